//! Bad market data and bad indicator input, each naming what is wrong and where.

use crate::bar_columns::columns_help;
use std::path::PathBuf;

/// Bad market data: what is wrong and where (file, 1-based line, column).
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("cannot read {path}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{origin}: no bars (the file is empty or holds only a header)")]
    Empty { origin: String },
    #[error("{origin}: no `{column}` column (found: {found}){hint}; expected {}", columns_help())]
    MissingColumn { origin: String, column: &'static str, found: String, hint: String },
    /// Not a CSV text file at all (compressed, binary, no line breaks, not UTF-8).
    #[error("{origin}: {problem}")]
    Format { origin: String, problem: String },
    #[error("{origin}, line {line}, column `{column}`: {problem}")]
    Invalid { origin: String, line: usize, column: String, problem: String },
    /// Bad data given as arrays (not a file): `row` is the 0-based position.
    #[error("{origin}, row {row}, column `{column}`: {problem}")]
    InvalidRow { origin: String, row: usize, column: String, problem: String },
    #[error("bad synthetic data spec `{spec}`: {problem}")]
    Synthetic { spec: String, problem: String },
}

/// Bad indicator input, reported before any work is done.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IndicatorError {
    #[error("unknown indicator `{name}` (known: {known})")]
    Unknown { name: String, known: &'static str },
    #[error("{indicator}: unknown parameter `{param}` (known: {known})")]
    UnknownParam { indicator: String, param: String, known: String },
    #[error("bad indicator spec `{spec}`: {problem}")]
    Syntax { spec: String, problem: String },
    #[error("{indicator}: {problem}")]
    BadValue { indicator: String, problem: String },
    #[error("{indicator} needs at least {needed} bars for its first value; the data has {len}")]
    TooShort { indicator: String, needed: usize, len: usize },
}

/// Where a bar sits in its source: a CSV line (1-based) or a row of arrays (0-based).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Place {
    Line(usize),
    Row(usize),
}

impl Place {
    pub(crate) fn error(self, origin: &str, column: &str, problem: String) -> DataError {
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
