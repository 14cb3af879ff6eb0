//! The built-in strategies and their parameter schemas, which sweeps and the CLI check
//! values against before any work.

use crate::BacktestError;
use std::fmt;
use threadx_indicators::Indicator;

/// What values a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamKind {
    /// A whole number (periods).
    Int,
    /// A real number.
    Float,
    /// One of a few names; the value is the name's index.
    Choice(&'static [&'static str]),
}

/// One parameter of a strategy: its name, kind, default and valid range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: ParamKind,
    pub default: f64,
    pub min: f64,
    /// Whether `min` itself is refused (e.g. `atr_mult > 0`).
    pub min_exclusive: bool,
    pub max: f64,
    pub help: &'static str,
}

impl ParamSpec {
    /// Parses and checks one value given as text (`20`, `2.5`, `ema`).
    pub fn parse(&self, text: &str) -> Result<f64, BacktestError> {
        let text = text.trim();
        let bad = |problem: String| BacktestError::BadValue { param: self.name, value: text.to_owned(), problem };
        let value = match self.kind {
            ParamKind::Choice(names) => match names.iter().position(|n| n.eq_ignore_ascii_case(text)) {
                Some(i) => i as f64,
                None => return Err(bad(format!("expected one of {}", names.join(", ")))),
            },
            ParamKind::Int | ParamKind::Float => {
                text.parse::<f64>().map_err(|_| bad(format!("not a number (expected {})", self.range())))?
            }
        };
        self.check(value).map_err(|e| match e {
            BacktestError::BadValue { problem, .. } => bad(problem),
            other => other,
        })?;
        Ok(value)
    }

    /// Checks a value against the kind and range.
    pub fn check(&self, value: f64) -> Result<(), BacktestError> {
        let bad = |problem: String| BacktestError::BadValue { param: self.name, value: self.format(value), problem };
        if !value.is_finite() {
            return Err(bad("not a finite number".into()));
        }
        if matches!(self.kind, ParamKind::Int | ParamKind::Choice(_)) && value.fract() != 0.0 {
            return Err(bad("must be a whole number".into()));
        }
        let below = if self.min_exclusive { value <= self.min } else { value < self.min };
        if below || value > self.max {
            return Err(bad(format!("out of range: must be {}", self.range())));
        }
        Ok(())
    }

    /// The valid range in words, e.g. `> 0 and ≤ 100`.
    pub fn range(&self) -> String {
        match self.kind {
            ParamKind::Choice(names) => format!("one of {}", names.join(", ")),
            _ => format!("{} {} and ≤ {}", if self.min_exclusive { ">" } else { "≥" }, self.min, self.max),
        }
    }

    /// A value as every JSON writes it: whole-number parameters as integers (`20`), floats
    /// in their shortest round-trip form (`2.0`, `2.5`), choices by name (`"ema"`).
    pub fn to_json(&self, value: f64) -> serde_json::Value {
        match self.kind {
            ParamKind::Choice(_) => serde_json::json!(self.format(value)),
            ParamKind::Int => serde_json::json!(value as i64),
            ParamKind::Float => serde_json::json!(value),
        }
    }

    /// A value as the user writes it (`20`, `2.5`, `ema`).
    pub fn format(&self, value: f64) -> String {
        match self.kind {
            ParamKind::Choice(names) if value >= 0.0 && (value as usize) < names.len() => names[value as usize].into(),
            _ => format!("{value}"),
        }
    }
}

const MAX_PERIOD: f64 = 100_000.0;

const BB_ATR: [ParamSpec; 4] = [
    ParamSpec {
        name: "bb_period",
        kind: ParamKind::Int,
        default: 20.0,
        min: 2.0,
        min_exclusive: false,
        max: MAX_PERIOD,
        help: "Bollinger window (bars)",
    },
    ParamSpec {
        name: "bb_std",
        kind: ParamKind::Float,
        default: 2.0,
        min: 0.0,
        min_exclusive: true,
        max: 10.0,
        help: "band width in standard deviations",
    },
    ATR_PERIOD,
    ParamSpec {
        name: "atr_mult",
        kind: ParamKind::Float,
        default: 2.0,
        min: 0.0,
        min_exclusive: true,
        max: 100.0,
        help: "stop distance below the entry close, in ATRs at entry",
    },
];

const ATR_PERIOD: ParamSpec = ParamSpec {
    name: "atr_period",
    kind: ParamKind::Int,
    default: 14.0,
    min: 1.0,
    min_exclusive: false,
    max: MAX_PERIOD,
    help: "ATR window (bars, Wilder smoothing)",
};

const MA_CROSS: [ParamSpec; 3] = [
    ParamSpec {
        name: "ma_type",
        kind: ParamKind::Choice(&["sma", "ema"]),
        default: 0.0,
        min: 0.0,
        min_exclusive: false,
        max: 1.0,
        help: "moving average of both lines",
    },
    ParamSpec {
        name: "fast",
        kind: ParamKind::Int,
        default: 10.0,
        min: 1.0,
        min_exclusive: false,
        max: MAX_PERIOD,
        help: "fast average window (bars), < slow",
    },
    ParamSpec {
        name: "slow",
        kind: ParamKind::Int,
        default: 50.0,
        min: 2.0,
        min_exclusive: false,
        max: MAX_PERIOD,
        help: "slow average window (bars)",
    },
];

const RSI_REVERSION: [ParamSpec; 5] = [
    ParamSpec {
        name: "rsi_period",
        kind: ParamKind::Int,
        default: 14.0,
        min: 2.0,
        min_exclusive: false,
        max: MAX_PERIOD,
        help: "RSI window (bars, Wilder smoothing)",
    },
    ParamSpec {
        name: "rsi_low",
        kind: ParamKind::Float,
        default: 30.0,
        min: 0.0,
        min_exclusive: false,
        max: 100.0,
        help: "enter when RSI < rsi_low",
    },
    ParamSpec {
        name: "rsi_high",
        kind: ParamKind::Float,
        default: 70.0,
        min: 0.0,
        min_exclusive: false,
        max: 100.0,
        help: "exit when RSI > rsi_high (> rsi_low)",
    },
    ATR_PERIOD,
    ParamSpec {
        name: "atr_mult",
        kind: ParamKind::Float,
        default: 0.0,
        min: 0.0,
        min_exclusive: false,
        max: 100.0,
        help: "ATR stop as in bb_atr; 0 = no stop",
    },
];

/// The most parameters any strategy has.
pub const MAX_PARAMS: usize = 5;

/// One parameter set in schema order, held inline (no allocation); reads as a `&[f64]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamValues {
    values: [f64; MAX_PARAMS],
    len: usize,
}

impl ParamValues {
    /// # Panics
    /// If `values` has more than [`MAX_PARAMS`] entries.
    pub fn new(values: &[f64]) -> Self {
        let mut inline = [0.0; MAX_PARAMS];
        inline[..values.len()].copy_from_slice(values);
        Self { values: inline, len: values.len() }
    }
}

impl std::ops::Deref for ParamValues {
    type Target = [f64];
    fn deref(&self) -> &[f64] {
        &self.values[..self.len]
    }
}

/// A built-in strategy. All are long-only, one position at a time, all cash in, filled at
/// the close, with the fee, equity and metric rules of docs/strategies.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Enter when close < lower Bollinger band; exit when close > middle band or at the
    /// ATR stop frozen at entry.
    BbAtr,
    /// Enter when the fast average crosses above the slow one; exit when it crosses below.
    MaCross,
    /// Enter when RSI < rsi_low; exit when RSI > rsi_high or at the optional ATR stop.
    RsiReversion,
}

impl Strategy {
    pub const ALL: [Strategy; 3] = [Strategy::BbAtr, Strategy::MaCross, Strategy::RsiReversion];

    /// The strategy called `name` (`bb_atr`, `ma_cross`, `rsi_reversion`).
    pub fn parse(name: &str) -> Result<Self, BacktestError> {
        Self::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| BacktestError::UnknownStrategy { name: name.to_owned(), known: Self::known() })
    }

    fn known() -> String {
        Self::ALL.map(|s| s.name()).join(", ")
    }

    pub fn name(self) -> &'static str {
        match self {
            Strategy::BbAtr => "bb_atr",
            Strategy::MaCross => "ma_cross",
            Strategy::RsiReversion => "rsi_reversion",
        }
    }

    /// The parameters, in combo order (the last varies fastest in a grid).
    pub fn schema(self) -> &'static [ParamSpec] {
        match self {
            Strategy::BbAtr => &BB_ATR,
            Strategy::MaCross => &MA_CROSS,
            Strategy::RsiReversion => &RSI_REVERSION,
        }
    }

    /// The position of parameter `name` in [`Strategy::schema`].
    pub fn param_index(self, name: &str) -> Result<usize, BacktestError> {
        self.schema().iter().position(|p| p.name == name.trim()).ok_or_else(|| BacktestError::UnknownParam {
            strategy: self.name(),
            param: name.to_owned(),
            known: self.schema().iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
        })
    }

    /// Parameter values in schema order from `name=value` pairs; unnamed ones take their
    /// default. Every value and the combination are checked.
    pub fn params<S: AsRef<str>>(self, pairs: &[(S, S)]) -> Result<Vec<f64>, BacktestError> {
        let mut values: Vec<f64> = self.schema().iter().map(|p| p.default).collect();
        let mut seen = vec![false; values.len()];
        for (name, text) in pairs {
            let i = self.param_index(name.as_ref())?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(BacktestError::Duplicate { param: self.schema()[i].name });
            }
            values[i] = self.schema()[i].parse(text.as_ref())?;
        }
        self.check(&values)?;
        Ok(values)
    }

    /// Checks a full set of values (schema order): each against its range, then the rules
    /// between them (ma_cross: fast < slow; rsi_reversion: rsi_low < rsi_high).
    pub fn check(self, values: &[f64]) -> Result<(), BacktestError> {
        let schema = self.schema();
        if values.len() != schema.len() {
            return Err(BacktestError::Combo {
                strategy: self.name(),
                problem: format!("{} values given for {} parameters", values.len(), schema.len()),
            });
        }
        for (spec, &v) in schema.iter().zip(values) {
            spec.check(v)?;
        }
        if self.allows(values) {
            return Ok(());
        }
        let problem = match self {
            Strategy::MaCross => format!("fast ({}) must be shorter than slow ({})", values[1], values[2]),
            _ => format!("rsi_low ({}) must be below rsi_high ({})", values[1], values[2]),
        };
        Err(BacktestError::Combo { strategy: self.name(), problem })
    }

    /// Whether in-range values (schema order) obey the rules between parameters
    /// (ma_cross: fast < slow; rsi_reversion: rsi_low < rsi_high). Allocation-free: a
    /// sweep asks it per combo and skips the combos it refuses.
    pub fn allows(self, values: &[f64]) -> bool {
        match self {
            Strategy::BbAtr => true,
            Strategy::MaCross | Strategy::RsiReversion => values[1] < values[2],
        }
    }

    /// The first bar on which a parameter set may enter: the first bar where every
    /// indicator it reads exists (and, for crossings, the bar before it too). Does not
    /// allocate: sweeps call it per combo.
    pub fn warmup(self, values: &[f64]) -> usize {
        let period = |v: f64| v as usize;
        let atr = |v: f64| Indicator::Atr { period: period(v) }.lookback();
        match self {
            Strategy::BbAtr => {
                Indicator::BollingerBands { period: period(values[0]), std: values[1] }.lookback().max(atr(values[2]))
            }
            Strategy::MaCross => {
                ma(values[0], period(values[1])).lookback().max(ma(values[0], period(values[2])).lookback()) + 1
            }
            Strategy::RsiReversion => {
                let rsi = Indicator::Rsi { period: period(values[0]) }.lookback();
                if values[4] > 0.0 { rsi.max(atr(values[3])) } else { rsi }
            }
        }
    }

    /// `name=value` pairs of a parameter set, as the user writes them.
    pub fn describe(self, values: &[f64]) -> String {
        self.schema()
            .iter()
            .zip(values)
            .map(|(p, &v)| format!("{}={}", p.name, p.format(v)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The moving average of `ma_type` (0 = SMA, 1 = EMA).
pub(crate) fn ma(ma_type: f64, period: usize) -> Indicator {
    if ma_type == 0.0 { Indicator::Sma { period } } else { Indicator::Ema { period } }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Checks a fee (fraction of traded value per side).
pub fn check_fee(fee: f64) -> Result<(), BacktestError> {
    if (0.0..1.0).contains(&fee) { Ok(()) } else { Err(BacktestError::Fee(fee)) }
}

/// Every strategy with its parameters, defaults and ranges, for `--help` texts.
pub fn strategy_help() -> String {
    Strategy::ALL
        .iter()
        .map(|s| {
            let params: String = s
                .schema()
                .iter()
                .map(|p| format!("\n  {}={}  {}; {}", p.name, p.format(p.default), p.help, p.range()))
                .collect();
            format!("{}:{params}", s.name())
        })
        .collect::<Vec<_>>()
        .join("\n")
}
