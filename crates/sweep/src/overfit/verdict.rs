//! The overfitting statistics' one overall reading ([`Verdict`], docs/overfitting.md,
//! "The verdict"): five checks of the summary's numbers, each a sign the docs' "When to
//! distrust a sweep" lists, and a documented rule that turns the failed ones into "holds
//! up", "not proven" or "likely overfit". The terminal prints it above the statistics'
//! own lines, and the report at the top of its overfitting section.

use crate::summary::OverfittingSummary;
use std::fmt;
use threadx_dispatch::thousands;

/// PBO at or above this: the in-sample best too often ranks below the median out of sample.
pub const PBO_LIMIT: f64 = 0.3;
/// The in-sample best losing out of sample in at least this share of the splits.
pub const OOS_LOSS_LIMIT: f64 = 0.5;
/// A deflated Sharpe ratio below this is not significant.
pub const DSR_LIMIT: f64 = 0.95;

/// The overall reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Every check passes.
    HoldsUp,
    /// Some check fails, but not one that says the selection itself overfits.
    NotProven,
    /// PBO fails, or the in-sample best both loses out of sample in most splits and a
    /// better in-sample Sharpe goes with a worse out-of-sample one.
    LikelyOverfit,
}

impl Reading {
    pub fn name(self) -> &'static str {
        match self {
            Self::HoldsUp => "holds up",
            Self::NotProven => "not proven",
            Self::LikelyOverfit => "likely overfit",
        }
    }
}

/// One overall reading of a sweep's overfitting statistics, with the checks that failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub reading: Reading,
    /// The failed checks, in words, in the docs' order.
    pub failed: Vec<String>,
}

impl Verdict {
    /// The reading of `o`; none when PBO is undefined (fewer than two combos, or no
    /// ranking out of sample), since then there is nothing to read.
    pub fn of(o: &OverfittingSummary) -> Option<Self> {
        if o.pbo.is_nan() {
            return None;
        }
        let pbo = o.pbo >= PBO_LIMIT;
        let slope = o.degradation_slope <= 0.0;
        let loses = o.prob_oos_loss >= OOS_LOSS_LIMIT;
        let mut failed = Vec::new();
        if pbo {
            failed.push(format!("PBO {:.2} ≥ {PBO_LIMIT}: the in-sample best often ranks low out of sample", o.pbo));
        }
        if loses {
            failed.push(format!(
                "the in-sample best loses out of sample in {:.0} % of the splits",
                100.0 * o.prob_oos_loss
            ));
        }
        if slope {
            failed.push(format!(
                "a better in-sample Sharpe goes with a worse one out of sample (slope {:.2})",
                o.degradation_slope
            ));
        }
        match o.dsr {
            Some(dsr) if dsr >= DSR_LIMIT => {}
            Some(dsr) if !dsr.is_nan() => failed.push(format!(
                "the best Sharpe is not significant after {} trials (DSR {dsr:.2} < {DSR_LIMIT})",
                thousands(o.trials.n as u64)
            )),
            _ => failed.push("the best Sharpe has no DSR".to_owned()),
        }
        if let Some(best) = o.top.first().filter(|t| t.shape() == "a spike") {
            failed.push(format!(
                "the best is a spike: its grid neighbours average {:.4} against its {:.4}",
                best.neighbour_mean, best.objective
            ));
        }
        let reading = match (pbo || (loses && slope), failed.is_empty()) {
            (true, _) => Reading::LikelyOverfit,
            (false, true) => Reading::HoldsUp,
            (false, false) => Reading::NotProven,
        };
        Some(Self { reading, failed })
    }
}

impl fmt::Display for Verdict {
    /// `likely overfit: A; B`, or `holds up: PBO, …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.failed.as_slice() {
            [] => {
                write!(f, "{}: PBO, out-of-sample losses, degradation, DSR and stability all pass", self.reading.name())
            }
            failed => write!(f, "{}: {}", self.reading.name(), failed.join("; ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A summary whose every check passes, with `edit` applied to its JSON.
    fn summary(edit: impl FnOnce(&mut serde_json::Value)) -> OverfittingSummary {
        let mut json = serde_json::json!({
            "request": {"blocks": 16, "pbo_splits": 1000, "seed": 0, "effective_trials": null},
            "pbo": 0.1, "splits": {"count": 12870, "exhaustive": true, "seed": null},
            "blocks": {"count": 16, "bars": 100, "dropped": 0},
            "prob_oos_loss": 0.2, "degradation_slope": 0.4, "degradation_intercept": 0.0,
            "logit_quantiles": {"p05": 0.0, "p25": 0.5, "p50": 1.0, "p75": 1.5, "p95": 2.0},
            "dsr": 0.97, "psr": 0.99, "skew": 0.0, "kurtosis": 3.0, "sr0": 0.01, "sharpe_std": 0.01,
            "trials": {"n": 100.0, "source": "combos evaluated"}, "bars": 1600, "objective": "sharpe",
            "top": [{"combo": 3, "params": {"n": 20}, "sharpe": 0.05, "dsr": 0.97, "psr": 0.99, "skew": 0.0,
                     "kurtosis": 3.0, "objective": 0.05, "neighbours": 2, "neighbour_mean": 0.04,
                     "neighbour_min": 0.03}],
            "seconds": 0.1,
        });
        edit(&mut json);
        serde_json::from_value(json).unwrap()
    }

    fn reading(edit: impl FnOnce(&mut serde_json::Value)) -> (Reading, usize) {
        let v = Verdict::of(&summary(edit)).unwrap();
        (v.reading, v.failed.len())
    }

    #[test]
    fn the_rule_reads_each_check_and_their_combinations() {
        assert_eq!(reading(|_| {}), (Reading::HoldsUp, 0));
        assert_eq!(
            Verdict::of(&summary(|_| {})).unwrap().to_string(),
            "holds up: PBO, out-of-sample losses, degradation, DSR and stability all pass"
        );
        // PBO alone is enough to call it overfit; at the limit too.
        assert_eq!(reading(|j| j["pbo"] = 0.3.into()), (Reading::LikelyOverfit, 1));
        assert_eq!(reading(|j| j["pbo"] = 0.29.into()), (Reading::HoldsUp, 0));
        // Losses out of sample or a falling line, each alone: not proven; both: overfit.
        assert_eq!(reading(|j| j["prob_oos_loss"] = 0.5.into()), (Reading::NotProven, 1));
        assert_eq!(reading(|j| j["degradation_slope"] = 0.0.into()), (Reading::NotProven, 1));
        let both = |j: &mut serde_json::Value| {
            j["prob_oos_loss"] = 0.9.into();
            j["degradation_slope"] = (-1.06).into();
        };
        assert_eq!(reading(both), (Reading::LikelyOverfit, 2));
        // A flat line (no slope: the bests' Sharpe ratios do not vary) is no failure.
        assert_eq!(reading(|j| j["degradation_slope"] = serde_json::Value::Null), (Reading::HoldsUp, 0));
        // DSR below the limit, or none; a spike: not proven.
        assert_eq!(reading(|j| j["dsr"] = 0.94.into()), (Reading::NotProven, 1));
        assert_eq!(reading(|j| j["dsr"] = serde_json::Value::Null), (Reading::NotProven, 1));
        assert_eq!(reading(|j| j["top"][0]["neighbour_mean"] = 0.02.into()), (Reading::NotProven, 1));
        // No PBO: no reading.
        assert!(Verdict::of(&summary(|j| j["pbo"] = serde_json::Value::Null)).is_none());
    }

    #[test]
    fn the_issues_example_reads_likely_overfit_with_every_reason() {
        // PBO 0.15 (fine by itself), the best losing in 49 % of splits, slope −1.06, DSR 0.00,
        // neighbours at less than half the best.
        let v = Verdict::of(&summary(|j| {
            j["pbo"] = 0.15.into();
            j["prob_oos_loss"] = 0.49.into();
            j["degradation_slope"] = (-1.06).into();
            j["dsr"] = 0.0.into();
            j["trials"]["n"] = 10000.0.into();
            j["top"][0]["neighbour_mean"] = 0.005.into();
            j["top"][0]["objective"] = 0.0118.into();
        }))
        .unwrap();
        assert_eq!(
            v.to_string(),
            "not proven: a better in-sample Sharpe goes with a worse one out of sample (slope -1.06); the best \
             Sharpe is not significant after 10,000 trials (DSR 0.00 < 0.95); the best is a spike: its grid \
             neighbours average 0.0050 against its 0.0118"
        );
    }
}
