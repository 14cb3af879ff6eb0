//! CSCV's screen on a device that places every (split, combo) pair of a pass at once: a
//! GPU kernel, whose host code lives above this crate. This module says what the device
//! is given ([`ScaledBlocks`], a [`ScreenPass`] of [`DeviceScreen`]s) and must answer
//! ([`Screened`]: the pairs it leaves open, as the [`Listing`] asks), holds the arithmetic
//! it must do ([`DeviceScreen::place`], [`OpenPair::likeness`]; [`screen_on_cpu`] is the
//! kernel's CPU twin), and runs CSCV's passes on it ([`OnDevice`]; pass 1 in two rounds:
//! each split's likeliest pair, then what the bests it makes leave open). Every pair left
//! open is compared exactly on the CPU, so [`pbo_on`](crate::pbo_on) gives
//! [`pbo`](crate::pbo)'s report bit for bit.
//!
//! The device computes a set's f32 Σr and Σr² from the scaled blocks, in any order, and
//! places it as `screen.rs` does, with WGSL's f32 in mind. Each addition and
//! multiplication is correctly rounded, but subnormal inputs and results may be flushed
//! to zero, and a compiler may assume that no infinity or NaN occurs. So:
//! - nothing infinite reaches the device. A combo whose bounds cannot hold has a negative
//!   slack and zero blocks, and places nothing. A ratio whose constants leave
//!   [2^-20, 2^40] places nothing either ([`NOTHING`]). Every sum is then below 2^6 and
//!   every product below 2^52.
//! - a flush is an absolute error of at most 2^-126 per operation. The slack's absolute term
//!   (2^-100, `lanes.rs`) covers those of Σr. For Σr² they are 2^-60 of the least Σr² that
//!   is placed by its ratio (2^-60), far inside ρ's room.
//! - a flushed product can only make a test claim less. The products on the right of
//!   each test (Σr² times a constant ≥ 2^-20, with Σr² ≥ 2^-60) are normal. A flushed
//!   left-hand product is below 2^-126, and its true value is below 2^-86, under the
//!   right-hand side, so the test is still true.
//! - the sign tests compare Σr with ±slack rather than computing Σr ± slack: a sum that
//!   flushes to 0 cannot pass as "≤ 0".
//! - a fused multiply-add cannot change a test: each compares two products, and nothing
//!   is added to a product.
//!
//! Invariant: a pair the device does not list is placed as [`DeviceScreen::place`] would
//! place it under these roundings. Such a placement is certain. The report depends only
//! on the blocks and the splits.

use crate::blocks::BlockMatrix;
use crate::device_screen::DeviceScreen;
use crate::error::PboError;
use crate::lanes::{relative_error, scaled};
use crate::passes::{Best, Counts, Passes, Work, exact};
use crate::ratio::Ratio;
use crate::screen::Screen;
use bytemuck::Zeroable;
use rayon::prelude::*;

/// Every combo's blocks in f32, each combo scaled by its own power of two (`lanes.rs`).
/// A combo's record is its blocks' (Σr, Σr²) in block order, then (slack, 0). A negative
/// slack means the bounds cannot hold; such a combo's blocks are 0 and it places nothing.
#[derive(Debug, Clone)]
pub struct ScaledBlocks {
    blocks: usize,
    records: Vec<[f32; 2]>,
}

impl ScaledBlocks {
    pub fn new(matrix: &BlockMatrix) -> Self {
        let s = matrix.blocks();
        let mut records = vec![[0.0f32; 2]; matrix.combos() * (s + 1)];
        records.par_chunks_mut(s + 1).enumerate().for_each(|(c, record)| {
            let slack = scaled(matrix.combo(c), relative_error(s), |k, sum, sum_sq| record[k] = [sum, sum_sq]);
            if slack.is_finite() {
                record[s] = [slack, 0.0];
            } else {
                record.fill([0.0; 2]);
                record[s] = [-1.0, 0.0];
            }
        });
        Self { blocks: s, records }
    }

    /// Blocks per combo (S).
    pub fn blocks(&self) -> usize {
        self.blocks
    }

    /// Entries per combo: S blocks, then the slack.
    pub fn stride(&self) -> usize {
        self.blocks + 1
    }

    /// Combo `c`'s record.
    pub fn record(&self, c: usize) -> &[[f32; 2]] {
        &self.records[c * self.stride()..(c + 1) * self.stride()]
    }
}

/// One pass for the device: every split × every listed combo.
#[derive(Debug, Clone, Copy)]
pub struct ScreenPass<'a> {
    /// Per split, the blocks of its side: bit b of the pair (low word first) for block b.
    pub masks: &'a [[u32; 2]],
    /// Per split, its value.
    pub screens: &'a [DeviceScreen],
    /// The combos, as indices of [`ScaledBlocks`].
    pub combos: &'a [u32],
    pub listing: Listing,
}

/// Which pairs a device lists; `as u32`, the code a kernel reads.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// Per split, the pair not surely below whose f32 sums give the highest
    /// [`OpenPair::likeness`], if any (pass 1's first round: the split's best is likely it).
    Likeliest = 0,
    /// Every pair not surely below (pass 1).
    NotBelow = 1,
    /// Every pair neither surely below nor surely above (pass 2).
    Undecided = 2,
}

/// A pair a device left open, with the f32 sums it placed it by: pass 1 screens these
/// again, against each split's best as it improves.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct OpenPair {
    pub split: u32,
    /// The position in the pass's `combos`.
    pub combo: u32,
    pub sum: f32,
    pub sum_sq: f32,
}

impl OpenPair {
    /// How high the pair's ratio looks from its f32 sums: Σr/√Σr², which orders ratios
    /// over sets of equal bars as the Sharpe ratio does (`f32::MIN` without variance).
    /// Only an order of what to compare first: the exact comparison decides.
    pub fn likeness(&self) -> f32 {
        if self.sum_sq > 0.0 { self.sum / self.sum_sq.sqrt() } else { f32::MIN }
    }
}

/// A device's answer to a [`ScreenPass`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Screened {
    /// Per split, the pairs placed surely below (NaN included) and not listed.
    pub below: Vec<u32>,
    /// The pairs left open, in any order.
    pub open: Vec<OpenPair>,
}

/// `pass` screened on the CPU as the kernel does it, each set's sums added in block
/// order: the kernel's twin, which a device's answer equals wherever no subnormal is
/// flushed (the open pairs by split, then combo; of equally likely pairs, the first).
pub fn screen_on_cpu(blocks: &ScaledBlocks, pass: &ScreenPass<'_>) -> Screened {
    let s = blocks.blocks();
    let per_split: Vec<(u32, Vec<OpenPair>)> = (pass.masks, pass.screens)
        .into_par_iter()
        .enumerate()
        .map(|(i, (mask, screen))| {
            let mask = u64::from(mask[0]) | u64::from(mask[1]) << 32;
            let (mut below, mut open) = (0, Vec::new());
            for (j, &c) in pass.combos.iter().enumerate() {
                let record = blocks.record(c as usize);
                let (mut a, mut q) = (0.0f32, 0.0f32);
                for (b, block) in record[..s].iter().enumerate() {
                    if (mask >> b) & 1 == 1 {
                        (a, q) = (a + block[0], q + block[1]);
                    }
                }
                let pair = OpenPair { split: i as u32, combo: j as u32, sum: a, sum_sq: q };
                match (screen.place(a, q, record[s][0]), pass.listing) {
                    ((true, _), _) => below += 1,
                    ((false, true), Listing::Undecided) => {}
                    (_, Listing::Likeliest)
                        if open.last().is_some_and(|p: &OpenPair| p.likeness() >= pair.likeness()) => {}
                    (_, Listing::Likeliest) => open = vec![pair],
                    _ => open.push(pair),
                }
            }
            (below, open)
        })
        .collect();
    let (below, open): (Vec<u32>, Vec<Vec<OpenPair>>) = per_split.into_iter().unzip();
    Screened { below, open: open.concat() }
}

/// A device that screens a whole pass (module docs).
pub trait ScreenDevice {
    type Error;

    /// Places every pair of `pass` over `blocks`.
    fn screen(&mut self, blocks: &ScaledBlocks, pass: &ScreenPass<'_>) -> Result<Screened, Self::Error>;
}

/// CSCV's passes on a [`ScreenDevice`], the open pairs compared exactly on the CPU.
pub(crate) struct OnDevice<'d, D> {
    device: &'d mut D,
    blocks: ScaledBlocks,
}

impl<'d, D: ScreenDevice> OnDevice<'d, D> {
    pub fn new(device: &'d mut D, matrix: &BlockMatrix) -> Self {
        Self { device, blocks: ScaledBlocks::new(matrix) }
    }

    /// The device's answer for one side of the visited splits (out of sample: pass 2),
    /// checked against the pass: the pairs placed below per split, and the open pairs.
    fn screen(
        &mut self,
        work: Work<'_>,
        listing: Listing,
        screens: &[DeviceScreen],
        combos: &[usize],
    ) -> Result<Screened, PboError<D::Error>> {
        let out_of_sample = listing == Listing::Undecided;
        let k = screens.len();
        let masks: Vec<[u32; 2]> = (0..k)
            .map(|i| {
                let m = work.visits.mask(i, out_of_sample);
                [m as u32, (m >> 32) as u32]
            })
            .collect();
        // The indices fit: `pbo_on` refuses more than 2^32 combos.
        let ids: Vec<u32> = combos.iter().map(|&c| c as u32).collect();
        let pass = ScreenPass { masks: &masks, screens, combos: &ids, listing };
        let screened = self.device.screen(&self.blocks, &pass).map_err(PboError::Device)?;
        let Screened { below, open } = &screened;
        let mut open_per_split = vec![0u64; k];
        for &OpenPair { split: i, combo: j, sum, sum_sq } in open {
            if i as usize >= k || j as usize >= combos.len() {
                let n = combos.len();
                return Err(PboError::Answer(format!("pair ({i}, {j}) is outside {k} splits × {n} combos")));
            }
            if !sum.is_finite() || !sum_sq.is_finite() {
                return Err(PboError::Answer(format!("pair ({i}, {j}) has sums {sum} and {sum_sq}")));
            }
            open_per_split[i as usize] += 1;
        }
        if below.len() != k {
            return Err(PboError::Answer(format!("{} counts for {k} splits", below.len())));
        }
        if let Some(i) = (0..k).find(|&i| u64::from(below[i]) + open_per_split[i] > combos.len() as u64) {
            return Err(PboError::Answer(format!("split {i} places more pairs than there are combos")));
        }
        if let Some(i) = (0..k).find(|&i| listing == Listing::Likeliest && open_per_split[i] > 1) {
            return Err(PboError::Answer(format!("split {i} has {} likeliest pairs", open_per_split[i])));
        }
        Ok(screened)
    }
}

impl<D: ScreenDevice> Passes for OnDevice<'_, D> {
    type Error = PboError<D::Error>;

    fn bests(
        &mut self,
        work: Work<'_>,
        seed: &[Best],
        _likely: &[usize],
        candidates: &[usize],
    ) -> Result<Vec<Best>, Self::Error> {
        // The likeliest round below finds better starting bests than `likely` would.
        let Work { matrix, visits, bars } = work;
        let (s, k) = (matrix.blocks(), seed.len());
        // First, each split's likeliest pair, compared exactly: the split's best is likely it,
        // so that few pairs stay open against the bests it makes.
        let screens: Vec<DeviceScreen> = seed.iter().map(|b| b.screen.for_device()).collect();
        let likeliest = self.screen(work, Listing::Likeliest, &screens, candidates)?.open;
        let mut best = seed.to_vec();
        let improved: Vec<(usize, Best)> = likeliest
            .par_iter()
            .filter_map(|p| {
                let (i, combo) = (p.split as usize, candidates[p.combo as usize]);
                let r = exact(matrix, combo, visits.mask(i, false), &bars);
                seed[i].beaten_by(&r, combo, &bars).then(|| (i, Best::new(r, combo, &bars, s)))
            })
            .collect();
        for (i, b) in improved {
            best[i] = b;
        }
        // Then every pair not surely below those bests.
        let screens: Vec<DeviceScreen> = best.iter().map(|b| b.screen.for_device()).collect();
        let open = self.screen(work, Listing::NotBelow, &screens, candidates)?.open;
        let (starts, open) = by_split(open, k);
        let blocks = &self.blocks;
        best.par_iter_mut().enumerate().with_min_len(16).for_each(|(i, b)| {
            let pairs = &open[starts[i]..starts[i + 1]];
            let mut screen = b.screen.for_device();
            let mut take = |p: &OpenPair, screen: &mut DeviceScreen| {
                let combo = candidates[p.combo as usize];
                let r = exact(matrix, combo, visits.mask(i, false), &bars);
                if b.beaten_by(&r, combo, &bars) {
                    *b = Best::new(r, combo, &bars, s);
                    *screen = b.screen.for_device();
                }
            };
            // The pair likeliest to be the best first (by its f32 sums), then the others
            // screened again against the best so far: the best is the highest ratio, then
            // the first combo, whatever the order.
            let likeliest = pairs.iter().enumerate().max_by(|x, y| x.1.likeness().total_cmp(&y.1.likeness()));
            let Some((first, p)) = likeliest else { return };
            take(p, &mut screen);
            for (_, p) in pairs.iter().enumerate().filter(|&(j, _)| j != first) {
                let slack = blocks.record(candidates[p.combo as usize])[s][0];
                if !screen.place(p.sum, p.sum_sq, slack).0 {
                    take(p, &mut screen);
                }
            }
        });
        Ok(best)
    }

    fn counts(
        &mut self,
        work: Work<'_>,
        ranked: &[usize],
        values: &[Option<Ratio>],
        screens: &[Screen],
    ) -> Result<Counts, Self::Error> {
        let screens: Vec<DeviceScreen> = screens.iter().map(Screen::for_device).collect();
        let Screened { below, open } = self.screen(work, Listing::Undecided, &screens, ranked)?;
        let Work { matrix, visits, bars } = work;
        let k = values.len();
        let (starts, open) = by_split(open, k);
        let mut counts = Counts::new(k);
        counts.below = below.into_iter().map(u64::from).collect();
        let Counts { below, equal, nans } = &mut counts;
        (below, equal, nans).into_par_iter().enumerate().with_min_len(64).for_each(|(i, (below, equal, nans))| {
            for p in &open[starts[i]..starts[i + 1]] {
                let r = exact(matrix, ranked[p.combo as usize], visits.mask(i, true), &bars);
                let (b, e, n) = Counts::of(r, &values[i], &bars);
                (*below, *equal, *nans) = (*below + b, *equal + e, *nans + n);
            }
        });
        Ok(counts)
    }
}

/// The open pairs grouped by split, by a counting sort (`screen` checked every split
/// index): split i's are `pairs[starts[i]..starts[i + 1]]`, in the device's order.
fn by_split(open: Vec<OpenPair>, k: usize) -> (Vec<usize>, Vec<OpenPair>) {
    let mut starts = vec![0usize; k + 1];
    for p in &open {
        starts[p.split as usize + 1] += 1;
    }
    for i in 0..k {
        starts[i + 1] += starts[i];
    }
    let mut pairs = vec![OpenPair::zeroed(); open.len()];
    let mut next = starts.clone();
    for p in open {
        pairs[next[p.split as usize]] = p;
        next[p.split as usize] += 1;
    }
    (starts, pairs)
}
