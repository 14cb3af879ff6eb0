//! The probability of backtest overfitting by combinatorially symmetric cross-validation
//! (Bailey, Borwein, López de Prado & Zhu, 2015), from block statistics.
//!
//! For each split the in-sample (IS) half of the blocks picks its best combo: the first
//! with the highest IS Sharpe ratio (NaN below every number). Its out-of-sample (OOS)
//! Sharpe ratio is ranked among every combo's (ascending, ties averaged, NaN below every
//! number); ω = rank / (N + 1) and the split's logit is ln(ω / (1 − ω)). PBO is the share
//! of splits whose logit is ≤ 0: the IS best at or below the OOS median. It is undefined
//! (NaN) with fewer than two combos, or when in every split all combos rank alike out of
//! sample (all equal, or all NaN): nothing is ranked, so nothing can be overfit.
//!
//! A set's Σr and Σr² are its blocks' sums added in block order within each group of
//! eight consecutive blocks, then the groups' sums in order (`BlockMatrix::set_sums`; the
//! order of the f64 tables this crate once kept, so the answers' bits never changed); its
//! Sharpe ratio is [`sharpe`](crate::sharpe) of those over the set's bars (ddof 1).
//!
//! The work is combos × splits, in two passes (`passes.rs`). On the CPU ([`pbo`]) they go
//! by tiles of sixteen combos placed side by side in f32 (`lanes.rs`, `screen.rs`;
//! AVX-512 or AVX2 where the CPU has it, through `pulp`); with a device ([`pbo_on`],
//! `device.rs`) a kernel places every pair at once. A set that an f32 screen places surely below a
//! split's best (or its ranked value), or surely above the value, needs nothing more; the
//! others are computed exactly from their f64 sums (`ratio.rs`). Nothing below changes an answer, only the work: bounds
//! skip combos that cannot matter (one whose Sharpe ratio over any half of its blocks
//! cannot reach the best some combo is sure to reach is never an IS best; one sure to stay
//! below, or above, every split's ranked value is counted without being computed; one with
//! no variance in any block is NaN in every set); each pass-1 task starts from the bests of
//! a few likely combos.

use crate::blocks::BlockMatrix;
use crate::bounds::all_bounds;
use crate::device::{OnDevice, ScreenDevice};
use crate::error::{PboError, StatsError};
use crate::lanes::LANES;
use crate::passes::{Best, OnCpu, Passes, Visits, Work, exact};
use crate::ratio::{Bars, ratio};
use crate::screen::Screen;
use crate::sharpe_of;
use crate::splits::SplitSet;
use rayon::prelude::*;

/// Combos that make the first bests every task of pass 1 starts from.
const SEED: usize = 16 * LANES;

/// What CSCV says of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct PboReport {
    /// The share of splits whose logit is ≤ 0; NaN (undefined) with fewer than two combos
    /// or where, in every split, all combos rank alike out of sample (identical combos, or
    /// no trades): there is no ranking to overfit.
    pub pbo: f64,
    /// The share of splits whose IS best has an OOS Sharpe ratio below 0.
    pub prob_oos_loss: f64,
    /// Least squares of OOS on IS Sharpe ratio over the splits' IS bests (NaN pairs left
    /// out): OOS ≈ intercept + slope · IS.
    pub slope: f64,
    pub intercept: f64,
    /// Per split, in the order of the [`SplitSet`]: the logit, the IS best combo, and its
    /// IS and OOS Sharpe ratios (per bar).
    pub logits: Vec<f64>,
    pub best: Vec<usize>,
    pub is_sharpe: Vec<f64>,
    pub oos_sharpe: Vec<f64>,
    /// Whether every split was used (else a random draw of them).
    pub exhaustive: bool,
    pub combos: usize,
}

/// CSCV over `splits` (module docs), on the CPU. The splits' blocks must be the matrix's.
pub fn pbo(matrix: &BlockMatrix, splits: &SplitSet) -> Result<PboReport, StatsError> {
    check(matrix, splits)?;
    cscv(matrix, splits, &mut OnCpu).map_err(|never| match never {})
}

/// CSCV with every combo × split pair screened by `device` (a GPU kernel above this
/// crate; `device.rs` says what it must do): the same report as [`pbo`], bit for bit.
pub fn pbo_on<D: ScreenDevice>(
    matrix: &BlockMatrix,
    splits: &SplitSet,
    device: &mut D,
) -> Result<PboReport, PboError<D::Error>> {
    check(matrix, splits).map_err(PboError::Input)?;
    if u32::try_from(matrix.combos()).is_err() || u32::try_from(splits.len()).is_err() {
        return Err(PboError::Input(crate::error::bad("blocks", "a device screens at most 2^32 combos and splits")));
    }
    cscv(matrix, splits, &mut OnDevice::new(device, matrix))
}

fn check(matrix: &BlockMatrix, splits: &SplitSet) -> Result<(), StatsError> {
    let s = matrix.blocks();
    if splits.blocks() != s {
        return Err(crate::error::bad("splits", format!("cut {} blocks but the matrix has {s}", splits.blocks())));
    }
    if matrix.combos() == 0 {
        return Err(crate::error::bad("blocks", "there are no combos"));
    }
    Ok(())
}

fn cscv<P: Passes>(matrix: &BlockMatrix, splits: &SplitSet, passes: &mut P) -> Result<PboReport, P::Error> {
    let (s, combos) = (matrix.blocks(), matrix.combos());
    let n = (matrix.bars() * s / 2) as f64;
    let bars = Bars::new(n);
    let visits = Visits::new(splits);
    let work = Work { matrix, visits: &visits, bars };
    let k = splits.len();
    let bounds = all_bounds(matrix, n, bars.n1);
    // Combos with Σr² = 0 in every block have no variance in any set: NaN in every split.
    let flat: Vec<bool> = (0..combos).map(|i| matrix.combo(i).chunks_exact(2).all(|b| b[1] == 0.0)).collect();
    let first_flat = flat.iter().position(|&f| f);
    let flat_count = flat.iter().filter(|&&f| f).count() as u64;

    // Pass 1: each split's IS best, among the combos that can be one: some combo (never
    // NaN) is sure to reach the greatest lower bound in every split. A lane takes a split's
    // best where the exact comparison says it is above it, or equal to it and of an
    // earlier combo.
    let floor = bounds.iter().filter(|b| b.never_nan).map(|b| b.low).fold(f64::NEG_INFINITY, f64::max);
    let candidates: Vec<usize> = (0..combos).filter(|&i| !flat[i] && bounds[i].high >= floor).collect();
    // Pass 1 starts from the bests of a few combos likely to be near the top (the highest
    // Sharpe ratios over all the blocks), so that few of its lanes need a look.
    let full = |i: usize| {
        let (a, q) = matrix.combo(i).chunks_exact(2).fold((0.0, 0.0), |(a, q), b| (a + b[0], q + b[1]));
        let ratio = sharpe_of(a, q, 2.0 * n, 2.0 * n - 1.0);
        if ratio.is_nan() { f64::NEG_INFINITY } else { ratio }
    };
    let mut likely: Vec<(f64, usize)> = candidates.iter().map(|&i| (full(i), i)).collect();
    let top = SEED.min(likely.len());
    if top > 0 {
        likely.select_nth_unstable_by(top - 1, |x, y| y.0.total_cmp(&x.0));
    }
    likely[..top].sort_by(|x, y| y.0.total_cmp(&x.0));
    let likely: Vec<usize> = likely[..top].iter().map(|&(_, i)| i).collect();
    // The likeliest is every split's first best; the passes screen the others against it.
    // With no candidate, no split has a best yet (a combo index no combo has).
    let seed: Vec<Best> = match likely.first() {
        Some(&c) => (0..k)
            .into_par_iter()
            .map(|i| Best::new(exact(matrix, c, visits.mask(i, false), &bars), c, &bars, s))
            .collect(),
        None => vec![Best::new(None, usize::MAX, &bars, s); k],
    };
    let mut best = passes.bests(work, &seed, likely.get(1..).unwrap_or_default(), &candidates)?;
    // Where no candidate has a number, the first NaN combo is the best: a flat one may be.
    for b in best.iter_mut().filter(|b| b.ratio.is_none()) {
        b.combo = b.combo.min(first_flat.unwrap_or(usize::MAX));
    }

    // Each split's best: its IS and OOS Sharpe ratios, and the value to rank (None: NaN).
    let (is_sharpe, (oos_sharpe, value)): (Vec<_>, (Vec<_>, Vec<_>)) = best
        .par_iter()
        .enumerate()
        .map(|(i, b)| {
            let (is, oos) =
                (matrix.set_sums(b.combo, visits.mask(i, false)), matrix.set_sums(b.combo, visits.mask(i, true)));
            (bars.sharpe(is.0, is.1), (bars.sharpe(oos.0, oos.1), ratio(oos.0, oos.1, &bars)))
        })
        .unzip();

    // Pass 2: rank each split's value among every combo's OOS ratio. Flat combos are NaN
    // (counted), combos sure to stay below every value (or NaN) are counted without being
    // computed, those sure to stay above are left out; a NaN value needs every combo's NaN
    // count.
    let any_nan = oos_sharpe.iter().any(|v| v.is_nan());
    let finite = oos_sharpe.iter().filter(|v| !v.is_nan());
    let lowest = finite.clone().copied().fold(f64::INFINITY, f64::min);
    let highest = finite.copied().fold(f64::NEG_INFINITY, f64::max);
    let (mut always_below, mut ranked) = (0u64, Vec::new());
    for (i, b) in bounds.iter().enumerate() {
        if flat[i] {
            continue;
        } else if any_nan {
            ranked.push(i);
        } else if b.high < lowest {
            always_below += 1;
        } else if !(b.low > highest && b.never_nan) {
            ranked.push(i);
        }
    }
    let screens: Vec<Screen> =
        value.par_iter().zip(&oos_sharpe).map(|(v, &t)| Screen::new(v.map(|_| t), n, s)).collect();
    let counts = passes.counts(work, &ranked, &value, &screens)?;

    // Back from the visiting order to the splits' order.
    let mut logits = vec![0.0; k];
    let mut report_best = vec![0; k];
    let (mut report_is, mut report_oos) = (vec![0.0; k], vec![0.0; k]);
    // Splits whose every combo ranks alike out of sample (all equal, or all NaN).
    let mut tied = 0;
    for (i, &j) in visits.split.iter().enumerate() {
        let (rank, tie) = if oos_sharpe[i].is_nan() {
            let nans = counts.nans[i] + flat_count;
            ((nans as f64 + 1.0) / 2.0, nans == combos as u64)
        } else {
            let below = counts.below[i] + always_below + flat_count;
            (below as f64 + (counts.equal[i] as f64 + 1.0) / 2.0, below == 0 && counts.equal[i] == combos as u64)
        };
        tied += usize::from(tie);
        let w = rank / (combos as f64 + 1.0);
        logits[j] = (w / (1.0 - w)).ln();
        report_best[j] = best[i].combo;
        report_is[j] = is_sharpe[i];
        report_oos[j] = oos_sharpe[i];
    }
    let share = |count: usize| count as f64 / k as f64;
    let (slope, intercept) = least_squares(&report_is, &report_oos);
    // Undefined where nothing is ranked: one combo, or every split a tie of all combos.
    let undefined = combos < 2 || tied == k;
    Ok(PboReport {
        pbo: if undefined { f64::NAN } else { share(logits.iter().filter(|&&l| l <= 0.0).count()) },
        prob_oos_loss: share(report_oos.iter().filter(|&&v| v < 0.0).count()),
        slope,
        intercept,
        logits,
        best: report_best,
        is_sharpe: report_is,
        oos_sharpe: report_oos,
        exhaustive: splits.exhaustive(),
        combos,
    })
}

/// y ≈ intercept + slope · x by least squares over the pairs with both finite; NaN when
/// the x do not vary.
fn least_squares(x: &[f64], y: &[f64]) -> (f64, f64) {
    let pairs: Vec<(f64, f64)> =
        x.iter().zip(y).filter(|(a, b)| a.is_finite() && b.is_finite()).map(|(&a, &b)| (a, b)).collect();
    let n = pairs.len() as f64;
    if pairs.len() < 2 {
        return (f64::NAN, f64::NAN);
    }
    let (mx, my) = (pairs.iter().map(|p| p.0).sum::<f64>() / n, pairs.iter().map(|p| p.1).sum::<f64>() / n);
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for &(a, b) in &pairs {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
    }
    if sxx > 0.0 {
        let slope = sxy / sxx;
        (slope, my - slope * mx)
    } else {
        (f64::NAN, f64::NAN)
    }
}

/// The `p` quantile of `sorted` (ascending, no NaN) by linear interpolation between
/// closest ranks (numpy's default); NaN when empty.
pub fn quantile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
}
