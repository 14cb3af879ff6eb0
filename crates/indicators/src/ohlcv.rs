//! Market data: the struct-of-arrays [`Ohlcv`] and its validation, the one rule of what
//! bars may be whatever read them.

use crate::bar_columns::{FIELDS, format_time};
use crate::calendar::{Calendar, bars_per_year};
use crate::error::{DataError, Place};

/// OHLCV bars as one array per field. Invariants, checked by [`Ohlcv::new`]: all arrays
/// have the same non-zero length, timestamps (epoch milliseconds, UTC) strictly increase,
/// prices lie in [`PRICE_RANGE`] with `low <= open, close <= high`, volumes are finite and
/// non-negative.
#[derive(Debug, Clone, PartialEq)]
pub struct Ohlcv {
    origin: String,
    timestamps: Vec<i64>,
    open: Vec<f64>,
    high: Vec<f64>,
    low: Vec<f64>,
    close: Vec<f64>,
    volume: Vec<f64>,
}

/// The prices a bar may have: squares and sums of squares of prices (variances, the
/// standard deviation) stay finite and normal, and the GPU's exact stop arithmetic holds.
pub const PRICE_RANGE: std::ops::RangeInclusive<f64> = 1e-100..=1e100;

impl Ohlcv {
    /// Validated bars. `origin` names where they came from (a path, a synthetic spec, a
    /// DataFrame) in errors; problems are reported at the bar's 0-based row.
    pub fn new(
        origin: impl Into<String>,
        timestamps: Vec<i64>,
        open: Vec<f64>,
        high: Vec<f64>,
        low: Vec<f64>,
        close: Vec<f64>,
        volume: Vec<f64>,
    ) -> Result<Self, DataError> {
        let bars = Self { origin: origin.into(), timestamps, open, high, low, close, volume };
        bars.validate(Place::Row)?;
        Ok(bars)
    }

    /// Bars not yet checked: [`ReadBars`] checks them where they came from.
    #[allow(clippy::too_many_arguments)] // The origin and the six columns.
    pub(crate) fn unchecked(
        origin: String,
        timestamps: Vec<i64>,
        open: Vec<f64>,
        high: Vec<f64>,
        low: Vec<f64>,
        close: Vec<f64>,
        volume: Vec<f64>,
    ) -> Self {
        Self { origin, timestamps, open, high, low, close, volume }
    }

    /// The bars at `rows` (in that order), named `origin`, not yet checked.
    pub(crate) fn gather(&self, rows: &[usize], origin: String) -> Self {
        let pick = |s: &[f64]| rows.iter().map(|&i| s[i]).collect();
        Self {
            origin,
            timestamps: rows.iter().map(|&i| self.timestamps[i]).collect(),
            open: pick(&self.open),
            high: pick(&self.high),
            low: pick(&self.low),
            close: pick(&self.close),
            volume: pick(&self.volume),
        }
    }
}

impl Ohlcv {
    /// Checks the invariants; `place(i)` is where bar `i` sits in its source.
    pub(crate) fn validate(&self, place: impl Fn(usize) -> Place) -> Result<(), DataError> {
        let n = self.timestamps.len();
        if n == 0 {
            return Err(DataError::Empty { origin: self.origin.clone() });
        }
        let invalid = |i: usize, column: &str, problem: String| place(i).error(&self.origin, column, problem);
        let series = [&self.open, &self.high, &self.low, &self.close, &self.volume];
        for (c, values) in series.iter().enumerate() {
            if values.len() != n {
                return Err(invalid(0, FIELDS[c + 1], format!("{} values for {n} timestamps", values.len())));
            }
        }
        for i in 0..n {
            if i > 0 && self.timestamps[i] <= self.timestamps[i - 1] {
                let what = if self.timestamps[i] == self.timestamps[i - 1] { "duplicate" } else { "out of order" };
                return Err(invalid(
                    i,
                    FIELDS[0],
                    format!("{what} timestamp {} (previous bar: {})", self.timestamps[i], self.timestamps[i - 1]),
                ));
            }
            for (c, values) in series.iter().enumerate() {
                let v = values[i];
                if !v.is_finite() {
                    return Err(invalid(i, FIELDS[c + 1], format!("{v} is not a finite number")));
                }
                let is_price = c < 4;
                if is_price && v <= 0.0 {
                    return Err(invalid(i, FIELDS[c + 1], format!("price {v} is not positive")));
                }
                if is_price && !PRICE_RANGE.contains(&v) {
                    return Err(invalid(
                        i,
                        FIELDS[c + 1],
                        format!(
                            "price {v:e} is outside {:e} to {:e}, the range in which indicators cannot overflow; rescale the prices",
                            PRICE_RANGE.start(),
                            PRICE_RANGE.end()
                        ),
                    ));
                }
                if !is_price && v < 0.0 {
                    return Err(invalid(i, FIELDS[c + 1], format!("volume {v} is negative")));
                }
            }
            if self.high[i] < self.low[i] {
                return Err(invalid(i, "high", format!("high {} is below low {}", self.high[i], self.low[i])));
            }
            // One rule for a bar: open and close lie within [low, high].
            for (c, values) in [(1, &self.open), (4, &self.close)] {
                let v = values[i];
                if v > self.high[i] {
                    return Err(invalid(i, FIELDS[c], format!("{} {v} is above high {}", FIELDS[c], self.high[i])));
                }
                if v < self.low[i] {
                    return Err(invalid(i, FIELDS[c], format!("{} {v} is below low {}", FIELDS[c], self.low[i])));
                }
            }
        }
        self.warn_outliers(&place);
        Ok(())
    }

    /// Warns, once, about prices more than 100 times away from both neighbours in their
    /// series (a bad tick: valid data, so not refused, but every window holding it says
    /// little), naming the first one's line and how many there are.
    fn warn_outliers(&self, place: &impl Fn(usize) -> Place) {
        let far = |v: f64, other: f64| v > 100.0 * other || other > 100.0 * v;
        let prices = [&self.open, &self.high, &self.low, &self.close];
        if self.len() < 2 {
            return;
        }
        let mut found: Vec<(usize, usize)> = Vec::new();
        for (c, values) in prices.into_iter().enumerate() {
            for i in 0..values.len() {
                let before = i.checked_sub(1).is_none_or(|j| far(values[i], values[j]));
                let after = values.get(i + 1).is_none_or(|&n| far(values[i], n));
                if before && after {
                    found.push((i, c));
                }
            }
        }
        let Some(&(i, c)) = found.iter().min() else { return };
        let values = prices[c];
        let neighbours: Vec<String> = [i.checked_sub(1), Some(i + 1)]
            .into_iter()
            .flatten()
            .filter_map(|j| values.get(j))
            .map(f64::to_string)
            .collect();
        let others = if found.len() > 1 { format!(" ({} such prices in all)", found.len()) } else { String::new() };
        tracing::warn!(
            "{}, {}, column `{}`: price {} is more than 100 times away from its neighbours ({}); \
             a bad tick? Indicators over windows that hold it are distorted{others}",
            self.origin,
            place(i),
            FIELDS[c + 1],
            values[i],
            neighbours.join(" and "),
        );
    }

    /// The calendar the bars keep ([`Calendar::of`]).
    pub fn calendar(&self) -> Calendar {
        Calendar::of(&self.timestamps)
    }

    /// Bars per year, what annualises per-bar figures ([`bars_per_year`]).
    pub fn bars_per_year(&self) -> f64 {
        bars_per_year(&self.timestamps)
    }

    /// Where the bars came from (a path or a synthetic spec).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn len(&self) -> usize {
        self.timestamps.len()
    }

    /// Always false: an `Ohlcv` holds at least one bar.
    pub fn is_empty(&self) -> bool {
        self.timestamps.is_empty()
    }

    /// Bar open times, epoch milliseconds UTC, strictly increasing.
    pub fn timestamps(&self) -> &[i64] {
        &self.timestamps
    }

    pub fn open(&self) -> &[f64] {
        &self.open
    }

    pub fn high(&self) -> &[f64] {
        &self.high
    }

    pub fn low(&self) -> &[f64] {
        &self.low
    }

    pub fn close(&self) -> &[f64] {
        &self.close
    }

    pub fn volume(&self) -> &[f64] {
        &self.volume
    }

    /// The bars `range` as a new series (walk-forward windows), same origin.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Self {
        Self {
            origin: format!("{}[{}..{}]", self.origin, range.start, range.end),
            timestamps: self.timestamps[range.clone()].to_vec(),
            open: self.open[range.clone()].to_vec(),
            high: self.high[range.clone()].to_vec(),
            low: self.low[range.clone()].to_vec(),
            close: self.close[range.clone()].to_vec(),
            volume: self.volume[range].to_vec(),
        }
    }

    /// The bars as CSV with a header (`timestamp` as RFC 3339 UTC), the form
    /// [`Ohlcv::parse_csv`] reads back to the same values.
    pub fn to_csv(&self) -> String {
        let mut out = String::with_capacity(self.len() * 80);
        out.push_str("timestamp,open,high,low,close,volume\n");
        for i in 0..self.len() {
            let time = format_time(self.timestamps[i]);
            let row = format!(
                "{time},{},{},{},{},{}\n",
                self.open[i], self.high[i], self.low[i], self.close[i], self.volume[i]
            );
            out.push_str(&row);
        }
        out
    }
}
