//! Many symbols' bars in one `--data`: a [`Universe`] from a glob pattern
//! (`dir/*.parquet`), a folder of data files, or one long file (or Arrow table) whose
//! `symbol` column holds several symbols. Each symbol's bars are read, split and checked
//! on their own, when a run reaches them (a long file is split once, on reading).

use crate::error::DataError;
use crate::ohlcv::{Ohlcv, Place};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// What a `--data` source holds: one data set, or a universe of symbols.
#[derive(Debug)]
pub enum MarketData {
    Bars(Ohlcv),
    Universe(Universe),
}

impl MarketData {
    /// Loads a `--data` source: a glob pattern (`*`, `?` or `[` in a path that is no
    /// file) or a folder is a universe of files, a symbol each; a file whose `symbol`
    /// column holds several symbols is a universe of them; anything else is one data set
    /// ([`Ohlcv::load`]'s rules).
    pub fn load(source: &str) -> Result<Self, DataError> {
        let path = Path::new(source);
        let is_pattern = source.contains(['*', '?', '[']) && !path.exists();
        if is_pattern || path.is_dir() {
            return Universe::of_files(source).map(Self::Universe);
        }
        if source == "synthetic" || source.starts_with("synthetic:") {
            return Ohlcv::load(source).map(Self::Bars);
        }
        Self::of(source, ReadBars::read_file(path)?)
    }

    /// An Arrow IPC stream in memory (a pyarrow or polars table from Python), under the
    /// rules of [`MarketData::load`]'s files; `origin` names it in errors.
    pub fn from_arrow_stream(origin: &str, stream: &[u8]) -> Result<Self, DataError> {
        Self::of(origin, ReadBars::read_arrow_stream(origin, stream)?)
    }

    /// A universe when the bars' `symbol` column holds several symbols, else one data set.
    fn of(origin: &str, read: ReadBars) -> Result<Self, DataError> {
        match read.symbols.as_ref().is_some_and(|s| s.names.len() > 1) {
            true => Universe::new(origin, read.split()?).map(Self::Universe),
            false => read.single().map(Self::Bars),
        }
    }
}

/// Many symbols' bars, swept with the same grid one symbol at a time: each symbol's bars
/// are read when [`Universe::load`] asks for them (a long file's are held, split). The
/// symbols are sorted by name; a name is never empty, repeated, or a CSV field's trouble
/// (a comma, a quote, a line break).
#[derive(Debug, Clone)]
pub struct Universe {
    origin: String,
    symbols: Vec<(String, Source)>,
}

#[derive(Debug, Clone)]
enum Source {
    File(PathBuf),
    Bars(Arc<Ohlcv>),
}

/// The extensions of the data files a folder's universe takes (any case).
const DATA_EXTENSIONS: [&str; 6] = ["csv", "parquet", "pq", "arrow", "feather", "ipc"];

impl Universe {
    /// Symbols given as bars (a long file split, or Python's dict of frames); `origin`
    /// names them all in messages.
    pub fn new(origin: &str, symbols: Vec<(String, Ohlcv)>) -> Result<Self, DataError> {
        let symbols = symbols.into_iter().map(|(name, bars)| (name, Source::Bars(Arc::new(bars)))).collect();
        Self::checked(origin, symbols)
    }

    /// The files a glob pattern matches, or the data files of a folder (by extension:
    /// [`DATA_EXTENSIONS`]), each a symbol named by its file name without the extension.
    fn of_files(source: &str) -> Result<Self, DataError> {
        let invalid = |problem: String| DataError::Format { origin: source.to_owned(), problem };
        let mut files: Vec<PathBuf> = if Path::new(source).is_dir() {
            let entries = std::fs::read_dir(source).map_err(|e| DataError::Io { path: source.into(), source: e })?;
            let mut files = Vec::new();
            for entry in entries {
                let path = entry.map_err(|e| DataError::Io { path: source.into(), source: e })?.path();
                let data = path
                    .extension()
                    .is_some_and(|e| DATA_EXTENSIONS.iter().any(|d| e.to_string_lossy().eq_ignore_ascii_case(d)));
                let hidden = path.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'));
                if data && !hidden && path.is_file() {
                    files.push(path);
                }
            }
            if files.is_empty() {
                return Err(invalid(format!("a folder with no data files ({})", DATA_EXTENSIONS.join(", "))));
            }
            files
        } else {
            let matches = glob::glob(source).map_err(|e| invalid(format!("not a valid pattern: {e}")))?;
            let files = matches
                .map(|m| m.map_err(|e| DataError::Io { path: e.path().to_owned(), source: e.into() }))
                .filter(|m| m.as_ref().is_ok_and(|p| p.is_file()) || m.is_err())
                .collect::<Result<Vec<_>, _>>()?;
            if files.is_empty() {
                return Err(invalid("no file matches the pattern".into()));
            }
            files
        };
        files.sort();
        let symbols = files
            .into_iter()
            .map(|f| (f.file_stem().unwrap_or_default().to_string_lossy().into_owned(), Source::File(f)))
            .collect();
        Self::checked(source, symbols)
    }

    fn checked(origin: &str, mut symbols: Vec<(String, Source)>) -> Result<Self, DataError> {
        let invalid = |problem: String| DataError::Format { origin: origin.to_owned(), problem };
        if symbols.is_empty() {
            return Err(invalid("no symbols".into()));
        }
        symbols.sort_by(|a, b| a.0.cmp(&b.0));
        let from = |s: &Source| match s {
            Source::File(path) => format!(" ({})", path.display()),
            Source::Bars(_) => String::new(),
        };
        let quoted = |s: &Source| match s {
            Source::File(path) => format!(" ({path:?})"),
            Source::Bars(_) => String::new(),
        };
        for (name, source) in &symbols {
            // Quoted as Rust quotes it, so that a control character is shown, not obeyed.
            if name.is_empty() || name.contains([',', '"']) || name.contains(char::is_control) || name.trim() != name {
                return Err(invalid(format!(
                    "the symbol name {name:?}{} is empty, or has a comma, quote, control character (a NUL, tab, \
                     line break, escape…) or edge space, which the results' `symbol` column and a terminal cannot \
                     hold",
                    quoted(source)
                )));
            }
        }
        for pair in symbols.windows(2) {
            if pair[0].0 == pair[1].0 {
                return Err(invalid(format!(
                    "two data sets are named `{}`{}{}: a symbol's name must be its own",
                    pair[0].0,
                    from(&pair[0].1),
                    from(&pair[1].1)
                )));
            }
        }
        Ok(Self { origin: origin.to_owned(), symbols })
    }

    /// What the universe was given as (a pattern, a folder, a file), for messages.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The number of symbols (at least one).
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// Always false: a universe holds at least one symbol.
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The symbols' names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.symbols.iter().map(|(name, _)| name.as_str())
    }

    /// The files the symbols are read from (none for bars held).
    pub fn files(&self) -> Vec<&Path> {
        self.symbols
            .iter()
            .filter_map(|(_, s)| match s {
                Source::File(path) => Some(path.as_path()),
                Source::Bars(_) => None,
            })
            .collect()
    }

    /// Symbol `i`'s name.
    pub fn name(&self, i: usize) -> &str {
        &self.symbols[i].0
    }

    /// Symbol `i`'s bars: read now from its file, or the bars held.
    pub fn load(&self, i: usize) -> Result<Arc<Ohlcv>, DataError> {
        match &self.symbols[i].1 {
            Source::File(path) => Ohlcv::read_file(path).map(Arc::new),
            Source::Bars(bars) => Ok(bars.clone()),
        }
    }
}
