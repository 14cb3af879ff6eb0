//! What an indicator is: its parameters, how it is written (`bbands:period=20,std=2`),
//! checked, named and keyed, and its values.

use crate::error::IndicatorError;
use ndarray::Array2;
use serde_json::{Value, json};
use std::fmt;
use std::mem::MaybeUninit;
use threadx_profile_store::profile_key;

/// One indicator with its parameters. Build it directly or with [`Indicator::parse`];
/// [`Indicator::check`] says whether it can run on `len` bars.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Indicator {
    Sma {
        period: usize,
    },
    Ema {
        period: usize,
    },
    /// Rolling population standard deviation.
    StdDev {
        period: usize,
    },
    /// SMA ± `std` population standard deviations; outputs middle, upper, lower.
    BollingerBands {
        period: usize,
        std: f64,
    },
    TrueRange,
    /// Wilder's average true range.
    Atr {
        period: usize,
    },
    /// Wilder's relative strength index.
    Rsi {
        period: usize,
    },
    /// Outputs macd (line), signal, hist.
    Macd {
        fast: usize,
        slow: usize,
        signal: usize,
    },
    /// Commodity channel index of the typical price (high + low + close) / 3 (TA-Lib's
    /// CCI: its deviation from its `period` mean over 0.015 mean absolute deviations).
    Cci {
        period: usize,
    },
    /// On-balance volume: the running sum of the volume, added on an up close and taken
    /// on a down close, from the first bar's volume (TA-Lib's OBV).
    Obv,
    /// Wilder's average directional index (TA-Lib's ADX); period ≥ 2.
    Adx {
        period: usize,
    },
    /// Wilder's directional indicators +DI and −DI (TA-Lib's PLUS_DI, MINUS_DI); period ≥ 2.
    PlusDi {
        period: usize,
    },
    MinusDi {
        period: usize,
    },
    /// The volume-weighted average price of each UTC day's session so far, of the typical
    /// price (high + low + close) / 3.
    Vwap,
}

/// An indicator's identity as a plain value ([`Indicator::id`]): its family and parameters.
pub type IndicatorId = (u8, [u64; 3]);

/// The names `--ind` accepts, with their parameters and defaults.
pub const INDICATOR_HELP: &str = "sma:period=20, ema:period=20, stddev:period=20, bbands:period=20,std=2, \
trange, atr:period=14, rsi:period=14, macd:fast=12,slow=26,signal=9, cci:period=14, obv, adx:period=14, plus_di:period=14, minus_di:period=14, vwap";

/// The family an indicator's batch runs in: one kernel, one dispatch, one profile name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Family {
    Sma,
    Ema,
    StdDev,
    BollingerBands,
    TrueRange,
    Atr,
    Rsi,
    Macd,
    Cci,
    Obv,
    Adx,
    PlusDi,
    MinusDi,
    Vwap,
}

impl Family {
    /// The operation name in profile keys (`bollinger_bands:{"period":20,"size":10000}`).
    pub(crate) fn op_name(self) -> &'static str {
        match self {
            Family::Sma => "sma",
            Family::Ema => "ema",
            Family::StdDev => "stddev",
            Family::BollingerBands => "bollinger_bands",
            Family::TrueRange => "true_range",
            Family::Atr => "atr",
            Family::Rsi => "rsi",
            Family::Macd => "macd",
            Family::Cci => "cci",
            Family::Obv => "obv",
            Family::Adx => "adx",
            Family::PlusDi => "plus_di",
            Family::MinusDi => "minus_di",
            Family::Vwap => "vwap",
        }
    }

    /// Whether a GPU kernel computes the family; the others run on the CPU, declined
    /// before any dispatch.
    pub(crate) fn has_gpu_kernel(self) -> bool {
        !matches!(self, Family::Cci | Family::Obv | Family::Adx | Family::PlusDi | Family::MinusDi | Family::Vwap)
    }
}

impl Indicator {
    /// Parses `name[:key=value,…]`, e.g. `bbands:period=20,std=2`, `atr:period=14`,
    /// `macd:fast=12,slow=26,signal=9`, `trange`. Left-out parameters take the defaults
    /// of [`INDICATOR_HELP`]. Checks the values but not the data length.
    pub fn parse(spec: &str) -> Result<Self, IndicatorError> {
        let (name, args) = spec.split_once(':').unwrap_or((spec, ""));
        let name = name.trim().to_ascii_lowercase();
        let mut given: Vec<(String, String)> = Vec::new();
        for part in args.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| IndicatorError::Syntax {
                spec: spec.to_owned(),
                problem: format!("`{part}` is not key=value"),
            })?;
            given.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
        let known: &[&str] = match name.as_str() {
            "sma" | "ema" | "stddev" | "atr" | "rsi" | "cci" | "adx" | "plus_di" | "minus_di" => &["period"],
            "bbands" => &["period", "std"],
            "trange" | "obv" | "vwap" => &[],
            "macd" => &["fast", "slow", "signal"],
            _ => return Err(IndicatorError::Unknown { name, known: INDICATOR_HELP }),
        };
        if let Some((k, _)) = given.iter().find(|(k, _)| !known.contains(&k.as_str())) {
            return Err(IndicatorError::UnknownParam { indicator: name, param: k.clone(), known: known.join(", ") });
        }
        if let Some((i, (k, _))) = given.iter().enumerate().find(|(i, (k, _))| given[..*i].iter().any(|(j, _)| j == k))
        {
            let values: Vec<&str> = given[..=i].iter().filter(|(j, _)| j == k).map(|(_, v)| v.as_str()).collect();
            return Err(IndicatorError::Syntax {
                spec: spec.to_owned(),
                problem: format!(
                    "{k} is given twice ({}); one spec is one indicator, so ask for each in its own",
                    values.join(" and ")
                ),
            });
        }
        let raw = |key: &str| given.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        let period = |key: &str, default: usize| -> Result<usize, IndicatorError> {
            raw(key).map_or(Ok(default), |v| {
                v.parse().map_err(|_| IndicatorError::BadValue {
                    indicator: name.clone(),
                    problem: format!("{key} `{v}` is not a whole number"),
                })
            })
        };
        let indicator = match name.as_str() {
            "sma" => Indicator::Sma { period: period("period", 20)? },
            "ema" => Indicator::Ema { period: period("period", 20)? },
            "stddev" => Indicator::StdDev { period: period("period", 20)? },
            "bbands" => {
                let std = raw("std").map_or(Ok(2.0), |v| {
                    v.parse::<f64>().map_err(|_| IndicatorError::BadValue {
                        indicator: name.clone(),
                        problem: format!("std `{v}` is not a number"),
                    })
                })?;
                Indicator::BollingerBands { period: period("period", 20)?, std }
            }
            "trange" => Indicator::TrueRange,
            "atr" => Indicator::Atr { period: period("period", 14)? },
            "rsi" => Indicator::Rsi { period: period("period", 14)? },
            "cci" => Indicator::Cci { period: period("period", 14)? },
            "obv" => Indicator::Obv,
            "vwap" => Indicator::Vwap,
            "adx" => Indicator::Adx { period: period("period", 14)? },
            "plus_di" => Indicator::PlusDi { period: period("period", 14)? },
            "minus_di" => Indicator::MinusDi { period: period("period", 14)? },
            _ => Indicator::Macd { fast: period("fast", 12)?, slow: period("slow", 26)?, signal: period("signal", 9)? },
        };
        indicator.check_params()?;
        Ok(indicator)
    }

    pub(crate) fn family(&self) -> Family {
        match self {
            Indicator::Sma { .. } => Family::Sma,
            Indicator::Ema { .. } => Family::Ema,
            Indicator::StdDev { .. } => Family::StdDev,
            Indicator::BollingerBands { .. } => Family::BollingerBands,
            Indicator::TrueRange => Family::TrueRange,
            Indicator::Atr { .. } => Family::Atr,
            Indicator::Rsi { .. } => Family::Rsi,
            Indicator::Macd { .. } => Family::Macd,
            Indicator::Cci { .. } => Family::Cci,
            Indicator::Obv => Family::Obv,
            Indicator::Adx { .. } => Family::Adx,
            Indicator::PlusDi { .. } => Family::PlusDi,
            Indicator::MinusDi { .. } => Family::MinusDi,
            Indicator::Vwap => Family::Vwap,
        }
    }

    /// The short name used in `--ind` and in column names.
    pub fn short_name(&self) -> &'static str {
        match self {
            Indicator::Sma { .. } => "sma",
            Indicator::Ema { .. } => "ema",
            Indicator::StdDev { .. } => "stddev",
            Indicator::BollingerBands { .. } => "bbands",
            Indicator::TrueRange => "trange",
            Indicator::Atr { .. } => "atr",
            Indicator::Rsi { .. } => "rsi",
            Indicator::Macd { .. } => "macd",
            Indicator::Cci { .. } => "cci",
            Indicator::Obv => "obv",
            Indicator::Adx { .. } => "adx",
            Indicator::PlusDi { .. } => "plus_di",
            Indicator::MinusDi { .. } => "minus_di",
            Indicator::Vwap => "vwap",
        }
    }

    /// The period-like parameters, each at least 1 (the main one first).
    fn periods(&self) -> Vec<(&'static str, usize)> {
        match *self {
            Indicator::Sma { period }
            | Indicator::Ema { period }
            | Indicator::StdDev { period }
            | Indicator::BollingerBands { period, .. }
            | Indicator::Atr { period }
            | Indicator::Rsi { period }
            | Indicator::Cci { period }
            | Indicator::Adx { period }
            | Indicator::PlusDi { period }
            | Indicator::MinusDi { period } => vec![("period", period)],
            Indicator::TrueRange | Indicator::Obv | Indicator::Vwap => Vec::new(),
            Indicator::Macd { fast, slow, signal } => vec![("fast", fast), ("slow", slow), ("signal", signal)],
        }
    }

    /// Checks the parameters on their own: periods ≥ 1 (and within the GPU's u32),
    /// std > 0 and finite, MACD fast < slow.
    pub fn check_params(&self) -> Result<(), IndicatorError> {
        let bad = |problem: String| IndicatorError::BadValue { indicator: self.short_name().to_owned(), problem };
        for (name, value) in self.periods() {
            if value == 0 {
                return Err(bad(format!("{name} must be at least 1, got 0")));
            }
            if u32::try_from(value).is_err() {
                return Err(bad(format!("{name} {value} is too large")));
            }
        }
        match *self {
            Indicator::BollingerBands { std, .. } if !(std.is_finite() && std > 0.0) => {
                Err(bad(format!("std must be a positive number, got {std}")))
            }
            Indicator::Macd { fast, slow, .. } if fast >= slow => {
                Err(bad(format!("fast ({fast}) must be shorter than slow ({slow})")))
            }
            Indicator::Adx { period } | Indicator::PlusDi { period } | Indicator::MinusDi { period } if period < 2 => {
                Err(bad(format!("period must be at least 2 (Wilder's smoothing), got {period}")))
            }
            _ => Ok(()),
        }
    }

    /// Checks the parameters and that `len` bars give at least one value.
    pub fn check(&self, len: usize) -> Result<(), IndicatorError> {
        self.check_params()?;
        let needed = self.lookback() + 1;
        if needed > len {
            return Err(IndicatorError::TooShort { indicator: self.label(), needed, len });
        }
        Ok(())
    }

    /// Bars before the first value (TA-Lib's lookback): values there are NaN.
    pub fn lookback(&self) -> usize {
        match *self {
            Indicator::Sma { period }
            | Indicator::Ema { period }
            | Indicator::StdDev { period }
            | Indicator::BollingerBands { period, .. }
            | Indicator::Cci { period } => period - 1,
            Indicator::Obv | Indicator::Vwap => 0,
            Indicator::TrueRange => 1,
            Indicator::Atr { period }
            | Indicator::Rsi { period }
            | Indicator::PlusDi { period }
            | Indicator::MinusDi { period } => period,
            Indicator::Adx { period } => 2 * period - 1,
            Indicator::Macd { slow, signal, .. } => slow + signal - 2,
        }
    }

    /// Names of the outputs, in the row order of [`IndicatorValues`].
    pub fn output_names(&self) -> &'static [&'static str] {
        match self {
            Indicator::BollingerBands { .. } => &["middle", "upper", "lower"],
            Indicator::Macd { .. } => &["macd", "signal", "hist"],
            _ => &["value"],
        }
    }

    /// The label of the indicator with its parameters: `bbands_20_2`, `atr_14`, `trange`.
    pub fn label(&self) -> String {
        let mut label = self.short_name().to_owned();
        for (_, value) in self.periods() {
            label.push_str(&format!("_{value}"));
        }
        if let Indicator::BollingerBands { std, .. } = self {
            label.push_str(&format!("_{std}"));
        }
        label
    }

    /// Column names of the outputs: `bbands_20_2_middle`, …, `atr_14`, `macd_12_26_9_hist`.
    pub fn columns(&self) -> Vec<String> {
        match self.output_names() {
            [_] => vec![self.label()],
            names => names.iter().map(|n| format!("{}_{n}", self.label())).collect(),
        }
    }

    /// Every parameter, normalised (`std` 2.0 and 2 are the same indicator).
    pub fn params(&self) -> Value {
        match *self {
            Indicator::BollingerBands { period, std } => json!({ "period": period, "std": std }),
            _ => Value::Object(self.periods().into_iter().map(|(k, v)| (k.to_owned(), v.into())).collect()),
        }
    }

    /// The identity of the indicator, built by the profiles' one key builder.
    pub fn key(&self) -> String {
        profile_key(self.family().op_name(), &self.params())
    }

    /// The identity of a checked indicator as a plain value to hash (equal ids, equal
    /// [`Indicator::key`]s), without building the key's text: for callers that look
    /// indicators up per row of a book.
    pub fn id(&self) -> IndicatorId {
        let p = |v: usize| v as u64;
        let family = self.family() as u8;
        match *self {
            Indicator::Sma { period }
            | Indicator::Ema { period }
            | Indicator::StdDev { period }
            | Indicator::Atr { period }
            | Indicator::Rsi { period }
            | Indicator::Cci { period }
            | Indicator::Adx { period }
            | Indicator::PlusDi { period }
            | Indicator::MinusDi { period } => (family, [p(period), 0, 0]),
            Indicator::BollingerBands { period, std } => (family, [p(period), std.to_bits(), 0]),
            Indicator::TrueRange | Indicator::Obv | Indicator::Vwap => (family, [0; 3]),
            Indicator::Macd { fast, slow, signal } => (family, [p(fast), p(slow), p(signal)]),
        }
    }

    /// The parameters that change the cost of computing it: all but the band width.
    pub(crate) fn cost_params(&self) -> Value {
        match *self {
            Indicator::BollingerBands { period, .. } => json!({ "period": period }),
            _ => self.params(),
        }
    }
}

impl fmt::Display for Indicator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// The values of one indicator over the whole series: one row per output (see
/// [`Indicator::output_names`]), one column per bar, NaN during the warm-up.
#[derive(Debug, Clone, PartialEq)]
pub struct IndicatorValues {
    indicator: Indicator,
    rows: Array2<f64>,
}

/// What debug builds put in the rows before a kernel runs: a NaN that no arithmetic
/// produces, so that a bar the kernel failed to write is caught (see [`IndicatorValues::build`]).
const UNWRITTEN: u64 = 0x7ff4_0bad_c0de_0001;

impl IndicatorValues {
    /// Values for `bars` bars: NaN in the warm-up, then what `fill` writes. `fill` gets
    /// one row per output, each `bars` long with the warm-up already written, and must
    /// write every later bar of every row. The rows are not zeroed first: for a 1M-bar
    /// series that costs as much as a cheap indicator. Debug builds (every test) check
    /// that nothing was left unwritten.
    pub(crate) fn build(indicator: Indicator, bars: usize, fill: impl FnOnce(&mut [&mut [MaybeUninit<f64>]])) -> Self {
        let outputs = indicator.output_names().len();
        let warm_up = indicator.lookback().min(bars);
        let mut buffer: Vec<f64> = Vec::with_capacity(outputs * bars);
        let mut rows: Vec<&mut [MaybeUninit<f64>]> =
            buffer.spare_capacity_mut()[..outputs * bars].chunks_mut(bars.max(1)).collect();
        for row in &mut rows {
            row[..warm_up].fill(MaybeUninit::new(f64::NAN));
            if cfg!(debug_assertions) {
                row[warm_up..].fill(MaybeUninit::new(f64::from_bits(UNWRITTEN)));
            }
        }
        fill(&mut rows);
        drop(rows);
        // SAFETY: all `outputs * bars` elements are initialised: the warm-up above and
        // the rest by `fill`, whose contract is to write every bar after the warm-up
        // (debug builds also wrote them above, and check the contract below).
        #[allow(unsafe_code)]
        unsafe {
            buffer.set_len(outputs * bars)
        };
        debug_assert!(buffer.iter().all(|v| v.to_bits() != UNWRITTEN), "{indicator}: the kernel left bars unwritten");
        let rows = Array2::from_shape_vec((outputs, bars), buffer).unwrap_or_else(|_| unreachable!("outputs × bars"));
        Self { indicator, rows }
    }

    /// The values of `indicator` over data of `bars` bars too short for its first value
    /// (its lookback reaches past the last bar): NaN everywhere. A sweep's combos that
    /// read it cannot trade; the others still run.
    pub fn unavailable(indicator: Indicator, bars: usize) -> Self {
        let outputs = indicator.output_names().len();
        Self { indicator, rows: Array2::from_elem((outputs, bars), f64::NAN) }
    }

    pub fn indicator(&self) -> &Indicator {
        &self.indicator
    }

    /// Output `i` (0 for single-output indicators) as a slice over the bars.
    pub fn output(&self, i: usize) -> &[f64] {
        self.rows.row(i).to_slice().unwrap_or_default()
    }

    /// The output called `name` (`middle`, `upper`, `lower`, `macd`, `signal`, `hist`,
    /// or `value` for single-output indicators).
    pub fn named(&self, name: &str) -> Option<&[f64]> {
        let i = self.indicator.output_names().iter().position(|n| *n == name)?;
        Some(self.output(i))
    }

    /// The single output (or the first: middle band, MACD line).
    pub fn values(&self) -> &[f64] {
        self.output(0)
    }

    /// All outputs as an (outputs × bars) array.
    pub fn rows(&self) -> &Array2<f64> {
        &self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::{Indicator, IndicatorValues};

    #[test]
    fn built_rows_hold_the_warm_up_and_what_the_kernel_wrote() {
        let values = IndicatorValues::build(Indicator::Sma { period: 3 }, 5, |rows| {
            for (t, slot) in rows[0].iter_mut().enumerate().skip(2) {
                slot.write(t as f64);
            }
        });
        assert!(values.values()[..2].iter().all(|v| v.is_nan()));
        assert_eq!(values.values()[2..], [2.0, 3.0, 4.0]);
    }

    /// The net under the kernels' promise to write every bar (debug builds, so every test).
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "left bars unwritten")]
    fn a_bar_left_unwritten_is_caught() {
        IndicatorValues::build(Indicator::Sma { period: 3 }, 5, |rows| {
            rows[0][2].write(1.0);
            rows[0][4].write(1.0);
        });
    }
}
