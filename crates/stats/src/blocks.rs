//! [`BlockMatrix`]: each combo's returns cut into S blocks of equal length, kept as Σr and
//! Σr² per block — what CSCV needs of a returns matrix, in 2·S numbers per combo.

use crate::error::{StatsError, bad};
use crate::splits::check_blocks;

/// Per combo (in order) and block (in order): Σr, then Σr², over `bars` bars each.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockMatrix {
    blocks: usize,
    bars: usize,
    /// combo-major: combo i's blocks at `2·S·i ..`, (Σr, Σr²) per block.
    values: Vec<f64>,
}

impl BlockMatrix {
    /// Blocks as a sweep records them: `values` holds 2·`blocks` numbers per combo, each
    /// block over `bars` bars.
    pub fn new(blocks: usize, bars: usize, values: Vec<f64>) -> Result<Self, StatsError> {
        check_blocks(blocks)?;
        if !values.len().is_multiple_of(2 * blocks) {
            return Err(bad("blocks", format!("{} values are not 2 × {blocks} per combo", values.len())));
        }
        if bars * (blocks / 2) < 2 {
            return Err(bad("blocks", format!("{bars} bars per block leave a half of the blocks under two bars")));
        }
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            let combo = i / (2 * blocks);
            return Err(bad("blocks", format!("combo {combo}, block {}: a sum is not finite", i % (2 * blocks) / 2)));
        }
        Ok(Self { blocks, bars, values })
    }

    /// The blocks of a returns matrix of `rows` bars by `combos` columns, `returns[t·combos +
    /// c]` (row-major, as a T×N frame's values), cut by the paper's rule as pypbo applies
    /// it: the first T mod S bars dropped, then S blocks of T div S bars, each summed in
    /// bar order.
    pub fn from_returns(returns: &[f64], rows: usize, combos: usize, blocks: usize) -> Result<Self, StatsError> {
        check_blocks(blocks)?;
        if combos == 0 || returns.len() != rows * combos {
            return Err(bad("returns", format!("{} values are not {rows} bars × {combos} columns", returns.len())));
        }
        if let Some(i) = returns.iter().position(|r| !r.is_finite()) {
            return Err(bad(
                "returns",
                format!("bar {}, column {}: {} is not a finite return", i / combos, i % combos, returns[i]),
            ));
        }
        let bars = rows / blocks;
        let first = rows % blocks;
        let mut values = vec![0.0; combos * 2 * blocks];
        for k in 0..blocks {
            for t in first + k * bars..first + (k + 1) * bars {
                for (c, &r) in returns[t * combos..(t + 1) * combos].iter().enumerate() {
                    let at = c * 2 * blocks + 2 * k;
                    values[at] += r;
                    values[at + 1] += r * r;
                }
            }
        }
        Self::new(blocks, bars, values)
    }

    /// S, the number of blocks.
    pub fn blocks(&self) -> usize {
        self.blocks
    }

    /// Bars per block.
    pub fn bars(&self) -> usize {
        self.bars
    }

    pub fn combos(&self) -> usize {
        self.values.len() / (2 * self.blocks)
    }

    /// Combo `i`'s blocks: (Σr, Σr²) per block.
    pub fn combo(&self, i: usize) -> &[f64] {
        &self.values[i * 2 * self.blocks..(i + 1) * 2 * self.blocks]
    }

    /// Combo `i`'s Σr and Σr² over the blocks set in `mask`: the blocks' sums added in block
    /// order within each group of eight consecutive blocks (from 0), then the groups' sums
    /// in group order. This order is CSCV's definition of a set's sums: its bits are the
    /// answer's.
    #[inline]
    pub(crate) fn set_sums(&self, i: usize, mask: u64) -> (f64, f64) {
        let blocks = self.combo(i);
        let mut total = (0.0, 0.0);
        for (g, group) in blocks.chunks(2 * 8).enumerate() {
            let mut sums = (0.0, 0.0);
            for (k, b) in group.chunks_exact(2).enumerate() {
                // Without a branch: a block left out adds ±0, which changes no running sum
                // (one that starts at +0 is never −0) and so no bit.
                let take = ((mask >> (8 * g + k)) & 1) as f64;
                sums.0 += b[0] * take;
                sums.1 += b[1] * take;
            }
            total = if g == 0 { sums } else { (total.0 + sums.0, total.1 + sums.1) };
        }
        total
    }

    /// Every combo's blocks, combo-major.
    pub fn values(&self) -> &[f64] {
        &self.values
    }
}
