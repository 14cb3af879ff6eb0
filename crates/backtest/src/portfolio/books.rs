//! A rule file's portfolio: every symbol's [`SignalBook`] on one clock, the union of their
//! bar times, each combo an account ([`PortfolioBooks::simulate`]). A symbol's decisions
//! are its book's, taken on its own bars as a single run takes them (docs/strategies.md):
//! an entry of one side alone from its warm-up on, never on the bar of an exit (but by a
//! reversal); then a stop (or the trail, the tighter), a take-profit, a reversal, the exit
//! rule and max_bars, in that order, a level filled with the fee alone: at the close, or
//! inside the bar at the level (or the open beyond it) when the rule file says `intrabar
//! = true`; with `fill = "next_open"`, what a close decides fills at the next bar's open.
//! Only the cash is shared.

use crate::blocks::{BlockCuts, Snapshots};
use crate::book::{BookLayout, ComboPlan, SignalBook, StopRule};
use crate::costs::Fill;
use crate::error::BacktestError;
use crate::fixed::Totals;
use crate::grid::Grid;
use crate::metrics::{ExitReason, Side, Trade};
use crate::portfolio::levels::{BarPrices, Levels};
use crate::portfolio::schedule::{Exit, Schedule};
use crate::portfolio::sides::Sides;
use crate::portfolio::{Account, Activity, Mark, PortfolioRecord, PortfolioRun, Source, run, run_together};
use crate::rules::{rank_params, rank_series};
use crate::simulate::{BacktestReport, BatchTotals, curve_metrics};
use crate::strategy::Strategy;
use crate::trade_parts::{last_bar, next_bit, prefetch};
use rayon::prelude::*;
use threadx_dispatch::Dispatcher;
use threadx_indicators::{IndicatorBank, Ohlcv};

/// Every symbol's book on the union of their bar times.
#[derive(Debug)]
pub struct PortfolioBooks {
    books: Vec<SignalBook>,
    times: Vec<i64>,
    /// Per symbol: the bar of the clock of each of its own bars; None where they are the
    /// clock's first bars one for one (no lookup: a universe of one calendar's bars).
    clock: Vec<Option<Vec<u32>>>,
    /// Bars × symbols, row-major: each symbol's last close (0 before its first bar).
    prices: Vec<f64>,
    /// The `rank` rule's values; none without the rule.
    ranks: Ranks,
}

/// A `rank` rule's values: per symbol, one series (a value at each of its own bars) per
/// variant, a variant being one set of values of the parameters the rule reads; and, per
/// parameter it reads, its place in the grid and its stride among the variants.
#[derive(Debug, Default)]
struct Ranks {
    series: Vec<Vec<Vec<f64>>>,
    reads: Vec<(usize, usize)>,
}

impl Ranks {
    /// The variant a combo of grid position `index` (a value's place on each axis) reads.
    fn variant(&self, index: &[usize]) -> usize {
        self.reads.iter().map(|&(p, stride)| index[p] * stride).sum()
    }
}

impl PortfolioBooks {
    /// The books of one strategy and grid, one per symbol, with each symbol's bar times
    /// (ascending).
    pub fn new(symbols: Vec<(SignalBook, &[i64])>) -> Result<Self, BacktestError> {
        let times = Self::joint_clock(symbols.iter().map(|(_, t)| *t));
        let n = symbols.len();
        let mut prices = vec![0.0; times.len() * n];
        let mut clock = Vec::with_capacity(n);
        for (s, (book, own)) in symbols.iter().enumerate() {
            let mut at = 0;
            let bars: Vec<u32> = own
                .iter()
                .map(|time| {
                    at += times[at..].partition_point(|t| t < time);
                    at as u32
                })
                .collect();
            // Each close from its bar until the symbol's next one.
            for (i, window) in bars.iter().enumerate() {
                let end = bars.get(i + 1).map_or(times.len(), |&b| b as usize);
                for t in *window as usize..end {
                    prices[t * n + s] = book.close()[i];
                }
            }
            let identity = bars.iter().enumerate().all(|(i, &b)| b as usize == i);
            clock.push((!identity).then_some(bars));
        }
        let books = symbols.into_iter().map(|(book, _)| book).collect();
        Ok(Self { books, times, clock, prices, ranks: Ranks::default() })
    }

    /// The union of the symbols' bar times, ascending: the account's clock.
    pub fn joint_clock<'a>(times: impl Iterator<Item = &'a [i64]>) -> Vec<i64> {
        let mut clock: Vec<i64> = times.flat_map(|t| t.iter().copied()).collect();
        clock.sort_unstable();
        clock.dedup();
        clock
    }

    /// One parameter set of `strategy` over `symbols` (name and bars, in symbol order):
    /// each symbol's book built through its own indicator bank on `dispatcher`, a
    /// problem named with its symbol. Its one combo is combo 0.
    pub fn for_params(
        strategy: &Strategy,
        values: &[f64],
        symbols: &[(&str, &Ohlcv)],
        dispatcher: &Dispatcher,
    ) -> Result<Self, BacktestError> {
        let axes: Vec<Vec<f64>> = values.iter().map(|&v| vec![v]).collect();
        let banks: Vec<IndicatorBank<'_>> =
            symbols.iter().map(|(_, bars)| IndicatorBank::new(bars, dispatcher)).collect();
        let layout = BookLayout::new(Grid::new(strategy.clone(), &axes)?, None)?;
        Self::new(SignalBook::for_each_symbol(&banks, &layout)?)?.ranked_by(strategy, &banks)
    }

    /// One parameter set of `strategy` over `symbols` as one account, in detail: the books
    /// ([`Self::for_params`]), `account` sized for these values ([`Account::for_params`])
    /// and its detailed run. With `first_entry`, no symbol enters before that time (a
    /// walk-forward's test window, its history read before it). The one way the CLI, a
    /// sweep's page, a walk-forward and Python run a portfolio's parameter set.
    pub fn run_params(
        strategy: &Strategy,
        values: &[f64],
        symbols: &[(&str, &Ohlcv)],
        (account, first_entry): (&Account, Option<i64>),
        dispatcher: &Dispatcher,
    ) -> Result<(Self, Account, PortfolioRun), BacktestError> {
        let books = Self::for_params(strategy, values, symbols, dispatcher)?;
        let account = account.for_params(strategy.schema(), values)?;
        let run = books.simulate(0, &account, (true, first_entry));
        Ok((books, account, run))
    }

    /// The books ordering each bar's entries by `strategy`'s `rank` rule (the highest
    /// first, NaN last, then by symbol), evaluated on each symbol's bank (`banks`, in
    /// symbol order): a series per set of values the grid gives the parameters it reads;
    /// as they are without the rule.
    pub fn ranked_by(self, strategy: &Strategy, banks: &[IndicatorBank<'_>]) -> Result<Self, BacktestError> {
        let axes = self.books[0].grid().map(|g| g.axes().to_vec()).unwrap_or_default();
        let mut variants = 1;
        let reads: Vec<(usize, usize)> = rank_params(strategy)
            .unwrap_or_default()
            .into_iter()
            .map(|p| {
                let stride = variants;
                variants *= axes[p].len();
                (p, stride)
            })
            .collect();
        // Each variant's values: the read parameters' own, the others' first (unread).
        let values: Vec<Vec<f64>> = (0..variants)
            .map(|v| {
                let own = |p: usize| reads.iter().find(|r| r.0 == p).map_or(0, |&(_, s)| v / s % axes[p].len());
                axes.iter().enumerate().map(|(p, axis)| axis[own(p)]).collect()
            })
            .collect();
        let series = banks.iter().map(|bank| rank_series(bank, strategy, &values)).collect::<Result<Option<_>, _>>()?;
        match series {
            Some(series) => Ok(Self { ranks: Ranks { series, reads }, ..self }),
            None => Ok(self),
        }
    }

    /// Each symbol's book, in symbol order.
    pub fn books(&self) -> &[SignalBook] {
        &self.books
    }

    /// The clock: every symbol's bar times, once each, ascending.
    pub fn times(&self) -> &[i64] {
        &self.times
    }

    pub fn symbols(&self) -> usize {
        self.books.len()
    }

    /// Each symbol's last close at each bar of the clock, row-major (bars × symbols; 0
    /// before its first bar): what the account values its positions at.
    pub fn prices(&self) -> &[f64] {
        &self.prices
    }

    /// Symbol `s`'s last close (what an open position is marked at after the last bar).
    pub fn last_close(&self, s: usize) -> f64 {
        let book = &self.books[s];
        book.bars().checked_sub(1).map_or(f64::NAN, |i| book.close()[i])
    }

    /// The bar of the clock of symbol `s`'s own bar `i`.
    #[inline(always)]
    fn at(&self, s: usize, i: usize) -> Mark {
        let bar = self.clock[s].as_ref().map_or(i, |clock| clock[i] as usize);
        Mark { bar, own: i }
    }

    /// Combo `combo`'s plan (the same in every symbol's book: books laid out from one
    /// grid hold the same rows) and the `rank` variant it reads.
    fn plan_of(&self, combo: u64) -> (ComboPlan, usize) {
        let book = &self.books[0];
        match book.grid() {
            Some(grid) => {
                let index = grid.index(combo);
                (book.plan(&index[..grid.axes().len()]), self.ranks.variant(&index))
            }
            None => (book.combo_plan(combo), 0),
        }
    }

    /// The totals of `combos` (grid numbers), each one account over every symbol, on the
    /// CPU's pool, in order, [`LANES`] accounts walking the clock together on a thread;
    /// with each combo's blocks when `cuts` are given (as [`crate::simulate_cpu`]'s).
    /// With `sizes`, combo i's account sizes its entries `sizes[i]` (values
    /// [`Account::with_size`] took).
    pub fn totals(
        &self,
        combos: &[u64],
        (account, sizes): (&Account, Option<&[f64]>),
        cuts: Option<&BlockCuts>,
    ) -> BatchTotals {
        let (bars, symbols) = (self.times.len(), self.books.len());
        let scratch = || Scratch {
            schedules: (0..LANES).map(|_| Schedule::new(bars, symbols)).collect(),
            rows: (0..LANES).map(|_| Vec::with_capacity(symbols)).collect(),
            snapshots: vec![0; LANES * cuts.map_or(0, BlockCuts::snapshot_len)],
        };
        let groups: Vec<BatchTotals> = combos
            .par_chunks(LANES)
            .enumerate()
            .map_init(scratch, |scratch, (g, group)| {
                // Plan i's account: with `sizes`, each plan's own size (checked by the caller).
                let sized = |i: usize| sizes.map_or(*account, |s| account.sized(s[g * LANES + i]));
                let accounts: Vec<Account> = (0..group.len()).map(sized).collect();
                let plans: Vec<(ComboPlan, usize)> = group.iter().map(|&c| self.plan_of(c)).collect();
                self.group(&plans, &accounts, scratch, cuts)
            })
            .collect();
        let mut batch = BatchTotals::default();
        for group in groups {
            batch.totals.extend(group.totals);
            batch.activity.extend(group.activity);
            batch.blocks.extend(group.blocks);
        }
        batch
    }

    /// The totals and activity of `plans` (each with its `rank` variant) run as
    /// `accounts` together ([`run_together`]), and their blocks' statistics when `cuts`
    /// are given.
    fn group<'b>(
        &'b self,
        plans: &[(ComboPlan, usize)],
        accounts: &[Account],
        scratch: &mut Scratch<'b>,
        cuts: Option<&BlockCuts>,
    ) -> BatchTotals {
        let Scratch { schedules, rows, snapshots } = scratch;
        let sources: Vec<BookSource<'b>> = plans
            .iter()
            .zip(rows.iter_mut())
            .map(|((plan, rank), rows)| {
                rows.clear();
                rows.extend(self.books.iter().map(|book| SymbolRules::new(book, plan)));
                BookSource { books: self, rows: std::mem::take(rows), rank: *rank }
            })
            .collect();
        let recorded = match cuts {
            Some(cuts) => snapshots
                .chunks_mut(cuts.snapshot_len())
                .take(plans.len())
                .map(|s| Some(Snapshots::new(cuts, s)))
                .collect(),
            None => plans.iter().map(|_| None).collect(),
        };
        let runs = run_together(&sources, accounts, &mut schedules[..plans.len()], recorded);
        let (totals, activity): (Vec<Totals>, Vec<Activity>) = runs.into_iter().unzip();
        let mut blocks = Vec::new();
        if let Some(cuts) = cuts {
            blocks = vec![0.0; plans.len() * cuts.stats_len()];
            let each = blocks.chunks_mut(cuts.stats_len()).zip(snapshots.chunks(cuts.snapshot_len()));
            for ((out, snapshots), totals) in each.zip(&totals) {
                cuts.stats(snapshots, totals, out);
            }
        }
        for (rows, source) in rows.iter_mut().zip(sources) {
            *rows = source.rows;
        }
        BatchTotals { totals, blocks, activity }
    }

    /// Combo `combo` as one account, its record kept when `detailed`; with
    /// `first_entry`, no symbol enters before that time.
    pub fn simulate(
        &self,
        combo: u64,
        account: &Account,
        (detailed, first_entry): (bool, Option<i64>),
    ) -> PortfolioRun {
        let (plan, rank) = self.plan_of(combo);
        // The clock's first bar at or after `first_entry`, then each symbol's own there.
        let first = first_entry.map_or(0, |first| self.times.partition_point(|&t| t < first));
        let rows = self
            .books
            .iter()
            .zip(&self.clock)
            .map(|(book, clock)| {
                let mut rules = SymbolRules::new(book, &plan);
                let own =
                    clock.as_ref().map_or(first.min(book.bars()), |c| c.partition_point(|&b| (b as usize) < first));
                rules.warmup = rules.warmup.max(own);
                rules
            })
            .collect();
        let mut schedule = Schedule::new(self.times.len(), self.books.len());
        run(&BookSource { books: self, rows, rank }, account, (detailed, None), &mut schedule)
    }

    /// A detailed run's `record` (of an account starting with `init_cash`) as one equity
    /// curve, the account's value over its starting cash, and its trades, each symbol's
    /// trade on the clock (one open at the end marked at its symbol's last close,
    /// without an exit fee); its metrics from the curve, as a single run's report's. What
    /// a walk-forward's test window reads ([`BacktestReport::since`]).
    pub fn report(&self, record: &PortfolioRecord, init_cash: f64, bars_per_year: f64) -> BacktestReport {
        let last = self.times.len().saturating_sub(1);
        let trades: Vec<Trade> = record
            .trades
            .iter()
            .map(|t| {
                let last_close = self.last_close(t.symbol);
                let exit_bar = t.exit_bar.unwrap_or(last);
                Trade {
                    side: t.side,
                    entry_bar: t.entry_bar,
                    exit_bar,
                    entry_time: self.times[t.entry_bar],
                    exit_time: self.times[exit_bar],
                    entry_price: t.entry.price,
                    exit_price: t.exit.map_or(last_close, |x| x.price),
                    return_: t.return_at(last_close),
                    reason: t.reason,
                }
            })
            .collect();
        let equity: Vec<f64> = record.equity.iter().map(|e| e / init_cash).collect();
        let metrics = curve_metrics(&equity, &trades, bars_per_year);
        BacktestReport { metrics, trades, equity, bars_per_year }
    }
}

/// The accounts a sweep's thread walks the clock with at once: enough that a bar's prices
/// and the closes ahead serve several before they leave the caches, few enough that their
/// schedules stay small.
const LANES: usize = 8;

/// What a thread of a sweep reuses from group to group of [`LANES`] combos.
struct Scratch<'b> {
    schedules: Vec<Schedule>,
    rows: Vec<Vec<SymbolRules<'b>>>,
    snapshots: Vec<u128>,
}

/// One symbol's rules in one combo.
struct SymbolRules<'b> {
    close: &'b [f64],
    /// Each bar's open, high and low when its stops are checked inside the bar; else
    /// empty.
    bar_range: [&'b [f64]; 3],
    /// The entries of each side (no short row: long only), and each side's exits.
    sides: Sides<'b>,
    exits: [&'b [u64]; 2],
    /// Each side's stop and take-profit: [long, short].
    stop: [Option<StopRule<'b>>; 2],
    take_profit: [Option<StopRule<'b>>; 2],
    trail: Option<StopRule<'b>>,
    warmup: usize,
    max_bars: u32,
    /// Each bar's open where decisions fill at the next open; else empty (at the close).
    next_open: &'b [f64],
    /// Whether none of shorts, a trail, stops inside the bar and next-open fills is used:
    /// an exit is then found on closes alone ([`Self::exit_after`]'s fast path).
    plain: bool,
}

impl<'b> SymbolRules<'b> {
    fn new(book: &'b SignalBook, plan: &ComboPlan) -> Self {
        let n = book.bars();
        let bar_range =
            if book.fills().intrabar { [&book.open()[..n], &book.high()[..n], &book.low()[..n]] } else { [&[][..]; 3] };
        let shorts = plan.short_entry != ComboPlan::NO_STOP;
        let next_open = book.fills().fill == Fill::NextOpen;
        let trail = book.stop(plan.trail);
        let plain = !shorts && trail.is_none() && !book.fills().intrabar && !next_open;
        Self {
            close: &book.close()[..n],
            bar_range,
            sides: Sides {
                long: book.entry_row(plan.entry),
                short: if shorts { book.entry_row(plan.short_entry) } else { &[] },
            },
            exits: [book.exit_row(plan.exit), if shorts { book.exit_row(plan.short_exit) } else { book.no_row() }],
            stop: [plan.stop, plan.short_stop].map(|s| book.stop(s)),
            take_profit: [plan.take_profit, plan.short_take_profit].map(|s| book.stop(s)),
            trail,
            warmup: plan.warmup as usize,
            max_bars: plan.max_bars,
            next_open: if next_open { &book.open()[..n] } else { &[] },
            plain,
        }
    }

    /// The own bar an entry may fill at from `from` on, and its side: at the close of
    /// the bar that decides it (from the warm-up on), or at the next bar's open (a
    /// decision on the last bar never fills).
    #[inline(always)]
    fn next_entry(&self, from: usize) -> Option<(usize, Side)> {
        let n = self.close.len();
        if self.next_open.is_empty() {
            return self.sides.next_entry(from.max(self.warmup)).filter(|&(i, _)| i < n);
        }
        let (d, side) = self.sides.next_entry(from.saturating_sub(1).max(self.warmup))?;
        (d + 1 < n).then_some((d + 1, side))
    }

    /// The bar whose close decided an entry filled at own bar `e`, and that close.
    #[inline(always)]
    fn decided(&self, e: usize) -> (usize, f64) {
        let d = if self.next_open.is_empty() { e } else { e - 1 };
        (d, self.close[d])
    }

    /// Where an exit decided at the close of own bar `t` fills: at that close, or at the
    /// next bar's open (None on the last bar: it never fills).
    #[inline(always)]
    fn fill(&self, t: usize, exit: Exit) -> Option<(usize, Exit)> {
        match self.next_open.get(t + 1) {
            _ if self.next_open.is_empty() => Some((t, exit)),
            Some(&open) => Some((t + 1, Exit { inside: Some(open), ..exit })),
            None => None,
        }
    }

    /// The own bar a `side` position filled at own bar `e` at price `entry` (its close,
    /// read from the bar's prices already at hand, or its open) exits at, and how: the
    /// first bar after `e` whose close reaches the stop frozen at `e`, then the
    /// take-profit (≤ 0 or NaN: none), a reversal, the exit rule, then max_bars (a single
    /// run's order). With shorts, a trail, stops inside the bar or next-open fills (not
    /// [`SymbolRules::plain`]), the market rules' [`Self::market_exit_after`].
    fn exit_after(&self, e: usize, entry: f64, side: Side) -> Option<(usize, Exit)> {
        if !self.plain {
            return self.market_exit_after(e, entry, side);
        }
        let close = self.close;
        let stop = self.stop[0].map_or(f64::NEG_INFINITY, |r| r.level(e, entry));
        let take_profit = self.take_profit[0].map_or(0.0, |r| r.level(e, entry));
        let decided = self.decided_after(e, e, side);
        if let Some(t) = first_reaching(close, e + 1..self.end(decided), (stop, take_profit)) {
            let reason = if close[t] <= stop { ExitReason::Stop } else { ExitReason::TakeProfit };
            return Some((t, Exit::at_close(reason)));
        }
        self.closed_by(decided)
    }

    /// The first bars after `d` (the bar that decided the entry filled at `e`) at which
    /// a `side` position's closes decide its exit (`usize::MAX`: none): max_bars' (counted
    /// from `e`), its exit rule's, and a reversal's (the other side's entry alone).
    #[inline(always)]
    fn decided_after(&self, d: usize, e: usize, side: Side) -> [usize; 3] {
        let never = usize::MAX;
        let exit = next_bit(self.exits[side as usize], d + 1).unwrap_or(never);
        [last_bar(e, self.max_bars), exit, self.sides.reversal_after(d, side).unwrap_or(never)]
    }

    /// The end of the bars a position's levels are checked on: the data's, or the bar
    /// after the first that `decided` closes it at.
    #[inline(always)]
    fn end(&self, decided: [usize; 3]) -> usize {
        self.close.len().min(decided.into_iter().min().unwrap_or(usize::MAX).saturating_add(1))
    }

    /// The exit the first bar `decided` closes it at decides, where the data reaches it
    /// ([`Self::fill`]): on one bar a reversal, then the exit rule, then max_bars.
    #[inline(always)]
    fn closed_by(&self, [last, exit, reverse]: [usize; 3]) -> Option<(usize, Exit)> {
        let first = last.min(exit).min(reverse);
        let reason = match first {
            _ if first >= self.close.len() => return None,
            _ if first == reverse => ExitReason::Reverse,
            _ if first == exit => ExitReason::Signal,
            _ => ExitReason::MaxBars,
        };
        self.fill(first, Exit::at_close(reason))
    }

    /// [`Self::exit_after`] by the market rules ([`BarPrices::exit_at_level`]), then a
    /// reversal, the exit rule and max_bars at the close. `entry` is the fill price (the
    /// trail's first best); the levels are frozen at the deciding bar's close. Filled at
    /// the next open, the closes decide from the fill bar on, and the bar's own range
    /// (checked from the bar after) moves the trail's best first.
    fn market_exit_after(&self, e: usize, entry: f64, side: Side) -> Option<(usize, Exit)> {
        let (k, short) = (side as usize, side == Side::Short);
        let (d, close) = self.decided(e);
        let levels = Levels::frozen([self.stop[k], self.take_profit[k], self.trail], d, close);
        let decided = self.decided_after(d, e, side);
        let prices = BarPrices { close: self.close, range: self.bar_range };
        let [_, high, low] = self.bar_range;
        let (best, from) = match (self.next_open.is_empty(), high.is_empty()) {
            (true, _) => (entry, e + 1),
            (false, true) => (entry, e),
            (false, false) if short => (if low[e] < entry { low[e] } else { entry }, e + 1),
            (false, false) => (if high[e] > entry { high[e] } else { entry }, e + 1),
        };
        match prices.exit_at_level(levels, best, from..self.end(decided), short) {
            // A level reached at a close decides, as the exit rule does.
            Some((t, exit)) if exit.inside.is_none() => self.fill(t, exit),
            Some(at_level) => Some(at_level),
            None => self.closed_by(decided),
        }
    }
}

/// The first bar of `bars` whose close is at or below `stop` or, when `take_profit` is
/// above 0, at or above it. Eight closes at a time without a branch between them (the
/// compiler's vector compares), then the one that did within its eight: a held position's
/// bars are most of a sweep's reads.
#[inline(always)]
fn first_reaching(close: &[f64], bars: std::ops::Range<usize>, (stop, take_profit): (f64, f64)) -> Option<usize> {
    let take_profit = if take_profit > 0.0 { take_profit } else { f64::INFINITY };
    let reaches = |c: f64| (c <= stop) | (c >= take_profit);
    let window = close.get(bars.clone())?;
    let mut base = 0;
    for eight in window.chunks_exact(8) {
        if eight.iter().fold(false, |any, &c| any | reaches(c)) {
            break;
        }
        base += 8;
    }
    window[base..].iter().position(|&c| reaches(c)).map(|i| bars.start + base + i)
}

struct BookSource<'b> {
    books: &'b PortfolioBooks,
    rows: Vec<SymbolRules<'b>>,
    /// The `rank` variant the combo reads.
    rank: usize,
}

impl Source for BookSource<'_> {
    fn bars(&self) -> usize {
        self.books.times.len()
    }

    fn symbols(&self) -> usize {
        self.rows.len()
    }

    fn prices(&self) -> &[f64] {
        &self.books.prices
    }

    fn next_entry(&self, s: usize, own: usize) -> Option<(Mark, Side)> {
        let rules = &self.rows[s];
        let (i, side) = rules.next_entry(own)?;
        // The entry's levels and the closes after it are read when it fills, often many
        // bars (and other symbols' events) later: a cache miss each, without this.
        let k = side as usize;
        for rule in [rules.stop[k], rules.take_profit[k]].into_iter().flatten() {
            rule.prefetch(i);
        }
        prefetch(rules.close, i + 1);
        Some((self.books.at(s, i), side))
    }

    fn ranked(&self) -> bool {
        !self.books.ranks.series.is_empty()
    }

    fn rank(&self, s: usize, own: usize) -> f64 {
        self.books.ranks.series[s][self.rank][own]
    }

    fn stop_level(&self, s: usize, own: usize, side: Side) -> Option<f64> {
        let rules = &self.rows[s];
        let (d, close) = rules.decided(own);
        rules.stop[side as usize].map(|rule| rule.level(d, close))
    }

    fn fill_price(&self, s: usize, own: usize) -> Option<f64> {
        self.rows[s].next_open.get(own).copied()
    }

    fn exit_after(&self, s: usize, own: usize, close: f64, side: Side) -> Option<(Mark, Exit)> {
        self.rows[s].exit_after(own, close, side).map(|(x, exit)| (self.books.at(s, x), exit))
    }
}
