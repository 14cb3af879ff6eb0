//! The functions rules can call: the one place to add one. Each says what arguments it
//! takes and how it is built from their bound values.

use super::bound::{Bound, Op, Price, SeriesKey};
use threadx_indicators::Indicator;

/// What an argument must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arg {
    /// An optional leading series the indicator reads: the close when left out.
    Source,
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

fn price(price: Price) -> Bound {
    Bound::series(SeriesKey::Price(price))
}

/// The series a call reads when its leading series is left out.
pub(crate) fn close() -> Bound {
    price(Price::Close)
}

/// Output `output` of `indicator` of `source`: on the close (or the close some bars ago)
/// the bank's series, shared by every rule that reads it; on any other series, the
/// indicator of that series.
fn of(source: Bound, indicator: Indicator, output: usize) -> Bound {
    match source {
        Bound::Series(key, ago) if *key == SeriesKey::Price(Price::Close) => {
            Bound::Series(Box::new(SeriesKey::Indicator(indicator, output)), ago)
        }
        source => Bound::series(SeriesKey::Derived { indicator, output, source: Box::new(source) }),
    }
}

/// `of` the call's leading series (argument 0).
fn of_source(mut args: Vec<ArgValue>, indicator: Indicator, output: usize) -> Bound {
    of(value(&mut args, 0), indicator, output)
}

/// The middle band: the window mean, the same bits whatever the band width.
fn middle(source: Bound, period: usize) -> Bound {
    of(source, Indicator::BollingerBands { period, std: 1.0 }, 0)
}

/// `middle ± k · deviation`: the bank's band of width k, bit for bit, formed from the
/// middle band and the deviation so that memory grows with the periods, never with the
/// (period, width) pairs.
fn band(mut args: Vec<ArgValue>, op: Op) -> Bound {
    let p = period(&args, 1);
    let k = value(&mut args, 2);
    let source = value(&mut args, 0);
    let deviation = of(source.clone(), Indicator::StdDev { period: p }, 0);
    Bound::binary(op, middle(source, p), Bound::binary(Op::Mul, k, deviation))
}

fn macd(args: Vec<ArgValue>, output: usize) -> Bound {
    let macd = Indicator::Macd { fast: period(&args, 1), slow: period(&args, 2), signal: period(&args, 3) };
    of_source(args, macd, output)
}

fn rolling(mut args: Vec<ArgValue>, max: bool) -> Bound {
    let p = period(&args, 1);
    Bound::series(SeriesKey::Rolling { max, period: p, source: Box::new(value(&mut args, 0)) })
}

/// `(x − lowest(low, n)) / ((highest(high, n) − lowest(low, n)) / scale)`, 0 where the
/// range is 0 (TA-Lib's stochastic %K with `x` the close and scale 100; Williams' %R is
/// the same form from the high, with scale −100), written in TA-Lib's operations.
fn range_position(n: usize, from_high: bool, scale: f64) -> Bound {
    let extreme =
        |max: bool, p: Price| Bound::series(SeriesKey::Rolling { max, period: n, source: Box::new(price(p)) });
    let (high, low) = (extreme(true, Price::High), extreme(false, Price::Low));
    let range = Bound::binary(Op::Div, Bound::binary(Op::Sub, high.clone(), low.clone()), Bound::Const(scale));
    let part = if from_high { Bound::binary(Op::Sub, high, close()) } else { Bound::binary(Op::Sub, close(), low) };
    // A range still in warm-up (NaN) is `!= 0`: the value is NaN there, as TA-Lib's none.
    let nonzero = Bound::binary(Op::Ne, range.clone(), Bound::Const(0.0));
    Bound::choose(nonzero, Bound::binary(Op::Div, part, range), Bound::Const(0.0))
}

/// TA-Lib's STOCH (its moving averages simple): output 0 slow %K, the `slowk`-bar mean of
/// %K over `fastk` bars; output 1 slow %D, the `slowd`-bar mean of slow %K. Both start
/// where slow %D does, as TA-Lib aligns them.
fn stoch(args: &[ArgValue], output: usize) -> Bound {
    let (fastk, slowk, slowd) = (period(args, 0), period(args, 1), period(args, 2));
    let slow_k = of(range_position(fastk, false, 100.0), Indicator::Sma { period: slowk }, 0);
    let slow_d = of(slow_k.clone(), Indicator::Sma { period: slowd }, 0);
    if output == 1 {
        return slow_d;
    }
    let started = Bound::binary(Op::Eq, slow_d.clone(), slow_d);
    Bound::choose(started, slow_k, Bound::Const(f64::NAN))
}

/// Keltner channel: the `n`-bar EMA of the close ± k ATRs of `n` bars.
fn keltner(args: &[ArgValue], k: Option<(Bound, Op)>) -> Bound {
    let n = period(args, 0);
    let middle = indicator(Indicator::Ema { period: n }, 0);
    match k {
        None => middle,
        Some((k, op)) => {
            Bound::binary(op, middle, Bound::binary(Op::Mul, k, indicator(Indicator::Atr { period: n }, 0)))
        }
    }
}

/// a crosses above b at t: a[t] > b[t] and a[t−1] ≤ b[t−1].
fn cross(a: Bound, b: Bound) -> Bound {
    let now = Bound::binary(Op::Gt, a.clone(), b.clone());
    Bound::binary(Op::And, now, Bound::binary(Op::Le, a.ago(1), b.ago(1)))
}

const SOURCE_PERIOD: &[Arg] = &[Arg::Source, Arg::Period];
const MACD: &[Arg] = &[Arg::Source, Arg::Period, Arg::Period, Arg::Period];
const STOCH: &[Arg] = &[Arg::Period, Arg::Period, Arg::Period];

/// Every function, by name.
pub(crate) const FUNCTIONS: &[Function] = &[
    Function {
        name: "sma",
        args: SOURCE_PERIOD,
        gives: Gives::Series,
        usage: "sma([x,] n)",
        help: "simple moving average of x (any series; the close when left out)",
        build: |a| {
            let n = period(&a, 1);
            of_source(a, Indicator::Sma { period: n }, 0)
        },
    },
    Function {
        name: "ema",
        args: SOURCE_PERIOD,
        gives: Gives::Series,
        usage: "ema([x,] n)",
        help: "exponential moving average of x (TA-Lib's, seeded with the SMA; the close when left out)",
        build: |a| {
            let n = period(&a, 1);
            of_source(a, Indicator::Ema { period: n }, 0)
        },
    },
    Function {
        name: "stddev",
        args: SOURCE_PERIOD,
        gives: Gives::Series,
        usage: "stddev([x,] n)",
        help: "rolling population standard deviation of x (the close when left out)",
        build: |a| {
            let n = period(&a, 1);
            of_source(a, Indicator::StdDev { period: n }, 0)
        },
    },
    Function {
        name: "bbands_upper",
        args: &[Arg::Source, Arg::Period, Arg::Scalar],
        gives: Gives::Series,
        usage: "bbands_upper([x,] n, k)",
        help: "Bollinger upper band: sma + k · stddev",
        build: |a| band(a, Op::Add),
    },
    Function {
        name: "bbands_middle",
        args: SOURCE_PERIOD,
        gives: Gives::Series,
        usage: "bbands_middle([x,] n)",
        help: "Bollinger middle band (the sma)",
        build: |mut a| {
            let n = period(&a, 1);
            middle(value(&mut a, 0), n)
        },
    },
    Function {
        name: "bbands_lower",
        args: &[Arg::Source, Arg::Period, Arg::Scalar],
        gives: Gives::Series,
        usage: "bbands_lower([x,] n, k)",
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
        args: SOURCE_PERIOD,
        gives: Gives::Series,
        usage: "rsi([x,] n)",
        help: "Wilder's relative strength index of x (0 to 100; the close when left out)",
        build: |a| {
            let n = period(&a, 1);
            of_source(a, Indicator::Rsi { period: n }, 0)
        },
    },
    Function {
        name: "macd",
        args: MACD,
        gives: Gives::Series,
        usage: "macd([x,] fast, slow, signal)",
        help: "MACD line: ema(fast) − ema(slow)",
        build: |a| macd(a, 0),
    },
    Function {
        name: "macd_signal",
        args: MACD,
        gives: Gives::Series,
        usage: "macd_signal([x,] fast, slow, signal)",
        help: "MACD signal line: ema(signal) of the MACD line",
        build: |a| macd(a, 1),
    },
    Function {
        name: "macd_hist",
        args: MACD,
        gives: Gives::Series,
        usage: "macd_hist([x,] fast, slow, signal)",
        help: "MACD histogram: line − signal",
        build: |a| macd(a, 2),
    },
    Function {
        name: "cci",
        args: &[Arg::Period],
        gives: Gives::Series,
        usage: "cci(n)",
        help: "commodity channel index of the typical price (high + low + close) / 3 (TA-Lib's CCI)",
        build: |a| indicator(Indicator::Cci { period: period(&a, 0) }, 0),
    },
    Function {
        name: "adx",
        args: &[Arg::Period],
        gives: Gives::Series,
        usage: "adx(n)",
        help: "Wilder's average directional index (0 to 100; TA-Lib's ADX, n ≥ 2)",
        build: |a| indicator(Indicator::Adx { period: period(&a, 0) }, 0),
    },
    Function {
        name: "plus_di",
        args: &[Arg::Period],
        gives: Gives::Series,
        usage: "plus_di(n)",
        help: "Wilder's +DI (TA-Lib's PLUS_DI, n ≥ 2)",
        build: |a| indicator(Indicator::PlusDi { period: period(&a, 0) }, 0),
    },
    Function {
        name: "minus_di",
        args: &[Arg::Period],
        gives: Gives::Series,
        usage: "minus_di(n)",
        help: "Wilder's −DI (TA-Lib's MINUS_DI, n ≥ 2)",
        build: |a| indicator(Indicator::MinusDi { period: period(&a, 0) }, 0),
    },
    Function {
        name: "willr",
        args: &[Arg::Period],
        gives: Gives::Series,
        usage: "willr(n)",
        help: "Williams' %R over n bars (−100 to 0; TA-Lib's WILLR)",
        build: |a| range_position(period(&a, 0), true, -100.0),
    },
    Function {
        name: "stoch_k",
        args: STOCH,
        gives: Gives::Series,
        usage: "stoch_k(fastk, slowk, slowd)",
        help: "stochastic slow %K (0 to 100; TA-Lib's STOCH with simple averages)",
        build: |a| stoch(&a, 0),
    },
    Function {
        name: "stoch_d",
        args: STOCH,
        gives: Gives::Series,
        usage: "stoch_d(fastk, slowk, slowd)",
        help: "stochastic slow %D: the slowd-bar mean of slow %K",
        build: |a| stoch(&a, 1),
    },
    Function {
        name: "obv",
        args: &[],
        gives: Gives::Series,
        usage: "obv()",
        help: "on-balance volume (TA-Lib's OBV)",
        build: |_| indicator(Indicator::Obv, 0),
    },
    Function {
        name: "vwap",
        args: &[],
        gives: Gives::Series,
        usage: "vwap()",
        help: "volume-weighted average typical price of the UTC day's session so far",
        build: |_| indicator(Indicator::Vwap, 0),
    },
    Function {
        name: "keltner_upper",
        args: &[Arg::Period, Arg::Scalar],
        gives: Gives::Series,
        usage: "keltner_upper(n, k)",
        help: "Keltner upper channel: ema(n) + k · atr(n)",
        build: |mut a| {
            let k = value(&mut a, 1);
            keltner(&a, Some((k, Op::Add)))
        },
    },
    Function {
        name: "keltner_middle",
        args: &[Arg::Period],
        gives: Gives::Series,
        usage: "keltner_middle(n)",
        help: "Keltner middle line: ema(n)",
        build: |a| keltner(&a, None),
    },
    Function {
        name: "keltner_lower",
        args: &[Arg::Period, Arg::Scalar],
        gives: Gives::Series,
        usage: "keltner_lower(n, k)",
        help: "Keltner lower channel: ema(n) − k · atr(n)",
        build: |mut a| {
            let k = value(&mut a, 1);
            keltner(&a, Some((k, Op::Sub)))
        },
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
    Price::ALL.iter().find(|(n, _)| *n == name).map(|&(_, p)| price(p))
}

/// The names [`named_value`] knows.
pub(crate) fn value_names() -> impl Iterator<Item = &'static str> + Clone {
    Price::ALL.iter().map(|(n, _)| *n).chain(["nan"])
}

pub(crate) fn function(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.name == name)
}
