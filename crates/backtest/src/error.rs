//! [`BacktestError`]: bad backtest input, named before any work.

use threadx_indicators::IndicatorError;

/// Bad backtest input, reported before any work is done.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BacktestError {
    #[error("unknown strategy `{name}` (known: {known})")]
    UnknownStrategy { name: String, known: String },
    #[error("{strategy}: unknown parameter `{param}` (known: {known})")]
    UnknownParam { strategy: String, param: String, known: String },
    #[error("parameter {param} is given twice")]
    Duplicate { param: String },
    #[error("{param}={value}: {problem}")]
    BadValue { param: String, value: String, problem: String },
    #[error("{strategy}: {problem}")]
    Combo { strategy: String, problem: String },
    #[error("parameter {param} has no values")]
    EmptyAxis { param: String },
    /// A list or range of values that does not parse.
    #[error("{0}")]
    Axis(String),
    /// A strategy file that cannot be read or is wrong (with its place, line and caret).
    #[error("{0}")]
    Definition(String),
    #[error("signals: {0}")]
    Signals(String),
    #[error("portfolio: {0}")]
    Portfolio(String),
    #[error("fee {0} is outside [0, 1) (a fraction of traded value per side, e.g. 0.001)")]
    Fee(f64),
    #[error("slippage {0} is outside [0, 1) (a fraction of the price against the trader on every fill, e.g. 0.0005)")]
    Slippage(f64),
    #[error("{strategy} with {params} needs at least {needed} bars to trade; the data has {len}")]
    TooShort { strategy: String, params: String, needed: usize, len: usize },
    #[error(transparent)]
    Indicator(#[from] IndicatorError),
}
