//! Many symbols' bars in one `--data`: a [`Universe`] from a glob pattern
//! (`dir/*.parquet`), a folder of data files, or one long file (or Arrow table) whose
//! `symbol` column holds several symbols. Each symbol's bars are read, split and checked
//! on their own, when a run reaches them (a long file is split once, on reading).

use crate::columnar::read_arrow_stream;
use crate::error::DataError;
use crate::load::{names_many_files, read_bars_file};
use crate::ohlcv::Ohlcv;
use crate::read_bars::ReadBars;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
        if names_many_files(source) {
            return Universe::of_files(source).map(Self::Universe);
        }
        if source == "synthetic" || source.starts_with("synthetic:") {
            return Ohlcv::load(source).map(Self::Bars);
        }
        Self::of(source, read_bars_file(Path::new(source))?)
    }

    /// An Arrow IPC stream in memory (a pyarrow or polars table from Python), under the
    /// rules of [`MarketData::load`]'s files; `origin` names it in errors.
    pub fn from_arrow_stream(origin: &str, stream: &[u8]) -> Result<Self, DataError> {
        Self::of(origin, read_arrow_stream(origin, stream)?)
    }

    /// A universe when the bars' `symbol` column holds several symbols, else one data set.
    fn of(origin: &str, read: ReadBars) -> Result<Self, DataError> {
        match read.has_several_symbols() {
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

    /// Every symbol's name and bars, in order (all of them held at once: a portfolio's).
    pub fn load_all(&self) -> Result<Vec<(String, Arc<Ohlcv>)>, DataError> {
        (0..self.len()).map(|i| Ok((self.name(i).to_owned(), self.load(i)?))).collect()
    }

    /// Symbol `i`'s bars: read now from its file, or the bars held.
    pub fn load(&self, i: usize) -> Result<Arc<Ohlcv>, DataError> {
        match &self.symbols[i].1 {
            Source::File(path) => Ohlcv::read_file(path).map(Arc::new),
            Source::Bars(bars) => Ok(bars.clone()),
        }
    }
}
