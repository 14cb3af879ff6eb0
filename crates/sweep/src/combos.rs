//! [`ComboSet`]: the combos a sweep runs, in combo order, and their fixed logical chunks.

use crate::error::SweepError;
use std::ops::Range;
use threadx_stats::SeededRng;

/// Bar·combos per chunk the chunk size aims at: about 50 ms of one CPU core, a few
/// dispatches of a GPU, and fine enough steps for the progress bar and the checkpoint.
const CHUNK_WORK: u64 = 1 << 26;
const MIN_CHUNK: u64 = 64;
const MAX_CHUNK: u64 = 1 << 16;

/// Combos per chunk for data of `bars` bars. It depends on the data length only, never on
/// the devices or the thread count, so chunk `c` names the same combos on every machine:
/// checkpoints, shards and merges rest on that.
pub fn chunk_size(bars: usize) -> u64 {
    (CHUNK_WORK / bars.max(1) as u64).clamp(MIN_CHUNK, MAX_CHUNK)
}

/// The combos of a sweep: the whole grid, or a sorted sample of it, cut into chunks of
/// [`chunk_size`] positions. Combos the strategy's rules refuse (ma_cross fast ≥ slow,
/// rsi_reversion low ≥ high) keep their number but are skipped when a chunk runs.
#[derive(Debug, Clone)]
pub struct ComboSet {
    grid_len: u64,
    /// Sorted grid numbers of a Monte-Carlo sample; `None` for the whole grid.
    sample: Option<Vec<u64>>,
    chunk_size: u64,
}

impl ComboSet {
    /// The whole grid of `grid_len` combos, or the sorted `sample` of it, in chunks of
    /// `chunk` combos (default: [`chunk_size`] of the data length, `bars`).
    pub fn new(grid_len: u64, sample: Option<Vec<u64>>, chunk: Option<u64>, bars: usize) -> Self {
        Self { grid_len, sample, chunk_size: chunk.unwrap_or_else(|| chunk_size(bars)) }
    }

    /// The sampled combos' grid numbers, sorted; `None` for the whole grid.
    pub fn sample(&self) -> Option<&[u64]> {
        self.sample.as_deref()
    }

    /// Combos of the full grid.
    pub fn grid_len(&self) -> u64 {
        self.grid_len
    }

    /// Positions (combos before skipping).
    pub fn len(&self) -> u64 {
        self.sample.as_ref().map_or(self.grid_len, |s| s.len() as u64)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn chunk_size(&self) -> u64 {
        self.chunk_size
    }

    pub fn chunks(&self) -> u64 {
        self.len().div_ceil(self.chunk_size)
    }

    /// The positions of chunk `chunk`.
    pub fn chunk(&self, chunk: u64) -> Range<u64> {
        let start = chunk * self.chunk_size;
        start..(start + self.chunk_size).min(self.len())
    }

    /// Positions in chunk `chunk` (skipped combos included).
    pub fn chunk_len(&self, chunk: u64) -> u64 {
        let positions = self.chunk(chunk);
        positions.end - positions.start
    }

    /// The grid number of the combo at `position`.
    pub fn combo_at(&self, position: u64) -> u64 {
        self.sample.as_ref().map_or(position, |s| s[position as usize])
    }

    /// The chunks shard `index` of `count` runs: every `count`-th chunk from `index`, so
    /// each shard gets its share of cheap and costly regions of the grid.
    pub fn shard_chunks(&self, shard: Shard) -> Vec<u64> {
        (shard.index..self.chunks()).step_by(shard.count as usize).collect()
    }
}

/// Uniform in 0..n (multiply-shift, no modulo bias worth the name for n ≪ 2^64).
pub(crate) fn below(rng: &mut SeededRng, n: u64) -> u64 {
    ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as u64
}

/// One of `count` parts of a sweep (`--shard I/N`, `index` from 0); a summary's `shard`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Parses `I/N` with 0 ≤ I < N.
    pub fn parse(text: &str) -> Result<Self, SweepError> {
        let bad = || SweepError::Spec(format!("--shard {text}: expected I/N with 0 ≤ I < N, e.g. 0/4"));
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count): (u64, u64) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Self { index, count })
    }

    pub fn is_whole(&self) -> bool {
        self.count == 1
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}
