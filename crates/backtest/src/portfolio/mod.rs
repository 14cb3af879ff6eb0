//! A universe traded as one account: every symbol's signals against one cash balance
//! (vectorbt's `from_signals(..., group_by=True, cash_sharing=True, call_seq="auto")`),
//! long positions sized by [`Sizing`]. docs/portfolios.md states the rules; this is their
//! CPU reference.
//!
//! On each bar, in this order: each symbol with a bar there takes its close as its price
//! (a symbol without one keeps its position, valued at its last close, and trades
//! nothing); the account's value is the cash plus every position at its price; exits
//! sell whole positions, the largest holding first (vectorbt's sort by order value, ties
//! by symbol); then entries buy, in symbol order, each from the cash left, until the cash
//! runs out. An entry and an exit on one bar cancel; an entry while holding is ignored.
//! The equity at the close is the cash plus every position at its last close. A fill's
//! arithmetic is vectorbt's (`orders.rs`), so the account equals vectorbt's to its
//! tolerances, and its [`Totals`] come from the equity curve as the market simulation's do.

mod orders;
mod sizing;

pub use orders::Filled;
pub use sizing::{SizeType, Sizing};

use crate::costs::Costs;
use crate::error::BacktestError;
use crate::fixed::{Totals, return_units};
use crate::trade_parts::{Drawdown, log_of};
use ndarray::ArrayView2;
use orders::{add, buy, is_close, sell};

/// A portfolio's bars and signals, each bars × symbols: closes (NaN where a symbol has no
/// bar), long entries and exits.
#[derive(Debug, Clone, Copy)]
pub struct PortfolioSignals<'a> {
    pub close: ArrayView2<'a, f64>,
    pub entries: ArrayView2<'a, bool>,
    pub exits: ArrayView2<'a, bool>,
}

/// The account: its starting cash, how entries are sized, what fills cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Account {
    pub init_cash: f64,
    pub sizing: Sizing,
    pub costs: Costs,
}

impl Account {
    /// A checked account: a positive, finite starting cash.
    pub fn new(init_cash: f64, sizing: Sizing, costs: Costs) -> Result<Self, BacktestError> {
        if !(init_cash.is_finite() && init_cash > 0.0) {
            return Err(BacktestError::BadValue {
                param: "init_cash".into(),
                value: init_cash.to_string(),
                problem: "the starting cash must be a positive number".into(),
            });
        }
        Ok(Self { init_cash, sizing, costs })
    }
}

/// One trade of a portfolio: a symbol's position from its entry fill to its exit fill
/// (`exit`: None while open at the last bar).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PortfolioTrade {
    pub symbol: usize,
    pub entry_bar: usize,
    pub entry: Filled,
    pub exit_bar: Option<usize>,
    pub exit: Option<Filled>,
}

impl PortfolioTrade {
    /// The profit in cash: received less spent (fees in both); None while open.
    pub fn pnl(&self) -> Option<f64> {
        self.exit.map(|x| x.cash - self.entry.cash)
    }

    /// The return: the cash the exit received over the cash the entry spent, minus 1
    /// (fees in both, as every ThreadX trade's).
    pub fn ret(&self) -> Option<f64> {
        self.exit.map(|x| x.cash / self.entry.cash - 1.0)
    }
}

/// What a detailed run keeps: per bar, the account's equity and cash and each symbol's
/// units held (row-major, bars × symbols); every trade in the order filled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PortfolioRecord {
    pub equity: Vec<f64>,
    pub cash: Vec<f64>,
    pub positions: Vec<f64>,
    pub trades: Vec<PortfolioTrade>,
}

/// A portfolio run: its totals (the metrics' one source) and, when asked, its record.
#[derive(Debug, Clone, PartialEq)]
pub struct PortfolioRun {
    pub totals: Totals,
    pub record: Option<PortfolioRecord>,
}

/// The account's state between bars.
struct Book {
    cash: f64,
    /// Units held and the last price of each symbol (NaN before its first bar).
    position: Vec<f64>,
    price: Vec<f64>,
    /// Each symbol's open trade, as an index into `trades`.
    open: Vec<Option<usize>>,
    trades: Vec<PortfolioTrade>,
    totals: Totals,
}

impl Book {
    /// Cash plus every position at its last price, in symbol order.
    fn value(&self) -> f64 {
        let mut value = self.cash;
        for (&units, &price) in self.position.iter().zip(&self.price) {
            if units != 0.0 {
                value += units * price;
            }
        }
        value
    }

    /// vectorbt reads a cash within its tolerance of zero as zero before an order.
    fn cash_now(&self) -> f64 {
        if is_close(self.cash, 0.0) { 0.0 } else { self.cash }
    }

    fn exit(&mut self, t: usize, s: usize, costs: Costs, sizing: &Sizing) {
        let Some(filled) = sell(self.position[s], self.price[s], costs, sizing.limits()) else { return };
        self.cash = self.cash_now() + filled.cash;
        self.position[s] = add(self.position[s], -filled.size);
        if self.position[s] == 0.0
            && let Some(i) = self.open[s].take()
        {
            let trade = &mut self.trades[i];
            (trade.exit_bar, trade.exit) = (Some(t), Some(filled));
            let spent = trade.entry.cash;
            self.totals.close_trade(filled.cash / spent - 1.0);
            self.totals.wins += u32::from(filled.cash > spent);
        }
    }

    fn enter(&mut self, t: usize, s: usize, account: &Account, value: f64) {
        let (sizing, price) = (&account.sizing, self.price[s]);
        let cash = self.cash_now();
        let order = match sizing.kind {
            SizeType::Percent => buy(cash, f64::INFINITY, price, Some(sizing.size), account.costs, sizing.limits()),
            SizeType::Value => buy(cash, sizing.size / price, price, None, account.costs, sizing.limits()),
            SizeType::TargetPercent if value > 0.0 => {
                buy(cash, sizing.size * value / price, price, None, account.costs, sizing.limits())
            }
            SizeType::TargetPercent => None,
        };
        let Some(filled) = order else { return };
        self.cash = add(cash, -filled.cash);
        self.position[s] = filled.size;
        self.open[s] = Some(self.trades.len());
        self.trades.push(PortfolioTrade { symbol: s, entry_bar: t, entry: filled, exit_bar: None, exit: None });
        self.totals.trades += 1;
    }
}

/// Checks the signals' shapes and prices: the same bars × symbols each, at least one
/// symbol, every close positive and finite or NaN (no bar).
fn check(signals: &PortfolioSignals<'_>) -> Result<(), BacktestError> {
    let shape = signals.close.dim();
    for (name, dim) in [("entries", signals.entries.dim()), ("exits", signals.exits.dim())] {
        if dim != shape {
            return Err(BacktestError::Signals(format!(
                "{name} has shape {dim:?}; the closes have {shape:?} (bars × symbols)"
            )));
        }
    }
    if shape.1 == 0 {
        return Err(BacktestError::Signals("a portfolio needs at least one symbol".into()));
    }
    if let Some(((t, s), &p)) =
        signals.close.indexed_iter().find(|(_, p)| !(p.is_nan() || (p.is_finite() && **p > 0.0)))
    {
        return Err(BacktestError::Signals(format!(
            "close at bar {t}, symbol {s} is {p}: a price is positive and finite (NaN: no bar)"
        )));
    }
    Ok(())
}

/// Runs the account over every bar: its [`Totals`] (from the equity curve and the closed
/// trades, as every simulation's), and its record when `detailed`.
pub fn simulate_portfolio(
    signals: &PortfolioSignals<'_>,
    account: &Account,
    detailed: bool,
) -> Result<PortfolioRun, BacktestError> {
    check(signals)?;
    let (bars, symbols) = signals.close.dim();
    let mut book = Book {
        cash: account.init_cash,
        position: vec![0.0; symbols],
        price: vec![f64::NAN; symbols],
        open: vec![None; symbols],
        trades: Vec::new(),
        totals: Totals::default(),
    };
    let mut record = detailed.then(|| PortfolioRecord {
        equity: Vec::with_capacity(bars),
        cash: Vec::with_capacity(bars),
        positions: Vec::with_capacity(bars * symbols),
        trades: Vec::new(),
    });
    let (mut equity, mut drawdown) = (account.init_cash, Drawdown::START);
    let mut exits: Vec<(f64, usize)> = Vec::with_capacity(symbols);
    for t in 0..bars {
        let close = signals.close.row(t);
        let (entries, exit_rows) = (signals.entries.row(t), signals.exits.row(t));
        for (price, &c) in book.price.iter_mut().zip(close) {
            if !c.is_nan() {
                *price = c;
            }
        }
        let value = book.value();
        // Exits, the largest holding first: vectorbt's order by approximate value (an
        // exit's is −units·price), stable by symbol.
        exits.clear();
        for s in 0..symbols {
            if book.position[s] != 0.0 && exit_rows[s] && !entries[s] && !close[s].is_nan() {
                exits.push((-book.position[s] * book.price[s], s));
            }
        }
        exits.sort_by(|a, b| a.0.total_cmp(&b.0));
        for &(_, s) in &exits {
            book.exit(t, s, account.costs, &account.sizing);
        }
        for s in 0..symbols {
            if book.position[s] == 0.0 && entries[s] && !exit_rows[s] && !close[s].is_nan() {
                book.enter(t, s, account, value);
            }
        }
        let now = book.value();
        book.totals.add_bar(return_units(now, equity));
        // The drawdown on equity over the starting cash: the same ratios as on equity.
        drawdown.step(now / account.init_cash);
        equity = now;
        book.totals.held += u32::from(book.position.iter().any(|&u| u != 0.0));
        if let Some(record) = record.as_mut() {
            record.equity.push(now);
            record.cash.push(book.cash);
            record.positions.extend_from_slice(&book.position);
        }
    }
    let mut totals = book.totals;
    totals.log_equity = log_of(equity / account.init_cash);
    totals.drawdown = log_of(drawdown.worst());
    if let Some(record) = record.as_mut() {
        record.trades = book.trades;
    }
    Ok(PortfolioRun { totals, record })
}

#[cfg(test)]
mod tests;
