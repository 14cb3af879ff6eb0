//! CSCV's splits: each is a set of S/2 of the S blocks, the in-sample half (the rest is
//! out of sample), held as a bit mask. Every one of the C(S, S/2) splits when that is
//! affordable, else a seeded random draw of them.

use crate::error::{StatsError, bad};

/// The most blocks (a split is a u64 mask).
pub const MAX_BLOCKS: usize = 64;

/// Every split is used while combos × C(S, S/2) stays at or below this (and the splits
/// themselves number at most [`MAX_EXHAUSTIVE_SPLITS`]); past it, a random draw of splits.
pub const EXHAUSTIVE_LIMIT: u128 = 200_000_000;

/// The most splits enumerated (C(24, 12) = 2,704,156 is the last S within it).
pub const MAX_EXHAUSTIVE_SPLITS: u128 = 4_000_000;

/// C(n, k), exactly (saturating at u128::MAX).
pub fn binomial(n: u64, k: u64) -> u128 {
    let k = k.min(n - k.min(n));
    (0..k).fold(1u128, |acc, i| acc.saturating_mul(u128::from(n - i)) / u128::from(i + 1))
}

/// The in-sample halves of a CSCV run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitSet {
    blocks: usize,
    masks: Vec<u64>,
    exhaustive: bool,
}

impl SplitSet {
    /// Every S/2-subset of `blocks` blocks, in lexicographic order of their block lists
    /// (the order of Python's `itertools.combinations`, as pypbo draws them).
    pub fn all(blocks: usize) -> Result<Self, StatsError> {
        check_blocks(blocks)?;
        let half = blocks / 2;
        if binomial(blocks as u64, half as u64) > MAX_EXHAUSTIVE_SPLITS {
            return Err(bad("blocks", format!("{blocks} blocks have too many splits to enumerate; draw them")));
        }
        let mut masks = Vec::with_capacity(binomial(blocks as u64, half as u64) as usize);
        let mut pick: Vec<usize> = (0..half).collect();
        loop {
            masks.push(pick.iter().fold(0u64, |m, &b| m | 1 << b));
            // The next combination: the rightmost index that can move, then its followers.
            let Some(i) = (0..half).rev().find(|&i| pick[i] < blocks - half + i) else { break };
            pick[i] += 1;
            for j in i + 1..half {
                pick[j] = pick[j - 1] + 1;
            }
        }
        Ok(Self { blocks, masks, exhaustive: true })
    }

    /// `count` random S/2-subsets (independent draws: a split may repeat), each a partial
    /// Fisher–Yates shuffle of the blocks driven by `next_u64`.
    pub fn random(blocks: usize, count: usize, next_u64: &mut dyn FnMut() -> u64) -> Result<Self, StatsError> {
        check_blocks(blocks)?;
        if count == 0 {
            return Err(bad("pbo_splits", "must be at least 1"));
        }
        let half = blocks / 2;
        let masks = (0..count)
            .map(|_| {
                let mut order: Vec<usize> = (0..blocks).collect();
                for i in 0..half {
                    // Lemire's multiply-shift: uniform enough for ≤ 64 choices.
                    let j = i + ((u128::from(next_u64()) * (blocks - i) as u128) >> 64) as usize;
                    order.swap(i, j);
                }
                order[..half].iter().fold(0u64, |m, &b| m | 1 << b)
            })
            .collect();
        Ok(Self { blocks, masks, exhaustive: false })
    }

    /// The rule of the CLI and Python: every split when `combos` × C(S, S/2) ≤
    /// [`EXHAUSTIVE_LIMIT`], else `random` seeded splits.
    pub fn for_sweep(
        combos: usize,
        blocks: usize,
        random: usize,
        next_u64: &mut dyn FnMut() -> u64,
    ) -> Result<Self, StatsError> {
        check_blocks(blocks)?;
        if Self::exhaustive_for(combos, blocks) { Self::all(blocks) } else { Self::random(blocks, random, next_u64) }
    }

    /// How many splits [`SplitSet::for_sweep`] makes, without making them (a valid `blocks`).
    pub fn count_for_sweep(combos: usize, blocks: usize, random: usize) -> usize {
        if Self::exhaustive_for(combos, blocks) { binomial(blocks as u64, blocks as u64 / 2) as usize } else { random }
    }

    /// Whether [`SplitSet::for_sweep`] takes every split.
    fn exhaustive_for(combos: usize, blocks: usize) -> bool {
        let all = binomial(blocks as u64, blocks as u64 / 2);
        (combos as u128).saturating_mul(all) <= EXHAUSTIVE_LIMIT && all <= MAX_EXHAUSTIVE_SPLITS
    }

    pub fn blocks(&self) -> usize {
        self.blocks
    }

    /// The in-sample blocks of each split, one bit per block.
    pub fn masks(&self) -> &[u64] {
        &self.masks
    }

    pub fn len(&self) -> usize {
        self.masks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.masks.is_empty()
    }

    /// Whether these are all C(S, S/2) splits (else a random draw).
    pub fn exhaustive(&self) -> bool {
        self.exhaustive
    }
}

pub(crate) fn check_blocks(blocks: usize) -> Result<(), StatsError> {
    if blocks < 2 || !blocks.is_multiple_of(2) || blocks > MAX_BLOCKS {
        return Err(bad(
            "blocks",
            format!("{blocks}: must be an even number from 2 to {MAX_BLOCKS} (the paper suggests 16)"),
        ));
    }
    Ok(())
}
