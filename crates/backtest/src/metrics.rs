//! Per-combo metrics and the trades of a single backtest (definitions in docs/strategies.md).

use serde::{Deserialize, Serialize};
use std::fmt;

/// What one combo achieved. Equity starts at 1 and is marked to market at every close.
/// In JSON (serde, both ways) the counts are integers and a NaN is null.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Metrics {
    /// E[N−1] / E[−1] − 1.
    #[serde(deserialize_with = "null_as_nan")]
    pub total_return: f64,
    /// Entries, an open position at the end included.
    pub trades: u32,
    pub closed_trades: u32,
    /// Fraction of closed trades that ended above their entry cash; NaN without one.
    #[serde(deserialize_with = "null_as_nan")]
    pub win_rate: f64,
    /// min over t of E[t] / max(E[0..=t]) − 1 (≤ 0).
    #[serde(deserialize_with = "null_as_nan")]
    pub max_drawdown: f64,
    /// mean(r) / std(r, ddof = 1) of the per-bar returns, not annualised; NaN when flat.
    #[serde(deserialize_with = "null_as_nan")]
    pub sharpe: f64,
    /// `sharpe · √(bars per year)`: the annualised Sharpe ratio.
    #[serde(deserialize_with = "null_as_nan")]
    pub sharpe_annual: f64,
    /// Fraction of bars that end in a position.
    #[serde(deserialize_with = "null_as_nan")]
    pub exposure: f64,
    /// Compound annual growth: (1 + total_return)^(bars per year / bars) − 1.
    #[serde(default = "nan", deserialize_with = "null_as_nan")]
    pub cagr: f64,
    /// std(r, ddof = 1) of the per-bar returns · √(bars per year): annual volatility.
    #[serde(default = "nan", deserialize_with = "null_as_nan")]
    pub volatility: f64,
    /// mean(r) / √(Σ min(r, 0)² / N) · √(bars per year): quantstats' annual Sortino
    /// ratio; NaN without a falling bar.
    #[serde(default = "nan", deserialize_with = "null_as_nan")]
    pub sortino: f64,
    /// cagr / |max_drawdown|; NaN without a drawdown.
    #[serde(default = "nan", deserialize_with = "null_as_nan")]
    pub calmar: f64,
    /// Σ of the closed trades' gains over Σ of their losses; NaN without a losing trade.
    #[serde(default = "nan", deserialize_with = "null_as_nan")]
    pub profit_factor: f64,
    /// Mean return of a closed trade; NaN without one.
    #[serde(default = "nan", deserialize_with = "null_as_nan")]
    pub expectancy: f64,
    /// System quality number: √(closed trades) · mean / std (ddof = 1) of the closed
    /// trades' returns; NaN under two closed trades.
    #[serde(default = "nan", deserialize_with = "null_as_nan")]
    pub sqn: f64,
    /// A portfolio's: the value bought and sold (units × fill price, every fill) over
    /// the mean equity; NaN (and left out of JSON) for a single run.
    #[serde(default = "nan", deserialize_with = "null_as_nan", skip_serializing_if = "is_nan")]
    pub turnover: f64,
    /// A portfolio's: the symbols held at a bar's close, on average over the bars; NaN
    /// (and left out of JSON) for a single run.
    #[serde(default = "nan", deserialize_with = "null_as_nan", skip_serializing_if = "is_nan")]
    pub mean_positions: f64,
}

impl Metrics {
    /// Names as they appear in results files and JSON, in [`Metrics::values`] order.
    pub const NAMES: [&'static str; 15] = [
        "total_return",
        "trades",
        "closed_trades",
        "win_rate",
        "max_drawdown",
        "sharpe",
        "sharpe_annual",
        "exposure",
        "cagr",
        "volatility",
        "sortino",
        "calmar",
        "profit_factor",
        "expectancy",
        "sqn",
    ];

    /// The metrics compact tables show (the terminal's best list, the report's): the
    /// first eight; a table ranked by another adds that one.
    pub const HEADLINE: &'static [&'static str] = Self::NAMES.split_at(8).0;

    /// What each of [`Metrics::NAMES`] means, for `--help`.
    pub const HELP: [&'static str; 15] = [
        "equity at the end over equity at the start, minus 1",
        "entries, a position open at the end included",
        "trades that exited",
        "fraction of closed trades that gained",
        "deepest fall of equity from its running peak (≤ 0)",
        "mean over standard deviation of the per-bar returns (per bar, not annualised)",
        "sharpe × √(bars per year): annualised",
        "fraction of bars that end in a position",
        "compound annual growth rate",
        "annual volatility: standard deviation of the per-bar returns × √(bars per year)",
        "annual Sortino ratio: mean over downside deviation of the per-bar returns",
        "cagr over the max drawdown's depth",
        "closed trades' gains over their losses",
        "mean return of a closed trade",
        "system quality number: √(closed trades) × mean over std of their returns",
    ];

    /// A portfolio's metrics beyond every run's, in the columns after them
    /// ([`MetricSet::Portfolio`]).
    pub const PORTFOLIO: [&'static str; 2] = ["turnover", "mean_positions"];

    /// What each of [`Metrics::PORTFOLIO`] means, for `--help`.
    pub const PORTFOLIO_HELP: [&'static str; 2] = [
        "a portfolio's: value bought and sold over the mean equity",
        "a portfolio's: symbols held at a bar's close, on average",
    ];

    /// The metrics of a combo that cannot trade (the data is shorter than its indicators
    /// need): no trade, every other value NaN (an empty cell), so that no ranking takes it.
    pub fn empty() -> Self {
        Self {
            total_return: f64::NAN,
            trades: 0,
            closed_trades: 0,
            win_rate: f64::NAN,
            max_drawdown: f64::NAN,
            sharpe: f64::NAN,
            sharpe_annual: f64::NAN,
            exposure: f64::NAN,
            cagr: f64::NAN,
            volatility: f64::NAN,
            sortino: f64::NAN,
            calmar: f64::NAN,
            profit_factor: f64::NAN,
            expectancy: f64::NAN,
            sqn: f64::NAN,
            turnover: f64::NAN,
            mean_positions: f64::NAN,
        }
    }

    /// Metrics from their [`Metrics::values`] (the counts as whole numbers).
    pub fn from_values(m: [f64; 15]) -> Self {
        Self {
            total_return: m[0],
            trades: m[1] as u32,
            closed_trades: m[2] as u32,
            win_rate: m[3],
            max_drawdown: m[4],
            sharpe: m[5],
            sharpe_annual: m[6],
            exposure: m[7],
            cagr: m[8],
            volatility: m[9],
            sortino: m[10],
            calmar: m[11],
            profit_factor: m[12],
            expectancy: m[13],
            sqn: m[14],
            turnover: f64::NAN,
            mean_positions: f64::NAN,
        }
    }

    /// Every metric's name, [`Metrics::at`]'s order: every run's ([`Metrics::NAMES`]),
    /// then a portfolio's ([`Metrics::PORTFOLIO`]).
    pub const EVERY: [&'static str; 17] = ALL_NAMES;

    /// Metric `i` of [`Metrics::EVERY`].
    pub fn at(&self, i: usize) -> f64 {
        MetricSet::values(self)[i]
    }

    /// A portfolio's metrics, in [`Metrics::PORTFOLIO`] order.
    pub fn portfolio_values(&self) -> [f64; 2] {
        [self.turnover, self.mean_positions]
    }

    /// These metrics with a portfolio's `[turnover, mean_positions]`.
    pub fn with_portfolio(self, [turnover, mean_positions]: [f64; 2]) -> Self {
        Self { turnover, mean_positions, ..self }
    }

    pub fn values(&self) -> [f64; 15] {
        [
            self.total_return,
            self.trades.into(),
            self.closed_trades.into(),
            self.win_rate,
            self.max_drawdown,
            self.sharpe,
            self.sharpe_annual,
            self.exposure,
            self.cagr,
            self.volatility,
            self.sortino,
            self.calmar,
            self.profit_factor,
            self.expectancy,
            self.sqn,
        ]
    }

    /// Every metric by its name, as results JSON writes them: counts as integers, NaN
    /// (no closed trade, flat equity) as null.
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        }
    }

    /// Whether metric `name` is a fraction that reads as a percentage (a return, a rate,
    /// a share of bars), not a ratio or a count.
    pub fn is_fraction(name: &str) -> bool {
        matches!(name, "total_return" | "win_rate" | "max_drawdown" | "exposure" | "cagr" | "volatility" | "expectancy")
    }

    /// The metric called `name`, if there is one (a portfolio's too).
    pub fn get(&self, name: &str) -> Option<f64> {
        match name {
            "turnover" => Some(self.turnover),
            "mean_positions" => Some(self.mean_positions),
            _ => Self::NAMES.iter().position(|n| *n == name).map(|i| self.values()[i]),
        }
    }
}

/// Every metric compared as f64s, but a portfolio's two where both are NaN (a single
/// run has neither): equal.
impl PartialEq for Metrics {
    fn eq(&self, other: &Self) -> bool {
        let same = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
        self.values() == other.values()
            && same(self.turnover, other.turnover)
            && same(self.mean_positions, other.mean_positions)
    }
}

/// Which metrics a table's rows carry: every run's ([`Metrics::NAMES`]), or a
/// portfolio's, [`Metrics::PORTFOLIO`] after them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetricSet {
    #[default]
    Run,
    Portfolio,
}

impl MetricSet {
    /// The metrics' names, in their columns' order.
    pub fn names(self) -> &'static [&'static str] {
        &ALL_NAMES[..self.count()]
    }

    /// How many metrics a row carries.
    pub const fn count(self) -> usize {
        match self {
            Self::Run => Metrics::NAMES.len(),
            Self::Portfolio => ALL_NAMES.len(),
        }
    }

    /// The values of `m`, every metric's: the first [`MetricSet::count`] are this set's.
    pub fn values(m: &Metrics) -> [f64; ALL_NAMES.len()] {
        let v = m.values();
        std::array::from_fn(|i| if i < v.len() { v[i] } else { m.portfolio_values()[i - v.len()] })
    }

    /// Metrics from this set's values, in [`MetricSet::names`] order.
    pub fn metrics(self, values: &[f64]) -> Metrics {
        let m = Metrics::from_values(std::array::from_fn(|i| values[i]));
        match self {
            Self::Run => m,
            Self::Portfolio => m.with_portfolio([values[15], values[16]]),
        }
    }
}

/// Every metric's name: every run's, then a portfolio's ([`Metrics::at`] reads them).
const ALL_NAMES: [&str; 17] = {
    let mut names = [""; 17];
    let mut i = 0;
    while i < 17 {
        names[i] = if i < 15 { Metrics::NAMES[i] } else { Metrics::PORTFOLIO[i - 15] };
        i += 1;
    }
    names
};

/// The most metrics a row carries.
pub const MOST_METRICS: usize = ALL_NAMES.len();

/// What a run sums up, in f64: every metric's one definition (docs/strategies.md), for
/// the integer totals of every device ([`crate::fixed::Totals::metrics`]) and for the f64
/// oracles alike. Returns r are per bar (N bars, E[−1] = 1); trade returns are those of
/// the closed trades.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunSums {
    pub total_return: f64,
    pub max_drawdown: f64,
    pub trades: u32,
    pub closed: u32,
    pub wins: u32,
    /// Bars that end in a position.
    pub held: usize,
    pub bars: usize,
    pub bars_per_year: f64,
    /// Σr, Σr² and Σ min(r, 0)² over the bars.
    pub sum: f64,
    pub sum_sq: f64,
    pub down_sq: f64,
    /// Σ of the trade returns, of their squares, and of the positive ones.
    pub trade_sum: f64,
    pub trade_sq: f64,
    pub trade_gain: f64,
}

impl RunSums {
    pub(crate) fn metrics(&self) -> Metrics {
        let n = self.bars as f64;
        let closed = f64::from(self.closed);
        let per_year = self.bars_per_year.sqrt();
        let sharpe = threadx_stats::sharpe(self.sum, self.sum_sq, self.bars);
        let cagr = libm::expm1(libm::log1p(self.total_return) * self.bars_per_year / n);
        let mean = self.sum / n;
        let volatility =
            if self.bars < 2 { f64::NAN } else { ((self.sum_sq - self.sum * mean) / (n - 1.0)).max(0.0).sqrt() };
        let losses = self.trade_gain - self.trade_sum;
        let positive = |x: f64| x > 0.0;
        Metrics {
            total_return: self.total_return,
            trades: self.trades,
            closed_trades: self.closed,
            win_rate: if self.closed > 0 { f64::from(self.wins) / closed } else { f64::NAN },
            max_drawdown: self.max_drawdown,
            sharpe,
            sharpe_annual: sharpe * per_year,
            exposure: if self.bars > 0 { self.held as f64 / n } else { f64::NAN },
            cagr,
            volatility: volatility * per_year,
            sortino: if positive(self.down_sq) { mean / (self.down_sq / n).sqrt() * per_year } else { f64::NAN },
            calmar: if self.max_drawdown < 0.0 { cagr / -self.max_drawdown } else { f64::NAN },
            profit_factor: if positive(losses) { self.trade_gain / losses } else { f64::NAN },
            expectancy: if self.closed > 0 { self.trade_sum / closed } else { f64::NAN },
            sqn: threadx_stats::sharpe(self.trade_sum, self.trade_sq, self.closed as usize) * closed.sqrt(),
            turnover: f64::NAN,
            mean_positions: f64::NAN,
        }
    }
}

fn nan() -> f64 {
    f64::NAN
}

fn is_nan(v: &f64) -> bool {
    v.is_nan()
}

/// Reads a JSON null (how serde_json writes a NaN) as NaN, a number as itself.
pub fn null_as_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Option::<f64>::deserialize(d).map(|v| v.unwrap_or(f64::NAN))
}

/// Why a trade ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReason {
    /// The strategy's exit rule fired.
    Signal,
    /// The price reached the stop level (a long's at or below it, a short's at or above).
    Stop,
    /// The price reached the trailing stop's level.
    Trail,
    /// The price reached the take-profit level.
    TakeProfit,
    /// The trade lasted `max_bars` bars.
    MaxBars,
    /// An entry of the other side reversed the position.
    Reverse,
    /// Still open after the last bar (valued at the last close).
    OpenAtEnd,
}

impl ExitReason {
    pub fn name(self) -> &'static str {
        match self {
            ExitReason::Signal => "signal",
            ExitReason::Stop => "stop",
            ExitReason::Trail => "trail",
            ExitReason::TakeProfit => "take_profit",
            ExitReason::MaxBars => "max_bars",
            ExitReason::Reverse => "reverse",
            ExitReason::OpenAtEnd => "end",
        }
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which way a position faces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Long,
    Short,
}

impl Side {
    /// The other side: what a reversal opens.
    pub fn opposite(self) -> Side {
        match self {
            Side::Long => Side::Short,
            Side::Short => Side::Long,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Side::Long => "long",
            Side::Short => "short",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One trade of a single backtest, with its fill prices (slippage not included: the
/// prices the fills were at).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Trade {
    pub side: Side,
    pub entry_bar: usize,
    /// The exit bar, or the last bar for a position open at the end.
    pub exit_bar: usize,
    /// Epoch milliseconds.
    pub entry_time: i64,
    pub exit_time: i64,
    pub entry_price: f64,
    pub exit_price: f64,
    /// Equity after the trade over equity before it, minus 1 (fees on both sides; for an
    /// open trade, marked at the last close without an exit fee).
    pub return_: f64,
    pub reason: ExitReason,
}
