//! When each symbol acts next: a [`Schedule`] of one pending event per symbol (an entry
//! it may make, long or short, or its position's exit), kept as a bit per symbol in each
//! bar's words, so that a bar's events come out in symbol order and a bar without any
//! costs two loads.

use crate::metrics::{ExitReason, Side};
use crate::portfolio::Mark;

/// Every symbol's next event. Its bits are cleared as the run takes them, so a run leaves
/// it empty for the next (a sweep's thread reuses one for all its combos).
#[derive(Debug)]
pub(crate) struct Schedule {
    /// Words of symbol bits per bar.
    words: usize,
    bits: Vec<u64>,
    /// Each symbol's event: its own bar, and what it does there.
    pending: Vec<(usize, Act)>,
}

/// What a symbol does at its event: enter a side, or exit its position.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Act {
    Enter(Side),
    Exit(Exit),
}

/// A held position's exit: why, and the price inside the bar it fills at (a stop or
/// take-profit checked against the bar's low and high); None: at the bar's close.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Exit {
    pub(crate) reason: ExitReason,
    pub(crate) inside: Option<f64>,
}

impl Exit {
    /// An exit at the bar's close.
    pub(crate) fn at_close(reason: ExitReason) -> Self {
        Self { reason, inside: None }
    }
}

impl Schedule {
    pub(crate) fn new(bars: usize, symbols: usize) -> Self {
        let words = symbols.div_ceil(64);
        Self { words, bits: vec![0; bars * words], pending: vec![(0, Act::Enter(Side::Long)); symbols] }
    }

    /// Whether it fits a run of `bars` bars × `symbols` symbols.
    pub(crate) fn fits(&self, bars: usize, symbols: usize) -> bool {
        self.pending.len() == symbols && self.bits.len() == bars * self.words
    }

    /// Symbol `s` does `act` at `at`.
    #[inline(always)]
    pub(crate) fn set(&mut self, s: usize, at: Mark, act: Act) {
        self.bits[at.bar * self.words + s / 64] |= 1 << (s % 64);
        self.pending[s] = (at.own, act);
    }

    /// Whether any symbol acts at bar `t`.
    #[inline(always)]
    pub(crate) fn any_at(&self, t: usize) -> bool {
        self.bits[t * self.words..(t + 1) * self.words].iter().any(|&w| w != 0)
    }

    /// Symbol `s`'s pending event: its own bar and what it does there (kept after
    /// [`Self::take_at`] takes its bit, until the symbol's next [`Self::set`]).
    #[inline(always)]
    pub(crate) fn pending(&self, s: usize) -> (usize, Act) {
        self.pending[s]
    }

    /// Takes bar `t`'s events in symbol order: `(symbol, own bar, act)` each.
    pub(crate) fn take_at(&mut self, t: usize, mut each: impl FnMut(usize, usize, Act)) {
        for w in 0..self.words {
            let mut word = std::mem::take(&mut self.bits[t * self.words + w]);
            while word != 0 {
                let s = w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                let (own, act) = self.pending[s];
                each(s, own, act);
            }
        }
    }
}
