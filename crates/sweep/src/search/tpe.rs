//! The Tree-structured Parzen Estimator (Bergstra et al. 2011) as Optuna 5.0's
//! `TPESampler` implements it with its defaults (univariate; 10 random start-up trials; γ(n) =
//! min(⌈0.1 n⌉, 25); the default weights, which ramp the older trials down; a prior
//! kernel of weight 1; the "magic clip" of bandwidths; 24 candidates drawn from l(x), the
//! one with the largest l(x)/g(x) kept). An ordinal axis is Optuna's
//! `IntDistribution(0, len − 1)` over ranks (a discretised truncated normal per kernel);
//! a choice is its `CategoricalDistribution`.
//!
//! Every axis's model is a table of probabilities over its ranks, built once per batch;
//! the arithmetic is libm's, so proposals are the same on every machine.

use super::Sampler;
use super::space::{Dim, Proposed, SearchSpace};
use threadx_stats::SeededRng;

/// Trials drawn uniformly before the model is used (Optuna's `n_startup_trials`).
const STARTUP_TRIALS: usize = 10;
/// Candidates drawn from l(x) per axis and proposal (Optuna's `n_ei_candidates`).
const CANDIDATES: usize = 24;
/// The prior kernel's weight (Optuna's `prior_weight`).
const PRIOR_WEIGHT: f64 = 1.0;
/// Proposals drawn again when one is a combo already proposed, before a uniform draw.
/// Within a batch the model is fixed, so the best of 24 candidates often repeats a combo:
/// every [`RETRIES_PER_HALVING`] retries halve the candidates (24, 12, 6, 3, then single
/// draws from l(x)), relaxing the selection before giving up on the model, and the next
/// proposal of the batch starts at the halving that succeeded. Falling back to uniform
/// draws at once made a batch of 64 land far from Optuna's sequential search on
/// `benchmarks/search_quality.py` (median top share 0.031 % against 0.0057 %).
const RETRIES: usize = 32;
const RETRIES_PER_HALVING: usize = 4;

#[derive(Debug, Clone)]
pub(crate) struct Tpe {
    space: SearchSpace,
    rng: SeededRng,
    proposed: Proposed,
    /// The trials told, in order: ranks and score (larger is better; `None`: infeasible).
    history: Vec<(Vec<usize>, Option<f64>)>,
}

impl Tpe {
    pub(crate) fn new(space: SearchSpace, seed: u64) -> Self {
        Self { space, rng: SeededRng::new(seed), proposed: Proposed::default(), history: Vec::new() }
    }

    /// The told trials split as Optuna splits them: the best γ(n) ("below", l) and the
    /// rest ("above", g), feasible before infeasible, each in trial order.
    fn split(&self) -> (Vec<usize>, Vec<usize>) {
        let mut order: Vec<usize> = (0..self.history.len()).collect();
        order.sort_by(|&a, &b| {
            let (sa, sb) = (self.history[a].1, self.history[b].1);
            match (sa, sb) {
                (Some(x), Some(y)) => y.total_cmp(&x),
                (x, y) => y.is_some().cmp(&x.is_some()),
            }
            .then(a.cmp(&b))
        });
        let n_below = gamma(self.history.len());
        let mut below = order[..n_below].to_vec();
        let mut above = order[n_below..].to_vec();
        below.sort_unstable();
        above.sort_unstable();
        (below, above)
    }
}

/// Optuna's `default_gamma`: how many trials are "below".
pub(crate) fn gamma(n: usize) -> usize {
    n.div_ceil(10).min(25)
}

/// Optuna's `default_weights`: 1 for each of the newest 25 trials, a ramp from 1/n up to
/// 1 before them.
pub(crate) fn default_weights(n: usize) -> Vec<f64> {
    if n < 25 {
        return vec![1.0; n];
    }
    let ramp = n - 25;
    let start = 1.0 / n as f64;
    let mut w: Vec<f64> = (0..ramp)
        .map(|i| if ramp == 1 { start } else { start + i as f64 * (1.0 - start) / (ramp - 1) as f64 })
        .collect();
    w.extend(std::iter::repeat_n(1.0, 25));
    w
}

/// The probability of each rank of `dim` under the Parzen estimator of `observed` ranks
/// (in trial order), with Optuna's weights and prior.
pub(crate) fn parzen(dim: &Dim, observed: &[usize]) -> Vec<f64> {
    let len = dim.len();
    let mut weights = default_weights(observed.len());
    weights.push(if observed.is_empty() { 1.0 } else { PRIOR_WEIGHT });
    let total: f64 = weights.iter().sum();
    weights.iter_mut().for_each(|w| *w /= total);
    let mut pmf = vec![0.0; len];
    if dim.categorical {
        if observed.is_empty() {
            return vec![1.0 / len as f64; len];
        }
        // A kernel per observation (and the prior's): the prior's mass spread evenly,
        // plus 1 on the observed category; each row normalised.
        let kernels = observed.len() + 1;
        let fill = PRIOR_WEIGHT / kernels as f64;
        for (k, &w) in weights.iter().enumerate() {
            let row_sum = fill * len as f64 + if k < observed.len() { 1.0 } else { 0.0 };
            for (x, p) in pmf.iter_mut().enumerate() {
                let hit = if k < observed.len() && observed[k] == x { 1.0 } else { 0.0 };
                *p += w * (fill + hit) / row_sum;
            }
        }
        return pmf;
    }
    let (mus, sigmas) = kernels(observed, len);
    // Kernels with the same centre and bandwidth (an axis has few ranks, so thousands of
    // observations make few distinct kernels) are one kernel with their weights added,
    // in order of first appearance: the cost grows with the distinct kernels, not the trials.
    let mut distinct: Vec<(f64, f64, f64)> = Vec::new();
    // Per rank, the distinct kernels centred there (a few: equal neighbours share a
    // bandwidth; the prior's centre, mid-range, joins the rank below it).
    let mut at_rank: Vec<Vec<usize>> = vec![Vec::new(); len];
    for ((&mu, &sigma), &w) in mus.iter().zip(&sigmas).zip(&weights) {
        let slot = (mu as usize).min(len - 1);
        let same = |&&k: &&usize| distinct[k].0.to_bits() == mu.to_bits() && distinct[k].1.to_bits() == sigma.to_bits();
        match at_rank[slot].iter().find(same) {
            Some(&k) => distinct[k].2 += w,
            None => {
                at_rank[slot].push(distinct.len());
                distinct.push((mu, sigma, w));
            }
        }
    }
    // Φ's tail at each rank's edges, once per kernel: edge i is rank i − 0.5, so the
    // truncation range's ends are edges 0 and len.
    let (mut edges, mut tails) = (vec![0.0; len + 1], vec![0.0; len + 1]);
    for &(mu, sigma, w) in &distinct {
        for (i, (z, tail)) in edges.iter_mut().zip(&mut tails).enumerate() {
            *z = ((i as f64 - 0.5) - mu) / sigma;
            *tail = upper_tail(*z);
        }
        let accepted = gauss_mass(edges[0], edges[len], tails[0], tails[len]);
        for (x, p) in pmf.iter_mut().enumerate() {
            *p += w * gauss_mass(edges[x], edges[x + 1], tails[x], tails[x + 1]) / accepted;
        }
    }
    pmf
}

/// The kernels' centres and bandwidths over ranks `0..len` (Optuna 5's univariate
/// `_calculate_numerical_distributions` with step 1, no endpoints, the magic clip): each
/// observation's bandwidth is the larger gap to its sorted neighbours (the range's ends
/// beyond the outermost), then the prior's kernel, centred with the range's width.
pub(crate) fn kernels(observed: &[usize], len: usize) -> (Vec<f64>, Vec<f64>) {
    let (low, high) = (-0.5, len as f64 - 0.5);
    let mut mus: Vec<f64> = observed.iter().map(|&r| r as f64).collect();
    // The observations by rank, the earlier of equals first: a counting sort, as ranks
    // are below `len` (a stable sort by value, in linear time).
    let mut starts = vec![0usize; len + 1];
    for &r in observed {
        starts[r + 1] += 1;
    }
    for i in 0..len {
        starts[i + 1] += starts[i];
    }
    let mut order = vec![0usize; observed.len()];
    for (i, &r) in observed.iter().enumerate() {
        order[starts[r]] = i;
        starts[r] += 1;
    }
    let mut ends = Vec::with_capacity(mus.len() + 2);
    ends.push(low);
    ends.extend(order.iter().map(|&i| mus[i]));
    ends.push(high);
    let m = mus.len();
    let mut sorted: Vec<f64> = (0..m).map(|i| (ends[i + 1] - ends[i]).max(ends[i + 2] - ends[i + 1])).collect();
    if ends.len() >= 4 {
        sorted[0] = ends[2] - ends[1];
        sorted[m - 1] = ends[m] - ends[m - 1];
    }
    let mut sigmas = vec![0.0; m];
    for (rank, &i) in order.iter().enumerate() {
        sigmas[i] = sorted[rank];
    }
    let min_sigma = (high - low) / (1.0 + (m + 1) as f64).min(100.0);
    sigmas.iter_mut().for_each(|s| *s = s.clamp(min_sigma, high - low));
    mus.push(0.5 * (low + high));
    sigmas.push(high - low);
    (mus, sigmas)
}

/// 1 − Φ(|z|): the normal tail beyond |z|, accurate far out.
fn upper_tail(z: f64) -> f64 {
    0.5 * libm::erfc(z.abs() / std::f64::consts::SQRT_2)
}

/// Φ(b) − Φ(a) for a ≤ b, accurate in either tail, from the tails beyond |a| and |b|
/// ([`upper_tail`]).
fn gauss_mass(a: f64, b: f64, tail_a: f64, tail_b: f64) -> f64 {
    if a >= 0.0 {
        tail_a - tail_b
    } else if b <= 0.0 {
        tail_b - tail_a
    } else {
        1.0 - tail_a - tail_b
    }
}

/// One axis's model for a batch: l(x) to draw from, and log l(x) − log g(x) to rank by.
struct AxisModel {
    cumulative: Vec<f64>,
    acquisition: Vec<f64>,
}

impl AxisModel {
    fn new(dim: &Dim, below: &[usize], above: &[usize]) -> Self {
        let l = parzen(dim, below);
        let g = parzen(dim, above);
        let acquisition = l.iter().zip(&g).map(|(&l, &g)| libm::log(l) - libm::log(g)).collect();
        let mut sum = 0.0;
        let cumulative = l
            .iter()
            .map(|&p| {
                sum += p;
                sum
            })
            .collect();
        Self { cumulative, acquisition }
    }

    /// The best of `candidates` ranks drawn from l(x).
    fn propose(&self, rng: &mut SeededRng, candidates: usize) -> usize {
        let total = *self.cumulative.last().unwrap_or(&1.0);
        let mut best: Option<usize> = None;
        for _ in 0..candidates {
            let u = rng.uniform() * total;
            let x = self.cumulative.partition_point(|&c| c <= u).min(self.cumulative.len() - 1);
            if best.is_none_or(|b| self.acquisition[x] > self.acquisition[b]) {
                best = Some(x);
            }
        }
        best.unwrap_or(0)
    }
}

impl Sampler for Tpe {
    fn ask(&mut self, n: usize) -> Vec<u64> {
        let mut out = Vec::with_capacity(n);
        let models: Option<Vec<AxisModel>> = (self.history.len() >= STARTUP_TRIALS).then(|| {
            let (below, above) = self.split();
            let ranks = |trials: &[usize], d: usize| trials.iter().map(|&t| self.history[t].0[d]).collect::<Vec<_>>();
            self.space
                .dims()
                .iter()
                .enumerate()
                .map(|(d, dim)| AxisModel::new(dim, &ranks(&below, d), &ranks(&above, d)))
                .collect()
        });
        // The halving a batch's proposals start from: where the last one succeeded (the
        // model is the same for the whole batch, so what repeated then repeats now).
        let mut first_retry = 0;
        let mut ranks = vec![0; self.space.dims().len()];
        while out.len() < n {
            let mut found = None;
            if let Some(models) = &models {
                for retry in first_retry..RETRIES {
                    let candidates = (CANDIDATES >> (retry / RETRIES_PER_HALVING)).max(1);
                    for (rank, model) in ranks.iter_mut().zip(models) {
                        *rank = model.propose(&mut self.rng, candidates);
                    }
                    let combo = self.space.combo(&ranks);
                    if self.proposed.take(&self.space, combo) {
                        found = Some(combo);
                        first_retry = retry / RETRIES_PER_HALVING * RETRIES_PER_HALVING;
                        break;
                    }
                }
            }
            match found.or_else(|| self.proposed.uniform(&self.space, &mut self.rng)) {
                Some(combo) => out.push(combo),
                None => break,
            }
        }
        out
    }

    fn tell(&mut self, combos: &[u64], scores: &[Option<f64>]) {
        for (&combo, &score) in combos.iter().zip(scores) {
            self.history.push((self.space.ranks(combo), score));
        }
    }
}

#[cfg(test)]
mod tests {
    //! Optuna 5.0.0's own numbers (`_ParzenEstimator(...).log_pdf`, `default_weights`,
    //! `default_gamma`), printed by the script in `benchmarks/optuna_parzen.py`.
    use super::*;

    fn close(ours: &[f64], optuna: &[f64]) {
        assert_eq!(ours.len(), optuna.len());
        for (i, (a, b)) in ours.iter().zip(optuna).enumerate() {
            assert!((a - b).abs() <= 1e-12 * b.abs().max(1e-3), "rank {i}: ours {a}, Optuna {b}");
        }
    }

    fn space(len: usize, categorical: bool) -> SearchSpace {
        SearchSpace::of_axes(&[(len, categorical)])
    }

    #[test]
    fn parzen_estimators_are_optunas() {
        let observed = [3, 3, 0, 9, 4, 7, 1, 3, 8, 2, 5, 6, 3, 3, 4, 2, 9, 0, 1, 1, 4, 5, 6, 7, 8, 2, 3, 4, 11, 10];
        close(
            &parzen(&space(12, false).dims()[0], &observed),
            &[
                0.06418519206034863,
                0.09702966602341524,
                0.10672095307752395,
                0.1635191899098682,
                0.13251727670550745,
                0.0773413264142435,
                0.07275028981229821,
                0.07229216567052946,
                0.0688971922514962,
                0.06033442580346958,
                0.04905573853686124,
                0.03535658373443828,
            ],
        );
        let five = space(5, false);
        close(
            &parzen(&five.dims()[0], &[2]),
            &[0.1807020325525737, 0.20924360352784493, 0.22010872783916302, 0.20924360352784493, 0.1807020325525737],
        );
        close(
            &parzen(&five.dims()[0], &[]),
            &[0.19207691835685053, 0.20391356193884302, 0.20801903940861308, 0.20391356193884302, 0.19207691835685053],
        );
        close(
            &parzen(&space(5, true).dims()[0], &[2, 0, 2, 3]),
            &[0.22000000000000006, 0.12000000000000006, 0.3200000000000001, 0.22000000000000006, 0.12000000000000006],
        );
    }

    #[test]
    fn weights_and_gamma_are_optunas() {
        let w = default_weights(30);
        close(&w[..5], &[0.03333333333333333, 0.275, 0.5166666666666667, 0.7583333333333333, 1.0]);
        assert!(w[5..].iter().all(|&x| x == 1.0) && w.len() == 30);
        assert_eq!(default_weights(24), vec![1.0; 24]);
        let gammas: Vec<usize> = [0, 1, 9, 10, 11, 100, 250, 251, 1000].map(gamma).to_vec();
        assert_eq!(gammas, [0, 1, 1, 1, 2, 10, 25, 25, 25]);
    }
}
