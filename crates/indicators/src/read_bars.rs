//! Bars as a reader found them, before they are checked ([`ReadBars`]): where each sits
//! in its source and, with a `symbol` column, whose it is; the header rule every reader
//! follows ([`find_columns`]) and the CSV reader itself. The readers of Parquet and Arrow
//! (`columnar.rs`) stand on it; `load.rs` chooses between them.

use crate::bar_columns::{FIELDS, TIME_COLUMNS, parse_time};
use crate::csv_input::{CheckedInput, cut, quoted};
use crate::error::{DataError, Place};
use crate::ohlcv::Ohlcv;
use std::collections::HashMap;
use std::path::Path;

/// The name of the column that tells a long file's symbols apart (any case).
pub(crate) const SYMBOL_COLUMN: &str = "symbol";

/// Each bar's symbol, as read: a number per bar and the names in order of first sight.
#[derive(Debug, Default)]
pub(crate) struct SymbolColumn {
    of_bar: Vec<u32>,
    names: Vec<String>,
    index: HashMap<String, u32>,
}

impl SymbolColumn {
    pub(crate) fn push(&mut self, name: &str) {
        let next = self.names.len() as u32;
        let i = match self.index.get(name) {
            Some(&i) => i,
            None => {
                self.index.insert(name.to_owned(), next);
                self.names.push(name.to_owned());
                next
            }
        };
        self.of_bar.push(i);
    }
}

/// Bars read from a file or an Arrow table, not yet checked: where each sits (a CSV line,
/// else its 0-based row) and, with a `symbol` column, each one's symbol.
#[derive(Debug)]
pub(crate) struct ReadBars {
    pub(crate) bars: Ohlcv,
    pub(crate) lines: Option<Vec<usize>>,
    pub(crate) symbols: Option<SymbolColumn>,
}

impl ReadBars {
    fn place(&self, bar: usize) -> Place {
        match &self.lines {
            Some(lines) => Place::Line(lines[bar]),
            None => Place::Row(bar),
        }
    }

    /// Whether the bars' `symbol` column names more than one symbol.
    pub(crate) fn has_several_symbols(&self) -> bool {
        self.symbols.as_ref().is_some_and(|s| s.names.len() > 1)
    }

    /// The bars of one symbol, checked; a `symbol` column naming more than one is refused.
    pub(crate) fn single(self) -> Result<Ohlcv, DataError> {
        if let Some(symbols) = self.symbols.as_ref().filter(|s| s.names.len() > 1) {
            let mut names = symbols.names.clone();
            names.sort();
            return Err(DataError::Format {
                origin: self.bars.origin().to_owned(),
                problem: format!(
                    "its `symbol` column holds {} symbols ({}): give one symbol's bars, or run a sweep over \
                     them all (`--data` of the file, or a dict of frames in Python)",
                    names.len(),
                    listed(&names)
                ),
            });
        }
        self.bars.validate(|i| self.place(i))?;
        Ok(self.bars)
    }

    /// The bars of each symbol (by name), each checked where its bars sit in the source;
    /// one unnamed symbol when there is no `symbol` column.
    pub(crate) fn split(self) -> Result<Vec<(String, Ohlcv)>, DataError> {
        let Some(symbols) = &self.symbols else {
            self.bars.validate(|i| self.place(i))?;
            return Ok(vec![(String::new(), self.bars)]);
        };
        let mut rows: Vec<Vec<usize>> = vec![Vec::new(); symbols.names.len()];
        for (bar, &s) in symbols.of_bar.iter().enumerate() {
            rows[s as usize].push(bar);
        }
        // A long file's rows come in any order: each symbol's in time order, a stable sort
        // (two rows of one time stay in file order, and the later is named as a duplicate).
        let times = self.bars.timestamps();
        for rows in &mut rows {
            rows.sort_by_key(|&r| times[r]);
        }
        let mut split = Vec::with_capacity(rows.len());
        for (name, rows) in symbols.names.iter().zip(&rows) {
            let bars = self.bars.gather(rows, format!("{} [{name}]", self.bars.origin()));
            bars.validate(|i| self.place(rows[i]))?;
            split.push((name.clone(), bars));
        }
        split.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(split)
    }
}

/// `a`, `b`, `c`, … (the first few names).
fn listed(names: &[String]) -> String {
    let shown: Vec<String> = names.iter().take(4).map(|n| format!("`{n}`")).collect();
    format!("{}{}", shown.join(", "), if names.len() > shown.len() { ", …" } else { "" })
}

/// The positions of the time, open, high, low, close and volume columns in `header`
/// (names in any case; the time column as [`columns_help`](crate::columns_help) says, or an unnamed first
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

impl ReadBars {
    /// The bars of a CSV file (see [`Ohlcv::read_csv`]).
    pub(crate) fn read_csv(path: &Path) -> Result<Self, DataError> {
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
        let mut timestamps = Vec::new();
        let [mut open, mut high, mut low, mut close, mut volume] = [(); 5].map(|()| Vec::<f64>::new());
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
            timestamps.push(parse_time(field(0)?).map_err(|p| invalid(line, FIELDS[0], p))?);
            let number = |c: usize| -> Result<f64, DataError> {
                let text = field(c)?;
                text.parse::<f64>().map_err(|_| invalid(line, FIELDS[c], format!("{} is not a number", quoted(text))))
            };
            open.push(number(1)?);
            high.push(number(2)?);
            low.push(number(3)?);
            close.push(number(4)?);
            volume.push(if columns[5].is_some() { number(5)? } else { 0.0 });
            if let (Some(symbols), Some(c)) = (&mut symbols, symbol_column) {
                match record.get(c).filter(|s| !s.is_empty()) {
                    Some(name) => symbols.push(name),
                    None => return Err(invalid(line, SYMBOL_COLUMN, "no symbol".into())),
                }
            }
            lines.push(line);
        }
        if timestamps.is_empty() {
            return Err(DataError::Empty { origin: origin.to_owned() });
        }
        let bars = Ohlcv::unchecked(origin.to_owned(), timestamps, open, high, low, close, volume);
        Ok(ReadBars { bars, lines: Some(lines), symbols })
    }
}
