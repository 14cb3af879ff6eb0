//! Market data: the struct-of-arrays [`Ohlcv`], its validation, and the one loader of
//! `--data` sources (a CSV, Parquet or Arrow IPC file, or `synthetic:bars=N,seed=S`).

use crate::columnar::Columnar;
use crate::csv_input::{CheckedInput, cut, quoted};
use crate::error::DataError;
use crate::synthetic::SyntheticSpec;
use crate::universe::{ReadBars, SYMBOL_COLUMN, SymbolColumn};
use chrono::{DateTime, NaiveDate, NaiveDateTime};
use std::path::Path;

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

/// Header names of the time column, matched in any case. A pandas `to_csv()` export names
/// its index column nothing (or `Unnamed: 0` once read back and written again): an unnamed
/// first column is the time column too.
const TIME_COLUMNS: [&str; 6] = ["timestamp", "time", "date", "datetime", "open_time", "opentime"];

/// The columns a CSV must have, for errors and `--help`.
pub fn columns_help() -> String {
    format!(
        "a time column (named {}, or an unnamed first column as pandas' to_csv() writes), open, high, low, close[, volume]",
        TIME_COLUMNS.join(", ")
    )
}

/// The columns of one bar, in the order of [`Ohlcv::new`]'s arguments.
const FIELDS: [&str; 6] = ["timestamp", "open", "high", "low", "close", "volume"];

/// Where a bar sits in its source: a CSV line (1-based) or a row of arrays (0-based).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place {
    Line(usize),
    Row(usize),
}

impl Place {
    fn error(self, origin: &str, column: &str, problem: String) -> DataError {
        let (origin, column) = (origin.to_owned(), column.to_owned());
        match self {
            Place::Line(line) => DataError::Invalid { origin, line, column, problem },
            Place::Row(row) => DataError::InvalidRow { origin, row, column, problem },
        }
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Line(line) => write!(f, "line {line}"),
            Place::Row(row) => write!(f, "row {row}"),
        }
    }
}

/// The positions of the time, open, high, low, close and volume columns in `header`
/// (names in any case; the time column as [`columns_help`] says, or an unnamed first
/// column), the one header rule of CSV files and DataFrames. Volume is optional.
pub fn find_columns(origin: &str, header: &[&str]) -> Result<([usize; 5], Option<usize>), DataError> {
    let find = |names: &[&str]| header.iter().position(|h| names.iter().any(|n| h.trim().eq_ignore_ascii_case(n)));
    // A price or the volume named twice (`close` and `Close`): which one is meant is not
    // ours to guess.
    for name in &FIELDS[1..] {
        let same: Vec<String> =
            header.iter().filter(|h| h.trim().eq_ignore_ascii_case(name)).map(|h| format!("`{h}`")).collect();
        if same.len() > 1 {
            return Err(DataError::Format {
                origin: origin.to_owned(),
                problem: format!(
                    "the columns {} all name the {name}: keep one (column names are matched in any case)",
                    same.join(" and ")
                ),
            });
        }
    }
    let unnamed_first =
        header.first().is_some_and(|h| h.trim().is_empty() || h.trim().eq_ignore_ascii_case("unnamed: 0"));
    let found = [
        find(&TIME_COLUMNS).or(unnamed_first.then_some(0)),
        find(&["open"]),
        find(&["high"]),
        find(&["low"]),
        find(&["close"]),
    ];
    // One column holding the others' names with another separator between them.
    let separator = [';', '\t', '|'].into_iter().find(|&c| header.len() == 1 && header[0].contains(c));
    let hint = match separator {
        Some(c) => format!(
            "; the columns seem separated by `{}`: ThreadX reads comma-separated files",
            if c == '\t' { "\\t".to_owned() } else { c.to_string() }
        ),
        None => String::new(),
    };
    match found.iter().position(Option::is_none) {
        Some(missing) => Err(DataError::MissingColumn {
            origin: origin.to_owned(),
            column: FIELDS[missing],
            found: cut(&header.join(", ")),
            hint,
        }),
        None => Ok((found.map(|c| c.unwrap_or_default()), find(&["volume"]))),
    }
}

/// Epoch milliseconds from an epoch number in seconds, milliseconds, microseconds or
/// nanoseconds, told apart by magnitude (1e11 s and 1e14 ms are both the year 5138): the
/// rule of numeric time columns in CSV files and DataFrames.
pub fn epoch_to_ms(number: f64) -> Result<i64, String> {
    if !number.is_finite() || number < 0.0 {
        return Err(format!("`{number}` is not a time"));
    }
    let ms = if number < 1e11 {
        number * 1e3
    } else if number < 1e14 {
        number
    } else if number < 1e17 {
        number / 1e3
    } else {
        number / 1e6
    };
    in_time_range(ms.round() as i64, &number)
}

/// [`epoch_to_ms`] of an integer, exactly (its message shows the integer as it is).
pub fn epoch_int_to_ms(number: i64) -> Result<i64, String> {
    if number < 0 {
        return Err(format!("`{number}` is not a time"));
    }
    // Rounded half up, as the f64 rule rounds.
    let divided = |by: i64| number / by + i64::from(number % by >= by / 2);
    let ms = match number {
        n if n < 100_000_000_000 => n.saturating_mul(1000),
        n if n < 100_000_000_000_000 => n,
        n if n < 100_000_000_000_000_000 => divided(1000),
        _ => divided(1_000_000),
    };
    in_time_range(ms, &number)
}

/// The last millisecond of the year 9999: times beyond it are no market's.
const LAST_MS: i64 = 253_402_300_799_999;

fn in_time_range(ms: i64, number: &dyn std::fmt::Display) -> Result<i64, String> {
    if ms > LAST_MS {
        return Err(format!("`{number}` is out of range for a time (after the year 9999)"));
    }
    Ok(ms)
}

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

    /// Loads a `--data` source: `synthetic:bars=N,seed=S` or the path of a file
    /// ([`Ohlcv::read_file`]).
    pub fn load(source: &str) -> Result<Self, DataError> {
        match source.strip_prefix("synthetic:") {
            Some(spec) => Ok(SyntheticSpec::parse(spec)?.generate()),
            None if source == "synthetic" => Ok(SyntheticSpec::default().generate()),
            None => Self::read_file(Path::new(source)),
        }
    }

    /// Reads a Parquet file, an Arrow IPC file (Feather v2) or stream, or a CSV file
    /// ([`Ohlcv::read_csv`]), told apart by their first bytes, not their names. Columnar
    /// files follow the CSV's column rules: the same names; a time column of timestamps
    /// (any unit, any zone), dates, epoch numbers (s, ms, µs or ns by magnitude) or
    /// date-time text; pandas' unnamed index as the time column; numeric prices. Problems
    /// are reported at the 0-based row.
    pub fn read_file(path: &Path) -> Result<Self, DataError> {
        ReadBars::read_file(path)?.single()
    }

    /// Reads a CSV file: a header naming the columns (any case; the time column may be
    /// called as [`columns_help`] says; volume is optional), or a
    /// headerless Binance kline file (open_time, open, high, low, close, volume, …).
    /// Times are date-time strings (RFC 3339, `YYYY-MM-DD[ HH:MM[:SS]]`) or epoch seconds,
    /// milliseconds or microseconds (told apart by magnitude).
    ///
    /// The file is read as a stream: a compressed or binary file, a line longer than
    /// 64 KiB or text that is not UTF-8 is refused at the line where it shows.
    pub fn read_csv(path: &Path) -> Result<Self, DataError> {
        ReadBars::read_csv(path)?.single()
    }

    /// [`Ohlcv::read_csv`] on text already in memory; `origin` names it in errors.
    pub fn parse_csv(origin: &str, text: &str) -> Result<Self, DataError> {
        ReadBars::parse_csv(origin, text.as_bytes())?.single()
    }
}

impl ReadBars {
    /// The bars of a file, told apart by its first bytes (see [`Ohlcv::read_file`]).
    pub(crate) fn read_file(path: &Path) -> Result<Self, DataError> {
        match Columnar::sniff(path)? {
            Some(format) => format.read(path),
            None => Self::read_csv(path),
        }
    }

    fn read_csv(path: &Path) -> Result<Self, DataError> {
        let io = |source| DataError::Io { path: path.to_owned(), source };
        let file = std::fs::File::open(path).map_err(io)?;
        Self::parse_csv(&path.display().to_string(), std::io::BufReader::with_capacity(1 << 16, file))
    }

    pub(crate) fn parse_csv(origin: &str, input: impl std::io::Read) -> Result<Self, DataError> {
        // Records end at `\n` (a `\r` before it is trimmed as whitespace): the csv crate's
        // CRLF terminator numbered a CRLF file's lines one too low.
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .terminator(csv::Terminator::Any(b'\n'))
            .from_reader(CheckedInput::new(input));
        let mut records = reader.records();
        let invalid = |line: usize, column: &str, problem: String| DataError::Invalid {
            origin: origin.to_owned(),
            line,
            column: column.to_owned(),
            problem,
        };
        let record_err = |e: csv::Error| {
            let line = e.position().map_or(0, |p| p.line() as usize);
            match e.kind() {
                csv::ErrorKind::Io(io) => DataError::Format { origin: origin.to_owned(), problem: io.to_string() },
                csv::ErrorKind::Utf8 { .. } => DataError::Format {
                    origin: origin.to_owned(),
                    problem: format!("line {line} is not UTF-8 text (save the file as UTF-8)"),
                },
                _ => invalid(line, "-", e.to_string()),
            }
        };
        let Some(first) = records.next().transpose().map_err(record_err)? else {
            return Err(DataError::Empty { origin: origin.to_owned() });
        };
        let headerless = first.get(0).is_some_and(|f| f.parse::<f64>().is_ok());
        let mut symbol_column = None;
        let columns: [Option<usize>; 6] = if headerless {
            [Some(0), Some(1), Some(2), Some(3), Some(4), Some(5)]
        } else {
            let header: Vec<&str> = first.iter().collect();
            let (found, volume) = find_columns(origin, &header)?;
            symbol_column = header.iter().position(|h| h.eq_ignore_ascii_case(SYMBOL_COLUMN));
            [Some(found[0]), Some(found[1]), Some(found[2]), Some(found[3]), Some(found[4]), volume]
        };
        let mut symbols = symbol_column.map(|_| SymbolColumn::default());
        let mut bars = Ohlcv {
            origin: origin.to_owned(),
            timestamps: Vec::new(),
            open: Vec::new(),
            high: Vec::new(),
            low: Vec::new(),
            close: Vec::new(),
            volume: Vec::new(),
        };
        let mut lines = Vec::new();
        let rows = headerless.then_some(Ok(first)).into_iter().chain(records);
        for record in rows {
            let record = record.map_err(record_err)?;
            let line = record.position().map_or(0, |p| p.line() as usize);
            if record.iter().all(str::is_empty) {
                continue;
            }
            let field = |c: usize| -> Result<&str, DataError> {
                let index = columns[c].unwrap_or(usize::MAX);
                record.get(index).ok_or_else(|| invalid(line, FIELDS[c], "missing field".into()))
            };
            bars.timestamps.push(parse_time(field(0)?).map_err(|p| invalid(line, FIELDS[0], p))?);
            let number = |c: usize| -> Result<f64, DataError> {
                let text = field(c)?;
                text.parse::<f64>().map_err(|_| invalid(line, FIELDS[c], format!("{} is not a number", quoted(text))))
            };
            bars.open.push(number(1)?);
            bars.high.push(number(2)?);
            bars.low.push(number(3)?);
            bars.close.push(number(4)?);
            bars.volume.push(if columns[5].is_some() { number(5)? } else { 0.0 });
            if let (Some(symbols), Some(c)) = (&mut symbols, symbol_column) {
                match record.get(c).filter(|s| !s.is_empty()) {
                    Some(name) => symbols.push(name),
                    None => return Err(invalid(line, SYMBOL_COLUMN, "no symbol".into())),
                }
            }
            lines.push(line);
        }
        if bars.timestamps.is_empty() {
            return Err(DataError::Empty { origin: origin.to_owned() });
        }
        Ok(ReadBars { bars, lines: Some(lines), symbols })
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

    /// Bars per year from the median spacing of the timestamps (a year of 365 days): what
    /// annualises per-bar figures. NaN with fewer than two bars. Data with gaps (FX
    /// weekends, stock exchanges' nights) gives the spacing of its sessions: daily stock
    /// bars give 365, where convention says 252; callers let the user override it.
    pub fn bars_per_year(&self) -> f64 {
        let mut spacing: Vec<i64> = self.timestamps.windows(2).map(|w| w[1] - w[0]).collect();
        if spacing.is_empty() {
            return f64::NAN;
        }
        let middle = spacing.len() / 2;
        let (_, &mut median, _) = spacing.select_nth_unstable(middle);
        const YEAR_MS: f64 = 365.0 * 86_400_000.0;
        YEAR_MS / median as f64
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

/// A bar time as RFC 3339 UTC with milliseconds when they are not zero.
pub fn format_time(ms: i64) -> String {
    match DateTime::from_timestamp_millis(ms) {
        Some(t) if ms % 1000 == 0 => t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Some(t) => t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        None => ms.to_string(),
    }
}

/// Epoch milliseconds from a date-time string or an epoch number in s, ms or µs.
pub(crate) fn parse_time(text: &str) -> Result<i64, String> {
    if let Ok(number) = text.parse::<f64>() {
        return epoch_to_ms(number).map_err(|_| format!("{} is not a time", quoted(text)));
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.timestamp_millis());
    }
    for format in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(t.and_utc().timestamp_millis());
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).map_or(0, |t| t.and_utc().timestamp_millis()));
    }
    Err(format!("{} is neither a date-time (e.g. 2024-01-31 13:45:00) nor epoch seconds/milliseconds", quoted(text)))
}

#[cfg(test)]
mod tests {
    use super::parse_time;

    #[test]
    fn times_in_every_accepted_form_agree() {
        let ms = 1_704_067_200_000; // 2024-01-01T00:00:00Z
        for text in [
            "1704067200",
            "1704067200000",
            "1704067200000000",
            "2024-01-01T00:00:00Z",
            "2024-01-01 00:00:00",
            "2024-01-01 00:00",
            "2024-01-01",
            "2024-01-01T01:00:00+01:00",
        ] {
            assert_eq!(parse_time(text), Ok(ms), "{text}");
        }
        assert_eq!(parse_time("2024-01-01 00:00:00.250"), Ok(ms + 250));
        assert!(parse_time("yesterday").unwrap_err().contains("`yesterday`"));
    }
}
