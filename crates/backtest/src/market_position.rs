//! An open position of the market simulation ([`crate::market`]) and the rules of one bar
//! for it: its frozen levels and trail, what stops it inside the bar, the fills of an entry
//! and an exit, and a bar's decision ([`decide`]: leave, then maybe enter).

use crate::bar_tables::BarTables;
use crate::book::ComboPlan;
use crate::metrics::{ExitReason, Side};
use crate::trade_parts::{at_level, bit, trail_level};

/// The frozen parts of an open position.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Position {
    pub(crate) side: Side,
    /// The fill bar and the bar its entry was decided on (the same unless next-open).
    pub(crate) entry: usize,
    pub(crate) decided: usize,
    pub(crate) entry_price: f64,
    pub(crate) shares: f64,
    /// Cash beside the position (a short's includes the sale's proceeds).
    pub(crate) cash: f64,
    /// Equity just before the entry: what the trade's return and win are measured from.
    pub(crate) before: f64,
    /// Stop and take-profit levels (`None`: none).
    pub(crate) stop: Option<f64>,
    pub(crate) take_profit: Option<f64>,
    /// A trail's (fraction, distance) and the best price since the entry.
    pub(crate) trail: Option<(f64, f64)>,
    pub(crate) best: f64,
}

impl Position {
    /// The position's value at price `p`.
    #[inline(always)]
    pub(crate) fn value(&self, p: f64) -> f64 {
        match self.side {
            Side::Long => self.shares * p,
            Side::Short => self.cash - self.shares * p,
        }
    }

    /// The trailing stop's level now.
    #[inline(always)]
    pub(crate) fn trail_level(&self) -> Option<f64> {
        self.trail.map(|(fraction, distance)| trail_level(self.side == Side::Short, self.best, fraction, distance))
    }

    /// The binding stop (the tighter of the stop and the trail) and which it is: a long's
    /// higher, a short's lower; the stop on a tie.
    #[inline(always)]
    pub(crate) fn binding_stop(&self) -> Option<(f64, ExitReason)> {
        let stop = self.stop.map(|l| (l, ExitReason::Stop));
        let trail = self.trail_level().map(|l| (l, ExitReason::Trail));
        match (stop, trail) {
            (Some(s), Some(t)) => Some(match self.side {
                Side::Long if t.0 > s.0 => t,
                Side::Short if t.0 < s.0 => t,
                _ => s,
            }),
            (s, t) => s.or(t),
        }
    }

    /// Whether price `p` is at or beyond a stop level `l` (below a long's, above a short's).
    #[inline(always)]
    pub(crate) fn stopped(&self, p: f64, l: f64) -> bool {
        match self.side {
            Side::Long => p <= l,
            Side::Short => p >= l,
        }
    }

    /// Whether price `p` is at or beyond a take-profit level `l`.
    #[inline(always)]
    pub(crate) fn reached(&self, p: f64, l: f64) -> bool {
        match self.side {
            Side::Long => p >= l,
            Side::Short => p <= l,
        }
    }

    /// Moves the best price to bar price `p` if it is better.
    #[inline(always)]
    pub(crate) fn follow(&mut self, p: f64) {
        match self.side {
            Side::Long if p > self.best => self.best = p,
            Side::Short if p < self.best => self.best = p,
            _ => {}
        }
    }
}

/// What a bar's decision asks for: leave the position (why), then maybe enter a side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Order {
    pub(crate) exit: Option<ExitReason>,
    pub(crate) enter: Option<Side>,
}

/// Buys `cash` worth at price `p` (all in, costs paid): (shares, cash beside them).
#[inline(always)]
pub(crate) fn open(side: Side, cash: f64, p: f64, tables: &BarTables) -> (f64, f64) {
    match side {
        Side::Long => (cash / (p * (1.0 + tables.buy)), 0.0),
        // vectorbt's all-in short: the size the cash covers at the slipped price plus fee;
        // the sale's proceeds, less slippage and fee, join the cash.
        Side::Short => {
            let shares = cash / (p * (1.0 - tables.slippage) * (1.0 + tables.fee));
            (shares, cash + shares * p * (1.0 - tables.sell))
        }
    }
}

/// The cash a position leaves when closed at price `p` for `reason` (never below 0: a
/// short that lost more than the equity leaves none).
#[inline(always)]
pub(crate) fn close_out(pos: &Position, p: f64, tables: &BarTables, reason: ExitReason) -> f64 {
    exit_cash(pos.side, pos.shares, pos.cash, p, tables, at_level(reason))
}

/// The cash `shares` of `side` with `cash` beside them leave when sold (a short's: bought
/// back) at price `p`, `at_level` or not. A stop, take-profit or trail fills at its level
/// with the fee alone, no slippage (vectorbt's `stoplimit`); other exits pay both. Without
/// slippage the two are the same bits. Never below 0.
#[inline(always)]
pub(crate) fn exit_cash(side: Side, shares: f64, cash: f64, p: f64, tables: &BarTables, at_level: bool) -> f64 {
    match side {
        Side::Long => shares * p * (1.0 - if at_level { tables.fee } else { tables.sell }),
        Side::Short => (cash - shares * p * (1.0 + if at_level { tables.fee } else { tables.buy })).max(0.0),
    }
}

/// A long's high or a short's low: the best price a bar reached.
#[inline(always)]
pub(crate) fn extreme(side: Side, high: f64, low: f64) -> f64 {
    match side {
        Side::Long => high,
        Side::Short => low,
    }
}

/// A stop or take-profit reached inside a bar with this open, high and low: the fill price
/// (the level, or the open when the bar opens beyond it) and why. The stop comes first.
#[inline(always)]
pub(crate) fn intrabar_exit(p: &Position, open: f64, high: f64, low: f64) -> Option<(f64, ExitReason)> {
    let (stop, reason) = p.binding_stop().unwrap_or((f64::NAN, ExitReason::Stop));
    let take_profit = p.take_profit.unwrap_or(f64::NAN);
    fill_inside(p.side == Side::Short, open, high, low, stop, take_profit)
        .map(|(price, stopped)| (price, if stopped { reason } else { ExitReason::TakeProfit }))
}

/// The one rule of a fill inside a bar, for a long or a `short`, with levels `stop` and
/// `take_profit` (NaN: none, as no comparison with NaN holds): the stop first, at the open
/// when the bar opens beyond it, else at its level if the bar's low (a short's high)
/// reaches it; then the take-profit the same way. The fill price, and whether the stop.
#[inline(always)]
pub(crate) fn fill_inside(
    short: bool,
    open: f64,
    high: f64,
    low: f64,
    stop: f64,
    take_profit: f64,
) -> Option<(f64, bool)> {
    let (against, toward) = if short { (high, low) } else { (low, high) };
    let stopped = |p: f64| if short { p >= stop } else { p <= stop };
    let reached = |p: f64| if short { p <= take_profit } else { p >= take_profit };
    if stopped(open) {
        Some((open, true))
    } else if stopped(against) {
        Some((stop, true))
    } else if reached(open) {
        Some((open, false))
    } else if reached(toward) {
        Some((take_profit, false))
    } else {
        None
    }
}

/// What the close of bar `t` decides for a position: stops against the close (unless
/// checked inside the bar), a reversal, the exit rule, max_bars; `None`: hold.
#[inline(always)]
pub(crate) fn decide(
    p: &Position,
    t: usize,
    plan: &ComboPlan,
    close: f64,
    intrabar: bool,
    rows: [&[u64]; 4],
) -> Option<Order> {
    let [long_entries, long_exits, short_entries, short_exits] = rows;
    let exit = |reason| Some(Order { exit: Some(reason), enter: None });
    if !intrabar {
        if let Some((_, reason)) = p.binding_stop().filter(|&(level, _)| p.stopped(close, level)) {
            return exit(reason);
        }
        if p.take_profit.is_some_and(|l| p.reached(close, l)) {
            return exit(ExitReason::TakeProfit);
        }
    }
    let (long_in, short_in) = (bit(long_entries, t), bit(short_entries, t));
    let (opposite, own_exit) = match p.side {
        Side::Long => (short_in && !long_in, bit(long_exits, t)),
        Side::Short => (long_in && !short_in, bit(short_exits, t)),
    };
    if opposite {
        return Some(Order { exit: Some(ExitReason::Reverse), enter: Some(p.side.opposite()) });
    }
    if own_exit {
        return exit(ExitReason::Signal);
    }
    if plan.max_bars != 0 && t >= p.entry + plan.max_bars as usize {
        return exit(ExitReason::MaxBars);
    }
    None
}
