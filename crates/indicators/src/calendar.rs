//! The calendar bars keep ([`Calendar`]) and what it makes of a year: the bars per year
//! that annualise per-bar figures (Sharpe ratios, volatility, CAGR) everywhere.

/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;

/// Trading days in a year on a weekday calendar.
pub const TRADING_DAYS: f64 = 252.0;

/// The calendar bars keep, which says how their per-bar figures are annualised
/// ([`bars_per_year`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Calendar {
    /// Bars on every day of the week (crypto, FX's Sunday opens), or too short a span to
    /// tell: a year of 365 days.
    Days,
    /// No bar on a Saturday or Sunday (UTC) over two weeks or more (stocks, futures' daily
    /// bars): a year of 252 trading days.
    TradingDays,
}

impl Calendar {
    /// The calendar of bars at `timestamps` (epoch ms, UTC, increasing): trading days when
    /// none falls on a Saturday or Sunday over at least two weeks, else calendar days.
    pub fn of(timestamps: &[i64]) -> Self {
        let (Some(&first), Some(&last)) = (timestamps.first(), timestamps.last()) else {
            return Self::Days;
        };
        // 1970-01-01 was a Thursday: day d is weekday (d + 3) mod 7 from Monday = 0.
        let weekend = |t: i64| (t.div_euclid(DAY_MS) + 3).rem_euclid(7) >= 5;
        if last - first < 14 * DAY_MS || timestamps.iter().any(|&t| weekend(t)) {
            Self::Days
        } else {
            Self::TradingDays
        }
    }

    /// Bars per year of bars at `timestamps` keeping this calendar; NaN with fewer than
    /// two bars. On calendar days, a year of 365 days over the median spacing of the
    /// timestamps (FX weekends and other gaps are not the median). On trading days (daily
    /// or intraday stock bars), 252 days times the median count of bars in a day (UTC), as
    /// quantstats and pandas' business days count.
    pub fn bars_per_year(self, timestamps: &[i64]) -> f64 {
        if timestamps.len() < 2 {
            return f64::NAN;
        }
        if self == Self::TradingDays {
            let mut per_day: Vec<usize> =
                timestamps.chunk_by(|a, b| a.div_euclid(DAY_MS) == b.div_euclid(DAY_MS)).map(<[i64]>::len).collect();
            let middle = per_day.len() / 2;
            let (_, &mut median, _) = per_day.select_nth_unstable(middle);
            return TRADING_DAYS * median as f64;
        }
        let mut spacing: Vec<i64> = timestamps.windows(2).map(|w| w[1] - w[0]).collect();
        let middle = spacing.len() / 2;
        let (_, &mut median, _) = spacing.select_nth_unstable(middle);
        const YEAR_MS: f64 = 365.0 * DAY_MS as f64;
        YEAR_MS / median as f64
    }

    /// The convention in words, as the summary and the report say it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Days => "calendar days: a year of 365 days",
            Self::TradingDays => "trading days: no bar on a weekend, a year of 252 days",
        }
    }
}

/// Bars per year of bars at `timestamps`, on the calendar they keep
/// ([`Calendar::bars_per_year`]).
pub fn bars_per_year(timestamps: &[i64]) -> f64 {
    Calendar::of(timestamps).bars_per_year(timestamps)
}
