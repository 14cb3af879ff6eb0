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
//! runs out. An entry while holding is ignored; no symbol enters on the bar it exited.
//! The equity at the close is the cash plus every position at its last close. A fill's
//! arithmetic is vectorbt's (`orders.rs`), so the account equals vectorbt's to its
//! tolerances, and its [`Totals`] come from the equity curve as the market simulation's do.

mod books;
mod orders;
mod signals;
mod sizing;

pub use books::PortfolioBooks;
pub use orders::Filled;
pub use signals::{PortfolioSignals, simulate_portfolio};
pub use sizing::{SizeType, Sizing};

use crate::costs::Costs;
use crate::error::BacktestError;
use crate::fixed::{Totals, return_units};
use crate::metrics::ExitReason;
use crate::trade_parts::{Drawdown, at_level, log_of};
use orders::{add, buy, is_close, sell};

/// What the account trades: each symbol's price at each bar and its decisions. An entry
/// is asked only of a flat symbol with a bar, an exit only of a held one (`Held`: what the
/// source froze at its entry, such as a stop level).
pub(crate) trait Source {
    type Held: Copy;
    fn bars(&self) -> usize;
    fn symbols(&self) -> usize;
    /// Symbol `s`'s close at bar `t`; NaN: no bar there.
    fn close(&self, t: usize, s: usize) -> f64;
    /// Whether flat symbol `s` enters at bar `t`, and what its position keeps if so.
    fn entry(&self, t: usize, s: usize) -> Option<Self::Held>;
    /// Whether held symbol `s` exits at bar `t`, and why.
    fn exit(&self, t: usize, s: usize, held: &Self::Held) -> Option<ExitReason>;
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
/// (`exit`: None while open at the last bar, its reason then `OpenAtEnd`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PortfolioTrade {
    pub symbol: usize,
    pub entry_bar: usize,
    pub entry: Filled,
    pub exit_bar: Option<usize>,
    pub exit: Option<Filled>,
    pub reason: ExitReason,
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
struct Ledger<H> {
    cash: f64,
    /// Units held and the last price of each symbol (NaN before its first bar).
    position: Vec<f64>,
    price: Vec<f64>,
    /// Each held symbol's open trade (an index into `trades`) and what its entry froze.
    open: Vec<Option<(usize, H)>>,
    /// The bar each symbol last exited at (no entry on that bar).
    exited: Vec<usize>,
    trades: Vec<PortfolioTrade>,
    totals: Totals,
}

impl<H: Copy> Ledger<H> {
    fn new(account: &Account, symbols: usize) -> Self {
        Self {
            cash: account.init_cash,
            position: vec![0.0; symbols],
            price: vec![f64::NAN; symbols],
            open: vec![None; symbols],
            exited: vec![usize::MAX; symbols],
            trades: Vec::new(),
            totals: Totals::default(),
        }
    }

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

    /// Sells symbol `s`'s position at bar `t` for `reason`: at a level (a stop or
    /// take-profit) with the fee alone, as every ThreadX exit at a level.
    fn exit(&mut self, t: usize, s: usize, reason: ExitReason, account: &Account) {
        let costs = if at_level(reason) { Costs { slippage: 0.0, ..account.costs } } else { account.costs };
        let Some(filled) = sell(self.position[s], self.price[s], costs, account.sizing.limits()) else { return };
        self.cash = self.cash_now() + filled.cash;
        self.position[s] = add(self.position[s], -filled.size);
        self.exited[s] = t;
        if self.position[s] == 0.0
            && let Some((i, _)) = self.open[s].take()
        {
            let trade = &mut self.trades[i];
            (trade.exit_bar, trade.exit, trade.reason) = (Some(t), Some(filled), reason);
            let spent = trade.entry.cash;
            self.totals.close_trade(filled.cash / spent - 1.0);
            self.totals.wins += u32::from(filled.cash > spent);
        }
    }

    /// Buys symbol `s` at bar `t` as the sizing says (`value`: the account's value before
    /// the bar's orders), keeping `held` with the position.
    fn enter(&mut self, t: usize, s: usize, account: &Account, value: f64, held: H) {
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
        self.open[s] = Some((self.trades.len(), held));
        self.trades.push(PortfolioTrade {
            symbol: s,
            entry_bar: t,
            entry: filled,
            exit_bar: None,
            exit: None,
            reason: ExitReason::OpenAtEnd,
        });
        self.totals.trades += 1;
    }
}

/// Runs the account over every bar of `source`: its [`Totals`] (from the equity curve and
/// the closed trades, as every simulation's), and its record when `detailed`.
pub(crate) fn run<S: Source>(source: &S, account: &Account, detailed: bool) -> PortfolioRun {
    let (bars, symbols) = (source.bars(), source.symbols());
    let mut ledger = Ledger::new(account, symbols);
    let mut record = detailed.then(|| PortfolioRecord {
        equity: Vec::with_capacity(bars),
        cash: Vec::with_capacity(bars),
        positions: Vec::with_capacity(bars * symbols),
        trades: Vec::new(),
    });
    let (mut equity, mut drawdown) = (account.init_cash, Drawdown::START);
    let mut exits: Vec<(f64, usize, ExitReason)> = Vec::with_capacity(symbols);
    for t in 0..bars {
        for s in 0..symbols {
            let c = source.close(t, s);
            if !c.is_nan() {
                ledger.price[s] = c;
            }
        }
        let value = ledger.value();
        // Exits, the largest holding first: vectorbt's order by approximate value (an
        // exit's is −units·price), stable by symbol.
        exits.clear();
        for s in 0..symbols {
            if let Some((_, held)) = ledger.open[s]
                && !source.close(t, s).is_nan()
                && let Some(reason) = source.exit(t, s, &held)
            {
                exits.push((-ledger.position[s] * ledger.price[s], s, reason));
            }
        }
        exits.sort_by(|a, b| a.0.total_cmp(&b.0));
        for &(_, s, reason) in &exits {
            ledger.exit(t, s, reason, account);
        }
        for s in 0..symbols {
            if ledger.position[s] == 0.0
                && ledger.exited[s] != t
                && !source.close(t, s).is_nan()
                && let Some(held) = source.entry(t, s)
            {
                ledger.enter(t, s, account, value, held);
            }
        }
        let now = ledger.value();
        ledger.totals.add_bar(return_units(now, equity));
        // The drawdown on equity over the starting cash: the same ratios as on equity.
        drawdown.step(now / account.init_cash);
        equity = now;
        ledger.totals.held += u32::from(ledger.position.iter().any(|&u| u != 0.0));
        if let Some(record) = record.as_mut() {
            record.equity.push(now);
            record.cash.push(ledger.cash);
            record.positions.extend_from_slice(&ledger.position);
        }
    }
    let mut totals = ledger.totals;
    totals.log_equity = log_of(equity / account.init_cash);
    totals.drawdown = log_of(drawdown.worst());
    if let Some(record) = record.as_mut() {
        record.trades = ledger.trades;
    }
    PortfolioRun { totals, record }
}

#[cfg(test)]
mod tests;
