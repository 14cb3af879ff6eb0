//! A position's exit at its levels, as the market rules decide it (`market.rs`): the
//! binding stop, the tighter of the stop and the trail (the trail following the best
//! close, or the best high inside the bar (a short's low), after each bar's checks), then
//! the take-profit, checked at each close or inside each bar (filled at the level, or at
//! the open when the bar opens beyond it: `market_position::fill_inside`).
//! What a rule file's book and a user's `sl_stop`/`tp_stop`/`sl_trail` both ask.

use crate::book::StopRule;
use crate::market_position::fill_inside;
use crate::metrics::ExitReason;
use crate::portfolio::schedule::Exit;
use crate::trade_parts::trail_level;

/// A position's levels, frozen at its entry: the stop and take-profit (NaN: none) and the
/// trail's (fraction of the best price, distance) (NaN: none).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Levels {
    pub(crate) stop: f64,
    pub(crate) take_profit: f64,
    pub(crate) trail: (f64, f64),
}

impl Levels {
    /// The levels of a position decided at bar `e` with close `close` (its side's rules):
    /// `stop`'s and `take_profit`'s frozen there, `trail`'s distance (none: NaN).
    pub(crate) fn frozen([stop, take_profit, trail]: [Option<StopRule<'_>>; 3], e: usize, close: f64) -> Self {
        let level = |rule: Option<StopRule<'_>>| rule.and_then(|r| r.frozen_level(e, close)).unwrap_or(f64::NAN);
        Self {
            stop: level(stop),
            take_profit: level(take_profit),
            trail: trail.and_then(|r| r.trail(e)).unwrap_or((f64::NAN, f64::NAN)),
        }
    }
}

/// A symbol's prices, bar by bar: its closes, and its opens, highs and lows where stops are
/// checked inside the bar (empty: against closes). NaN at a bar: no bar there, where no
/// level is reached and the best price stays.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BarPrices<'a> {
    pub(crate) close: &'a [f64],
    pub(crate) range: [&'a [f64]; 3],
}

impl BarPrices<'_> {
    /// The first bar of `bars` (after the entry, its best price so far `entry`) at which
    /// `levels` close the position (a `short` one: its stop above, its take-profit below),
    /// and how.
    pub(crate) fn exit_at_level(
        &self,
        levels: Levels,
        entry: f64,
        bars: std::ops::Range<usize>,
        short: bool,
    ) -> Option<(usize, Exit)> {
        let Levels { stop: fixed, take_profit, trail: (fraction, distance) } = levels;
        let [open, high, low] = self.range;
        let intrabar = !open.is_empty();
        // `a` beyond `b` the way the price goes against the position (a long's down).
        let against = |a: f64, b: f64| if short { a > b } else { a < b };
        let mut best = entry;
        for t in bars {
            let trail = trail_level(short, best, fraction, distance);
            // NaN: no level; the stop on a tie.
            let (stop, why) = if against(fixed, trail) || fixed.is_nan() && !trail.is_nan() {
                (trail, ExitReason::Trail)
            } else {
                (fixed, ExitReason::Stop)
            };
            let c = self.close[t];
            if intrabar {
                if let Some((price, stopped)) = fill_inside(short, open[t], high[t], low[t], stop, take_profit) {
                    let reason = if stopped { why } else { ExitReason::TakeProfit };
                    return Some((t, Exit { reason, inside: Some(price) }));
                }
            } else if c == stop || against(c, stop) {
                return Some((t, Exit::at_close(why)));
            } else if c == take_profit || against(take_profit, c) {
                return Some((t, Exit::at_close(ExitReason::TakeProfit)));
            }
            let reached = match (intrabar, short) {
                (true, false) => high[t],
                (true, true) => low[t],
                (false, _) => c,
            };
            best = if against(best, reached) { reached } else { best };
        }
        None
    }
}
