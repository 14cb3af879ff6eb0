//! Bars as a reader found them, before they are checked ([`ReadBars`]): where each sits
//! in its source and, with a `symbol` column, whose it is; the header rule every reader
//! follows ([`find_columns`]) and the CSV reader itself. The readers of Parquet and Arrow
//! (`columnar.rs`) stand on it; `load.rs` chooses between them.

use crate::bar_columns::{FIELDS, TIME_COLUMNS, parse_time};
use crate::csv_input::{CheckedInput, cut, quoted};
use crate::error::{DataError, Place};
use crate::ohlcv::Ohlcv;
use rayon::prelude::*;
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

/// Where a CSV's fields sit: the columns of a bar (time, open, high, low, close, volume,
/// the last optional) and of the symbol.
#[derive(Clone, Copy)]
struct CsvLayout {
    columns: [Option<usize>; 6],
    symbol: Option<usize>,
    /// The header's fields (none without a header: klines have as many as they have).
    fields: Option<usize>,
}

/// Bars of a stretch of CSV lines, in order, before they are joined.
#[derive(Default)]
struct CsvRows {
    timestamps: Vec<i64>,
    columns: [Vec<f64>; 5],
    lines: Vec<usize>,
    symbols: Option<SymbolColumn>,
}

/// Text stretches at least this long are parsed side by side on the pool.
const PARALLEL_BYTES: usize = 1 << 20;

impl ReadBars {
    /// The bars of a CSV file (see [`Ohlcv::read_csv`]).
    pub(crate) fn read_csv(path: &Path) -> Result<Self, DataError> {
        let io = |source| DataError::Io { path: path.to_owned(), source };
        let file = std::fs::File::open(path).map_err(io)?;
        Self::parse_csv(&path.display().to_string(), std::io::BufReader::with_capacity(1 << 16, file))
    }

    /// The bars of CSV text: read whole through [`CheckedInput`] (which refuses a binary or
    /// compressed file at once), then parsed in stretches of whole lines on the pool when
    /// the text is long and has no quotes (a quoted field may hold a line break), and
    /// joined in order: the same bars, lines and first error as one pass.
    pub(crate) fn parse_csv(origin: &str, input: impl std::io::Read) -> Result<Self, DataError> {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut CheckedInput::new(input), &mut text)
            .map_err(|e| DataError::Format { origin: origin.to_owned(), problem: e.to_string() })?;
        let mut reader = csv_reader(&text[..]);
        let mut first = csv::StringRecord::new();
        if !reader.read_record(&mut first).map_err(|e| record_error(origin, 0, e))? {
            return Err(DataError::Empty { origin: origin.to_owned() });
        }
        let headerless = first.get(0).is_some_and(|f| f.trim_ascii().parse::<f64>().is_ok());
        let (layout, rows_from) = if headerless {
            (CsvLayout { columns: [0, 1, 2, 3, 4, 5].map(Some), symbol: None, fields: None }, 0)
        } else {
            let header: Vec<&str> = first.iter().map(str::trim_ascii).collect();
            let (found, volume) = find_columns(origin, &header)?;
            let symbol = header.iter().position(|h| h.eq_ignore_ascii_case(SYMBOL_COLUMN));
            let columns = [Some(found[0]), Some(found[1]), Some(found[2]), Some(found[3]), Some(found[4]), volume];
            (CsvLayout { columns, symbol, fields: Some(header.len()) }, reader.position().byte() as usize)
        };
        let rows = &text[rows_from..];
        let first_line = 1 + memchr::memchr_iter(b'\n', &text[..rows_from]).count();
        let parts: Vec<Result<CsvRows, DataError>> = line_stretches(rows, first_line)
            .into_par_iter()
            .map(|(at, line)| parse_rows(origin, at, line, layout))
            .collect();
        let mut all = CsvRows { symbols: layout.symbol.map(|_| SymbolColumn::default()), ..CsvRows::default() };
        for part in parts {
            all.append(part?);
        }
        if all.timestamps.is_empty() {
            return Err(DataError::Empty { origin: origin.to_owned() });
        }
        let [open, high, low, close, volume] = all.columns;
        let bars = Ohlcv::unchecked(origin.to_owned(), all.timestamps, open, high, low, close, volume);
        Ok(ReadBars { bars, lines: Some(all.lines), symbols: all.symbols })
    }
}

/// The CSV reader every stretch uses. Records end at `\n` (a `\r` before it is trimmed as
/// whitespace): the csv crate's CRLF terminator numbered a CRLF file's lines one too low.
/// Fields are trimmed as they are read (`str::trim_ascii`, what the csv crate's trim does),
/// not by the crate, whose trim copies every record.
fn csv_reader(text: &[u8]) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .terminator(csv::Terminator::Any(b'\n'))
        .from_reader(text)
}

/// `rows` cut into stretches of whole lines, each with the file's line number of its
/// first byte: one stretch when it is short or holds a quote.
fn line_stretches(rows: &[u8], first_line: usize) -> Vec<(&[u8], usize)> {
    let pieces = (rows.len() / PARALLEL_BYTES).min(4 * rayon::current_num_threads());
    if pieces < 2 || memchr::memchr(b'"', rows).is_some() {
        return vec![(rows, first_line)];
    }
    let mut stretches = Vec::with_capacity(pieces);
    let (mut start, mut line) = (0, first_line);
    for k in 1..=pieces {
        let end = if k == pieces {
            rows.len()
        } else {
            let guess = (rows.len() * k / pieces).max(start);
            memchr::memchr(b'\n', &rows[guess..]).map_or(rows.len(), |i| guess + i + 1)
        };
        if end > start {
            stretches.push((&rows[start..end], line));
            line += memchr::memchr_iter(b'\n', &rows[start..end]).count();
            start = end;
        }
    }
    stretches
}

/// A CSV error as the loader reports it, `line_base` added to the stretch's line numbers.
fn record_error(origin: &str, line_base: usize, e: csv::Error) -> DataError {
    let line = line_base + e.position().map_or(0, |p| p.line() as usize);
    match e.kind() {
        csv::ErrorKind::Io(io) => DataError::Format { origin: origin.to_owned(), problem: io.to_string() },
        csv::ErrorKind::Utf8 { .. } => DataError::Format {
            origin: origin.to_owned(),
            problem: format!("line {line} is not UTF-8 text (save the file as UTF-8)"),
        },
        _ => invalid(origin, line, "-", e.to_string()),
    }
}

fn invalid(origin: &str, line: usize, column: &str, problem: String) -> DataError {
    DataError::Invalid { origin: origin.to_owned(), line, column: column.to_owned(), problem }
}

/// The bars of one stretch of lines, `first_line` being the file's line of its first byte.
fn parse_rows(origin: &str, text: &[u8], first_line: usize, layout: CsvLayout) -> Result<CsvRows, DataError> {
    let lines_estimate = text.len() / 48;
    let mut rows = CsvRows {
        timestamps: Vec::with_capacity(lines_estimate),
        columns: [(); 5].map(|()| Vec::with_capacity(lines_estimate)),
        lines: Vec::with_capacity(lines_estimate),
        symbols: layout.symbol.map(|_| SymbolColumn::default()),
    };
    let base = first_line - 1;
    let mut reader = csv_reader(text);
    let mut record = csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(|e| record_error(origin, base, e))? {
        let line = base + record.position().map_or(0, |p| p.line() as usize);
        if record.iter().all(|f| f.trim_ascii().is_empty()) {
            continue;
        }
        // A row longer than the header (a stray comma, a column added mid-file) is not read
        // by guess; empty fields past it (a trailing comma) say nothing.
        if let Some(n) = layout.fields.filter(|&n| record.iter().skip(n).any(|f| !f.trim_ascii().is_empty())) {
            let problem = format!("line {line} has {} fields where the header has {n}", record.len());
            return Err(DataError::Format { origin: origin.to_owned(), problem });
        }
        let field = |c: usize| -> Result<&str, DataError> {
            let index = layout.columns[c].unwrap_or(usize::MAX);
            record
                .get(index)
                .map(str::trim_ascii)
                .ok_or_else(|| invalid(origin, line, FIELDS[c], "missing field".into()))
        };
        rows.timestamps.push(parse_time(field(0)?).map_err(|p| invalid(origin, line, FIELDS[0], p))?);
        let number = |c: usize| -> Result<f64, DataError> {
            let text = field(c)?;
            text.parse::<f64>()
                .map_err(|_| invalid(origin, line, FIELDS[c], format!("{} is not a number", quoted(text))))
        };
        for c in 0..4 {
            rows.columns[c].push(number(c + 1)?);
        }
        rows.columns[4].push(if layout.columns[5].is_some() { number(5)? } else { 0.0 });
        if let (Some(symbols), Some(c)) = (&mut rows.symbols, layout.symbol) {
            match record.get(c).map(str::trim_ascii).filter(|s| !s.is_empty()) {
                Some(name) => symbols.push(name),
                None => return Err(invalid(origin, line, SYMBOL_COLUMN, "no symbol".into())),
            }
        }
        rows.lines.push(line);
    }
    Ok(rows)
}

impl CsvRows {
    /// The rows of the next stretch after these (its symbols renumbered in order of first
    /// sight over the whole file).
    fn append(&mut self, mut next: CsvRows) {
        self.timestamps.append(&mut next.timestamps);
        for (all, part) in self.columns.iter_mut().zip(&mut next.columns) {
            all.append(part);
        }
        self.lines.append(&mut next.lines);
        if let (Some(all), Some(part)) = (&mut self.symbols, next.symbols) {
            for &s in &part.of_bar {
                all.push(&part.names[s as usize]);
            }
        }
    }
}
