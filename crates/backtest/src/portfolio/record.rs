//! What a portfolio run gives: its totals and activity (the metrics' sources), and in a
//! detailed run its record: the equity, cash and positions at each bar, and the trades.

use crate::fixed::Totals;
use crate::metrics::{ExitReason, Metrics, Side};
use crate::portfolio::orders::Filled;

/// One trade of a portfolio: a symbol's position, long or short, from its entry fill to
/// its exit fill (`exit`: None while open at the last bar, its reason then `OpenAtEnd`).
/// A long's entry spent its cash and its exit received it; a short's entry received and
/// its cover spent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PortfolioTrade {
    pub symbol: usize,
    pub side: Side,
    pub entry_bar: usize,
    pub entry: Filled,
    pub exit_bar: Option<usize>,
    pub exit: Option<Filled>,
    pub reason: ExitReason,
}

impl PortfolioTrade {
    /// The cash its exit moved, or, open at the end, its units at `last_close` (its
    /// symbol's last close, no exit fee): what a trade's profit and return are measured
    /// by in every output.
    fn exit_cash(&self, last_close: f64) -> f64 {
        self.exit.map_or(self.entry.size * last_close, |x| x.cash)
    }

    /// The profit in cash (fees in both fills), an open trade's marked at `last_close`.
    pub fn profit(&self, last_close: f64) -> f64 {
        let out = self.exit_cash(last_close);
        match self.side {
            Side::Long => out - self.entry.cash,
            Side::Short => self.entry.cash - out,
        }
    }

    /// The return, an open trade's marked at `last_close`: [`trade_return`].
    pub fn return_at(&self, last_close: f64) -> f64 {
        trade_return(self.side, &self.entry, self.exit_cash(last_close))
    }

    /// The profit in cash; None while open.
    pub fn pnl(&self) -> Option<f64> {
        self.exit.map(|_| self.profit(f64::NAN))
    }

    /// The return; None while open.
    pub fn ret(&self) -> Option<f64> {
        self.exit.map(|_| self.return_at(f64::NAN))
    }
}

/// A trade's return from its entry fill and the cash its exit moved (`out`): a long's,
/// the cash received over the cash spent, minus 1 (every ThreadX trade's); a short's, its
/// profit over its cost, the units' value at the sale plus its fee (vectorbt's).
pub(crate) fn trade_return(side: Side, entry: &Filled, out: f64) -> f64 {
    match side {
        Side::Long => out / entry.cash - 1.0,
        Side::Short => (entry.cash - out) / (entry.size * entry.price + entry.fee),
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

/// A portfolio run: its totals and the account's activity (its metrics' one source)
/// and, when asked, its record.
#[derive(Debug, Clone, PartialEq)]
pub struct PortfolioRun {
    pub totals: Totals,
    pub activity: Activity,
    pub record: Option<PortfolioRecord>,
}

impl PortfolioRun {
    /// The account's metrics over `bars` bars of the clock, annualised by
    /// `bars_per_year`: every run's, its turnover and its mean positions held.
    pub fn metrics(&self, bars: usize, bars_per_year: f64) -> Metrics {
        self.activity.metrics(&self.totals, bars, bars_per_year)
    }
}

/// What a portfolio's metrics need beyond a run's [`Totals`], summed as the account
/// walks the clock: the value of every fill (units × fill price) in the order filled,
/// the equity at each close, and the symbols held at each close.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Activity {
    pub traded: f64,
    pub equity: f64,
    pub held: u64,
}

impl Activity {
    /// The metrics of `totals` over `bars` bars with the turnover (the value traded over
    /// the mean equity; NaN where that mean is not positive, an account that a leverage
    /// or a short's loss took below zero long enough, whose ratio would read as a negative
    /// turnover) and the mean positions held: the one conversion for a sweep's row, a
    /// backtest and a report.
    pub fn metrics(&self, totals: &Totals, bars: usize, bars_per_year: f64) -> Metrics {
        let n = bars.max(1) as f64;
        let mean_equity = self.equity / n;
        let turnover = if mean_equity > 0.0 { self.traded / mean_equity } else { f64::NAN };
        totals.metrics(bars, bars_per_year).with_portfolio([turnover, self.held as f64 / n])
    }
}
