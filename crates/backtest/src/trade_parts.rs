//! What every simulator shares (`simulate.rs`'s plain and f64 loops, `market.rs` and
//! `market_close.rs`): the [`Observer`] that records a run and the [`Leg`] it is told of,
//! reading rows of bits, the max-bars limit, which exits fill at a level, a trail's level
//! and ln in the tables' units. It sits below them all, so none imports another for these.

use crate::fixed::{LOG_SCALE, log_units};
use crate::metrics::{ExitReason, Side};

/// Receives what a simulation does, bar by bar; every method defaults to nothing.
pub(crate) trait Observer {
    /// Bars `from..to` are flat, with equity `cash`.
    fn flat(&mut self, _from: usize, _to: usize, _cash: f64) {}
    /// Bar `t` ends in a position worth `value`.
    fn held(&mut self, _t: usize, _value: f64) {}
    /// A trade ended (open at the end: at the last bar).
    fn trade(&mut self, _leg: Leg) {}
}

/// A trade as a simulation sees it: bars, side, fill prices, why it ended, and equity
/// after it over equity before it, minus 1.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Leg {
    pub entry: usize,
    pub exit: usize,
    pub side: Side,
    pub entry_price: f64,
    pub exit_price: f64,
    pub reason: ExitReason,
    pub gain: f64,
}

/// A run's drawdown as its equities go by: the running peak, the lowest equity since it,
/// and the lowest ratio of a trough to its peak before it (divided only when a new peak
/// starts: the same bits as min over t of E[t]/peak, division by one positive peak
/// being monotonic). The market simulation and its fast twin keep it alike.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Drawdown {
    pub(crate) peak: f64,
    pub(crate) trough: f64,
    pub(crate) worst: f64,
}

impl Drawdown {
    /// From an equity of 1.
    pub(crate) const START: Self = Self { peak: 1.0, trough: 1.0, worst: 1.0 };

    /// A marked equity `e`: a new peak behind a branch (rare where it matters, on a
    /// short's bars), the trough a select.
    #[inline(always)]
    pub(crate) fn step(&mut self, e: f64) {
        if e > self.peak {
            self.worst = self.worst.min(self.trough / self.peak);
            self.peak = e;
            self.trough = e;
        }
        self.trough = if e < self.trough { e } else { self.trough };
    }

    /// The lowest ratio so far, the trough since the last peak included; a run that keeps
    /// it in registers as that ratio folds it back with [`Self::folded`].
    #[inline(always)]
    pub(crate) fn worst(&self) -> f64 {
        self.worst.min(self.trough / self.peak)
    }

    /// The state after a stretch whose peak and lowest ratio were kept in registers: its
    /// trough is the peak (every ratio is already in `worst`).
    #[inline(always)]
    pub(crate) fn folded(peak: f64, worst: f64) -> Self {
        Self { peak, trough: peak, worst }
    }
}

/// An observer that records nothing (sweeps).
pub(crate) struct Nothing;

impl Observer for Nothing {}

/// The first set bit at or after `from` in a row of bits, if any.
#[inline(always)]
pub(crate) fn next_bit(row: &[u64], from: usize) -> Option<usize> {
    next_bit_where(row.len(), from, |w| row[w])
}

/// The first set bit at or after `from` in a row of `words` words, word `w` being
/// `word(w)` (a row formed from others as it is read), if any.
#[inline(always)]
pub(crate) fn next_bit_where(words: usize, from: usize, word: impl Fn(usize) -> u64) -> Option<usize> {
    let mut w = from / 64;
    if w >= words {
        return None;
    }
    let mut bits = word(w) & (u64::MAX << (from % 64));
    loop {
        if bits != 0 {
            return Some(w * 64 + bits.trailing_zeros() as usize);
        }
        w += 1;
        if w >= words {
            return None;
        }
        bits = word(w);
    }
}

#[inline(always)]
pub(crate) fn bit(row: &[u64], t: usize) -> bool {
    (row[t / 64] >> (t % 64)) & 1 == 1
}

/// The bar at which a trade entered at `e` has lasted `max_bars` bars (never for 0).
#[inline(always)]
pub(crate) fn last_bar(e: usize, max_bars: u32) -> usize {
    if max_bars == 0 { usize::MAX } else { e + max_bars as usize }
}

/// Whether an exit for `reason` fills at a level (a stop, take-profit or trail), with no
/// slippage.
#[inline(always)]
pub(crate) fn at_level(reason: ExitReason) -> bool {
    matches!(reason, ExitReason::Stop | ExitReason::TakeProfit | ExitReason::Trail)
}

/// A trail's level with the best price `best` since the entry: `fraction` of it and then
/// `distance` below a long's best, above a short's. Only ever tightens as `best` moves.
#[inline(always)]
pub(crate) fn trail_level(short: bool, best: f64, fraction: f64, distance: f64) -> f64 {
    if short { best * (1.0 + fraction) + distance } else { best * (1.0 - fraction) - distance }
}

/// ln(x) in the tables' 2^-52 units; an equity of 0 (or less) as the lowest there is.
pub(crate) fn log_of(x: f64) -> i64 {
    if x > 0.0 { log_units(libm::log(x)) } else { (-2048.0 * LOG_SCALE) as i64 }
}

/// Asks the CPU to bring `values[i]` into its caches without waiting for it (a hint: no
/// effect on any result, nothing where the target has no such instruction).
#[inline(always)]
pub(crate) fn prefetch(values: &[f64], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(value) = values.get(i) {
        // SAFETY: `sse` is in every x86-64 target's baseline, and a prefetch reads nothing a
        // program sees and never faults (here its address is a live element besides).
        #[allow(unsafe_code)]
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(std::ptr::from_ref(value).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (values, i);
}
