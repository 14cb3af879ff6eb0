//! The market simulation's fast twin for the combos most market sweeps run: those filled
//! at the close, long, short or both with reversals, with stops and take-profits against
//! closes or inside the bar, a trailing stop and max_bars. It is [`crate::market`]'s rules
//! with its f64 equity, laid out a trade at a time: the bars on which nothing can happen
//! are held in one tight loop per side (a long's returns summed from the book's tables once
//! per trade, a short's in f64 bar by bar as the reference has them), and each row of bits
//! (entries of one side alone, exits) is scanned once per run, its next bit looked up
//! again only once passed. Its [`Totals`] and block snapshots are the market simulation's
//! bits: its tests (`market_close/tests.rs`) hold it to them. A detailed report (trades,
//! equity) of such a combo still comes from the market simulation.

use crate::bar_tables::BarTables;
use crate::blocks::Snapshots;
use crate::book::{ComboPlan, SignalBook, StopRule};
use crate::costs::Fill;
use crate::fixed::{Terms, Totals, add_return, down_part, minus, plus, return_units};
use crate::market_position::{exit_cash, fill_inside, open};
use crate::metrics::Side;
use crate::trade_parts::{Drawdown, last_bar, log_of, next_bit_where, trail_level};

/// Whether [`simulate_at_close`] runs the combos of `book` (a book that is not plain):
/// those filled at the close.
#[inline(always)]
pub(crate) fn runs_at_close(book: &SignalBook) -> bool {
    book.fills().fill == Fill::Close
}

/// One combo filled at the close ([`runs_at_close`]): the totals of [`crate::market`]'s
/// simulation, and its block snapshots into `blocks`.
#[inline(always)]
pub(crate) fn simulate_at_close(
    book: &SignalBook,
    tables: &BarTables,
    plan: &ComboPlan,
    blocks: Option<&mut Snapshots<'_>>,
) -> Totals {
    // One copy of the run per kind of plan: a long-only one never reads the short rows,
    // and a fixed stop's level does not move as a trail's does.
    let twin = Twin::new(book, tables, plan);
    match (plan.short_entry != ComboPlan::NO_STOP, plan.trail != ComboPlan::NO_STOP) {
        (false, false) => twin.run::<false, false>(blocks),
        (false, true) => twin.run::<false, true>(blocks),
        (true, false) => twin.run::<true, false>(blocks),
        (true, true) => twin.run::<true, true>(blocks),
    }
}

/// The next bar at or after a point with a bit set in `a` and not in `b`, looked up again
/// only once the run has passed it (the run only moves forward).
struct NextBit<'a> {
    a: &'a [u64],
    b: &'a [u64],
    /// The answer to the last question (`usize::MAX`: none left).
    at: usize,
}

impl<'a> NextBit<'a> {
    fn new(a: &'a [u64], b: &'a [u64], from: usize) -> Self {
        let mut next = Self { a, b, at: 0 };
        next.at = next.look(from);
        next
    }

    /// The first such bar at or after `t` (no earlier than any `t` asked before).
    #[inline(always)]
    fn from(&mut self, t: usize) -> usize {
        if self.at < t {
            self.at = self.look(t);
        }
        self.at
    }

    /// The rows read from bar `t` on.
    #[inline(always)]
    fn look(&self, t: usize) -> usize {
        let (a, b) = (self.a, self.b);
        next_bit_where(a.len(), t, |w| a[w] & !b[w]).unwrap_or(usize::MAX)
    }
}

/// How a trade ended.
enum End {
    /// Open at the last bar.
    Open,
    /// Closed at bar `x`, flat after it (no entry on that bar).
    Flat(usize),
    /// Closed at the close of bar `x` by the other side's entry, which opens with this cash.
    Reverse(usize, f64),
}

/// The account between trades: the totals (with the return sums), equity at the last
/// marked close, and the drawdown as the reference keeps it.
struct Account<'s, 'c> {
    totals: Totals,
    equity: f64,
    drawdown: Drawdown,
    blocks: Option<&'s mut Snapshots<'c>>,
    /// The next block start to record (`usize::MAX`: none).
    block: usize,
}

impl Account<'_, '_> {
    /// Bar `t` ends with equity `e`, its return `r` (2^-64 units): the block starts up to
    /// it recorded with the sums before it.
    #[inline(always)]
    fn mark(&mut self, t: usize, e: f64, r: (u128, u128)) {
        if t >= self.block {
            self.record(t);
        }
        self.totals.add_bar(r);
        self.step(e);
    }

    /// Bar `t` ends with equity `e`, its return over the last marked equity in f64
    /// ([`add_return`]: the terms of `return_units`).
    #[inline(always)]
    fn mark_return(&mut self, t: usize, e: f64) {
        if t >= self.block {
            self.record(t);
        }
        [self.totals.sum, self.totals.sum_sq, self.totals.down_sq] = add_return(self.totals.terms(), e, self.equity);
        self.step(e);
    }

    /// A marked equity `e`: the peak, trough and drawdown.
    #[inline(always)]
    fn step(&mut self, e: f64) {
        self.drawdown.step(e);
        self.equity = e;
    }

    #[inline(never)]
    fn record(&mut self, t: usize) {
        if let Some(blocks) = self.blocks.as_deref_mut() {
            blocks.bar(t, (self.totals.sum, self.totals.sum_sq));
            self.block = blocks.pending().unwrap_or(usize::MAX);
        }
    }

    fn sums(&self) -> Terms {
        self.totals.terms()
    }

    /// The sums become `before` plus a trade's `part`.
    #[inline(always)]
    fn add(&mut self, before: Terms, part: Terms) {
        [self.totals.sum, self.totals.sum_sq, self.totals.down_sq] = plus(before, part);
    }

    /// A closed trade: entered with `cash`, left with `after`.
    #[inline(always)]
    fn close_trade(&mut self, cash: f64, after: f64) {
        self.totals.close_trade(after / cash - 1.0);
        self.totals.wins += u32::from(after > cash);
    }

    /// The run's totals, its sums and snapshots final.
    fn finish(self) -> Totals {
        if let Some(blocks) = self.blocks {
            blocks.finish((self.totals.sum, self.totals.sum_sq));
        }
        let mut totals = self.totals;
        totals.log_equity = log_of(self.equity);
        totals.drawdown = log_of(self.drawdown.worst());
        totals
    }
}

/// A stop rule's level frozen at entry bar `e` with close `close`; NaN: none.
#[inline(always)]
fn frozen_level(rule: Option<StopRule<'_>>, e: usize, close: f64) -> f64 {
    match rule {
        Some(rule) => rule.frozen_level(e, close).unwrap_or(f64::NAN),
        None => f64::NAN,
    }
}

/// One combo's book, tables and plan, resolved once.
struct Twin<'a> {
    n: usize,
    close: &'a [f64],
    /// Each bar's open, high and low; against closes, the close's own.
    open: &'a [f64],
    high: &'a [f64],
    low: &'a [f64],
    intrabar: bool,
    tables: &'a BarTables,
    plan: &'a ComboPlan,
    /// Each side's entries and exits.
    longs: &'a [u64],
    shorts: &'a [u64],
    long_exits: &'a [u64],
    short_exits: &'a [u64],
    no_row: &'a [u64],
    /// Each side's stop and take-profit, and the trail.
    long_levels: [Option<StopRule<'a>>; 2],
    short_levels: [Option<StopRule<'a>>; 2],
    trail: Option<StopRule<'a>>,
}

/// A trade's frozen levels (NaN: none) and its trail (fraction, distance).
#[derive(Clone, Copy)]
struct Levels {
    stop: f64,
    take_profit: f64,
    trail: (f64, f64),
}

impl<'a> Twin<'a> {
    fn new(book: &'a SignalBook, tables: &'a BarTables, plan: &'a ComboPlan) -> Self {
        let n = book.bars();
        let close = &book.close()[..n];
        let intrabar = book.fills().intrabar;
        let (open, high, low) =
            if intrabar { (&book.open()[..n], &book.high()[..n], &book.low()[..n]) } else { (close, close, close) };
        let shorts = plan.short_entry != ComboPlan::NO_STOP;
        let no_row = book.no_row();
        Self {
            n,
            close,
            open,
            high,
            low,
            intrabar,
            tables,
            plan,
            longs: book.entry_row(plan.entry),
            shorts: if shorts { book.entry_row(plan.short_entry) } else { no_row },
            long_exits: book.exit_row(plan.exit),
            short_exits: if shorts { book.exit_row(plan.short_exit) } else { no_row },
            no_row,
            long_levels: [plan.stop, plan.take_profit].map(|s| book.stop(s)),
            short_levels: [plan.short_stop, plan.short_take_profit].map(|s| book.stop(s)),
            trail: book.stop(plan.trail),
        }
    }

    /// The levels of a trade of `side` entered at bar `e`'s close, frozen there; no trail
    /// at this entry is one never reached.
    #[inline(always)]
    fn levels(&self, side: Side, e: usize) -> Levels {
        let [stop, take_profit] = match side {
            Side::Long => self.long_levels,
            Side::Short => self.short_levels,
        };
        Levels {
            stop: frozen_level(stop, e, self.close[e]),
            take_profit: frozen_level(take_profit, e, self.close[e]),
            trail: self.trail.and_then(|s| s.trail(e)).unwrap_or((0.0, f64::INFINITY)),
        }
    }

    /// The whole run: trades one after another, each entered from flat on a bar with one
    /// side's entry alone, or on the bar of a reversal.
    #[inline(always)]
    fn run<const SHORTS: bool, const TRAILS: bool>(&self, blocks: Option<&mut Snapshots<'_>>) -> Totals {
        let mut from = self.plan.warmup as usize;
        let mut long_entries = NextBit::new(self.longs, self.shorts, from);
        let mut short_entries = NextBit::new(self.shorts, self.longs, from);
        let mut long_exits = NextBit::new(self.long_exits, self.no_row, from);
        let mut short_exits = NextBit::new(self.short_exits, self.no_row, from);
        let block = blocks.as_ref().and_then(|b| b.pending()).unwrap_or(usize::MAX);
        let mut account = Account { totals: Totals::default(), equity: 1.0, drawdown: Drawdown::START, blocks, block };
        // A reversal's side, bar and cash: the next trade's entry.
        let mut reversal = None;
        loop {
            let (side, e, cash, reversed) = match reversal.take() {
                Some((side, x, cash)) => (side, x, cash, true),
                None => {
                    let long = long_entries.from(from);
                    let short = if SHORTS { short_entries.from(from) } else { usize::MAX };
                    let e = long.min(short);
                    if e >= self.n {
                        break;
                    }
                    (if long < short { Side::Long } else { Side::Short }, e, account.equity, false)
                }
            };
            account.totals.trades += 1;
            // The first bar the exit rule, a reversal or max_bars closes the trade at.
            let (own_exits, opposite) = match side {
                Side::Long => (&mut long_exits, &mut short_entries),
                Side::Short => (&mut short_exits, &mut long_entries),
            };
            let reverse_at = if SHORTS { opposite.from(e + 1) } else { usize::MAX };
            let due = last_bar(e, self.plan.max_bars).min(own_exits.from(e + 1)).min(reverse_at);
            let end = match side {
                Side::Long => self.long_trade::<TRAILS>(&mut account, (e, cash, reversed), due, reverse_at),
                Side::Short => self.short_trade::<TRAILS>(&mut account, (e, cash), due, reverse_at),
            };
            match end {
                End::Open => break,
                End::Flat(x) => from = x + 1,
                End::Reverse(x, cash) => reversal = Some((side.opposite(), x, cash)),
            }
        }
        account.finish()
    }

    /// A long entered at bar `e`'s close with `cash` (`reversed`: on a short's exit), held
    /// until `due` at the latest (its exit rule, a reversal at `reverse_at`, or max_bars).
    /// Its held bars' returns are the tables' close ratios, summed once.
    #[inline(always)]
    fn long_trade<const TRAILS: bool>(
        &self,
        account: &mut Account<'_, '_>,
        (e, cash, reversed): (usize, f64, bool),
        due: usize,
        reverse_at: usize,
    ) -> End {
        let (n, tables) = (self.n, self.tables);
        let (close, high, low) = (&self.close[..n], &self.high[..n], &self.low[..n]);
        let (shares, _) = open(Side::Long, cash, close[e], tables);
        // From flat, the entry bar's return is the tables' (the plain rule's); on a
        // reversal, the bar's return in f64.
        let entry = if reversed {
            let (r1, r2) = return_units(shares * close[e], account.equity);
            [r1, r2, down_part(r1, r2)]
        } else {
            tables.entry
        };
        let before = account.sums();
        account.mark(e, shares * close[e], (entry[0], entry[1]));
        let Levels { stop: fixed, take_profit, trail: (fraction, distance) } = self.levels(Side::Long, e);
        // The binding stop: the tighter of the stop and the trail (a NaN stop: the trail).
        let stop_at = |best: f64| {
            let trail = trail_level(false, best, fraction, distance);
            if !TRAILS || fixed > trail { fixed } else { trail }
        };
        let mut best = close[e];
        let mut stop = stop_at(best);
        // The first bar at which a level is reached, the trade is due, or the data ends.
        let end = due.min(n);
        let mut t = e + 1;
        // The drawdown in registers, without branches: the running peak and the lowest
        // ratio of an equity to it (the same bits as the trough's ratio: division by one
        // positive peak is monotonic), folded back after the stretch.
        let (mut equity, mut peak, mut worst) = (account.equity, account.drawdown.peak, account.drawdown.worst());
        while t < end && !(low[t] <= stop || high[t] >= take_profit) {
            equity = shares * close[t];
            // Selects, not f64::max/min: no NaN here, and one instruction each.
            peak = if equity > peak { equity } else { peak };
            let ratio = equity / peak;
            worst = if ratio < worst { ratio } else { worst };
            best = if high[t] > best { high[t] } else { best };
            if TRAILS {
                stop = stop_at(best);
            }
            t += 1;
        }
        (account.equity, account.drawdown) = (equity, Drawdown::folded(peak, worst));
        // A level reached comes before the exit rule, a reversal and max_bars.
        let exit = (t < n).then(|| (t, low[t] <= stop || high[t] >= take_profit));
        // Σ of the trade's returns over bars e..=t while held (t < its exit).
        let entry_sums = minus(entry, tables.held_sums(e));
        let held = |t: usize| plus(entry_sums, tables.held_sums(t));
        if let Some(blocks) = account.blocks.as_deref_mut() {
            let pair = |t: usize| {
                let [s1, s2, _] = held(t);
                (s1, s2)
            };
            blocks.trade(e, exit.map(|(x, _)| x), (before[0], before[1]), pair);
            account.block = blocks.pending().unwrap_or(usize::MAX);
        }
        let Some((x, hit)) = exit else {
            account.totals.held += (n - e) as u32;
            account.add(before, held(n - 1));
            return End::Open;
        };
        account.totals.held += (x - e) as u32;
        let inside = hit && self.intrabar;
        let price = if inside { self.fill_inside(false, x, stop, take_profit) } else { close[x] };
        // A stop or take-profit fills with the fee alone (see `trade_parts::at_level`).
        let after = exit_cash(Side::Long, shares, 0.0, price, tables, hit);
        account.close_trade(cash, after);
        if inside || (!hit && x == reverse_at) {
            // The exit bar's return in f64 (a reversal's: the next trade's entry forms it).
            account.add(before, held(x - 1));
            if !inside {
                return End::Reverse(x, after);
            }
            account.mark_return(x, after);
        } else {
            account.add(before, plus(entry_sums, tables.exit_sums(x, hit)));
            account.mark(x, after, (0, 0));
        }
        End::Flat(x)
    }

    /// A short entered at bar `e`'s close with `cash`, held until `due` at the latest (as
    /// [`Self::long_trade`]). Its held bars' returns are E[t]/E[t−1] − 1 in f64, each.
    #[inline(always)]
    fn short_trade<const TRAILS: bool>(
        &self,
        account: &mut Account<'_, '_>,
        (e, cash): (usize, f64),
        due: usize,
        reverse_at: usize,
    ) -> End {
        let (n, tables) = (self.n, self.tables);
        let (close, high, low) = (&self.close[..n], &self.high[..n], &self.low[..n]);
        let (shares, cash_beside) = open(Side::Short, cash, close[e], tables);
        let value = cash_beside - shares * close[e];
        account.mark_return(e, value);
        let Levels { stop: fixed, take_profit, trail: (fraction, distance) } = self.levels(Side::Short, e);
        let stop_at = |best: f64| {
            let trail = trail_level(true, best, fraction, distance);
            if !TRAILS || fixed < trail { fixed } else { trail }
        };
        let mut best = close[e];
        let mut stop = stop_at(best);
        let end = due.min(n);
        let mut t = e + 1;
        // The account in registers.
        let ([mut sum, mut sum_sq, mut down_sq], mut equity, mut block) =
            (account.sums(), account.equity, account.block);
        let mut drawdown = account.drawdown;
        while t < end && !(high[t] >= stop || low[t] <= take_profit) {
            let v = cash_beside - shares * close[t];
            if t >= block {
                [account.totals.sum, account.totals.sum_sq, account.totals.down_sq] = [sum, sum_sq, down_sq];
                account.record(t);
                block = account.block;
            }
            [sum, sum_sq, down_sq] = add_return([sum, sum_sq, down_sq], v, equity);
            drawdown.step(v);
            equity = v;
            best = if low[t] < best { low[t] } else { best };
            if TRAILS {
                stop = stop_at(best);
            }
            t += 1;
        }
        [account.totals.sum, account.totals.sum_sq, account.totals.down_sq] = [sum, sum_sq, down_sq];
        (account.equity, account.drawdown) = (equity, drawdown);
        let exit = (t < n).then(|| (t, high[t] >= stop || low[t] <= take_profit));
        let Some((x, hit)) = exit else {
            account.totals.held += (n - e) as u32;
            return End::Open;
        };
        account.totals.held += (x - e) as u32;
        let price = if hit && self.intrabar { self.fill_inside(true, x, stop, take_profit) } else { close[x] };
        let after = exit_cash(Side::Short, shares, cash_beside, price, tables, hit);
        account.close_trade(cash, after);
        if !hit && x == reverse_at {
            return End::Reverse(x, after);
        }
        account.mark_return(x, after);
        End::Flat(x)
    }

    /// The fill price of a stop or take-profit reached inside bar `x` (the market
    /// simulation's rule, `market_position::fill_inside`).
    #[inline(always)]
    fn fill_inside(&self, short: bool, x: usize, stop: f64, take_profit: f64) -> f64 {
        fill_inside(short, self.open[x], self.high[x], self.low[x], stop, take_profit)
            .map_or(self.close[x], |(price, _)| price)
    }
}

#[cfg(test)]
mod tests;
