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
    #[inline(always)]
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
        let (head, last) = parts.split_at(parts.len() - 1);
        self.finish(&self.head(head), head.len(), last[0])
    }

    /// Each lane's sums over the first groups' subsets `parts` (all groups but the last),
    /// which consecutive splits often share.
    #[inline(always)]
    pub fn head(&self, parts: &[u8]) -> [[f64; LANES]; 2] {
        let Some((&first, rest)) = parts.split_first() else { return [[0.0; LANES]; 2] };
        let mut sums = self.sums[first as usize];
        for (g, &p) in rest.iter().enumerate() {
            add(&mut sums, &self.sums[((g + 1) << GROUP) | p as usize]);
        }
        sums
    }

    /// The sums of a [`Self::head`] over `groups` groups with the last group's subset `last`.
    #[inline(always)]
    pub fn finish(&self, head: &[[f64; LANES]; 2], groups: usize, last: u8) -> [[f64; LANES]; 2] {
        let table = &self.sums[(groups << GROUP) | last as usize];
        if groups == 0 {
            return *table;
        }
        let mut sums = *head;
        add(&mut sums, table);
        sums
    }
}

#[inline(always)]
fn add(sums: &mut [[f64; LANES]; 2], more: &[[f64; LANES]; 2]) {
    for l in 0..LANES {
        sums[0][l] += more[0][l];
        sums[1][l] += more[1][l];
    }
}
