//! Per-combo metrics and the trades of a single backtest (definitions in docs/strategies.md).

use serde::{Deserialize, Serialize};
use std::fmt;

/// What one combo achieved. Equity starts at 1 and is marked to market at every close.
/// In JSON (serde, both ways) the counts are integers and a NaN is null.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
}

impl Metrics {
    /// Names as they appear in results files and JSON, in [`Metrics::values`] order.
    pub const NAMES: [&'static str; 8] =
        ["total_return", "trades", "closed_trades", "win_rate", "max_drawdown", "sharpe", "sharpe_annual", "exposure"];

    /// What each of [`Metrics::NAMES`] means, for `--help`.
    pub const HELP: [&'static str; 8] = [
        "equity at the end over equity at the start, minus 1",
        "entries, a position open at the end included",
        "trades that exited",
        "fraction of closed trades that gained",
        "deepest fall of equity from its running peak (≤ 0)",
        "mean over standard deviation of the per-bar returns (per bar, not annualised)",
        "sharpe × √(bars per year): annualised",
        "fraction of bars that end in a position",
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
        }
    }

    /// Metrics from their [`Metrics::values`] (the counts as whole numbers).
    pub fn from_values(m: [f64; 8]) -> Self {
        Self {
            total_return: m[0],
            trades: m[1] as u32,
            closed_trades: m[2] as u32,
            win_rate: m[3],
            max_drawdown: m[4],
            sharpe: m[5],
            sharpe_annual: m[6],
            exposure: m[7],
        }
    }

    pub fn values(&self) -> [f64; 8] {
        [
            self.total_return,
            self.trades.into(),
            self.closed_trades.into(),
            self.win_rate,
            self.max_drawdown,
            self.sharpe,
            self.sharpe_annual,
            self.exposure,
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

    /// The metric called `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<f64> {
        Self::NAMES.iter().position(|n| *n == name).map(|i| self.values()[i])
    }
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
