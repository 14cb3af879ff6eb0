//! [`LaneTables`]: [`LANES`] combos side by side in f32, each combo's blocks scaled by a
//! power of two and its sums over every subset of each group of [`GROUP`] consecutive
//! blocks tabled once, so that a set's Σr and Σr² cost one vector load and add per group
//! for all the lanes. With them each lane's `slack`: a bound on the distance between a
//! set's f32 Σr and its exact f64 Σr (scaled), which lets [`crate::screen`] place a set
//! for certain.
//!
//! Invariant: for every lane and set, with ρ = [`relative_error`] of the block count,
//! |f32 Σr − f64 Σr| ≤ slack and |f32 Σr² − f64 Σr²| ≤ ρ·(f32 Σr²) once that is at least
//! [`Q_MIN`] (all scaled); a combo whose blocks cannot keep this (a negative Σr², sums past
//! f32's range) gets an infinite slack, which places nothing.

use crate::blocks::BlockMatrix;
use crate::splits::MAX_BLOCKS;

/// A lane mask: bit l for lane l.
pub(crate) type Mask = u32;

/// Every lane.
pub(crate) const ALL_LANES: Mask = (1 << LANES) - 1;

/// Combos computed side by side: one AVX-512 vector of f32, or two AVX2 ones.
pub(crate) const LANES: usize = 16;

/// Blocks per group: a group's sums over its subsets are one table of 2^8 entries.
pub(crate) const GROUP: usize = 8;

/// f32's unit roundoff.
pub(crate) const U: f64 = 1.0 / (1u64 << 24) as f64;

/// ρ: a bound on the relative error of a set's f32 sum of non-negative terms (the
/// f64→f32 roundings and at most S/2 − 1 additions in f32: (S/2 + 1)·2^-24, and the f64
/// sum's own rounding), with room to spare.
pub(crate) fn relative_error(blocks: usize) -> f64 {
    (blocks as f64 + 8.0) * U
}

/// The least scaled f32 Σr² that the relative bound on Σr² holds for: far above the
/// absolute error of f32's subnormal range (2^-149 per operation).
pub(crate) const Q_MIN: f32 = 1.0 / (1u64 << 60) as f32;

/// The lanes' f32 sums over every subset of each group: at `group · 2^GROUP + subset`, Σr
/// of each lane, then Σr² of each lane.
#[derive(Debug)]
pub(crate) struct LaneTables {
    sums: Vec<[[f32; LANES]; 2]>,
    /// Per lane: the bound on |f32 Σr − f64 Σr| of any set (module docs).
    pub slack: [f32; LANES],
    blocks: usize,
}

impl LaneTables {
    pub fn new(blocks: usize) -> Self {
        Self { sums: vec![[[0.0; LANES]; 2]; blocks.div_ceil(GROUP) << GROUP], slack: [0.0; LANES], blocks }
    }

    /// Tables `combos` (1 to [`LANES`]) in the first lanes; the others repeat the last combo.
    #[inline(always)]
    pub fn fill(&mut self, matrix: &BlockMatrix, combos: &[usize]) {
        debug_assert!((1..=LANES).contains(&combos.len()));
        let s = self.blocks;
        let mut a = [[0.0f32; LANES]; MAX_BLOCKS];
        let mut q = [[0.0f32; LANES]; MAX_BLOCKS];
        for l in 0..LANES {
            let blocks = matrix.combo(combos[l.min(combos.len() - 1)]);
            self.slack[l] = scaled(blocks, relative_error(s), |k, sum, sum_sq| (a[k][l], q[k][l]) = (sum, sum_sq));
        }
        for (g, table) in self.sums.chunks_mut(1 << GROUP).enumerate() {
            let len = GROUP.min(s - g * GROUP);
            table[0] = [[0.0; LANES]; 2];
            for m in 1usize..1 << len {
                let top = usize::BITS as usize - 1 - m.leading_zeros() as usize;
                let k = g * GROUP + top;
                let mut sums = table[m ^ (1 << top)];
                for l in 0..LANES {
                    sums[0][l] += a[k][l];
                    sums[1][l] += q[k][l];
                }
                table[m] = sums;
            }
        }
    }

    /// Each lane's sums over the first groups' subsets `parts` (all groups but the last),
    /// which consecutive splits often share.
    #[inline(always)]
    pub fn head(&self, parts: &[u8]) -> [[f32; LANES]; 2] {
        let Some((&first, rest)) = parts.split_first() else { return [[0.0; LANES]; 2] };
        let mut sums = self.sums[first as usize];
        for (g, &p) in rest.iter().enumerate() {
            add(&mut sums, &self.sums[((g + 1) << GROUP) | p as usize]);
        }
        sums
    }

    /// The sums of a [`Self::head`] over `groups` groups with the last group's subset `last`.
    #[inline(always)]
    pub fn finish(&self, head: &[[f32; LANES]; 2], groups: usize, last: u8) -> [[f32; LANES]; 2] {
        let mut sums = *head;
        add(&mut sums, &self.sums[(groups << GROUP) | last as usize]);
        sums
    }
}

/// Hands a combo's blocks to `put` as f32, scaled by one power of two (a set's Sharpe ratio
/// does not change when every return is scaled) so that the largest |Σr| and √Σr² lie in
/// [1/2, 1); returns the combo's slack: ρ·Σ|Σr| + 2^-100 over all its blocks (the f64→f32
/// roundings, the f32 additions, the f64 sum's own rounding, the subnormal range's absolute
/// errors, flushed to zero or not, and the rounding of a sum with the slack stay under it), or +∞ where the bounds
/// cannot hold.
pub(crate) fn scaled(blocks: &[f64], rho: f64, mut put: impl FnMut(usize, f32, f32)) -> f32 {
    let largest = blocks.chunks_exact(2).fold(0.0f64, |m, b| m.max(b[0].abs()).max(b[1].abs().sqrt()));
    let exponent = if largest > 0.0 { largest.log2().floor() as i32 + 1 } else { 0 };
    let scale = 2f64.powi(-exponent.clamp(-1000, 1000));
    let mut spread = 0.0;
    let mut sound = true;
    for (k, b) in blocks.chunks_exact(2).enumerate() {
        let (sum, sum_sq) = (b[0] * scale, b[1] * scale * scale);
        let (sum32, sum_sq32) = (sum as f32, sum_sq as f32);
        sound &= sum_sq >= 0.0 && sum32.is_finite() && sum_sq32.is_finite() && sum_sq.abs() < 1e30;
        spread += sum.abs();
        put(k, sum32, sum_sq32);
    }
    let slack = (rho * spread * (1.0 + 1e-6) + 2f64.powi(-100)) as f32;
    if sound && spread < 1e30 { slack } else { f32::INFINITY }
}

#[inline(always)]
fn add(sums: &mut [[f32; LANES]; 2], more: &[[f32; LANES]; 2]) {
    for l in 0..LANES {
        sums[0][l] += more[0][l];
        sums[1][l] += more[1][l];
    }
}
