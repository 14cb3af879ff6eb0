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
//! eight consecutive blocks, then the groups' sums in order (`BlockMatrix::set_sums`; the
//! order of the f64 tables this crate once kept, so the answers' bits never changed); its
//! Sharpe ratio is [`sharpe`](crate::sharpe) of those over the set's bars (ddof 1).
//!
//! The work is combos × splits. Two passes share it out by tiles of eight combos placed
//! side by side in f32 (`lanes.rs`, `screen.rs`; AVX2 where the CPU has it, through
//! `pulp`): a lane that the f32 screen places surely below a split's best (or its ranked
//! value), or surely above the value, needs nothing more; the others are computed exactly
//! from their f64 sums (`ratio.rs`). Nothing below changes an answer, only the work: bounds
//! skip combos that cannot matter (one whose Sharpe ratio over any half of its blocks
//! cannot reach the best some combo is sure to reach is never an IS best; one sure to stay
//! below, or above, every split's ranked value is counted without being computed; one with
//! no variance in any block is NaN in every set); each pass-1 task starts from the bests of
//! a few likely combos.

use crate::blocks::BlockMatrix;
use crate::error::StatsError;
use crate::lanes::{GROUP, LANES, LaneTables};
use crate::ratio::{Bars, Ratio, compare, ratio};
use crate::screen::{ALL_LANES, Mask, Screen};
use crate::sharpe_of;
use crate::splits::{MAX_BLOCKS, SplitSet};
use crate::vector::{Pass, Vector, dispatch};
use rayon::prelude::*;
use std::cmp::Ordering;

/// Combos per task of a pass.
const TASK: usize = 64;

/// Combos that make the first bests every task of pass 1 starts from.
const SEED: usize = 16 * LANES;

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
    let (mut a, mut q) = ([0.0; MAX_BLOCKS], [0.0; MAX_BLOCKS]);
    for (b, sums) in blocks.chunks_exact(2).enumerate() {
        (a[b], q[b]) = (sums[0], sums[1]);
    }
    // The least half and the greatest half of each, in any order within them.
    let (a, q) = (&mut a[..s], &mut q[..s]);
    a.select_nth_unstable_by(half, f64::total_cmp);
    q.select_nth_unstable_by(half, f64::total_cmp);
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

/// The splits' group subsets (`parts`: a split's in-sample subsets, then its
/// out-of-sample ones, `groups` of each), in the order the passes visit them: sorted, so
/// that consecutive splits read nearby table entries and often share all their subsets
/// but the last group's (`new_head[i]`: the i-th does not). `split[i]` is the i-th
/// visited split, `masks[i]` its in-sample blocks.
struct Visits {
    groups: usize,
    parts: Vec<u8>,
    split: Vec<usize>,
    masks: Vec<u64>,
    new_head: Vec<bool>,
    /// Every block.
    all: u64,
}

impl Visits {
    fn new(splits: &SplitSet) -> Self {
        let blocks = splits.blocks();
        let groups = blocks.div_ceil(GROUP);
        let all = if blocks == 64 { u64::MAX } else { (1u64 << blocks) - 1 };
        let cut = |m: u64| (0..groups).map(move |g| ((m >> (g * GROUP)) & 0xff) as u8);
        let mut split: Vec<usize> = (0..splits.len()).collect();
        // The group subsets as one number, the first group's most significant (≤ 8 groups).
        let key = |j: usize| cut(splits.masks()[j]).fold(0u64, |key, part| (key << GROUP) | u64::from(part));
        split.sort_by_key(|&j| key(j));
        let parts: Vec<u8> =
            split.iter().flat_map(|&j| cut(splits.masks()[j]).chain(cut(all & !splits.masks()[j]))).collect();
        // The out-of-sample subsets are the complements: their heads change together.
        let head = |i: usize| &parts[2 * groups * i..2 * groups * i + groups - 1];
        let new_head = (0..split.len()).map(|i| i == 0 || head(i) != head(i - 1)).collect();
        let masks = split.iter().map(|&j| splits.masks()[j]).collect();
        Self { groups, parts, split, masks, new_head, all }
    }

    /// The in-sample and out-of-sample group subsets of the i-th visited split.
    #[inline(always)]
    fn sides(&self, i: usize) -> (&[u8], &[u8]) {
        self.parts[2 * self.groups * i..2 * self.groups * (i + 1)].split_at(self.groups)
    }

    /// The blocks of the i-th visited split's side.
    #[inline(always)]
    fn mask(&self, i: usize, out_of_sample: bool) -> u64 {
        if out_of_sample { self.all & !self.masks[i] } else { self.masks[i] }
    }
}

/// The lanes' f32 sums over one side of the visited splits (in sample or out of sample),
/// in visiting order: each head is tabled once for the splits that share it.
struct Side<'a> {
    visits: &'a Visits,
    out_of_sample: bool,
    head: [[f32; LANES]; 2],
    /// No head tabled yet.
    fresh: bool,
}

impl<'a> Side<'a> {
    fn new(visits: &'a Visits, out_of_sample: bool) -> Self {
        Self { visits, out_of_sample, head: [[0.0; LANES]; 2], fresh: true }
    }

    /// The sums of the i-th visited split's side; `i` runs up from any split for each tile.
    #[inline(always)]
    fn sums(&mut self, tables: &LaneTables, i: usize) -> [[f32; LANES]; 2] {
        let (is, oos) = self.visits.sides(i);
        let side = if self.out_of_sample { oos } else { is };
        let last = self.visits.groups - 1;
        if self.fresh || self.visits.new_head[i] {
            self.head = tables.head(&side[..last]);
            self.fresh = false;
        }
        tables.finish(&self.head, last, side[last])
    }
}

/// The f64 sums, then the exact ratio, of `combo` over the blocks in `mask`.
#[inline(always)]
fn exact(matrix: &BlockMatrix, combo: usize, mask: u64, bars: &Bars) -> Option<Ratio> {
    let (a, q) = matrix.set_sums(combo, mask);
    ratio(a, q, bars)
}

/// The lanes of a tile of `len` combos, as a mask.
fn valid_lanes(len: usize) -> Mask {
    ALL_LANES >> (LANES - len)
}

/// An IS best so far: the combo and its ratio (`None`: NaN, below every number).
#[derive(Debug, Clone, Copy)]
struct Best {
    ratio: Option<Ratio>,
    combo: usize,
    /// The ratio as a screen for the lanes (none while there is no best).
    screen: Screen,
}

impl Best {
    fn new(ratio: Option<Ratio>, combo: usize, n: &Bars, blocks: usize) -> Self {
        // A NaN best is beaten by any number: nothing is placed below it.
        let t = ratio.map_or(0.0, |r| n.sharpe(r.a, r.q));
        Self { ratio, combo, screen: Screen::new(Some(t), n.n, blocks) }
    }

    /// Whether `ratio` of `combo` beats this one: a higher ratio, or an equal one (NaN
    /// equal to NaN) of an earlier combo.
    #[inline(always)]
    fn beaten_by(&self, ratio: &Option<Ratio>, combo: usize, n: &Bars) -> bool {
        let earlier = combo < self.combo;
        match (&self.ratio, ratio) {
            _ if self.combo == usize::MAX => true,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (None, None) => earlier,
            (Some(b), Some(r)) => match compare(r, b, n) {
                Ordering::Greater => true,
                Ordering::Equal => earlier,
                Ordering::Less => false,
            },
        }
    }

    /// The better of two: the higher ratio, then the first combo.
    fn max(self, other: Best, n: &Bars) -> Best {
        // Tasks that started from the same seeds mostly end on the same best.
        if other.combo == self.combo || other.combo == usize::MAX {
            return self;
        }
        if self.beaten_by(&other.ratio, other.combo, n) { other } else { self }
    }
}

/// Per visited split: how many ranked combos are below its value, equal to it, NaN.
#[derive(Debug, Clone)]
struct Counts {
    below: Vec<u64>,
    equal: Vec<u64>,
    nans: Vec<u64>,
}

impl Counts {
    fn new(k: usize) -> Self {
        Self { below: vec![0; k], equal: vec![0; k], nans: vec![0; k] }
    }

    fn add(mut self, other: Counts) -> Counts {
        for (x, y) in [(&mut self.below, other.below), (&mut self.equal, other.equal), (&mut self.nans, other.nans)] {
            x.iter_mut().zip(y).for_each(|(x, y)| *x += y);
        }
        self
    }

    /// Counts one combo's OOS ratio `r` against the split's `value` (one at a time).
    #[inline(always)]
    fn count(&mut self, i: usize, r: Option<Ratio>, value: &Option<Ratio>, n: &Bars) {
        match (r, value) {
            (None, _) => {
                self.nans[i] += 1;
                self.below[i] += 1;
            }
            (Some(_), None) => {}
            (Some(r), Some(v)) => match compare(&r, v, n) {
                Ordering::Less => self.below[i] += 1,
                Ordering::Equal => self.equal[i] += 1,
                Ordering::Greater => {}
            },
        }
    }
}

/// The lanes of `mask`, lowest first.
#[inline(always)]
fn lanes_of(mut mask: Mask) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let l = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            l
        })
    })
}

/// Pass 1 over one task's combos: each split's IS best among them and those `best` has
/// seen (the highest ratio, then the first combo). Run by [`dispatch`].
struct BestAmong<'a> {
    chunk: &'a [usize],
    /// The bests of the visited splits from `first` on.
    best: &'a mut [Best],
    first: usize,
    tables: &'a mut LaneTables,
    visits: &'a Visits,
    matrix: &'a BlockMatrix,
    bars: Bars,
}

impl Pass for BestAmong<'_> {
    type Output = ();

    #[inline(always)]
    fn run<V: Vector>(self, v: V) {
        let Self { chunk, best, first, tables, visits, matrix, bars } = self;
        let blocks = matrix.blocks();
        for tile in chunk.chunks(LANES) {
            tables.fill(matrix, tile);
            let valid = valid_lanes(tile.len());
            let mut side = Side::new(visits, false);
            for (i, b) in (first..).zip(best.iter_mut()) {
                let sums = side.sums(tables, i);
                let (below, _) = b.screen.place(v, &sums, &tables.slack);
                let open = valid & !below;
                if open == 0 {
                    continue;
                }
                for l in lanes_of(open) {
                    let r = exact(matrix, tile[l], visits.mask(i, false), &bars);
                    if b.beaten_by(&r, tile[l], &bars) {
                        *b = Best::new(r, tile[l], &bars, blocks);
                    }
                }
            }
        }
    }
}

/// Pass 2 over one task's combos: per split, how many OOS ratios are below the split's
/// value (placed against its [`Screen`]), equal to it, NaN. Run by [`dispatch`].
struct CountAmong<'a> {
    chunk: &'a [usize],
    counts: &'a mut Counts,
    tables: &'a mut LaneTables,
    visits: &'a Visits,
    matrix: &'a BlockMatrix,
    bars: Bars,
    values: &'a [Option<Ratio>],
    screens: &'a [Screen],
}

impl Pass for CountAmong<'_> {
    type Output = ();

    #[inline(always)]
    fn run<V: Vector>(self, v: V) {
        let Self { chunk, counts, tables, visits, matrix, bars, values, screens } = self;
        for tile in chunk.chunks(LANES) {
            tables.fill(matrix, tile);
            let valid = valid_lanes(tile.len());
            let mut side = Side::new(visits, true);
            for (i, (value, screen)) in values.iter().zip(screens).enumerate() {
                let sums = side.sums(tables, i);
                let (below, above) = screen.place(v, &sums, &tables.slack);
                counts.below[i] += u64::from((below & valid).count_ones());
                let open = valid & !(below | above);
                if open == 0 {
                    continue;
                }
                for l in lanes_of(open) {
                    counts.count(i, exact(matrix, tile[l], visits.mask(i, true), &bars), value, &bars);
                }
            }
        }
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
    let bars = Bars::new(n);
    let visits = Visits::new(splits);
    let k = splits.len();
    let bounds: Vec<Bounds> = (0..combos).into_par_iter().map(|i| bounds(matrix.combo(i), n, bars.n1)).collect();
    // Combos with Σr² = 0 in every block have no variance in any set: NaN in every split.
    let flat: Vec<bool> = (0..combos).map(|i| matrix.combo(i).chunks_exact(2).all(|b| b[1] == 0.0)).collect();
    let first_flat = flat.iter().position(|&f| f);
    let flat_count = flat.iter().filter(|&&f| f).count() as u64;

    // Pass 1: each split's IS best, among the combos that can be one: some combo (never
    // NaN) is sure to reach the greatest lower bound in every split. A lane takes a split's
    // best where [`compare`] says it is above it, or equal to it and of an earlier combo.
    let floor = bounds.iter().filter(|b| b.never_nan).map(|b| b.low).fold(f64::NEG_INFINITY, f64::max);
    let candidates: Vec<usize> = (0..combos).filter(|&i| !flat[i] && bounds[i].high >= floor).collect();
    // Every task starts from the bests of a few combos likely to be near the top (the
    // highest Sharpe ratios over all the blocks), so that few of its lanes need a look.
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
    // The likeliest is every split's first best; the others are screened against it. With
    // no candidate, no split has a best yet (a combo index no combo has).
    let mut seed: Vec<Best> = match likely.first() {
        Some(&c) => (0..k).map(|i| Best::new(exact(matrix, c, visits.mask(i, false), &bars), c, &bars, s)).collect(),
        None => vec![Best::new(None, usize::MAX, &bars, s); k],
    };
    let part = k.div_ceil(2 * rayon::current_num_threads());
    seed.par_chunks_mut(part).enumerate().for_each(|(p, best)| {
        dispatch(BestAmong {
            chunk: likely.get(1..).unwrap_or_default(),
            best,
            first: p * part,
            tables: &mut LaneTables::new(s),
            visits: &visits,
            matrix,
            bars,
        })
    });
    let mut best: Vec<Best> = candidates
        .par_chunks(TASK)
        .fold(
            || (seed.clone(), LaneTables::new(s)),
            |(mut best, mut tables), chunk| {
                dispatch(BestAmong {
                    chunk,
                    best: &mut best,
                    first: 0,
                    tables: &mut tables,
                    visits: &visits,
                    matrix,
                    bars,
                });
                (best, tables)
            },
        )
        .map(|(best, _)| best)
        .reduce(|| seed.clone(), |a, b| a.into_iter().zip(b).map(|(x, y)| x.max(y, &bars)).collect());
    // Where no candidate has a number, the first NaN combo is the best: a flat one may be.
    for b in best.iter_mut().filter(|b| b.ratio.is_none()) {
        b.combo = b.combo.min(first_flat.unwrap_or(usize::MAX));
    }

    // Each split's best: its IS and OOS Sharpe ratios, and the value to rank (None: NaN).
    let (mut is_sharpe, mut oos_sharpe) = (vec![f64::NAN; k], vec![f64::NAN; k]);
    let mut value: Vec<Option<Ratio>> = vec![None; k];
    for (i, b) in best.iter().enumerate() {
        let (is, oos) =
            (matrix.set_sums(b.combo, visits.mask(i, false)), matrix.set_sums(b.combo, visits.mask(i, true)));
        is_sharpe[i] = bars.sharpe(is.0, is.1);
        oos_sharpe[i] = bars.sharpe(oos.0, oos.1);
        value[i] = ratio(oos.0, oos.1, &bars);
    }

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
    let screens: Vec<Screen> = value.iter().zip(&oos_sharpe).map(|(v, &t)| Screen::new(v.map(|_| t), n, s)).collect();
    let counts = ranked
        .par_chunks(TASK)
        .fold(
            || (Counts::new(k), LaneTables::new(s)),
            |(mut counts, mut tables), chunk| {
                dispatch(CountAmong {
                    chunk,
                    counts: &mut counts,
                    tables: &mut tables,
                    visits: &visits,
                    matrix,
                    bars,
                    values: &value,
                    screens: &screens,
                });
                (counts, tables)
            },
        )
        .map(|(counts, _)| counts)
        .reduce(|| Counts::new(k), Counts::add);

    // Back from the visiting order to the splits' order.
    let mut logits = vec![0.0; k];
    let mut report_best = vec![0; k];
    let (mut report_is, mut report_oos) = (vec![0.0; k], vec![0.0; k]);
    for (i, &j) in visits.split.iter().enumerate() {
        let rank = if oos_sharpe[i].is_nan() {
            ((counts.nans[i] + flat_count) as f64 + 1.0) / 2.0
        } else {
            (counts.below[i] + always_below + flat_count) as f64 + (counts.equal[i] as f64 + 1.0) / 2.0
        };
        let w = rank / (combos as f64 + 1.0);
        logits[j] = (w / (1.0 - w)).ln();
        report_best[j] = best[i].combo;
        report_is[j] = is_sharpe[i];
        report_oos[j] = oos_sharpe[i];
    }
    let share = |count: usize| count as f64 / k as f64;
    let (slope, intercept) = least_squares(&report_is, &report_oos);
    Ok(PboReport {
        pbo: share(logits.iter().filter(|&&l| l <= 0.0).count()),
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
