//! A results file, a grid's (`combo`, parameters, metrics) or a search's (`trial` before
//! them), in any [`TableFormat`]: written row by row, and read back row by row for
//! `merge` and for readers of results. The CSV stays the bytes `rows.rs` formats; the
//! columnar forms hold the same rows, typed.

use crate::error::{SweepError, in_file, io_error};
use crate::rows::{Lead, Row, columns, header, parse_row, push_row, row_of, write_row};
use crate::table::{ColumnType, ColumnarReader, ColumnarWriter, TableFormat};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use threadx_backtest::{MetricSet, Strategy};
use threadx_profile_store::{AtomicFile, Staged};

/// Which results table: a grid's rows, a search's trials (a `trial` column first), or a
/// universe's rows (a `symbol` column first); a grid's and a search's rows carry a
/// portfolio's metrics when their combos run as one ([`MetricSet`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResultsKind {
    Grid(MetricSet),
    Trials(MetricSet),
    Universe,
}

impl ResultsKind {
    /// The columns before `combo`.
    pub(crate) fn lead(self) -> &'static [(&'static str, ColumnType)] {
        match self {
            Self::Grid(_) => &[],
            Self::Trials(_) => &[("trial", ColumnType::Key)],
            Self::Universe => &[("symbol", ColumnType::Text)],
        }
    }

    /// The metrics its rows carry.
    pub(crate) fn metrics(self) -> MetricSet {
        match self {
            Self::Grid(set) | Self::Trials(set) => set,
            Self::Universe => MetricSet::Run,
        }
    }

    /// The CSV header line (with its newline).
    pub(crate) fn header(self, strategy: &Strategy) -> String {
        let lead: String = self.lead().iter().map(|(name, _)| format!("{name},")).collect();
        format!("{lead}{}", header(strategy, self.metrics()))
    }
}

impl Lead<'_> {
    /// The table whose rows lead with this, carrying `set`'s metrics: a search's for a
    /// trial, a universe's for a symbol.
    pub(crate) fn kind(self, set: MetricSet) -> ResultsKind {
        match self {
            Self::None => ResultsKind::Grid(set),
            Self::Trial(_) => ResultsKind::Trials(set),
            Self::Symbol(_) => ResultsKind::Universe,
        }
    }
}

/// A results file being written; it appears whole when its [`ResultsWriter::stage`]d file is committed.
#[derive(Debug)]
pub(crate) enum ResultsWriter {
    Csv { path: PathBuf, file: AtomicFile, text: String, set: MetricSet },
    Columnar(Box<ColumnarWriter<AtomicFile>>, MetricSet),
}

/// CSV text is handed to the file in pieces of about this many bytes.
pub(crate) const TEXT_PIECE: usize = 1 << 20;

impl ResultsWriter {
    /// Creates `path` for a `kind` table of `strategy`, in the format its extension names.
    pub(crate) fn create(path: &Path, strategy: &Strategy, kind: ResultsKind) -> Result<Self, SweepError> {
        match TableFormat::of(path) {
            TableFormat::Csv => {
                let file = AtomicFile::create(path).map_err(io_error(path))?;
                Ok(Self::Csv { path: path.to_owned(), file, text: kind.header(strategy), set: kind.metrics() })
            }
            format => {
                let columns = columns((strategy, kind.metrics()), kind.lead());
                Ok(Self::Columnar(Box::new(ColumnarWriter::create(path, format, &columns)?), kind.metrics()))
            }
        }
    }

    /// CSV rows formatted by `rows.rs`: the rest of `from`, copied by the kernel.
    pub(crate) fn csv_file(&mut self, from: &mut fs::File) -> Result<(), SweepError> {
        match self {
            Self::Csv { path, file, text, .. } => {
                file.write_all(text.as_bytes()).map_err(io_error(path))?;
                text.clear();
                file.append_file(from).map_err(io_error(path)).map(drop)
            }
            Self::Columnar(..) => Err(SweepError::Results("CSV rows given to a columnar results file".into())),
        }
    }

    /// A row read from another results file: the line as it was read when both are CSV
    /// (a CSV merge copies the bytes it read), the row written anew otherwise.
    pub(crate) fn copy(&mut self, strategy: &Strategy, read: &ReadRow) -> Result<(), SweepError> {
        if let (Self::Csv { path, file, text, .. }, Some(line)) = (&mut *self, &read.line) {
            text.push_str(line);
            text.push('\n');
            return Self::spill(path, file, text);
        }
        self.row(strategy, read.lead(), &read.row)
    }

    fn spill(path: &Path, file: &mut AtomicFile, text: &mut String) -> Result<(), SweepError> {
        if text.len() >= TEXT_PIECE {
            file.write_all(text.as_bytes()).map_err(io_error(path))?;
            text.clear();
        }
        Ok(())
    }

    /// One row (after its trial or symbol when the table has one).
    pub(crate) fn row(&mut self, strategy: &Strategy, lead: Lead<'_>, row: &Row) -> Result<(), SweepError> {
        match self {
            Self::Csv { path, file, text, set } => {
                lead.push(text);
                write_row(text, (strategy, *set), row.combo, &row.values, &row.metrics);
                Self::spill(path, file, text)
            }
            Self::Columnar(w, set) => push_row(w, (strategy, *set), lead, row.combo, &row.values, &row.metrics),
        }
    }

    /// Writes the rest beside the file's place, its rename left to the caller (who stages
    /// a run's every output before putting any in place).
    pub(crate) fn stage(self) -> Result<Staged, SweepError> {
        match self {
            Self::Csv { path, mut file, text, .. } => {
                file.write_all(text.as_bytes()).map_err(io_error(&path))?;
                file.stage().map_err(io_error(&path))
            }
            Self::Columnar(w, _) => w.stage(),
        }
    }
}

/// One row read back: its trial (a search's) or symbol (a universe's), the row, and its
/// CSV line when the file is CSV (so that a CSV merge copies the bytes it read).
#[derive(Debug, Clone)]
pub(crate) struct ReadRow {
    pub trial: Option<u64>,
    pub symbol: Option<String>,
    pub row: Row,
    pub line: Option<String>,
}

impl ReadRow {
    pub(crate) fn lead(&self) -> Lead<'_> {
        match (self.trial, &self.symbol) {
            (Some(t), _) => Lead::Trial(t),
            (None, Some(s)) => Lead::Symbol(s),
            (None, None) => Lead::None,
        }
    }
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
    /// The lines after the header, and the number of the last one read (the header's: 1).
    Csv(std::io::Lines<BufReader<fs::File>>, usize),
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
                Source::Csv(reader.lines(), 1)
            }
            _ => {
                Source::Columnar(ColumnarReader::open(path, &columns((strategy, kind.metrics()), kind.lead()), &what)?)
            }
        };
        Ok(Self { path: path.to_owned(), strategy: strategy.clone(), kind, source })
    }

    /// The next row, or `None` at the end of the file.
    pub(crate) fn next_row(&mut self) -> Result<Option<ReadRow>, SweepError> {
        let kind = self.kind;
        let read = match &mut self.source {
            Source::Csv(lines, number) => match lines.next() {
                None => None,
                Some(line) => {
                    let line = line.map_err(io_error(&self.path))?;
                    *number += 1;
                    let at_line = |e: SweepError| SweepError::Results(format!("line {number}: {e}"));
                    let malformed = || at_line(SweepError::Results(format!("malformed row `{line}`")));
                    let (mut trial, mut symbol, mut rest) = (None, None, line.as_str());
                    if !matches!(kind, ResultsKind::Grid(_)) {
                        let (lead, after) = line.split_once(',').ok_or_else(malformed)?;
                        rest = after;
                        match kind {
                            ResultsKind::Trials(_) => trial = Some(lead.parse().map_err(|_| malformed())?),
                            _ => symbol = Some(lead.to_owned()),
                        }
                    }
                    let row = parse_row((&self.strategy, kind.metrics()), rest).map_err(at_line)?;
                    Some(ReadRow { trial, symbol, row, line: Some(line) })
                }
            },
            Source::Columnar(reader) => match reader.next_row()? {
                None => None,
                Some(r) => {
                    let missing = |what: &str| SweepError::Results(format!("a results row with no {what}"));
                    let (trial, symbol) = match kind {
                        ResultsKind::Grid(_) => (None, None),
                        ResultsKind::Trials(_) => {
                            (Some(r.int(0).filter(|&t| t >= 0).ok_or_else(|| missing("trial"))? as u64), None)
                        }
                        ResultsKind::Universe => (None, Some(r.text(0).ok_or_else(|| missing("symbol"))?.to_owned())),
                    };
                    let row = row_of((&self.strategy, kind.metrics()), &r, kind.lead().len())?;
                    Some(ReadRow { trial, symbol, row, line: None })
                }
            },
        };
        Ok(read)
    }
}

/// Every row of a grid's results file (CSV, Parquet or Arrow) of `strategy` (a single
/// run's or a portfolio's), in file order.
pub fn read_results(path: &Path, strategy: &Strategy) -> Result<Vec<Row>, SweepError> {
    let mut rows = Vec::new();
    for_each_result(path, strategy, false, &mut |row| {
        rows.push(*row);
        Ok(())
    })?;
    Ok(rows)
}

/// Hands `each` every row of a grid's results file (or, with `trials`, a search's) of
/// `strategy`, a single run's or a portfolio's, in file order, one at a time: a big file
/// is never held whole.
pub fn for_each_result(
    path: &Path,
    strategy: &Strategy,
    trials: bool,
    each: &mut dyn FnMut(&Row) -> Result<(), SweepError>,
) -> Result<(), SweepError> {
    let kind = |set| if trials { ResultsKind::Trials(set) } else { ResultsKind::Grid(set) };
    let mut reader = match ResultsReader::open(path, strategy, kind(MetricSet::Run)) {
        Ok(reader) => reader,
        Err(e) => ResultsReader::open(path, strategy, kind(MetricSet::Portfolio)).map_err(|_| e)?,
    };
    while let Some(r) = reader.next_row().map_err(|e| in_file(path, e))? {
        each(&r.row)?;
    }
    Ok(())
}
