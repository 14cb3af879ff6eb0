//! Block statistics: a combo's per-bar returns cut into S equal blocks, each kept as its
//! number of bars, Σr and Σr² — the 3·S numbers from which the overfitting statistics
//! (CSCV's in- and out-of-sample Sharpe ratios) are made without the returns themselves.
//!
//! The rule is the one the public pypbo package applies: drop the first T mod S bars, then
//! S blocks of T div S bars. r[t] is the return the combo's Sharpe ratio uses (0 while
//! flat; the entry bar's, the held bars' and the exit bar's returns while in a trade).
//!
//! The simulation does not cut anything: it records the combo's running Σr and Σr² (the
//! integers of [`BarTables`](crate::BarTables), 2^-64 units mod 2^128) as it passes the
//! start of each block, the *snapshots*; a block's sums are the difference of two of them,
//! the last block's the totals minus the last snapshot. Integers all the way, so the
//! blocks are the same bits on every device; [`BlockCuts::stats`] converts them to f64 once.

use crate::BacktestError;
use crate::fixed::{RET_SCALE, Totals};

/// The default number of blocks (the paper's suggestion).
pub const DEFAULT_BLOCKS: u32 = 16;

/// The most blocks (a CSCV split is a 64-bit mask; the kernel records a block start in
/// at most one extra loop iteration each).
pub const MAX_BLOCKS: u32 = threadx_stats::MAX_BLOCKS as u32;

/// Where the blocks of a run of `bars` bars begin and how long they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCuts {
    count: u32,
    /// The first block's first bar: T mod S.
    first: usize,
    /// Bars per block: T div S.
    len: usize,
}

impl BlockCuts {
    /// `count` blocks over `bars` bars: `count` must be even and at least 2, and half of
    /// the blocks (a CSCV set) must hold at least two bars, for a Sharpe ratio.
    pub fn new(bars: usize, count: u32) -> Result<Self, BacktestError> {
        let bad =
            |problem: String| BacktestError::BadValue { param: "blocks".into(), value: count.to_string(), problem };
        if count < 2 || !count.is_multiple_of(2) || count > MAX_BLOCKS {
            return Err(bad(format!(
                "must be an even number of blocks from 2 to {MAX_BLOCKS} (the paper suggests 16)"
            )));
        }
        let len = bars / count as usize;
        // A CSCV set is count/2 blocks; its Sharpe ratio needs two bars.
        if len == 0 || len * (count as usize / 2) < 2 {
            return Err(bad(format!("{bars} bars are too few to cut into {count} blocks with two bars per half")));
        }
        Ok(Self { count, first: bars % count as usize, len })
    }

    /// The number of blocks, S.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Bars per block, T div S.
    pub fn bars(&self) -> usize {
        self.len
    }

    /// The bars dropped before the first block, T mod S.
    pub fn dropped(&self) -> usize {
        self.first
    }

    /// Block `k`'s first bar (k < S).
    #[inline(always)]
    pub(crate) fn start(&self, k: usize) -> usize {
        self.first + k * self.len
    }

    /// u128 snapshots per combo: Σr and Σr² at the start of each block.
    pub fn snapshot_len(&self) -> usize {
        2 * self.count as usize
    }

    /// f64 numbers per combo in [`Self::stats`]: Σr and Σr² of each block.
    pub fn stats_len(&self) -> usize {
        2 * self.count as usize
    }

    /// One combo's blocks from its snapshots and totals, written to `out`
    /// ([`Self::stats_len`] values) as (Σr, Σr²) per block in f64: the exact integer
    /// differences, each rounded once.
    pub fn stats(&self, snapshots: &[u128], totals: &Totals, out: &mut [f64]) {
        let value = |units: u128| units as i128 as f64 / RET_SCALE;
        let s = self.count as usize;
        for k in 0..s {
            let (end_sum, end_sq) =
                if k + 1 < s { (snapshots[2 * k + 2], snapshots[2 * k + 3]) } else { (totals.sum, totals.sum_sq) };
            out[2 * k] = value(end_sum.wrapping_sub(snapshots[2 * k]));
            out[2 * k + 1] = value(end_sq.wrapping_sub(snapshots[2 * k + 1]));
        }
    }
}

/// Records a simulation's snapshots (module docs): called once per trade, in order, and at
/// the end, it fills the snapshots of the block starts the run has passed.
pub(crate) struct Snapshots<'a> {
    cuts: &'a BlockCuts,
    out: &'a mut [u128],
    /// The next block start to record.
    next: usize,
    /// Its first bar (`usize::MAX` once every start is recorded): one comparison a trade.
    next_start: usize,
}

impl<'a> Snapshots<'a> {
    pub(crate) fn new(cuts: &'a BlockCuts, out: &'a mut [u128]) -> Self {
        Self { cuts, out, next: 0, next_start: cuts.start(0) }
    }

    #[inline(always)]
    fn record(&mut self, sums: (u128, u128)) {
        self.out[2 * self.next] = sums.0;
        self.out[2 * self.next + 1] = sums.1;
        self.next += 1;
        self.next_start = if self.next < self.cuts.count as usize { self.cuts.start(self.next) } else { usize::MAX };
    }

    /// The next block start to record, if any.
    pub(crate) fn pending(&self) -> Option<usize> {
        (self.next_start != usize::MAX).then_some(self.next_start)
    }

    /// A trade entered at `entry` and left at `exit` (`None`: open at the end), with the
    /// run's sums before it, `before`, and its running sums while held: `held(t)` is Σ
    /// over bars entry..=t of the trade's returns (t < exit).
    #[inline(always)]
    pub(crate) fn trade(
        &mut self,
        entry: usize,
        exit: Option<usize>,
        before: (u128, u128),
        held: impl Fn(usize) -> (u128, u128),
    ) {
        // Block starts at or before the entry bar: everything before them was flat since
        // the last trade.
        self.bar(entry, before);
        // Block starts inside the trade: bars entry..start−1 held.
        let last = exit.unwrap_or(usize::MAX - 1);
        while self.next_start <= last {
            let (a, b) = held(self.next_start - 1);
            self.record((before.0.wrapping_add(a), before.1.wrapping_add(b)));
        }
    }

    /// Bar `t` comes with the run's sums before it, `before`: every block start up to it
    /// is recorded with them (bars skipped since the last call added nothing).
    #[inline(always)]
    pub(crate) fn bar(&mut self, t: usize, before: (u128, u128)) {
        while self.next_start <= t {
            self.record(before);
        }
    }

    /// The end of the run with its final sums: every block start left was passed flat.
    pub(crate) fn finish(&mut self, sums: (u128, u128)) {
        while self.next_start != usize::MAX {
            self.record(sums);
        }
    }
}
