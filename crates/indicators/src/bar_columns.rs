//! How a source of bars names its columns and writes its times: the time column's names,
//! the fields of a bar, epoch numbers of any unit and date-time text. Below every reader
//! (CSV, Parquet, Arrow, Python's frames) and the errors that name the columns.

use crate::csv_input::quoted;
use chrono::{DateTime, NaiveDate, NaiveDateTime};

/// Header names of the time column, matched in any case. A pandas `to_csv()` export names
/// its index column nothing (or `Unnamed: 0` once read back and written again): an unnamed
/// first column is the time column too.
pub(crate) const TIME_COLUMNS: [&str; 6] = ["timestamp", "time", "date", "datetime", "open_time", "opentime"];

/// The columns a CSV must have, for errors and `--help`.
pub fn columns_help() -> String {
    format!(
        "a time column (named {}, or an unnamed first column as pandas' to_csv() writes), open, high, low, close[, volume]",
        TIME_COLUMNS.join(", ")
    )
}

/// The columns of one bar, in the order of [`Ohlcv::new`]'s arguments.
pub(crate) const FIELDS: [&str; 6] = ["timestamp", "open", "high", "low", "close", "volume"];

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
