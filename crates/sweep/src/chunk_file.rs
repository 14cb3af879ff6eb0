//! A checkpoint chunk's rows on disk, checksummed (XXH3-64) so that a file changed on disk
//! is never taken into results. Each is made on the worker that ran the chunk, in the form
//! the results file joins cheapest: a run writing CSV keeps the CSV's own text
//! (`chunk-N.csv`: the results file is those texts joined); one writing Parquet or Arrow
//! keeps binary rows (`chunk-N.rows`: combo and the metrics' f64 bits, zstd-compressed),
//! since that file's row groups are cut by row count, never by chunk.

use crate::error::{SweepError, in_file, io_error};
use crate::rows::{Lead, ParamTexts, Row, parse_row};
use crate::runner::ChunkResult;
use crate::table::TableFormat;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use threadx_backtest::{MOST_METRICS, MetricSet, SignalBook, Strategy};

/// The checksum of a checkpoint's or a shard's file: XXH3-64 (twox-hash). FNV-1a, a byte
/// at a time, took 8 % of a CSV run's CPU over the hundreds of MB it checkpoints.
pub(crate) fn checksum(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(bytes)
}

/// A checksum as a summary records it (a plot's, a shard's results file's): `xxh3-64:`
/// and 16 hex digits.
pub(crate) fn tagged(sum: u64) -> String {
    format!("xxh3-64:{sum:016x}")
}

/// [`tagged`] of a file's bytes, read in pieces: what a shard's summary records of its
/// results file (`results_checksum`), for `merge` to refuse a shard changed since.
pub(crate) fn file_checksum(path: &Path) -> Result<String, SweepError> {
    let mut hasher = twox_hash::XxHash3_64::new();
    let mut file = fs::File::open(path).map_err(io_error(path))?;
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).map_err(io_error(path))?;
        if n == 0 {
            break;
        }
        std::hash::Hasher::write(&mut hasher, &buffer[..n]);
    }
    Ok(tagged(std::hash::Hasher::finish(&hasher)))
}

/// The first line of a text chunk: the checksum of the rows after it.
const CHECKSUM: &str = "# xxh3-64 ";

/// That line's length: the tag, 16 hex digits, the newline.
const CHECKSUM_LINE: usize = CHECKSUM.len() + 17;

/// A text chunk's file: the checksum line, then the rows `write` appends (about `bytes`
/// of them). The line's place is kept and filled in once the rows are there: the rows
/// are never copied.
pub(crate) fn text_chunk(bytes: usize, write: impl FnOnce(&mut String)) -> Vec<u8> {
    let mut text = String::with_capacity(CHECKSUM_LINE + bytes);
    text.extend(std::iter::repeat_n(' ', CHECKSUM_LINE));
    write(&mut text);
    let line = format!("{CHECKSUM}{:016x}\n", checksum(&text.as_bytes()[CHECKSUM_LINE..]));
    let mut file = text.into_bytes();
    file[..CHECKSUM_LINE].copy_from_slice(line.as_bytes());
    file
}

/// The rows of a text chunk's file, or why they cannot be trusted.
fn verified_rows(text: &str) -> Result<&str, &'static str> {
    let (first, rows) = text.split_once('\n').ok_or("no checksum line")?;
    let sum = first.strip_prefix(CHECKSUM).ok_or("no checksum line")?;
    if u64::from_str_radix(sum, 16) != Ok(checksum(rows.as_bytes())) {
        return Err("its rows do not match their checksum");
    }
    Ok(rows)
}

fn changed(path: &Path, why: &str) -> SweepError {
    SweepError::Results(format!("{}: {why}: the checkpoint was changed on disk", path.display()))
}

/// Reads a text chunk's file and checks its checksum.
pub(crate) fn read_chunk(path: &Path) -> Result<String, SweepError> {
    let text = fs::read_to_string(path).map_err(io_error(path))?;
    verified_rows(&text).map(str::to_owned).map_err(|why| changed(path, why))
}

/// The text chunk file of chunk (or search batch) `chunk`.
pub(crate) fn chunk_path(parts: &Path, chunk: u64) -> PathBuf {
    parts.join(format!("chunk-{chunk:08}.csv"))
}

/// The first bytes of a binary chunk.
const MAGIC: &[u8; 8] = b"TXROWZ02";

/// The zstd level of a binary chunk's rows: a chunk's metrics repeat (trade counts, the
/// returns of neighbouring combos), so level 1 shrinks them ~17 times in about a
/// millisecond a MB, less than writing them whole costs.
const ZSTD_LEVEL: i32 = 1;

/// A binary row's bytes: the combo, then each of `set`'s metrics' f64 bits, little endian.
const fn row_bytes(set: MetricSet) -> usize {
    8 * (1 + set.count())
}

/// How a grid run keeps its chunks: as text for a CSV results file, as binary rows for a
/// Parquet or Arrow one (whose row groups are cut by row count when the file is written,
/// never by chunk).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChunkForm {
    Text,
    Binary,
}

impl ChunkForm {
    /// The form for a run writing `out`.
    pub(crate) fn of(out: &Path) -> Self {
        match TableFormat::of(out) {
            TableFormat::Csv => Self::Text,
            TableFormat::Parquet | TableFormat::Arrow => Self::Binary,
        }
    }

    pub(crate) fn path(self, parts: &Path, chunk: u64) -> PathBuf {
        match self {
            Self::Text => chunk_path(parts, chunk),
            Self::Binary => parts.join(format!("chunk-{chunk:08}.rows")),
        }
    }

    /// The file of a finished chunk's rows carrying `set`'s metrics, each after its
    /// `lead` (a universe's symbol; binary rows leave it to the results file).
    pub(crate) fn encode(
        self,
        book: &SignalBook,
        r: &ChunkResult,
        (lead, set): (Lead<'_>, MetricSet),
    ) -> Result<Vec<u8>, SweepError> {
        let grid = || book.grid().ok_or_else(|| SweepError::Spec("checkpoint chunks hold a grid's combos".into()));
        Ok(match self {
            Self::Text => {
                let mut params = ParamTexts::new(grid()?, set);
                text_chunk(r.combos.len() * 128, |text| {
                    for (&combo, m) in r.combos.iter().zip(&r.metrics) {
                        lead.push(text);
                        params.write_row(text, combo, m);
                    }
                })
            }
            Self::Binary => {
                let mut rows = Vec::with_capacity(r.combos.len() * row_bytes(set));
                for (&combo, m) in r.combos.iter().zip(&r.metrics) {
                    rows.extend_from_slice(&combo.to_le_bytes());
                    for &v in &MetricSet::values(m)[..set.count()] {
                        rows.extend_from_slice(&v.to_bits().to_le_bytes());
                    }
                }
                let mut bytes = MAGIC.to_vec();
                zstd::stream::copy_encode(rows.as_slice(), &mut bytes, ZSTD_LEVEL)
                    .map_err(|e| SweepError::Results(format!("compressing a chunk's rows: {e}")))?;
                let sum = checksum(&bytes[MAGIC.len()..]);
                bytes.extend_from_slice(&sum.to_le_bytes());
                bytes
            }
        })
    }

    /// A text chunk's file, past its checksum line: its rows as they go into the results
    /// file. The rows were checked when this run wrote them or took them on resume.
    pub(crate) fn rows_file(self, path: &Path) -> Result<fs::File, SweepError> {
        debug_assert_eq!(self, Self::Text);
        let mut file = fs::File::open(path).map_err(io_error(path))?;
        let mut line = [0u8; CHECKSUM_LINE];
        file.read_exact(&mut line).map_err(io_error(path))?;
        if !line.starts_with(CHECKSUM.as_bytes()) || line[CHECKSUM_LINE - 1] != b'\n' {
            return Err(changed(path, "no checksum line"));
        }
        Ok(file)
    }

    /// Checks a chunk's file of rows carrying `set`'s metrics (its checksum, not its rows' values).
    pub(crate) fn verify(self, path: &Path, set: MetricSet) -> Result<(), SweepError> {
        match self {
            Self::Text => read_chunk(path).map(drop),
            Self::Binary => binary_rows(path, &fs::read(path).map_err(io_error(path))?, set).map(drop),
        }
    }

    /// The rows of a chunk's file (written with `lead`, carrying `set`'s metrics),
    /// checked; values from `book`'s grid.
    pub(crate) fn rows(
        self,
        path: &Path,
        (strategy, set): (&Strategy, MetricSet),
        book: &SignalBook,
        lead: Lead<'_>,
    ) -> Result<Vec<Row>, SweepError> {
        match self {
            Self::Text => read_chunk(path)?
                .lines()
                .map(|line| {
                    let row = match lead {
                        Lead::Symbol(s) => line.strip_prefix(s).and_then(|l| l.strip_prefix(',')),
                        _ => Some(line),
                    };
                    let row = row.ok_or_else(|| SweepError::Results(format!("a row of another symbol `{line}`")));
                    row.and_then(|row| parse_row((strategy, set), row)).map_err(|e| in_file(path, e))
                })
                .collect(),
            Self::Binary => {
                let rows = binary_rows(path, &fs::read(path).map_err(io_error(path))?, set)?;
                let word = |b: &[u8], k: usize| u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().unwrap_or_default());
                Ok(rows
                    .chunks_exact(row_bytes(set))
                    .map(|b| {
                        let combo = word(b, 0);
                        let mut m = [0.0; MOST_METRICS];
                        for (k, slot) in m[..set.count()].iter_mut().enumerate() {
                            *slot = f64::from_bits(word(b, k + 1));
                        }
                        Row { combo, values: book.combo_values(combo), metrics: set.metrics(&m) }
                    })
                    .collect())
            }
        }
    }
}

/// The rows of a binary chunk's bytes (rows carrying `set`'s metrics), checked and decompressed.
fn binary_rows(path: &Path, bytes: &[u8], set: MetricSet) -> Result<Vec<u8>, SweepError> {
    let body = bytes
        .strip_prefix(MAGIC.as_slice())
        .filter(|b| b.len() >= 8)
        .ok_or_else(|| changed(path, "not a binary chunk"))?;
    let (packed, sum) = body.split_at(body.len() - 8);
    if checksum(packed).to_le_bytes() != sum {
        return Err(changed(path, "its rows do not match their checksum"));
    }
    let rows =
        zstd::stream::decode_all(packed).map_err(|e| changed(path, &format!("its rows do not decompress: {e}")))?;
    if rows.len() % row_bytes(set) != 0 {
        return Err(changed(path, "not a binary chunk of whole rows"));
    }
    Ok(rows)
}
