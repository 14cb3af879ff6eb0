//! Stops and take-profits of a book: the series they read, each held once, and how a
//! level is formed at the entry bar.

use crate::rules::{Bound, Op, Price, SeriesKey};
use std::sync::Arc;
use threadx_indicators::{Indicator, IndicatorId, IndicatorValues};

/// A series that stops read: an ATR series (a stop `close[e] − m · ATR[e]`) or a user's
/// stop levels (the level at the entry bar itself).
#[derive(Debug)]
pub(super) enum StopSeries {
    Indicator(Arc<IndicatorValues>),
    /// Levels with every NaN or non-positive value made 0 (no stop at that bar): the GPU
    /// compares the bits of positive numbers only.
    Levels(Vec<f64>),
}

impl StopSeries {
    /// A level series with every NaN or non-positive level made 0.
    pub(super) fn levels(levels: impl IntoIterator<Item = f64>) -> Self {
        StopSeries::Levels(levels.into_iter().map(|l| if l > 0.0 { l } else { 0.0 }).collect())
    }

    pub(super) fn values(&self) -> &[f64] {
        match self {
            StopSeries::Indicator(values) => values.output(0),
            StopSeries::Levels(levels) => levels,
        }
    }
}

/// One stop of a book: which series it reads and how its level at the entry bar is formed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Stop {
    /// `close[e] − mult · series[e]` (an ATR series and a multiplier).
    Distance { series: u32, mult: f64 },
    /// `series[e]`, a user's or a rule's level (a trail: its distance).
    Level { series: u32 },
    /// `close[e] · (1 + sign · series[e])`, a fraction of the entry close (vectorbt's
    /// `sl_stop` and `tp_stop`; a trail: the fraction itself); sign is ±1.
    Fraction { series: u32, sign: f64 },
    /// `mult · series[e]`: a trail's distance in ATRs (the ATR series held once).
    Scaled { series: u32, mult: f64 },
}

impl Stop {
    pub(crate) fn series(self) -> u32 {
        match self {
            Stop::Distance { series, .. }
            | Stop::Level { series }
            | Stop::Fraction { series, .. }
            | Stop::Scaled { series, .. } => series,
        }
    }
}

/// How a [`StopRule`] forms its level from its series.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Form {
    Distance(f64),
    Level,
    Fraction(f64),
    Scaled(f64),
}

/// A combo's stop, ready to give its level at an entry bar.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StopRule<'a> {
    pub(super) series: &'a [f64],
    pub(super) form: Form,
}

impl<'a> StopRule<'a> {
    /// A stop `sign` · `series[e]` of the entry's close away from it (vectorbt's `sl_stop`
    /// with sign −1, `tp_stop` with +1; as a trail, that fraction of the best price).
    pub(crate) fn fraction(series: &'a [f64], sign: f64) -> Self {
        Self { series, form: Form::Fraction(sign) }
    }

    /// The level frozen for a trade entered at bar `e` with close `close` (0 or NaN: none).
    #[inline(always)]
    pub(crate) fn level(&self, e: usize, close: f64) -> f64 {
        match self.form {
            Form::Distance(m) => close - m * self.series[e],
            Form::Level => self.series[e],
            Form::Scaled(m) => m * self.series[e],
            Form::Fraction(sign) => {
                let q = self.series[e];
                if q > 0.0 && q.is_finite() { close * (1.0 + sign * q) } else { 0.0 }
            }
        }
    }

    /// Asks the CPU to fetch what [`Self::level`] reads at bar `e` into its caches, ahead
    /// of the read (a portfolio schedules an entry long before it reads its level).
    #[inline(always)]
    pub(crate) fn prefetch(&self, e: usize) {
        crate::trade_parts::prefetch(self.series, e);
    }

    /// [`Self::level`] when it is a level (positive and finite), as the market rules take it.
    #[inline(always)]
    pub(crate) fn frozen_level(&self, e: usize, close: f64) -> Option<f64> {
        Some(self.level(e, close)).filter(|l| *l > 0.0 && l.is_finite())
    }

    /// A trail's distance frozen at bar `e`: (fraction of the best price, price units);
    /// `None` when it has none there.
    #[inline(always)]
    pub(crate) fn trail(&self, e: usize) -> Option<(f64, f64)> {
        let v = match self.form {
            Form::Scaled(m) => m * self.series[e],
            _ => self.series[e],
        };
        (v > 0.0 && v.is_finite()).then_some(match self.form {
            Form::Fraction(_) => (v, 0.0),
            Form::Distance(_) | Form::Level | Form::Scaled(_) => (0.0, v),
        })
    }
}

/// What a stop series is, to hold each once.
#[derive(PartialEq, Eq, Hash)]
pub(super) enum SeriesId {
    Indicator(IndicatorId),
    Level(String),
}

/// How a level rule of family `trail` (or not) is held as a bank indicator's first output
/// and a multiplier m > 0: a stop or take-profit `close − m · series`, a trail's distance
/// `m · series` (or `series · m`). `None`: held as its own series of values.
pub(super) fn scaled_series(level: &Bound, trail: bool) -> Option<(Indicator, f64)> {
    if !trail {
        return distance(level);
    }
    let Bound::Binary(Op::Mul, a, b) = level else { return None };
    let (m, series) = match (a.as_ref(), b.as_ref()) {
        (Bound::Const(m), s) | (s, Bound::Const(m)) => (*m, s),
        _ => return None,
    };
    match series {
        Bound::Series(s, 0) if m.is_finite() && m > 0.0 => match s.as_ref() {
            SeriesKey::Indicator(indicator, 0) => Some((*indicator, m)),
            _ => None,
        },
        _ => None,
    }
}

/// `close − m · series` with m > 0 and a bank indicator's first output: a stop held as
/// the series and the multiplier.
fn distance(level: &Bound) -> Option<(Indicator, f64)> {
    let Bound::Binary(Op::Sub, close, product) = level else { return None };
    let Bound::Binary(Op::Mul, m, series) = product.as_ref() else { return None };
    match (close.as_ref(), m.as_ref(), series.as_ref()) {
        (Bound::Series(c, 0), Bound::Const(m), Bound::Series(s, 0)) if m.is_finite() && *m > 0.0 => {
            match (c.as_ref(), s.as_ref()) {
                (SeriesKey::Price(Price::Close), SeriesKey::Indicator(indicator, 0)) => Some((*indicator, *m)),
                _ => None,
            }
        }
        _ => None,
    }
}
