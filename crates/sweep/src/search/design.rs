//! Designs fixed in advance: uniform random draws, a scrambled Sobol sequence and Latin
//! hypercube samples over the axes' ranks, each combo once. What they propose never
//! depends on the scores told, so a design may be cut into shards.

use super::space::{Proposed, SearchSpace};
use super::{Sampler, SearchMethod};
use threadx_stats::SeededRng;

/// Sobol points per scramble: `sobol_burley` gives 2^16 points a seed.
const SOBOL_POINTS: u64 = 1 << 16;

/// Uniform draws, a scrambled Sobol sequence or Latin hypercubes, mapped to combos.
#[derive(Debug, Clone)]
pub(crate) struct Design {
    method: SearchMethod,
    space: SearchSpace,
    seed: u64,
    rng: SeededRng,
    proposed: Proposed,
    /// Points of the sequence used so far (Sobol), or of the current hypercube (LHS).
    next: u64,
    /// The current hypercube: per axis, a permutation of its strata (LHS).
    strata: Vec<Vec<u32>>,
    /// How many more points the plan holds (LHS: a hypercube per remaining plan).
    planned: u64,
    /// Random draws of a plan that takes most of the space: every allowed combo, the
    /// first `next` of them drawn (a Fisher–Yates shuffle as it goes).
    dense: Option<Vec<u64>>,
}

impl Design {
    pub(crate) fn new(method: SearchMethod, space: SearchSpace, seed: u64, trials: u64) -> Self {
        Self {
            method,
            space,
            seed,
            rng: SeededRng::new(seed),
            proposed: Proposed::default(),
            next: 0,
            strata: Vec::new(),
            planned: trials,
            dense: None,
        }
    }

    /// The next uniform draw without replacement. Rejection while the plan is sparse;
    /// when it asks for more than half the space, a shuffle of the allowed combos, which
    /// never misses.
    fn uniform(&mut self) -> Option<u64> {
        if self.planned.saturating_mul(2) <= self.space.len() && self.dense.is_none() {
            return self.proposed.uniform(&self.space, &mut self.rng);
        }
        let space = &self.space;
        let all = self.dense.get_or_insert_with(|| (0..space.len()).filter(|&c| space.allows(c)).collect());
        let i = self.next as usize;
        if i >= all.len() {
            return None;
        }
        let j = i + crate::combos::below(&mut self.rng, (all.len() - i) as u64) as usize;
        all.swap(i, j);
        self.next += 1;
        Some(all[i])
    }

    fn sobol(&mut self) -> Vec<f64> {
        let (i, block) = (self.next % SOBOL_POINTS, self.next / SOBOL_POINTS);
        self.next += 1;
        let seed = (self.seed ^ block.wrapping_mul(0x9E37_79B9_7F4A_7C15)) as u32 ^ (self.seed >> 32) as u32;
        (0..self.space.dims().len()).map(|d| f64::from(sobol_burley::sample(i as u32, d as u32, seed))).collect()
    }

    /// The next point of a Latin hypercube of `planned` points: one point in each of the
    /// `planned` strata of every axis. A new hypercube starts when one is used up.
    fn latin(&mut self) -> Vec<f64> {
        if self.strata.is_empty() || self.next == self.strata[0].len() as u64 {
            let n = self.planned.clamp(1, u64::from(u32::MAX)) as u32;
            let rng = &mut self.rng;
            self.strata = (0..self.space.dims().len())
                .map(|_| {
                    let mut perm: Vec<u32> = (0..n).collect();
                    for i in (1..perm.len()).rev() {
                        perm.swap(i, crate::combos::below(rng, i as u64 + 1) as usize);
                    }
                    perm
                })
                .collect();
            self.next = 0;
        }
        let i = self.next as usize;
        self.next += 1;
        let n = self.strata[0].len() as f64;
        let rng = &mut self.rng;
        self.strata.iter().map(|perm| (f64::from(perm[i]) + rng.uniform()) / n).collect()
    }
}

/// Points drawn without a new combo before the space counts as covered.
const MAX_MISSES: u32 = 1_000_000;

impl Sampler for Design {
    fn ask(&mut self, n: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(n);
        let mut misses = 0;
        while out.len() < n && misses < MAX_MISSES {
            let accepted = match self.method {
                SearchMethod::Sobol => {
                    let point = self.sobol();
                    let combo = self.space.at(&point);
                    self.proposed.take(&self.space, combo).then_some(combo)
                }
                SearchMethod::Lhs => {
                    let point = self.latin();
                    let combo = self.space.at(&point);
                    self.proposed.take(&self.space, combo).then_some(combo)
                }
                SearchMethod::Random | SearchMethod::Tpe => match self.uniform() {
                    Some(combo) => Some(combo),
                    None => break,
                },
            };
            if let Some(combo) = accepted {
                out.push(combo);
                self.planned = self.planned.saturating_sub(1);
                misses = 0;
            } else {
                misses += 1;
            }
        }
        out
    }

    fn tell(&mut self, _combos: &[u64], _scores: &[Option<f64>]) {}
}
