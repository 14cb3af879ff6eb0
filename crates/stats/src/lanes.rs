//! [`LaneTables`]: [`LANES`] combos side by side, with each combo's sums over every subset
//! of each group of [`GROUP`] consecutive blocks tabled once, so that a set's Σr and Σr²
//! cost one vector load and add per group for all the lanes.
//!
//! Invariant: a set's sums are its blocks' sums added in block order within each group,
//! then the groups' sums in group order, in every lane and for every combo.

use crate::blocks::BlockMatrix;
use crate::splits::MAX_BLOCKS;

/// Combos computed side by side.
pub(crate) const LANES: usize = 8;

/// Blocks per group: a group's sums over its subsets are one table of 2^8 entries.
pub(crate) const GROUP: usize = 8;

/// The lanes' sums over every subset of each group: at `group · 2^GROUP + subset`, Σr of
/// each lane, then Σr² of each lane.
#[derive(Debug)]
pub(crate) struct LaneTables {
    sums: Vec<[[f64; LANES]; 2]>,
    blocks: usize,
}

impl LaneTables {
    pub fn new(blocks: usize) -> Self {
        Self { sums: vec![[[0.0; LANES]; 2]; blocks.div_ceil(GROUP) << GROUP], blocks }
    }

    /// Tables `combos` (1 to [`LANES`]) in the first lanes; the others repeat the last combo.
    pub fn fill(&mut self, matrix: &BlockMatrix, combos: &[usize]) {
        debug_assert!((1..=LANES).contains(&combos.len()));
        let s = self.blocks;
        let mut a = [[0.0; LANES]; MAX_BLOCKS];
        let mut q = [[0.0; LANES]; MAX_BLOCKS];
        for l in 0..LANES {
            let blocks = matrix.combo(combos[l.min(combos.len() - 1)]);
            for k in 0..s {
                a[k][l] = blocks[2 * k];
                q[k][l] = blocks[2 * k + 1];
            }
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

    /// Each lane's Σr and Σr² over the set whose group subsets are `parts`.
    #[inline(always)]
    pub fn sums(&self, parts: &[u8]) -> [[f64; LANES]; 2] {
        let mut sums = self.sums[parts[0] as usize];
        for (g, &p) in parts.iter().enumerate().skip(1) {
            let add = &self.sums[(g << GROUP) | p as usize];
            for l in 0..LANES {
                sums[0][l] += add[0][l];
                sums[1][l] += add[1][l];
            }
        }
        sums
    }
}
