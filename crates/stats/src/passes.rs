//! CSCV's two passes over combos × splits and what they share: the splits in visiting
//! order ([`Visits`]), a split's IS best so far ([`Best`]), the OOS counts ([`Counts`]) and
//! the exact ratio of a set ([`exact`]). [`Passes`] says where the passes run: [`OnCpu`]
//! over tiles of sixteen combos in f32 (the screen in `screen.rs`, AVX-512 or AVX2 where
//! there is one), or a device that screens every pair at once (`device.rs`).
//!
//! Invariant: a pass's answer is the definition's whatever runs it: a lane the screen
//! leaves open is compared exactly, and a best is the highest ratio then the first combo,
//! which no order of visits changes.

use crate::blocks::BlockMatrix;
use crate::lanes::{ALL_LANES, GROUP, LANES, LaneTables, Mask};
use crate::ratio::{Bars, Ratio, compare, ratio};
use crate::screen::Screen;
use crate::splits::SplitSet;
use crate::vector::{Pass, Vector, dispatch};
use rayon::prelude::*;
use std::cmp::Ordering;
use std::convert::Infallible;

/// Combos per task of a pass.
const TASK: usize = 64;

/// The splits' group subsets (`parts`: a split's in-sample subsets, then its
/// out-of-sample ones, `groups` of each), in the order the passes visit them: sorted, so
/// that consecutive splits read nearby table entries and often share all their subsets
/// but the last group's (`new_head[i]`: the i-th does not). `split[i]` is the i-th
/// visited split, `masks[i]` its in-sample blocks.
pub(crate) struct Visits {
    groups: usize,
    parts: Vec<u8>,
    pub split: Vec<usize>,
    masks: Vec<u64>,
    new_head: Vec<bool>,
    /// Every block.
    all: u64,
}

impl Visits {
    pub fn new(splits: &SplitSet) -> Self {
        let blocks = splits.blocks();
        let groups = blocks.div_ceil(GROUP);
        let all = if blocks == 64 { u64::MAX } else { (1u64 << blocks) - 1 };
        let cut = |m: u64| (0..groups).map(move |g| ((m >> (g * GROUP)) & 0xff) as u8);
        // The group subsets as one number, the first group's most significant (≤ 8 groups);
        // equal keys keep the splits' order.
        let key = |m: u64| cut(m).fold(0u64, |key, part| (key << GROUP) | u64::from(part));
        let mut keyed: Vec<(u64, usize)> = splits.masks().iter().enumerate().map(|(j, &m)| (key(m), j)).collect();
        keyed.sort_unstable();
        let split: Vec<usize> = keyed.into_iter().map(|(_, j)| j).collect();
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
    pub fn mask(&self, i: usize, out_of_sample: bool) -> u64 {
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
pub(crate) fn exact(matrix: &BlockMatrix, combo: usize, mask: u64, bars: &Bars) -> Option<Ratio> {
    let (a, q) = matrix.set_sums(combo, mask);
    ratio(a, q, bars)
}

/// The lanes of a tile of `len` combos, as a mask.
fn valid_lanes(len: usize) -> Mask {
    ALL_LANES >> (LANES - len)
}

/// An IS best so far: the combo and its ratio (`None`: NaN, below every number).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Best {
    pub ratio: Option<Ratio>,
    pub combo: usize,
    /// The ratio as a screen for the lanes (none while there is no best).
    pub screen: Screen,
}

impl Best {
    pub fn new(ratio: Option<Ratio>, combo: usize, n: &Bars, blocks: usize) -> Self {
        // A NaN best is beaten by any number: nothing is placed below it.
        let t = ratio.map_or(0.0, |r| n.sharpe(r.a, r.q));
        Self { ratio, combo, screen: Screen::new(Some(t), n.n, blocks) }
    }

    /// Whether `ratio` of `combo` beats this one: a higher ratio, or an equal one (NaN
    /// equal to NaN) of an earlier combo.
    #[inline(always)]
    pub fn beaten_by(&self, ratio: &Option<Ratio>, combo: usize, n: &Bars) -> bool {
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
    pub fn max(self, other: Best, n: &Bars) -> Best {
        // Tasks that started from the same seeds mostly end on the same best.
        if other.combo == self.combo || other.combo == usize::MAX {
            return self;
        }
        if self.beaten_by(&other.ratio, other.combo, n) { other } else { self }
    }
}

/// Per visited split: how many ranked combos are below its value, equal to it, NaN.
#[derive(Debug, Clone)]
pub(crate) struct Counts {
    pub below: Vec<u64>,
    pub equal: Vec<u64>,
    pub nans: Vec<u64>,
}

impl Counts {
    pub fn new(k: usize) -> Self {
        Self { below: vec![0; k], equal: vec![0; k], nans: vec![0; k] }
    }

    pub fn add(mut self, other: Counts) -> Counts {
        for (x, y) in [(&mut self.below, other.below), (&mut self.equal, other.equal), (&mut self.nans, other.nans)] {
            x.iter_mut().zip(y).for_each(|(x, y)| *x += y);
        }
        self
    }

    /// Counts one combo's OOS ratio `r` against the split's `value` (one at a time).
    #[inline(always)]
    pub fn count(&mut self, i: usize, r: Option<Ratio>, value: &Option<Ratio>, n: &Bars) {
        let (below, equal, nan) = Self::of(r, value, n);
        self.below[i] += below;
        self.equal[i] += equal;
        self.nans[i] += nan;
    }

    /// Where one combo's OOS ratio `r` counts against a split's `value`: (below, equal,
    /// NaN), each 0 or 1 (NaN is below every number, and counted as below as well).
    #[inline(always)]
    pub fn of(r: Option<Ratio>, value: &Option<Ratio>, n: &Bars) -> (u64, u64, u64) {
        match (r, value) {
            (None, _) => (1, 0, 1),
            (Some(_), None) => (0, 0, 0),
            (Some(r), Some(v)) => match compare(&r, v, n) {
                Ordering::Less => (1, 0, 0),
                Ordering::Equal => (0, 1, 0),
                Ordering::Greater => (0, 0, 0),
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

/// What a pass reads: the blocks, the splits in visiting order, a set's bars.
#[derive(Clone, Copy)]
pub(crate) struct Work<'a> {
    pub matrix: &'a BlockMatrix,
    pub visits: &'a Visits,
    pub bars: Bars,
}

/// Where CSCV's two passes run.
pub(crate) trait Passes {
    type Error;

    /// Pass 1: each visited split's IS best among `candidates` and the bests `seed` holds
    /// (those of the likeliest combo; `likely`: the next likeliest, to start from).
    fn bests(
        &mut self,
        work: Work<'_>,
        seed: &[Best],
        likely: &[usize],
        candidates: &[usize],
    ) -> Result<Vec<Best>, Self::Error>;

    /// Pass 2: per visited split, the `ranked` combos whose OOS ratio is below its value
    /// (placed against its screen), equal to it, NaN.
    fn counts(
        &mut self,
        work: Work<'_>,
        ranked: &[usize],
        values: &[Option<Ratio>],
        screens: &[Screen],
    ) -> Result<Counts, Self::Error>;
}

/// The passes on the CPU's threads, a tile of [`LANES`] combos at a time.
pub(crate) struct OnCpu;

impl Passes for OnCpu {
    type Error = Infallible;

    fn bests(
        &mut self,
        work: Work<'_>,
        seed: &[Best],
        likely: &[usize],
        candidates: &[usize],
    ) -> Result<Vec<Best>, Infallible> {
        // Every task starts from the bests of the likely combos.
        let mut seed = seed.to_vec();
        improve(work, &mut seed, likely);
        let seed = &seed[..];
        let Work { matrix, visits, bars } = work;
        let s = matrix.blocks();
        Ok(candidates
            .par_chunks(TASK)
            .fold(
                || (seed.to_vec(), LaneTables::new(s)),
                |(mut best, mut tables), chunk| {
                    dispatch(BestAmong { chunk, best: &mut best, first: 0, tables: &mut tables, visits, matrix, bars });
                    (best, tables)
                },
            )
            .map(|(best, _)| best)
            .reduce(|| seed.to_vec(), |a, b| better_of(a, b, &bars)))
    }

    fn counts(
        &mut self,
        work: Work<'_>,
        ranked: &[usize],
        values: &[Option<Ratio>],
        screens: &[Screen],
    ) -> Result<Counts, Infallible> {
        let Work { matrix, visits, bars } = work;
        let (s, k) = (matrix.blocks(), values.len());
        Ok(ranked
            .par_chunks(TASK)
            .fold(
                || (Counts::new(k), LaneTables::new(s)),
                |(mut counts, mut tables), chunk| {
                    dispatch(CountAmong {
                        chunk,
                        counts: &mut counts,
                        tables: &mut tables,
                        visits,
                        matrix,
                        bars,
                        values,
                        screens,
                    });
                    (counts, tables)
                },
            )
            .map(|(counts, _)| counts)
            .reduce(|| Counts::new(k), Counts::add))
    }
}

/// Per split, the better of two bests.
fn better_of(a: Vec<Best>, b: Vec<Best>, bars: &Bars) -> Vec<Best> {
    a.into_iter().zip(b).map(|(x, y)| x.max(y, bars)).collect()
}

/// `seed`'s bests improved by the combos `likely`, the visited splits cut across threads.
fn improve(work: Work<'_>, seed: &mut [Best], likely: &[usize]) {
    let Work { matrix, visits, bars } = work;
    let part = seed.len().div_ceil(2 * rayon::current_num_threads()).max(1);
    seed.par_chunks_mut(part).enumerate().for_each(|(p, best)| {
        dispatch(BestAmong {
            chunk: likely,
            best,
            first: p * part,
            tables: &mut LaneTables::new(matrix.blocks()),
            visits,
            matrix,
            bars,
        })
    });
}
