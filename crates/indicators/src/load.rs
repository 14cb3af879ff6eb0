//! The one home of reading bars: a `--data` source (a CSV, Parquet or Arrow IPC file, told
//! apart by its first bytes, or `synthetic:bars=N,seed=S`) and Python's Arrow tables, as
//! [`Ohlcv`] or as [`ReadBars`] for a universe to split.

use crate::columnar::{Columnar, read_arrow_stream};
use crate::error::DataError;
use crate::ohlcv::Ohlcv;
use crate::read_bars::ReadBars;
use crate::synthetic::SyntheticSpec;
use std::path::Path;

impl Ohlcv {
    /// Loads a `--data` source: `synthetic:bars=N,seed=S` or the path of a file
    /// ([`Ohlcv::read_file`]).
    pub fn load(source: &str) -> Result<Self, DataError> {
        match source.strip_prefix("synthetic:") {
            Some(spec) => Ok(SyntheticSpec::parse(spec)?.generate()),
            None if source == "synthetic" => Ok(SyntheticSpec::default().generate()),
            None if names_many_files(source) => Err(DataError::Format {
                origin: source.to_owned(),
                problem: "a folder or a pattern is many symbols' files (a universe), and this takes one data set: \
                          a file or synthetic:… (a sweep and backtest --portfolio take a universe)"
                    .into(),
            }),
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
        read_bars_file(path)?.single()
    }

    /// Bars from an Arrow IPC stream in memory (a pyarrow or polars table passed from
    /// Python), under the rules of [`Ohlcv::read_file`]; `origin` names it in errors.
    pub fn read_arrow_stream(origin: &str, stream: &[u8]) -> Result<Self, DataError> {
        read_arrow_stream(origin, stream)?.single()
    }

    /// Reads a CSV file: a header naming the columns (any case; the time column may be
    /// called as [`columns_help`](crate::columns_help) says; volume is optional), or a
    /// headerless Binance kline file (open_time, open, high, low, close, volume, …).
    /// Times are date-time strings (RFC 3339, `YYYY-MM-DD[ HH:MM[:SS]]`) or epoch seconds,
    /// milliseconds or microseconds (told apart by magnitude).
    ///
    /// The file is checked as it is read: a compressed or binary file, a line longer than
    /// 64 KiB or text that is not UTF-8 is refused at the line where it shows. A long file
    /// is then parsed in stretches of lines on all cores, with the one-pass result.
    pub fn read_csv(path: &Path) -> Result<Self, DataError> {
        ReadBars::read_csv(path)?.single()
    }

    /// [`Ohlcv::read_csv`] on text already in memory; `origin` names it in errors.
    pub fn parse_csv(origin: &str, text: &str) -> Result<Self, DataError> {
        ReadBars::parse_csv(origin, text.as_bytes())?.single()
    }
}

/// Whether a `--data` source names many files, a symbol each: a folder, or a glob pattern
/// (`*`, `?` or `[` in a path that is no file).
pub(crate) fn names_many_files(source: &str) -> bool {
    let path = Path::new(source);
    (source.contains(['*', '?', '[']) && !path.exists()) || path.is_dir()
}

/// The bars of a file, told apart by its first bytes (see [`Ohlcv::read_file`]).
pub(crate) fn read_bars_file(path: &Path) -> Result<ReadBars, DataError> {
    match Columnar::sniff(path)? {
        Some(format) => format.read(path),
        None => ReadBars::read_csv(path),
    }
}
