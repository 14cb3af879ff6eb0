//! A rule bound to one set of parameter values ([`Bound`]: constants folded, lookbacks
//! pushed down to the series): the tree of prices, series ([`SeriesKey`]) and operators
//! ([`Op`]) that one row of a book computes. `eval.rs` computes it over the bars.

use threadx_indicators::{Indicator, Ohlcv};

/// The price columns a rule can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Price {
    Open,
    High,
    Low,
    Close,
    Volume,
}

impl Price {
    pub(crate) const ALL: [(&'static str, Price); 5] = [
        ("open", Price::Open),
        ("high", Price::High),
        ("low", Price::Low),
        ("close", Price::Close),
        ("volume", Price::Volume),
    ];

    pub(super) fn of(self, data: &Ohlcv) -> &[f64] {
        match self {
            Price::Open => data.open(),
            Price::High => data.high(),
            Price::Low => data.low(),
            Price::Close => data.close(),
            Price::Volume => data.volume(),
        }
    }
}

/// A series a bound rule reads.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SeriesKey {
    Price(Price),
    /// Output `1` of an indicator of the bank.
    Indicator(Indicator, usize),
    /// The rolling maximum (or minimum) of `source` over `period` bars, NaN while the
    /// window holds a NaN.
    Rolling {
        max: bool,
        period: usize,
        source: Box<Bound>,
    },
    /// Output `output` of `indicator` (one that reads one series) computed on `source`
    /// instead of the close (`threadx_indicators::compute_on_series`).
    Derived {
        indicator: Indicator,
        output: usize,
        source: Box<Bound>,
    },
}

impl SeriesKey {
    /// Bars before the first value.
    fn lookback(&self) -> usize {
        match self {
            SeriesKey::Price(_) => 0,
            SeriesKey::Indicator(indicator, _) => indicator.lookback(),
            SeriesKey::Rolling { period, source, .. } => source.lookback() + period - 1,
            SeriesKey::Derived { indicator, source, .. } => source.lookback() + indicator.lookback(),
        }
    }

    /// The identity of the series in a book (equal keys, equal values).
    pub(super) fn id(&self) -> String {
        format!("{self:?}")
    }
}

/// An operator of the language, as parsed and as evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Min,
    Max,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl Op {
    #[inline(always)]
    pub(super) fn number(self, a: f64, b: f64) -> f64 {
        match self {
            Op::Add => a + b,
            Op::Sub => a - b,
            Op::Mul => a * b,
            Op::Div => a / b,
            // A value in warm-up stays NaN (f64::min would return the other one).
            Op::Min if a.is_nan() || b.is_nan() => f64::NAN,
            Op::Max if a.is_nan() || b.is_nan() => f64::NAN,
            Op::Min => a.min(b),
            Op::Max => a.max(b),
            _ => f64::from(u8::from(self.truth(a, b))),
        }
    }

    #[inline(always)]
    fn truth(self, a: f64, b: f64) -> bool {
        match self {
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Eq => a == b,
            Op::Ne => a != b,
            Op::And => a != 0.0 && b != 0.0,
            Op::Or => a != 0.0 || b != 0.0,
            _ => self.number(a, b) != 0.0,
        }
    }

    pub(crate) fn is_comparison(self) -> bool {
        matches!(self, Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Eq | Op::Ne)
    }

    pub(crate) fn is_logic(self) -> bool {
        matches!(self, Op::And | Op::Or)
    }

    /// How the operator is written (`min` and `max` are functions).
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Op::Add => "+",
            Op::Sub => "-",
            Op::Mul => "*",
            Op::Div => "/",
            Op::Min => "min",
            Op::Max => "max",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "==",
            Op::Ne => "!=",
            Op::And => "and",
            Op::Or => "or",
        }
    }
}

/// A rule with its parameters' values in place: what one row of a book computes.
/// Conditions are trees of comparisons; a constant condition is 1 or 0.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Bound {
    Const(f64),
    /// The series' value `shift` bars ago.
    Series(Box<SeriesKey>, usize),
    Neg(Box<Bound>),
    Abs(Box<Bound>),
    Not(Box<Bound>),
    Binary(Op, Box<Bound>, Box<Bound>),
    /// Per bar: the second value where the condition holds, else the third.
    If(Box<Bound>, Box<Bound>, Box<Bound>),
}

impl Bound {
    pub(crate) fn series(key: SeriesKey) -> Self {
        Bound::Series(Box::new(key), 0)
    }

    pub(crate) fn binary(op: Op, a: Bound, b: Bound) -> Self {
        match (&a, &b) {
            (Bound::Const(x), Bound::Const(y)) => Bound::Const(op.number(*x, *y)),
            _ => Bound::Binary(op, Box::new(a), Box::new(b)),
        }
    }

    pub(crate) fn neg(a: Bound) -> Self {
        match a {
            Bound::Const(x) => Bound::Const(-x),
            a => Bound::Neg(Box::new(a)),
        }
    }

    pub(crate) fn abs(a: Bound) -> Self {
        match a {
            Bound::Const(x) => Bound::Const(x.abs()),
            a => Bound::Abs(Box::new(a)),
        }
    }

    pub(crate) fn not(a: Bound) -> Self {
        match a {
            Bound::Const(x) => Bound::Const(f64::from(u8::from(x == 0.0))),
            a => Bound::Not(Box::new(a)),
        }
    }

    pub(crate) fn choose(c: Bound, a: Bound, b: Bound) -> Self {
        match c {
            Bound::Const(x) if x != 0.0 => a,
            Bound::Const(_) => b,
            c => Bound::If(Box::new(c), Box::new(a), Box::new(b)),
        }
    }

    /// The same value `bars` bars earlier.
    pub(crate) fn ago(self, bars: usize) -> Self {
        let shift = |b: Box<Bound>| Box::new(b.ago(bars));
        match self {
            Bound::Const(_) => self,
            Bound::Series(key, s) => Bound::Series(key, s + bars),
            Bound::Neg(a) => Bound::Neg(shift(a)),
            Bound::Abs(a) => Bound::Abs(shift(a)),
            Bound::Not(a) => Bound::Not(shift(a)),
            Bound::Binary(op, a, b) => Bound::Binary(op, shift(a), shift(b)),
            Bound::If(c, a, b) => Bound::If(shift(c), shift(a), shift(b)),
        }
    }

    /// Bars before every series it reads has a value: its warm-up.
    pub(crate) fn lookback(&self) -> usize {
        match self {
            Bound::Const(_) => 0,
            Bound::Series(key, shift) => key.lookback() + shift,
            Bound::Neg(a) | Bound::Abs(a) | Bound::Not(a) => a.lookback(),
            Bound::Binary(_, a, b) => a.lookback().max(b.lookback()),
            Bound::If(c, a, b) => c.lookback().max(a.lookback()).max(b.lookback()),
        }
    }

    /// Every series it reads (those a rolling series reads included), each as often as read.
    pub(crate) fn visit_series<'s>(&'s self, out: &mut Vec<&'s SeriesKey>) {
        match self {
            Bound::Const(_) => {}
            Bound::Series(key, _) => {
                if let SeriesKey::Rolling { source, .. } | SeriesKey::Derived { source, .. } = key.as_ref() {
                    source.visit_series(out);
                }
                out.push(key);
            }
            Bound::Neg(a) | Bound::Abs(a) | Bound::Not(a) => a.visit_series(out),
            Bound::Binary(_, a, b) => {
                a.visit_series(out);
                b.visit_series(out);
            }
            Bound::If(c, a, b) => {
                c.visit_series(out);
                a.visit_series(out);
                b.visit_series(out);
            }
        }
    }

    /// The identity of the rule's values (equal ids, equal values).
    pub(crate) fn id(&self) -> String {
        format!("{self:?}")
    }
}
