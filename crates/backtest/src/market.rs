//! The simulation of books the whole-backtest kernel does not trade ([`SignalBook::is_plain`]
//! false): short positions and reversals, trailing stops, fills at the next open, stops
//! and take-profits inside the bar. The rules are docs/strategies.md's "Trading like a
//! market"; they are vectorbt's `Portfolio.from_signals` at its defaults where it has them.
//!
//! It is the reference of the GPU's market kernel (market.wgsl, which follows this loop
//! bar for bar with the same f64 operations), bar by bar, equity in f64; its
//! results are [`Totals`] like the kernel's, so every metric, block statistic and file
//! downstream is made the one way. A held long bar's return is the close ratio of the
//! book's tables, as in the plain simulation; every other bar's is E[t]/E[t−1] − 1 in f64,
//! then fixed point. One pass gives the totals and, through an [`Observer`], the trades
//! and the equity curve, so the detailed report and the sweep's row cannot disagree.
//! Sweeps run combos filled at the close in its fast twin ([`crate::market_close`]),
//! whose totals are this simulation's bits.

use crate::bar_tables::BarTables;
use crate::blocks::Snapshots;
use crate::book::{ComboPlan, SignalBook, StopRule};
use crate::costs::Fill;
use crate::fixed::{Totals, minus, plus, return_units};
use crate::market_position::{Order, Position, close_out, decide, extreme, intrabar_exit, open};
use crate::metrics::{ExitReason, Side};
use crate::trade_parts::{Drawdown, Leg, Observer, at_level, bit, log_of, next_bit, next_bit_where, trail_level};

/// The running totals: equity in f64, drawdown, fixed-point return sums, counts.
struct Run<'a, O: Observer> {
    tables: &'a BarTables,
    totals: Totals,
    /// Equity at the last mark (E[t−1]) and the drawdown.
    equity: f64,
    drawdown: Drawdown,
    blocks: Option<Snapshots<'a>>,
    obs: &'a mut O,
}

impl<O: Observer> Run<'_, O> {
    /// Bar `t` ends with equity `e`; `r`: its return if not E[t]/E[t−1] − 1 (2^-64 units).
    #[inline(always)]
    fn mark(&mut self, t: usize, e: f64, r: Option<(u128, u128)>) {
        if let Some(blocks) = self.blocks.as_mut() {
            blocks.bar(t, (self.totals.sum, self.totals.sum_sq));
        }
        self.totals.add_bar(r.unwrap_or_else(|| return_units(e, self.equity)));
        self.step(e);
    }

    /// Equity `e` at a bar's close: peak, trough and drawdown.
    #[inline(always)]
    fn step(&mut self, e: f64) {
        self.drawdown.step(e);
        self.equity = e;
    }
}

/// One combo of a book that is not plain: its totals, its trades and equity through `obs`,
/// and its block snapshots when `snapshots` is given.
// The reference's one bar loop, its position and levels in locals that every rule reads:
// cut into functions, each would take the whole state. The rules of a fill and of the
// drawdown live once, in `market_position.rs` and `trade_parts.rs`, for it and its twin.
#[allow(clippy::too_many_lines)]
pub(crate) fn simulate_market<O: Observer>(
    book: &SignalBook,
    tables: &BarTables,
    plan: &ComboPlan,
    snapshots: Option<Snapshots<'_>>,
    obs: &mut O,
) -> Totals {
    let n = book.bars();
    let close = &book.close()[..n];
    let fills = book.fills();
    let next_open = fills.fill == Fill::NextOpen;
    let (open_p, high, low) = (book.open(), book.high(), book.low());
    let shorts = plan.short_entry != ComboPlan::NO_STOP;
    let rows = [
        book.entry_row(plan.entry),
        book.exit_row(plan.exit),
        if shorts { book.entry_row(plan.short_entry) } else { book.no_row() },
        if shorts { book.exit_row(plan.short_exit) } else { book.no_row() },
    ];
    // The plan's levels, resolved once.
    let [long_stop, long_target, short_stop, short_target, trail] =
        [plan.stop, plan.take_profit, plan.short_stop, plan.short_take_profit, plan.trail].map(|s| book.stop(s));
    let level = |rule: Option<StopRule<'_>>, d: usize| rule.and_then(|s| s.frozen_level(d, close[d]));
    // A decision at bar `d` to enter `side` with `cash`, filled at price `p` on bar `e`.
    let enter = |side: Side, cash: f64, d: usize, e: usize, p: f64| {
        let (shares, beside) = open(side, cash, p, tables);
        let (stop, take_profit) = match side {
            Side::Long => (level(long_stop, d), level(long_target, d)),
            Side::Short => (level(short_stop, d), level(short_target, d)),
        };
        let trail = trail.and_then(|s| s.trail(d));
        Position {
            side,
            entry: e,
            decided: d,
            entry_price: p,
            shares,
            cash: beside,
            before: cash,
            stop,
            take_profit,
            trail,
            best: p,
        }
    };
    let mut run =
        Run { tables, totals: Totals::default(), equity: 1.0, drawdown: Drawdown::START, blocks: snapshots, obs };
    let mut cash = 1.0;
    let mut pos: Option<Position> = None;
    let mut pending: Option<Order> = None;
    let mut flat_from = 0;
    let mut t = plan.warmup as usize;
    while t < n {
        if pos.is_none() && pending.is_none() {
            // Flat: skip to the next entry bit of either side.
            let next = if shorts { next_bit_of_either(rows[0], rows[2], t) } else { next_bit(rows[0], t) };
            match next.filter(|&e| e < n) {
                Some(e) => t = e,
                None => break,
            }
        }
        if let Some(p) = pos.as_mut().filter(|p| pending.is_none() && t > p.entry && t > p.decided) {
            t = hold(&mut run, p, t, n, plan.max_bars, fills.intrabar, (book, rows));
            if t >= n {
                break;
            }
        }
        // Whether the bar's price moves alone decide its return (a long held through it).
        let mut traded = false;
        let mut entered_at_close = false;
        // A position closed within this bar (at a stop inside it): with fills at the
        // close, no entry on it.
        let mut exited_in_bar = false;
        // 1. A decision of the bar before fills at this open.
        if let Some(order) = pending.take() {
            traded = true;
            if let Some(reason) = order.exit {
                let p = pos.take().expect("a pending exit has a position");
                cash = close_position(&mut run, &p, t, open_p[t], reason);
                flat_from = t;
            }
            if let Some(side) = order.enter {
                run.obs.flat(flat_from, t, cash);
                pos = Some(enter(side, cash, t - 1, t, open_p[t]));
                run.totals.trades += 1;
            }
        }
        // 2. Stops inside the bar, from the bar after the fill bar.
        let stopped_in_bar = pos
            .as_ref()
            .filter(|p| fills.intrabar && t > p.entry)
            .and_then(|p| intrabar_exit(p, open_p[t], high[t], low[t]).map(|hit| (p, hit)));
        if let Some((p, (price, reason))) = stopped_in_bar {
            traded = true;
            exited_in_bar = true;
            cash = close_position(&mut run, p, t, price, reason);
            flat_from = t;
            pos = None;
        }
        // 3. The close decides: a position's exits from the bar after its entry's
        // decision; a flat bar's entries, unless a position closed within it and fills
        // are at the close (a next-open decision comes after that exit).
        let order = match &pos {
            Some(p) if t > p.decided => decide(p, t, plan, close[t], fills.intrabar, rows),
            Some(_) => None,
            None if next_open || !exited_in_bar => {
                flat_entry(rows[0], rows[2], t).map(|side| Order { exit: None, enter: Some(side) })
            }
            None => None,
        };
        // The bar's return where the plain rule's tables hold it: a long entered at this
        // close from flat, or left at it after holding through the bar, or a flat bar.
        let mut table_return = None;
        if let Some(order) = order {
            if next_open {
                // Filled at the next open; a decision on the last bar never fills.
                pending = (t + 1 < n).then_some(order);
            } else {
                let alone = !traded;
                traded = true;
                if let Some(reason) = order.exit {
                    let p = pos.take().expect("an exit has a position");
                    cash = close_position(&mut run, &p, t, close[t], reason);
                    flat_from = t;
                    if alone && p.side == Side::Long && order.enter.is_none() {
                        let [r1, r2, _] = minus(tables.exit_sums(t, at_level(reason)), tables.held_sums(t - 1));
                        table_return = Some((r1, r2));
                    }
                }
                if let Some(side) = order.enter {
                    run.obs.flat(flat_from, t, cash);
                    pos = Some(enter(side, cash, t, t, close[t]));
                    run.totals.trades += 1;
                    entered_at_close = true;
                    if alone && side == Side::Long && order.exit.is_none() {
                        table_return = Some((tables.entry[0], tables.entry[1]));
                    }
                }
            }
        }
        // 4. The bar's close marks the equity; a trail follows the bar's best price
        // after the bar's checks (an entry at this close has seen none of the bar).
        match pos.as_mut() {
            Some(p) => {
                let e = p.value(close[t]);
                let r = table_return.or_else(|| {
                    (!traded && p.side == Side::Long).then(|| {
                        let [r1, r2, _] = minus(tables.held_sums(t), tables.held_sums(t - 1));
                        (r1, r2)
                    })
                });
                run.obs.held(t, e);
                run.mark(t, e, r);
                if !entered_at_close {
                    p.follow(if fills.intrabar { extreme(p.side, high[t], low[t]) } else { close[t] });
                }
            }
            None => run.mark(t, cash, table_return.or((!traded).then_some((0, 0)))),
        }
        t += 1;
    }
    match pos {
        Some(p) => {
            run.totals.held += (n - p.entry) as u32;
            let gain = run.equity / p.before - 1.0;
            run.obs.trade(Leg {
                entry: p.entry,
                exit: n - 1,
                side: p.side,
                entry_price: p.entry_price,
                exit_price: close[n - 1],
                reason: ExitReason::OpenAtEnd,
                gain,
            });
        }
        None => run.obs.flat(flat_from, n, cash),
    }
    let sums = (run.totals.sum, run.totals.sum_sq);
    if let Some(blocks) = run.blocks.as_mut() {
        blocks.finish(sums);
    }
    let mut totals = run.totals;
    totals.log_equity = log_of(run.equity);
    totals.drawdown = log_of(run.drawdown.worst());
    totals
}

/// Closes position `p` at bar `x` at price `price`: the trade counted and observed; the
/// cash it leaves.
fn close_position<O: Observer>(run: &mut Run<'_, O>, p: &Position, x: usize, price: f64, reason: ExitReason) -> f64 {
    let after = close_out(p, price, run.tables, reason);
    let gain = after / p.before - 1.0;
    run.totals.held += (x - p.entry) as u32;
    run.totals.close_trade(gain);
    run.totals.wins += u32::from(after > p.before);
    run.obs.trade(Leg {
        entry: p.entry,
        exit: x,
        side: p.side,
        entry_price: p.entry_price,
        exit_price: price,
        reason,
        gain,
    });
    after
}

/// Holds position `p` from bar `t` through every bar on which nothing can happen (no stop
/// or take-profit reached, no exit or opposite entry bit, within max_bars): each marked,
/// its best price followed. Returns the first bar where something may happen (or `n`),
/// for the bar-by-bar rules to decide; what it does to a bar is what they would do.
#[inline(always)]
fn hold<O: Observer>(
    run: &mut Run<'_, O>,
    p: &mut Position,
    t: usize,
    n: usize,
    max_bars: u32,
    intrabar: bool,
    (book, rows): (&SignalBook, [&[u64]; 4]),
) -> usize {
    match p.side {
        Side::Long => hold_side::<O, false>(run, p, t, n, max_bars, intrabar, (book, rows)),
        Side::Short => hold_side::<O, true>(run, p, t, n, max_bars, intrabar, (book, rows)),
    }
}

/// [`hold`] for one side (`SHORT`), its comparisons fixed at compile time.
#[inline(always)]
fn hold_side<O: Observer, const SHORT: bool>(
    run: &mut Run<'_, O>,
    p: &mut Position,
    mut t: usize,
    n: usize,
    max_bars: u32,
    intrabar: bool,
    (book, rows): (&SignalBook, [&[u64]; 4]),
) -> usize {
    let (close, high, low) = (book.close(), book.high(), book.low());
    let tables = run.tables;
    let last = if max_bars == 0 { n } else { n.min(p.entry + max_bars as usize) };
    // NaN: no level (no comparison with it holds; max and min take the other).
    let fixed = p.stop.unwrap_or(f64::NAN);
    let (fraction, distance) = p.trail.unwrap_or((f64::NAN, f64::NAN));
    // The binding level: the tighter of the stop and the trail (NaN: none).
    let level = |best: f64| {
        let trail = trail_level(SHORT, best, fraction, distance);
        if SHORT { fixed.min(trail) } else { fixed.max(trail) }
    };
    let mut stop = level(p.best);
    let take_profit = p.take_profit.unwrap_or(f64::NAN);
    let (opposite, own_exit) = if SHORT { (rows[0], rows[3]) } else { (rows[2], rows[1]) };
    // A long-only plan's opposite row is the empty one: not read.
    let reverses = !std::ptr::eq(opposite, book.no_row());
    let trails = p.trail.is_some();
    let (shares, cash) = (p.shares, p.cash);
    let mut best = p.best;
    // A long's held bars add the tables' returns: summed once per stretch (and at each
    // block start inside it), not bar by bar.
    let from = t;
    let mut block = run.blocks.as_ref().and_then(Snapshots::pending).unwrap_or(usize::MAX);
    let sums_before = |run: &Run<'_, O>, t: usize| {
        plus(run.totals.terms(), minus(tables.held_sums(t - 1), tables.held_sums(from - 1)))
    };
    // A long's drawdown in registers, without branches: the running peak and the lowest
    // equity-to-peak ratio (the same bits as the trough's ratio: division by one positive
    // peak is monotonic); folded back after the stretch.
    let (mut peak, mut worst) = (run.drawdown.peak, run.drawdown.worst());
    let mut e = run.equity;
    while t < last {
        let c = close[t];
        let (against, toward) = match (intrabar, SHORT) {
            (true, false) => (low[t], high[t]),
            (true, true) => (high[t], low[t]),
            (false, _) => (c, c),
        };
        let stopped = if SHORT { against >= stop } else { against <= stop };
        let reached = if SHORT { toward <= take_profit } else { toward >= take_profit };
        if stopped || reached || bit(own_exit, t) || (reverses && bit(opposite, t)) {
            break;
        }
        e = if SHORT { cash - shares * c } else { shares * c };
        run.obs.held(t, e);
        if SHORT {
            run.mark(t, e, None);
        } else {
            if t >= block {
                let [s1, s2, _] = sums_before(run, t);
                if let Some(blocks) = run.blocks.as_mut() {
                    blocks.bar(t, (s1, s2));
                    block = blocks.pending().unwrap_or(usize::MAX);
                }
            }
            // Selects rather than f64::max/min: no NaN here, and these compile to one
            // instruction each (maxsd, minsd) instead of IEEE maxNum's five.
            peak = if e > peak { e } else { peak };
            let ratio = e / peak;
            worst = if ratio < worst { ratio } else { worst };
        }
        best = if SHORT {
            if toward < best { toward } else { best }
        } else if toward > best {
            toward
        } else {
            best
        };
        if trails {
            stop = level(best);
        }
        t += 1;
    }
    p.best = best;
    if !SHORT && t > from {
        [run.totals.sum, run.totals.sum_sq, run.totals.down_sq] = sums_before(run, t);
        run.drawdown = Drawdown::folded(peak, worst);
        run.equity = e;
    }
    t
}

/// The first bar at or after `from` with a bit set in either row (of one length).
#[inline(always)]
fn next_bit_of_either(a: &[u64], b: &[u64], from: usize) -> Option<usize> {
    next_bit_where(a.len(), from, |w| a[w] | b[w])
}

/// The side a flat bar's entries open: one side's entry alone (both at once: neither).
#[inline(always)]
fn flat_entry(long: &[u64], short: &[u64], t: usize) -> Option<Side> {
    let (l, s) = (bit(long, t), bit(short, t));
    match (l, s) {
        (true, false) => Some(Side::Long),
        (false, true) => Some(Side::Short),
        _ => None,
    }
}
