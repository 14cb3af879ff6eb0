//! [`ComboSet`]: the combos a sweep runs, in combo order, and their fixed logical chunks.

use crate::error::SweepError;
use crate::spec::Sample;
use std::collections::HashSet;
use std::ops::Range;
use threadx_backtest::Grid;
use threadx_indicators::SeededRng;

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
    /// The whole `grid`, or `sample.n` distinct combos of it that the strategy's rules
    /// allow, drawn with `sample.seed` (the same on every machine), in chunks of `chunk`
    /// combos (default: [`chunk_size`] of the data length, `bars`).
    pub fn new(grid: &Grid, sample: Option<Sample>, chunk: Option<u64>, bars: usize) -> Result<Self, SweepError> {
        let grid_len = grid.len();
        let chunk_size = chunk.unwrap_or_else(|| chunk_size(bars));
        let Some(sample) = sample else {
            return Ok(Self { grid_len, sample: None, chunk_size });
        };
        let strategy = grid.strategy();
        let allowed = |combo: u64| strategy.allows(&grid.values(combo));
        let mut rng = SeededRng::new(sample.seed);
        let mut picked = if sample.n.saturating_mul(2) > grid_len {
            // Dense: shuffle the allowed combos and keep the first n.
            let mut all: Vec<u64> = (0..grid_len).filter(|&c| allowed(c)).collect();
            if (all.len() as u64) < sample.n {
                return Err(too_few(sample.n, all.len() as u64));
            }
            for i in 0..sample.n as usize {
                let j = i + below(&mut rng, (all.len() - i) as u64) as usize;
                all.swap(i, j);
            }
            all.truncate(sample.n as usize);
            all
        } else {
            // Sparse: draw until n distinct allowed combos are found.
            let mut seen = HashSet::with_capacity(sample.n as usize);
            let mut picked = Vec::with_capacity(sample.n as usize);
            let mut tries = 0u64;
            while (picked.len() as u64) < sample.n {
                tries += 1;
                if tries > 100 * sample.n + 10_000 {
                    return Err(too_few(sample.n, picked.len() as u64));
                }
                let c = below(&mut rng, grid_len);
                if allowed(c) && seen.insert(c) {
                    picked.push(c);
                }
            }
            picked
        };
        picked.sort_unstable();
        Ok(Self { grid_len, sample: Some(picked), chunk_size })
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

fn too_few(wanted: u64, found: u64) -> SweepError {
    SweepError::Spec(format!(
        "--random {wanted}: only {found} distinct combos of the grid pass the strategy's rules; ask for fewer or widen the grid"
    ))
}

/// One of `count` parts of a sweep (`--shard I/N`, `index` from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
