//! A rule file's portfolio: every symbol's [`SignalBook`] on one clock, the union of their
//! bar times, each combo an account ([`PortfolioBooks::simulate`]). A symbol's decisions
//! are its book's, taken on its own bars as a single run takes them (docs/strategies.md):
//! an entry from its warm-up on, never on the bar of an exit; then a stop, a take-profit,
//! the exit rule and max_bars, in that order, a stop or take-profit filled at the close
//! with the fee alone. Only the cash is shared.

use crate::book::{ComboPlan, SignalBook, StopRule};
use crate::error::BacktestError;
use crate::metrics::ExitReason;
use crate::portfolio::{Account, PortfolioRun, Source, run};
use crate::trade_parts::{bit, last_bar};

/// No bar of a symbol at a time.
const NONE: u32 = u32::MAX;

/// Every symbol's book on the union of their bar times.
#[derive(Debug)]
pub struct PortfolioBooks<'a> {
    books: Vec<&'a SignalBook>,
    times: Vec<i64>,
    /// Bars × symbols, row-major: each symbol's own bar at each time ([`NONE`]: none),
    /// and its close there (NaN: none).
    local: Vec<u32>,
    close: Vec<f64>,
}

impl<'a> PortfolioBooks<'a> {
    /// The books of one strategy and grid, one per symbol, with each symbol's bar times
    /// (ascending). Books that trade beyond long positions filled at the close with stops
    /// on closes are refused, naming what they use.
    pub fn new(symbols: Vec<(&'a SignalBook, &'a [i64])>) -> Result<Self, BacktestError> {
        if let Some((book, _)) = symbols.iter().find(|(book, _)| !book.is_plain()) {
            return Err(BacktestError::Portfolio(format!(
                "a portfolio trades long positions filled at the close, with stops and take-profits on closes; \
                 this strategy uses {}",
                book.market_features().join(", ")
            )));
        }
        let mut times: Vec<i64> = symbols.iter().flat_map(|(_, t)| t.iter().copied()).collect();
        times.sort_unstable();
        times.dedup();
        let n = symbols.len();
        let (mut local, mut close) = (vec![NONE; times.len() * n], vec![f64::NAN; times.len() * n]);
        for (s, (book, own)) in symbols.iter().enumerate() {
            let mut at = 0;
            for (i, time) in own.iter().enumerate() {
                at += times[at..].partition_point(|t| t < time);
                local[at * n + s] = i as u32;
                close[at * n + s] = book.close()[i];
            }
        }
        Ok(Self { books: symbols.into_iter().map(|(book, _)| book).collect(), times, local, close })
    }

    /// The clock: every symbol's bar times, once each, ascending.
    pub fn times(&self) -> &[i64] {
        &self.times
    }

    pub fn symbols(&self) -> usize {
        self.books.len()
    }

    /// Symbol `s`'s last close (what an open position is marked at after the last bar).
    pub fn last_close(&self, s: usize) -> f64 {
        let n = self.books.len();
        self.close[s..].iter().step_by(n).rev().find(|c| !c.is_nan()).copied().unwrap_or(f64::NAN)
    }

    /// One combo as one account: `plans[s]` is the combo's plan in symbol `s`'s book.
    pub fn simulate(&self, plans: &[ComboPlan], account: &Account, detailed: bool) -> PortfolioRun {
        let rows = self.books.iter().zip(plans).map(|(book, plan)| SymbolRules::new(book, plan)).collect();
        run(&BookSource { books: self, rows }, account, detailed)
    }
}

/// One symbol's rules in one combo.
struct SymbolRules<'b> {
    close: &'b [f64],
    entries: &'b [u64],
    exits: &'b [u64],
    stop: Option<StopRule<'b>>,
    take_profit: Option<StopRule<'b>>,
    warmup: usize,
    max_bars: u32,
}

impl<'b> SymbolRules<'b> {
    fn new(book: &'b SignalBook, plan: &ComboPlan) -> Self {
        Self {
            close: &book.close()[..book.bars()],
            entries: book.entry_row(plan.entry),
            exits: book.exit_row(plan.exit),
            stop: book.stop(plan.stop),
            take_profit: book.stop(plan.take_profit),
            warmup: plan.warmup as usize,
            max_bars: plan.max_bars,
        }
    }
}

/// A position's frozen levels (a stop of −∞ and a take-profit of 0: none) and the bar
/// of the symbol's own at which max_bars closes it.
#[derive(Debug, Clone, Copy)]
struct Levels {
    stop: f64,
    take_profit: f64,
    last: usize,
}

struct BookSource<'b> {
    books: &'b PortfolioBooks<'b>,
    rows: Vec<SymbolRules<'b>>,
}

impl BookSource<'_> {
    /// Symbol `s`'s own bar at time `t`.
    fn own(&self, t: usize, s: usize) -> usize {
        self.books.local[t * self.rows.len() + s] as usize
    }
}

impl Source for BookSource<'_> {
    type Held = Levels;

    fn bars(&self) -> usize {
        self.books.times.len()
    }

    fn symbols(&self) -> usize {
        self.rows.len()
    }

    fn close(&self, t: usize, s: usize) -> f64 {
        self.books.close[t * self.rows.len() + s]
    }

    fn entry(&self, t: usize, s: usize) -> Option<Levels> {
        let (i, rules) = (self.own(t, s), &self.rows[s]);
        if i < rules.warmup || !bit(rules.entries, i) {
            return None;
        }
        let close = rules.close[i];
        Some(Levels {
            stop: rules.stop.map_or(f64::NEG_INFINITY, |r| r.level(i, close)),
            // A take-profit ≤ 0 or NaN is none, as in a single run.
            take_profit: rules.take_profit.map_or(0.0, |r| r.level(i, close)),
            last: last_bar(i, rules.max_bars),
        })
    }

    fn exit(&self, t: usize, s: usize, held: &Levels) -> Option<ExitReason> {
        let (i, rules) = (self.own(t, s), &self.rows[s]);
        let c = rules.close[i];
        if c <= held.stop {
            Some(ExitReason::Stop)
        } else if held.take_profit > 0.0 && c >= held.take_profit {
            Some(ExitReason::TakeProfit)
        } else if bit(rules.exits, i) {
            Some(ExitReason::Signal)
        } else if i >= held.last {
            Some(ExitReason::MaxBars)
        } else {
            None
        }
    }
}
