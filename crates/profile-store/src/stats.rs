//! Running statistics that merge exactly: the merge of two summaries equals the summary
//! of the concatenated samples (Chan et al.'s parallel form of Welford's update).

use serde::{Deserialize, Serialize};

/// Count, mean and sum of squared deviations (M2) of a set of timings in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RunningStats {
    pub n: u64,
    pub mean: f64,
    pub m2: f64,
}

impl RunningStats {
    /// The summary of a single sample.
    pub fn of(x: f64) -> Self {
        Self { n: 1, mean: x, m2: 0.0 }
    }

    pub fn push(&mut self, x: f64) {
        self.merge(&Self::of(x));
    }

    pub fn merge(&mut self, other: &Self) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *other;
            return;
        }
        let n = self.n + other.n;
        let (na, nb, nn) = (self.n as f64, other.n as f64, n as f64);
        let delta = other.mean - self.mean;
        self.mean += delta * nb / nn;
        self.m2 += other.m2 + delta * delta * na * nb / nn;
        self.n = n;
    }

    /// Sample variance (ddof = 1); `None` below two samples.
    pub fn variance(&self) -> Option<f64> {
        (self.n >= 2).then(|| self.m2 / (self.n - 1) as f64)
    }

    /// The mean, when there is at least one sample.
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then_some(self.mean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn direct(xs: &[f64]) -> (f64, f64) {
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        (mean, xs.iter().map(|x| (x - mean).powi(2)).sum())
    }

    #[test]
    fn known_values() {
        let mut s = RunningStats::default();
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            s.push(x);
        }
        assert_eq!(s.n, 8);
        assert_eq!(s.mean, 5.0);
        assert!((s.m2 - 32.0).abs() < 1e-12);
        assert!((s.variance().unwrap() - 32.0 / 7.0).abs() < 1e-12);
        assert_eq!(RunningStats::of(3.0).variance(), None);
    }

    proptest! {
        #[test]
        fn merge_equals_concatenation(
            a in prop::collection::vec(0.0f64..1e4, 0..40),
            b in prop::collection::vec(0.0f64..1e4, 0..40),
        ) {
            let summarize = |xs: &[f64]| xs.iter().fold(RunningStats::default(), |mut s, &x| { s.push(x); s });
            let mut merged = summarize(&a);
            merged.merge(&summarize(&b));
            let all: Vec<f64> = a.iter().chain(&b).copied().collect();
            prop_assert_eq!(merged.n as usize, all.len());
            if !all.is_empty() {
                let (mean, m2) = direct(&all);
                prop_assert!((merged.mean - mean).abs() <= 1e-9 * mean.abs().max(1.0));
                prop_assert!((merged.m2 - m2).abs() <= 1e-6 * m2.max(1.0));
            }
        }
    }
}
