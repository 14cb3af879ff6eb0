//! The functions rules can call: the one place to add one. Each says what arguments it
//! takes and how it is built from their bound values.

use super::bound::{Bound, Op, Price, SeriesKey};
use threadx_indicators::Indicator;

/// What an argument must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arg {
    /// An optional leading `close`: the bank's indicators read the close.
    Close,
    /// A whole number ≥ 1 from numbers and parameters only.
    Period,
    /// A number from numbers and parameters only.
    Scalar,
    /// A number, per bar or not.
    Value,
    /// A condition.
    Cond,
}

/// An argument's bound value, as [`Function::build`] gets it.
#[derive(Debug)]
pub(crate) enum ArgValue {
    Period(usize),
    Value(Bound),
}

/// What a call gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gives {
    /// A number per bar, whatever its arguments.
    Series,
    /// A number, per bar when an argument is.
    Number,
    /// A condition per bar.
    Cond,
}

#[derive(Debug)]
pub(crate) struct Function {
    pub name: &'static str,
    pub args: &'static [Arg],
    pub gives: Gives,
    /// How it is written and what it is, for errors and `threadx strategy show`.
    pub usage: &'static str,
    pub help: &'static str,
    pub build: fn(Vec<ArgValue>) -> Bound,
}

fn period(args: &[ArgValue], i: usize) -> usize {
    match args[i] {
        ArgValue::Period(p) => p,
        ArgValue::Value(_) => unreachable!("checked: argument {i} is a period"),
    }
}

fn value(args: &mut [ArgValue], i: usize) -> Bound {
    match std::mem::replace(&mut args[i], ArgValue::Period(0)) {
        ArgValue::Value(v) => v,
        ArgValue::Period(_) => unreachable!("checked: argument {i} is a value"),
    }
}

/// The two values of a two-argument call.
fn pair(mut args: Vec<ArgValue>) -> (Bound, Bound) {
    (value(&mut args, 0), value(&mut args, 1))
}

fn indicator(indicator: Indicator, output: usize) -> Bound {
    Bound::series(SeriesKey::Indicator(indicator, output))
}

/// The middle band: the window mean, the same bits whatever the band width.
fn middle(period: usize) -> Bound {
    indicator(Indicator::BollingerBands { period, std: 1.0 }, 0)
}

/// `middle ± k · deviation`: the bank's band of width k, bit for bit, formed from the
/// middle band and the deviation so that memory grows with the periods, never with the
/// (period, width) pairs.
fn band(mut args: Vec<ArgValue>, op: Op) -> Bound {
    let p = period(&args, 1);
    let k = value(&mut args, 2);
    let deviation = indicator(Indicator::StdDev { period: p }, 0);
    Bound::binary(op, middle(p), Bound::binary(Op::Mul, k, deviation))
}

fn macd(args: &[ArgValue], output: usize) -> Bound {
    indicator(Indicator::Macd { fast: period(args, 1), slow: period(args, 2), signal: period(args, 3) }, output)
}

fn rolling(mut args: Vec<ArgValue>, max: bool) -> Bound {
    let p = period(&args, 1);
    Bound::series(SeriesKey::Rolling { max, period: p, source: Box::new(value(&mut args, 0)) })
}

/// a crosses above b at t: a[t] > b[t] and a[t−1] ≤ b[t−1].
fn cross(a: Bound, b: Bound) -> Bound {
    let now = Bound::binary(Op::Gt, a.clone(), b.clone());
    Bound::binary(Op::And, now, Bound::binary(Op::Le, a.ago(1), b.ago(1)))
}

const CLOSE_PERIOD: &[Arg] = &[Arg::Close, Arg::Period];
const MACD: &[Arg] = &[Arg::Close, Arg::Period, Arg::Period, Arg::Period];

/// Every function, by name.
pub(crate) const FUNCTIONS: &[Function] = &[
    Function {
        name: "sma",
        args: CLOSE_PERIOD,
        gives: Gives::Series,
        usage: "sma([close,] n)",
        help: "simple moving average of the close",
        build: |a| indicator(Indicator::Sma { period: period(&a, 1) }, 0),
    },
    Function {
        name: "ema",
        args: CLOSE_PERIOD,
        gives: Gives::Series,
        usage: "ema([close,] n)",
        help: "exponential moving average of the close (TA-Lib's, seeded with the SMA)",
        build: |a| indicator(Indicator::Ema { period: period(&a, 1) }, 0),
    },
    Function {
        name: "stddev",
        args: CLOSE_PERIOD,
        gives: Gives::Series,
        usage: "stddev([close,] n)",
        help: "rolling population standard deviation of the close",
        build: |a| indicator(Indicator::StdDev { period: period(&a, 1) }, 0),
    },
    Function {
        name: "bbands_upper",
        args: &[Arg::Close, Arg::Period, Arg::Scalar],
        gives: Gives::Series,
        usage: "bbands_upper([close,] n, k)",
        help: "Bollinger upper band: sma + k · stddev",
        build: |a| band(a, Op::Add),
    },
    Function {
        name: "bbands_middle",
        args: CLOSE_PERIOD,
        gives: Gives::Series,
        usage: "bbands_middle([close,] n)",
        help: "Bollinger middle band (the sma)",
        build: |a| middle(period(&a, 1)),
    },
    Function {
        name: "bbands_lower",
        args: &[Arg::Close, Arg::Period, Arg::Scalar],
        gives: Gives::Series,
        usage: "bbands_lower([close,] n, k)",
        help: "Bollinger lower band: sma − k · stddev",
        build: |a| band(a, Op::Sub),
    },
    Function {
        name: "trange",
        args: &[],
        gives: Gives::Series,
        usage: "trange()",
        help: "true range of the bar",
        build: |_| indicator(Indicator::TrueRange, 0),
    },
    Function {
        name: "atr",
        args: &[Arg::Period],
        gives: Gives::Series,
        usage: "atr(n)",
        help: "Wilder's average true range",
        build: |a| indicator(Indicator::Atr { period: period(&a, 0) }, 0),
    },
    Function {
        name: "rsi",
        args: CLOSE_PERIOD,
        gives: Gives::Series,
        usage: "rsi([close,] n)",
        help: "Wilder's relative strength index of the close (0 to 100)",
        build: |a| indicator(Indicator::Rsi { period: period(&a, 1) }, 0),
    },
    Function {
        name: "macd",
        args: MACD,
        gives: Gives::Series,
        usage: "macd([close,] fast, slow, signal)",
        help: "MACD line: ema(fast) − ema(slow)",
        build: |a| macd(&a, 0),
    },
    Function {
        name: "macd_signal",
        args: MACD,
        gives: Gives::Series,
        usage: "macd_signal([close,] fast, slow, signal)",
        help: "MACD signal line: ema(signal) of the MACD line",
        build: |a| macd(&a, 1),
    },
    Function {
        name: "macd_hist",
        args: MACD,
        gives: Gives::Series,
        usage: "macd_hist([close,] fast, slow, signal)",
        help: "MACD histogram: line − signal",
        build: |a| macd(&a, 2),
    },
    Function {
        name: "highest",
        args: &[Arg::Value, Arg::Period],
        gives: Gives::Series,
        usage: "highest(x, n)",
        help: "highest x of the last n bars, this one included",
        build: |a| rolling(a, true),
    },
    Function {
        name: "lowest",
        args: &[Arg::Value, Arg::Period],
        gives: Gives::Series,
        usage: "lowest(x, n)",
        help: "lowest x of the last n bars, this one included",
        build: |a| rolling(a, false),
    },
    Function {
        name: "crosses_above",
        args: &[Arg::Value, Arg::Value],
        gives: Gives::Cond,
        usage: "crosses_above(a, b)",
        help: "a > b on this bar and a ≤ b on the bar before",
        build: |a| {
            let (x, y) = pair(a);
            cross(x, y)
        },
    },
    Function {
        name: "crosses_below",
        args: &[Arg::Value, Arg::Value],
        gives: Gives::Cond,
        usage: "crosses_below(a, b)",
        help: "a < b on this bar and a ≥ b on the bar before (b crosses above a)",
        build: |a| {
            let (x, y) = pair(a);
            cross(y, x)
        },
    },
    Function {
        name: "abs",
        args: &[Arg::Value],
        gives: Gives::Number,
        usage: "abs(x)",
        help: "absolute value",
        build: |mut a| Bound::abs(value(&mut a, 0)),
    },
    Function {
        name: "min",
        args: &[Arg::Value, Arg::Value],
        gives: Gives::Number,
        usage: "min(a, b)",
        help: "the smaller of a and b (NaN if either is)",
        build: |a| {
            let (x, y) = pair(a);
            Bound::binary(Op::Min, x, y)
        },
    },
    Function {
        name: "max",
        args: &[Arg::Value, Arg::Value],
        gives: Gives::Number,
        usage: "max(a, b)",
        help: "the larger of a and b (NaN if either is)",
        build: |a| {
            let (x, y) = pair(a);
            Bound::binary(Op::Max, x, y)
        },
    },
    Function {
        name: "if",
        args: &[Arg::Cond, Arg::Value, Arg::Value],
        gives: Gives::Number,
        usage: "if(condition, a, b)",
        help: "a where the condition holds, else b",
        build: |mut a| {
            let (c, x, y) = (value(&mut a, 0), value(&mut a, 1), value(&mut a, 2));
            Bound::choose(c, x, y)
        },
    },
];

/// Named values rules can read besides parameters: the prices and `nan`.
pub(crate) fn named_value(name: &str) -> Option<Bound> {
    if name == "nan" {
        return Some(Bound::Const(f64::NAN));
    }
    Price::ALL.iter().find(|(n, _)| *n == name).map(|&(_, p)| Bound::series(SeriesKey::Price(p)))
}

/// The names [`named_value`] knows.
pub(crate) fn value_names() -> impl Iterator<Item = &'static str> + Clone {
    Price::ALL.iter().map(|(n, _)| *n).chain(["nan"])
}

pub(crate) fn function(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.name == name)
}
