//! The probability of backtest overfitting by combinatorially symmetric cross-validation
//! (Bailey, Borwein, López de Prado & Zhu, 2015), from block statistics.
//!
//! For each split the in-sample (IS) half of the blocks picks its best combo: the first
//! with the highest IS Sharpe ratio (NaN below every number). Its out-of-sample (OOS)
//! Sharpe ratio is ranked among every combo's (ascending, ties averaged, NaN below every
//! number); ω = rank / (N + 1) and the split's logit is ln(ω / (1 − ω)). PBO is the share
//! of splits whose logit is ≤ 0: the IS best at or below the OOS median.
//!
//! A set's Σr and Σr² are its blocks' sums added in block order within each group of
//! eight consecutive blocks, then the groups' sums in order (so that each combo's group
//! sums are tabled once and every split costs two look-ups a group); its Sharpe ratio is
//! [`sharpe`](crate::sharpe) of those over the set's bars (ddof 1).
//!
//! The work is combos × splits. Two passes share it out by combo, and bounds skip what
//! cannot matter without changing any answer: a combo whose Sharpe ratio over any half of
//! its blocks cannot reach the best that some combo is sure to reach is never an IS best,
//! and one sure to stay below (or above) every split's ranked value is counted without
//! being computed.

use crate::blocks::BlockMatrix;
use crate::error::StatsError;
use crate::sharpe_of;
use crate::splits::SplitSet;
use rayon::prelude::*;
use std::cmp::Ordering;

/// Blocks per group: a group's sums over its subsets are one table of 2^8 entries.
const GROUP: usize = 8;

/// Combos per task of a pass.
const TASK: usize = 64;

/// What CSCV says of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct PboReport {
    /// The share of splits whose logit is ≤ 0.
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

/// One combo's sums over every subset of each group of blocks: `(Σr, Σr²)` at
/// `group · 2^GROUP + subset`.
struct GroupTables {
    sums: Vec<(f64, f64)>,
}

impl GroupTables {
    fn new(groups: usize) -> Self {
        Self { sums: vec![(0.0, 0.0); groups << GROUP] }
    }

    /// Fills the tables from one combo's blocks (block order within each subset).
    fn fill(&mut self, blocks: &[f64]) {
        let s = blocks.len() / 2;
        for (g, table) in self.sums.chunks_mut(1 << GROUP).enumerate() {
            let len = GROUP.min(s - g * GROUP);
            table[0] = (0.0, 0.0);
            for m in 1usize..1 << len {
                let top = usize::BITS as usize - 1 - m.leading_zeros() as usize;
                let (a, q) = table[m ^ (1 << top)];
                let b = g * GROUP + top;
                table[m] = (a + blocks[2 * b], q + blocks[2 * b + 1]);
            }
        }
    }

    /// Σr and Σr² over the set whose group subsets are `parts`.
    #[inline(always)]
    fn sums(&self, parts: &[u8]) -> (f64, f64) {
        let (mut a, mut q) = self.sums[parts[0] as usize];
        for (g, &p) in parts.iter().enumerate().skip(1) {
            let (x, y) = self.sums[(g << GROUP) + p as usize];
            a += x;
            q += y;
        }
        (a, q)
    }

    /// The Sharpe ratio over the set whose group subsets are `parts`.
    fn sharpe(&self, parts: &[u8], n: &Bars) -> f64 {
        let (a, q) = self.sums(parts);
        sharpe_of(a, q, n.n, n.n1)
    }
}

/// A set's bars as the arithmetic wants them.
#[derive(Debug, Clone, Copy)]
struct Bars {
    n: f64,
    n1: f64,
    inv_n: f64,
    inv_n1: f64,
}

/// A set's Sharpe ratio m/√var held as m·|m| and var (which order sets the same way,
/// with no square root or division), with the sums for the exact comparison of near ties.
/// `None`: [`sharpe`](crate::sharpe) would give NaN.
#[derive(Debug, Clone, Copy)]
struct Ratio {
    signed: f64,
    var: f64,
    a: f64,
    q: f64,
}

const EPS: f64 = f64::EPSILON;

/// The relative rounding a [`Ratio`]'s key may carry (its variance's, from q − a·m, is
/// held under [`ROUNDING`] / 2 by [`ratio`]); keys closer than this are compared exactly.
const ROUNDING: f64 = 1e-10;

#[inline(always)]
fn ratio(a: f64, q: f64, n: &Bars) -> Option<Ratio> {
    let m = a * n.inv_n;
    let am = a * m;
    let d = q - am;
    // The cancellation in q − a·m bounds the variance's relative rounding; within the
    // bound the sign is certain and is sharpe()'s.
    if 16.0 * EPS * (q.abs() + am.abs()) < 0.5 * ROUNDING * d.abs() {
        return (d > 0.0).then_some(Ratio { signed: m * m.abs(), var: d * n.inv_n1, a, q });
    }
    // Near a zero variance: decided as sharpe() decides, and compared exactly.
    let mean = a / n.n;
    let var = (q - a * mean) / n.n1;
    (var > 0.0).then_some(Ratio { signed: f64::NAN, var, a, q })
}

/// The order of two sets' Sharpe ratios as [`sharpe`](crate::sharpe)'s f64 values order
/// them: by cross-multiplied keys when they differ beyond their rounding, else by the
/// values themselves.
#[inline(always)]
fn compare(x: &Ratio, y: &Ratio, n: &Bars) -> Ordering {
    let (l, r) = (x.signed * y.var, y.signed * x.var);
    // NaN keys (a variance near zero) fail this test and are compared exactly.
    if (l - r).abs() > 3.0 * ROUNDING * (l.abs() + r.abs()) {
        return if l > r { Ordering::Greater } else { Ordering::Less };
    }
    let (sx, sy) = (sharpe_of(x.a, x.q, n.n, n.n1), sharpe_of(y.a, y.q, n.n, n.n1));
    sx.partial_cmp(&sy).unwrap_or(Ordering::Equal)
}

/// Bounds on a combo's Sharpe ratio over every half of its blocks, from the least and
/// greatest Σr and Σr² any half can have (the ratio rises with Σr, and with Σr² only
/// while Σr < 0). `never_nan`: no half can have a zero variance.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    low: f64,
    high: f64,
    never_nan: bool,
}

/// Room for the rounding of the sums (the bounds' are added in another order).
fn widen(x: f64, up: bool) -> f64 {
    let slack = x.abs() * 1e-9 + 1e-15;
    if up { x + slack } else { x - slack }
}

fn bounds(blocks: &[f64], n: f64, n_minus_1: f64) -> Bounds {
    let s = blocks.len() / 2;
    let half = s / 2;
    let mut a: Vec<f64> = (0..s).map(|b| blocks[2 * b]).collect();
    let mut q: Vec<f64> = (0..s).map(|b| blocks[2 * b + 1]).collect();
    a.sort_by(f64::total_cmp);
    q.sort_by(f64::total_cmp);
    let (a_min, a_max): (f64, f64) = (a[..half].iter().sum(), a[half..].iter().sum());
    let (q_min, q_max): (f64, f64) = (q[..half].iter().sum(), q[half..].iter().sum());
    let var = |a: f64, q: f64| (q - a * (a / n)) / n_minus_1;
    let ratio = |a: f64, q: f64| sharpe_of(a, q, n, n_minus_1);
    let high = if a_max > 0.0 {
        if var(a_max, q_min) > 0.0 { ratio(a_max, q_min) } else { f64::INFINITY }
    } else if var(a_max, q_max) > 0.0 {
        ratio(a_max, q_max)
    } else {
        0.0
    };
    let low = if a_min < 0.0 {
        if var(a_min, q_min) > 0.0 { ratio(a_min, q_min) } else { f64::NEG_INFINITY }
    } else if var(a_min, q_max) > 0.0 {
        ratio(a_min, q_max)
    } else {
        0.0
    };
    let widest = a_min.abs().max(a_max.abs());
    let v = var(widest, q_min);
    let never_nan = v > 0.0 && v > 1e-9 * (q_min / n_minus_1).abs();
    Bounds { low: widen(low, false), high: widen(high, true), never_nan }
}

/// Each split's group subsets, in-sample then out of sample.
fn parts(mask: u64, blocks: usize) -> (Vec<u8>, Vec<u8>) {
    let groups = blocks.div_ceil(GROUP);
    let all = if blocks == 64 { u64::MAX } else { (1u64 << blocks) - 1 };
    let cut = |m: u64| (0..groups).map(|g| ((m >> (g * GROUP)) & 0xff) as u8).collect();
    (cut(mask), cut(all & !mask))
}

/// An IS best so far: the combo and its ratio (`None`: NaN, below every number).
#[derive(Debug, Clone, Copy)]
struct Best {
    ratio: Option<Ratio>,
    combo: usize,
}

impl Best {
    const NONE: Best = Best { ratio: None, combo: usize::MAX };

    /// Whether `ratio` of a later combo beats this one (a tie keeps the first).
    #[inline(always)]
    fn beaten_by(&self, ratio: &Option<Ratio>, n: &Bars) -> bool {
        match (&self.ratio, ratio) {
            _ if self.combo == usize::MAX => true,
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(b), Some(r)) => compare(r, b, n) == Ordering::Greater,
        }
    }

    /// The better of two: the higher ratio, then the first combo.
    fn max(self, other: Best, n: &Bars) -> Best {
        let (first, second) = if self.combo <= other.combo { (self, other) } else { (other, self) };
        if first.beaten_by(&second.ratio, n) && second.combo != usize::MAX { second } else { first }
    }
}

/// CSCV over `splits` (module docs). The splits' blocks must be the matrix's.
pub fn pbo(matrix: &BlockMatrix, splits: &SplitSet) -> Result<PboReport, StatsError> {
    let (s, combos) = (matrix.blocks(), matrix.combos());
    if splits.blocks() != s {
        return Err(crate::error::bad("splits", format!("cut {} blocks but the matrix has {s}", splits.blocks())));
    }
    if combos == 0 {
        return Err(crate::error::bad("blocks", "there are no combos"));
    }
    let n = (matrix.bars() * s / 2) as f64;
    let n1 = n - 1.0;
    let bars = Bars { n, n1, inv_n: 1.0 / n, inv_n1: 1.0 / n1 };
    let groups = s.div_ceil(GROUP);
    let sides: Vec<(Vec<u8>, Vec<u8>)> = splits.masks().iter().map(|&m| parts(m, s)).collect();
    let k = sides.len();
    let bounds: Vec<Bounds> = (0..combos).into_par_iter().map(|i| bounds(matrix.combo(i), n, n1)).collect();

    // Pass 1: each split's IS best, among the combos that can be one: some combo (never
    // NaN) is sure to reach the greatest lower bound in every split.
    let floor = bounds.iter().filter(|b| b.never_nan).map(|b| b.low).fold(f64::NEG_INFINITY, f64::max);
    let candidates: Vec<usize> = (0..combos).filter(|&i| bounds[i].high >= floor).collect();
    let best: Vec<Best> = candidates
        .par_chunks(TASK)
        .fold(
            || (vec![Best::NONE; k], GroupTables::new(groups)),
            |(mut best, mut tables), chunk| {
                for &i in chunk {
                    tables.fill(matrix.combo(i));
                    for (b, (is, _)) in best.iter_mut().zip(&sides) {
                        let (a, q) = tables.sums(is);
                        let r = ratio(a, q, &bars);
                        // Combos come in order within a task: a tie keeps the first.
                        if b.beaten_by(&r, &bars) {
                            *b = Best { ratio: r, combo: i };
                        }
                    }
                }
                (best, tables)
            },
        )
        .map(|(best, _)| best)
        .reduce(|| vec![Best::NONE; k], |a, b| a.into_iter().zip(b).map(|(x, y)| x.max(y, &bars)).collect());

    // Each split's best: its IS and OOS Sharpe ratios (the value to rank).
    let mut tables = GroupTables::new(groups);
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by_key(|&j| best[j].combo);
    let (mut is_sharpe, mut oos_sharpe) = (vec![f64::NAN; k], vec![f64::NAN; k]);
    // The value each split ranks, as a ratio (None: NaN).
    let mut value: Vec<Option<Ratio>> = vec![None; k];
    let mut filled = usize::MAX;
    for &j in &order {
        let combo = best[j].combo;
        if combo != filled {
            tables.fill(matrix.combo(combo));
            filled = combo;
        }
        is_sharpe[j] = tables.sharpe(&sides[j].0, &bars);
        oos_sharpe[j] = tables.sharpe(&sides[j].1, &bars);
        let (a, q) = tables.sums(&sides[j].1);
        value[j] = ratio(a, q, &bars);
    }

    // Pass 2: rank each split's value among every combo's OOS ratio. Combos sure to stay
    // below every value (or NaN) are counted without being computed, those sure to stay
    // above are left out; a NaN value needs every combo's NaN count.
    let any_nan = oos_sharpe.iter().any(|v| v.is_nan());
    let finite = oos_sharpe.iter().filter(|v| !v.is_nan());
    let lowest = finite.clone().copied().fold(f64::INFINITY, f64::min);
    let highest = finite.copied().fold(f64::NEG_INFINITY, f64::max);
    let (mut always_below, mut ranked) = (0u64, Vec::new());
    for (i, b) in bounds.iter().enumerate() {
        if any_nan {
            ranked.push(i);
        } else if b.high < lowest {
            always_below += 1;
        } else if !(b.low > highest && b.never_nan) {
            ranked.push(i);
        }
    }
    let zero = || (vec![0u64; k], vec![0u64; k], vec![0u64; k], GroupTables::new(groups));
    let (below, equal, nans) = ranked
        .par_chunks(TASK)
        .fold(zero, |(mut below, mut equal, mut nans, mut tables), chunk| {
            for &i in chunk {
                tables.fill(matrix.combo(i));
                for (j, (_, oos)) in sides.iter().enumerate() {
                    let (a, q) = tables.sums(oos);
                    match (ratio(a, q, &bars), &value[j]) {
                        (None, _) => {
                            nans[j] += 1;
                            below[j] += 1;
                        }
                        (Some(_), None) => {}
                        (Some(r), Some(v)) => match compare(&r, v, &bars) {
                            Ordering::Less => below[j] += 1,
                            Ordering::Equal => equal[j] += 1,
                            Ordering::Greater => {}
                        },
                    }
                }
            }
            (below, equal, nans, tables)
        })
        .map(|(below, equal, nans, _)| (below, equal, nans))
        .reduce(
            || (vec![0; k], vec![0; k], vec![0; k]),
            |a, b| {
                let add = |x: Vec<u64>, y: Vec<u64>| x.into_iter().zip(y).map(|(x, y)| x + y).collect::<Vec<u64>>();
                (add(a.0, b.0), add(a.1, b.1), add(a.2, b.2))
            },
        );

    let logits: Vec<f64> = (0..k)
        .map(|j| {
            let rank = if oos_sharpe[j].is_nan() {
                (nans[j] as f64 + 1.0) / 2.0
            } else {
                (below[j] + always_below) as f64 + (equal[j] as f64 + 1.0) / 2.0
            };
            let w = rank / (combos as f64 + 1.0);
            (w / (1.0 - w)).ln()
        })
        .collect();
    let share = |count: usize| count as f64 / k as f64;
    let (slope, intercept) = least_squares(&is_sharpe, &oos_sharpe);
    Ok(PboReport {
        pbo: share(logits.iter().filter(|&&l| l <= 0.0).count()),
        prob_oos_loss: share(oos_sharpe.iter().filter(|&&v| v < 0.0).count()),
        slope,
        intercept,
        logits,
        best: best.iter().map(|b| b.combo).collect(),
        is_sharpe,
        oos_sharpe,
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
