//! Which side a symbol's entry signals open, and where they reverse a position: one
//! side's entry alone opens it (a long and a short entry on one bar are neither, as
//! vectorbt's `upon_dir_conflict="ignore"`), and, held, the other side's entry alone
//! reverses it. What a rule file's book and a user's signals both ask.

use crate::metrics::Side;
use crate::trade_parts::{bit, next_bit, next_bit_where};

/// A symbol's long and short entries as bit rows (the short row empty: long only).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sides<'a> {
    pub(crate) long: &'a [u64],
    pub(crate) short: &'a [u64],
}

impl Sides<'_> {
    /// The first bar from `from` on with one side's entry alone, and that side.
    #[inline(always)]
    pub(crate) fn next_entry(&self, from: usize) -> Option<(usize, Side)> {
        let (long, short) = (self.long, self.short);
        if short.is_empty() {
            return next_bit(long, from).map(|i| (i, Side::Long));
        }
        let i = next_bit_where(long.len(), from, |w| long[w] ^ short[w])?;
        Some((i, if bit(long, i) { Side::Long } else { Side::Short }))
    }

    /// The first bar after `e` at which the other side's entry alone reverses a `side`
    /// position, if any.
    #[inline(always)]
    pub(crate) fn reversal_after(&self, e: usize, side: Side) -> Option<usize> {
        let (long, short) = (self.long, self.short);
        match side {
            _ if short.is_empty() => None,
            Side::Long => next_bit_where(long.len(), e + 1, |w| short[w] & !long[w]),
            Side::Short => next_bit_where(long.len(), e + 1, |w| long[w] & !short[w]),
        }
    }
}
