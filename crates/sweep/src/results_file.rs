//! A results file, a grid's (`combo`, parameters, metrics) or a search's (`trial` before
//! them), in any [`TableFormat`]: written row by row, and read back row by row for
//! `merge` and for readers of results. The CSV stays the bytes `rows.rs` formats; the
//! columnar forms hold the same rows, typed.

use crate::error::{SweepError, io_error};
use crate::output::in_file;
use crate::rows::{Row, columns, header, parse_row, push_row, row_of, write_row};
use crate::table::{ColumnarReader, ColumnarWriter, TableFormat};
use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use threadx_backtest::Strategy;
use threadx_profile_store::AtomicFile;

/// Which results table: a grid's rows, or a search's trials (a `trial` column first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResultsKind {
    Grid,
    Trials,
}

impl ResultsKind {
    fn lead(self) -> &'static [&'static str] {
        match self {
            Self::Grid => &[],
            Self::Trials => &["trial"],
        }
    }

    /// The CSV header line (with its newline).
    pub(crate) fn header(self, strategy: &Strategy) -> String {
        match self {
            Self::Grid => header(strategy),
            Self::Trials => format!("trial,{}", header(strategy)),
        }
    }
}

/// A results file being written; it appears whole at [`ResultsWriter::finish`].
#[derive(Debug)]
pub(crate) enum ResultsWriter {
    Csv { path: PathBuf, file: AtomicFile, text: String },
    Columnar(Box<ColumnarWriter<AtomicFile>>),
}

/// CSV text is handed to the file in pieces of about this many bytes.
const TEXT_PIECE: usize = 1 << 20;

impl ResultsWriter {
    /// Creates `path` for a `kind` table of `strategy`, in the format its extension names.
    pub(crate) fn create(path: &Path, strategy: &Strategy, kind: ResultsKind) -> Result<Self, SweepError> {
        match TableFormat::of(path) {
            TableFormat::Csv => {
                let file = AtomicFile::create(path).map_err(io_error(path))?;
                Ok(Self::Csv { path: path.to_owned(), file, text: kind.header(strategy) })
            }
            format => {
                Ok(Self::Columnar(Box::new(ColumnarWriter::create(path, format, &columns(strategy, kind.lead()))?)))
            }
        }
    }

    /// CSV rows formatted by `rows.rs`: the rest of `from`, copied by the kernel.
    pub(crate) fn csv_file(&mut self, from: &mut fs::File) -> Result<(), SweepError> {
        match self {
            Self::Csv { path, file, text } => {
                file.write_all(text.as_bytes()).map_err(io_error(path))?;
                text.clear();
                file.append_file(from).map_err(io_error(path)).map(drop)
            }
            Self::Columnar(_) => Err(SweepError::Results("CSV rows given to a columnar results file".into())),
        }
    }

    /// A row read from another results file: the line as it was read when both are CSV
    /// (a CSV merge copies the bytes it read), the row written anew otherwise.
    pub(crate) fn copy(&mut self, strategy: &Strategy, read: &ReadRow) -> Result<(), SweepError> {
        if let (Self::Csv { path, file, text }, Some(line)) = (&mut *self, &read.line) {
            text.push_str(line);
            text.push('\n');
            return Self::spill(path, file, text);
        }
        self.row(strategy, read.trial, &read.row)
    }

    fn spill(path: &Path, file: &mut AtomicFile, text: &mut String) -> Result<(), SweepError> {
        if text.len() >= TEXT_PIECE {
            file.write_all(text.as_bytes()).map_err(io_error(path))?;
            text.clear();
        }
        Ok(())
    }

    /// One row (after its `trial` when the table has one).
    pub(crate) fn row(&mut self, strategy: &Strategy, trial: Option<u64>, row: &Row) -> Result<(), SweepError> {
        match self {
            Self::Csv { path, file, text } => {
                if let Some(t) = trial {
                    let _ = write!(text, "{t},");
                }
                write_row(text, strategy, row.combo, &row.values, &row.metrics);
                Self::spill(path, file, text)
            }
            Self::Columnar(w) => {
                let lead: &[i64] = match trial {
                    Some(t) => &[t as i64],
                    None => &[],
                };
                push_row(w, strategy, lead, row.combo, &row.values, &row.metrics)
            }
        }
    }

    pub(crate) fn finish(self) -> Result<(), SweepError> {
        match self {
            Self::Csv { path, mut file, text } => {
                file.write_all(text.as_bytes()).map_err(io_error(&path))?;
                file.commit().map_err(io_error(&path))
            }
            Self::Columnar(w) => w.commit(),
        }
    }
}

/// One row read back: its trial (a search's), the row, and its CSV line when the file is
/// CSV (so that a CSV merge copies the bytes it read).
#[derive(Debug, Clone)]
pub(crate) struct ReadRow {
    pub trial: Option<u64>,
    pub row: Row,
    pub line: Option<String>,
}

/// A results file read row by row, in the format its first bytes show.
#[derive(Debug)]
pub(crate) struct ResultsReader {
    path: PathBuf,
    strategy: Strategy,
    kind: ResultsKind,
    source: Source,
}

#[derive(Debug)]
enum Source {
    Csv(std::io::Lines<BufReader<fs::File>>),
    Columnar(ColumnarReader),
}

impl ResultsReader {
    /// Opens `path` as a `kind` results file of `strategy`; a file of another table
    /// (another strategy, a grid's for a search's) is refused by its header or columns.
    pub(crate) fn open(path: &Path, strategy: &Strategy, kind: ResultsKind) -> Result<Self, SweepError> {
        let what = format!("a {strategy} results file");
        let source = match TableFormat::sniff(path)? {
            TableFormat::Csv => {
                let mut reader = BufReader::new(fs::File::open(path).map_err(io_error(path))?);
                let mut first = String::new();
                reader.read_line(&mut first).map_err(io_error(path))?;
                if first != kind.header(strategy) {
                    return Err(SweepError::Results(format!("{}: not {what} (header differs)", path.display())));
                }
                Source::Csv(reader.lines())
            }
            _ => Source::Columnar(ColumnarReader::open(path, &columns(strategy, kind.lead()), &what)?),
        };
        Ok(Self { path: path.to_owned(), strategy: strategy.clone(), kind, source })
    }

    /// The next row, or `None` at the end of the file.
    pub(crate) fn next_row(&mut self) -> Result<Option<ReadRow>, SweepError> {
        let trials = self.kind == ResultsKind::Trials;
        let read = match &mut self.source {
            Source::Csv(lines) => match lines.next() {
                None => None,
                Some(line) => {
                    let line = line.map_err(io_error(&self.path))?;
                    let (trial, rest) = match trials {
                        true => {
                            let (t, rest) = line.split_once(',').unwrap_or(("", &line));
                            let t = t.parse().map_err(|_| SweepError::Results(format!("malformed row `{line}`")));
                            (Some(t?), rest)
                        }
                        false => (None, line.as_str()),
                    };
                    let row = parse_row(&self.strategy, rest)?;
                    Some(ReadRow { trial, row, line: Some(line) })
                }
            },
            Source::Columnar(reader) => match reader.next_row()? {
                None => None,
                Some(r) => {
                    let trial = match trials {
                        true => Some(
                            r.int(0)
                                .filter(|&t| t >= 0)
                                .ok_or_else(|| SweepError::Results("a results row with no trial".into()))?
                                as u64,
                        ),
                        false => None,
                    };
                    Some(ReadRow { trial, row: row_of(&self.strategy, &r, usize::from(trials))?, line: None })
                }
            },
        };
        Ok(read)
    }
}

/// Every row of a grid's results file (CSV, Parquet or Arrow) of `strategy`, in file order.
pub fn read_results(path: &Path, strategy: &Strategy) -> Result<Vec<Row>, SweepError> {
    let mut reader = ResultsReader::open(path, strategy, ResultsKind::Grid)?;
    let mut rows = Vec::new();
    while let Some(r) = reader.next_row().map_err(|e| in_file(path, e))? {
        rows.push(r.row);
    }
    Ok(rows)
}
