//! The per-combo table across a universe's symbols (`<out>-by-combo`): for each combo,
//! how many symbols have a value of the objective, its mean (summed in symbol order),
//! median (the middle value, or the mean of the two middle ones) and minimum over them,
//! and the share of symbols whose total return is positive: the parameters that hold
//! across a universe.
//!
//! With `--constraint`, it also counts the symbols on which each combo keeps the rules
//! (`passing_symbols`), and the best combos are those that keep them on every symbol.
//!
//! It is made from four numbers per row (combo, objective, total return, whether it keeps
//! the constraints) kept as each symbol's rows go by, one small file per symbol, then read
//! back in blocks of combos side by side: memory holds a block, never every symbol's rows.

use crate::error::{SweepError, io_error};
use crate::leaderboard::metric_index;
use crate::rows::{Row, combo_param_columns, param_cell, push_combo_params};
use crate::runner::ChunkResult;
use crate::search::Constraint;
use crate::summary::{ByCombo, ComboLine, params_json};
use crate::table::{ArrowTable, Cell, ColumnType, ColumnarWriter, TableFormat};
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use threadx_backtest::{Grid, ParamValues, Strategy};
use threadx_profile_store::AtomicFile;

/// Bytes of a kept row: combo, objective, total return, whether it keeps the constraints.
const RECORD: usize = 32;

/// Rows of every symbol read side by side at a time: about this many bytes.
const BLOCK_BYTES: usize = 32 << 20;

/// The numbers of a universe's rows, kept symbol by symbol (in order), each symbol's in
/// combo order.
#[derive(Debug)]
pub(crate) struct Across {
    dir: PathBuf,
    by: String,
    by_index: usize,
    /// Whether the best combos have the smallest median (`--minimize`).
    minimize: bool,
    /// The rules a best combo keeps on every symbol (`--constraint`).
    constraints: Vec<Constraint>,
    return_index: usize,
    files: Vec<(PathBuf, u64)>,
    current: Option<BufWriter<File>>,
}

/// One combo's line of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ComboAcross {
    pub combo: u64,
    pub values: ParamValues,
    /// Symbols whose objective is a number.
    pub symbols: u64,
    pub mean: f64,
    pub median: f64,
    pub min: f64,
    /// The share of the symbols (with a row for the combo) whose total return is positive.
    pub positive_return_share: f64,
    /// The symbols on which the combo keeps the constraints (all of them without any).
    pub passing: u64,
}

/// What the table holds: where it went, its objective, its row count, the best combos by
/// median (the smallest first when `minimize`).
#[derive(Debug, Clone)]
pub struct AcrossReport {
    pub path: PathBuf,
    pub by: String,
    pub minimize: bool,
    /// The rules the best combos keep on every symbol.
    pub constraints: Vec<Constraint>,
    pub symbols: usize,
    pub rows: u64,
    pub best: Vec<ComboAcross>,
}

impl AcrossReport {
    /// The summary's `by_combo` section (NaN statistics null).
    pub fn summary(&self, strategy: &Strategy) -> ByCombo {
        let finite = |v: f64| v.is_finite().then_some(v);
        let best_by_median = self
            .best
            .iter()
            .map(|c| ComboLine {
                combo: c.combo,
                params: params_json(strategy, &c.values),
                symbols: c.symbols,
                mean: finite(c.mean),
                median: finite(c.median),
                min: finite(c.min),
                positive_return_share: finite(c.positive_return_share),
            })
            .collect();
        ByCombo {
            file: self.path.display().to_string(),
            by: self.by.clone(),
            minimize: self.minimize.then_some(true),
            constraints: (!self.constraints.is_empty())
                .then(|| self.constraints.iter().map(ToString::to_string).collect()),
            symbols: self.symbols as u64,
            combos: self.rows,
            best_by_median,
        }
    }
}

impl Across {
    /// Keeps the rows' numbers in the folder `dir` (created when missing); `by` is the
    /// objective, ranked smallest first when `minimize`, among the combos that keep
    /// `constraints` on every symbol.
    pub(crate) fn new(dir: &Path, by: &str, minimize: bool, constraints: Vec<Constraint>) -> Result<Self, SweepError> {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        Ok(Self {
            dir: dir.to_owned(),
            by: by.to_owned(),
            by_index: metric_index(by)?,
            minimize,
            constraints,
            return_index: metric_index("total_return")?,
            files: Vec::new(),
            current: None,
        })
    }

    /// Starts the next symbol's rows.
    pub(crate) fn next_symbol(&mut self) -> Result<(), SweepError> {
        self.close()?;
        let path = self.dir.join(format!("across-{:06}.bin", self.files.len()));
        let file = File::create(&path).map_err(io_error(&path))?;
        self.files.push((path, 0));
        self.current = Some(BufWriter::with_capacity(1 << 16, file));
        Ok(())
    }

    /// The current symbol's next row (in combo order).
    pub(crate) fn take(&mut self, row: &Row) -> Result<(), SweepError> {
        let (Some(out), Some((path, rows))) = (self.current.as_mut(), self.files.last_mut()) else {
            return Err(SweepError::Results("a row before its symbol".into()));
        };
        let mut record = [0u8; RECORD];
        record[..8].copy_from_slice(&row.combo.to_le_bytes());
        record[8..16].copy_from_slice(&row.metrics.at(self.by_index).to_le_bytes());
        record[16..24].copy_from_slice(&row.metrics.at(self.return_index).to_le_bytes());
        let keeps = Constraint::all_hold(&self.constraints, &row.metrics);
        record[24..].copy_from_slice(&f64::from(u8::from(keeps)).to_le_bytes());
        out.write_all(&record).map_err(io_error(path))?;
        *rows += 1;
        Ok(())
    }

    fn close(&mut self) -> Result<(), SweepError> {
        if let (Some(mut out), Some((path, _))) = (self.current.take(), self.files.last()) {
            out.flush().map_err(io_error(path))?;
        }
        Ok(())
    }

    /// Writes the table to `path` (CSV, Parquet or Arrow by its extension) and removes the
    /// kept numbers; `top` best combos by median go into the report.
    pub(crate) fn finish(
        mut self,
        path: &Path,
        strategy: &Strategy,
        grid: &Grid,
        top: usize,
    ) -> Result<AcrossReport, SweepError> {
        self.close()?;
        let rows = self.files.first().map_or(0, |f| f.1);
        if let Some((other, n)) = self.files.iter().find(|f| f.1 != rows) {
            return Err(SweepError::Results(format!(
                "the symbols hold different combos ({} rows, and {n} in {}): a universe's symbols share one grid",
                rows,
                other.display()
            )));
        }
        let symbols = self.files.len();
        let passing = !self.constraints.is_empty();
        let mut table = AcrossTable::create(path, strategy, &self.by, passing)?;
        let mut best: Vec<ComboAcross> = Vec::with_capacity(top + 1);
        let block = (BLOCK_BYTES / (RECORD * symbols.max(1))).max(1) as u64;
        let mut buffers = vec![Vec::new(); symbols];
        let mut values = Vec::with_capacity(symbols);
        let mut start = 0;
        while start < rows {
            let len = block.min(rows - start);
            for ((file, _), buffer) in self.files.iter().zip(&mut buffers) {
                let mut f = File::open(file).map_err(io_error(file))?;
                f.seek(SeekFrom::Start(start * RECORD as u64)).map_err(io_error(file))?;
                buffer.resize(len as usize * RECORD, 0);
                f.read_exact(buffer).map_err(io_error(file))?;
            }
            for r in 0..len as usize {
                let word = |b: &[u8], k: usize| <[u8; 8]>::try_from(&b[r * RECORD + 8 * k..][..8]).unwrap_or_default();
                let combo = u64::from_le_bytes(word(&buffers[0], 0));
                if let Some(s) = buffers.iter().position(|b| u64::from_le_bytes(word(b, 0)) != combo) {
                    return Err(SweepError::Results(format!(
                        "row {} is combo {combo} for the first symbol but not for symbol {s}: a universe's \
                         symbols share one grid",
                        start + r as u64
                    )));
                }
                let each = buffers.iter().map(|b| {
                    (
                        f64::from_le_bytes(word(b, 1)),
                        f64::from_le_bytes(word(b, 2)),
                        f64::from_le_bytes(word(b, 3)) > 0.0,
                    )
                });
                let line = summarise(combo, grid.values(combo), each, &mut values);
                table.push(strategy, &line)?;
                if line.passing == symbols as u64 {
                    keep_best(&mut best, line, top, self.minimize);
                }
            }
            start += len;
        }
        table.finish()?;
        std::fs::remove_dir_all(&self.dir).map_err(io_error(&self.dir))?;
        Ok(AcrossReport {
            path: path.to_owned(),
            by: self.by,
            minimize: self.minimize,
            constraints: self.constraints,
            symbols,
            rows,
            best,
        })
    }
}

/// The table's lines from every symbol's rows held in memory (symbol order; each
/// symbol's rows in combo order, the same combos), with the objective `by` and the
/// `constraints` counted in `passing`: the lines [`Across`] writes, from the same
/// arithmetic.
pub fn across_in_memory(
    rows: &[ChunkResult],
    grid: &Grid,
    by: &str,
    constraints: &[Constraint],
) -> Result<Vec<ComboAcross>, SweepError> {
    let (by, total_return) = (metric_index(by)?, metric_index("total_return")?);
    let Some(first) = rows.first() else { return Ok(Vec::new()) };
    if rows.iter().any(|r| r.combos != first.combos) {
        return Err(SweepError::Results(
            "the symbols hold different combos: a universe's symbols share one grid".into(),
        ));
    }
    let mut values = Vec::with_capacity(rows.len());
    let lines = first
        .combos
        .iter()
        .enumerate()
        .map(|(r, &combo)| {
            let each = rows.iter().map(|symbol| {
                let metrics = &symbol.metrics[r];
                (metrics.at(by), metrics.at(total_return), Constraint::all_hold(constraints, metrics))
            });
            summarise(combo, grid.values(combo), each, &mut values)
        })
        .collect();
    Ok(lines)
}

/// One combo's line from each symbol's (objective, total return, whether it keeps the
/// constraints): a NaN objective is left out of the statistics, a return above 0 counts
/// as positive. `values` is scratch space.
fn summarise(
    combo: u64,
    params: ParamValues,
    each: impl Iterator<Item = (f64, f64, bool)>,
    values: &mut Vec<f64>,
) -> ComboAcross {
    values.clear();
    let (mut symbols, mut positive, mut passing) = (0usize, 0u64, 0u64);
    for (objective, total_return, keeps) in each {
        symbols += 1;
        positive += u64::from(total_return > 0.0);
        passing += u64::from(keeps);
        if !objective.is_nan() {
            values.push(objective);
        }
    }
    let n = values.len();
    let mean = if n == 0 { f64::NAN } else { values.iter().sum::<f64>() / n as f64 };
    values.sort_by(f64::total_cmp);
    let median = match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    };
    ComboAcross {
        combo,
        values: params,
        symbols: n as u64,
        mean,
        median,
        min: values.first().copied().unwrap_or(f64::NAN),
        positive_return_share: if symbols == 0 { f64::NAN } else { positive as f64 / symbols as f64 },
        passing,
    }
}

/// Keeps the `top` best lines by median (larger first, or smaller first when `minimize`;
/// NaN last, then the lower combo).
fn keep_best(best: &mut Vec<ComboAcross>, line: ComboAcross, top: usize, minimize: bool) {
    let order = |a: &ComboAcross, b: &ComboAcross| {
        let nan = a.median.is_nan().cmp(&b.median.is_nan());
        let value = if minimize { a.median.total_cmp(&b.median) } else { b.median.total_cmp(&a.median) };
        nan.then(value).then(a.combo.cmp(&b.combo))
    };
    let at = best.partition_point(|b| order(b, &line).is_lt());
    if at < top {
        best.insert(at, line);
        best.truncate(top);
    }
}

/// The table's file as it is written: CSV text, or a columnar table; each with or
/// without the `passing_symbols` column.
enum AcrossTable {
    Csv { path: PathBuf, file: AtomicFile, text: String, passing: bool },
    Columnar(Box<ColumnarWriter<AtomicFile>>, bool),
}

/// The by-combo table's columns: combo, the parameters, `symbols`, the objective's mean,
/// median and minimum, `positive_return_share`, and `passing_symbols` with constraints
/// (`passing`).
fn across_columns(strategy: &Strategy, by: &str, passing: bool) -> Vec<(String, ColumnType)> {
    let mut columns = combo_param_columns(strategy, &[]);
    columns.push(("symbols".into(), ColumnType::Int));
    for stat in ["mean", "median", "min"] {
        columns.push((format!("{stat}_{by}"), ColumnType::Float));
    }
    columns.push(("positive_return_share".into(), ColumnType::Float));
    if passing {
        columns.push(("passing_symbols".into(), ColumnType::Int));
    }
    columns
}

/// Appends line `c` to a columnar by-combo table of [`across_columns`].
fn push_across<W: Write + Send>(
    w: &mut ColumnarWriter<W>,
    strategy: &Strategy,
    c: &ComboAcross,
    passing: bool,
) -> Result<(), SweepError> {
    let mut cells: Vec<Cell<'_>> = Vec::with_capacity(7 + c.values.len());
    cells.push(Cell::Int(c.combo as i64));
    cells.extend(strategy.schema().iter().zip(c.values.iter()).map(|(p, &v)| param_cell(p, v)));
    cells.push(Cell::Int(c.symbols as i64));
    cells.extend([c.mean, c.median, c.min, c.positive_return_share].map(Cell::Float));
    if passing {
        cells.push(Cell::Int(c.passing as i64));
    }
    w.push(&cells)
}

/// The by-combo lines as a table in memory, the columns of `<out>-by-combo.parquet`
/// (`passing_symbols` with `passing`: a run with constraints).
pub fn across_table(
    strategy: &Strategy,
    by: &str,
    lines: &[ComboAcross],
    passing: bool,
) -> Result<ArrowTable, SweepError> {
    let mut table = ColumnarWriter::in_memory("the by-combo table", &across_columns(strategy, by, passing));
    for line in lines {
        push_across(&mut table, strategy, line, passing)?;
    }
    table.into_table()
}

impl AcrossTable {
    fn create(path: &Path, strategy: &Strategy, by: &str, passing: bool) -> Result<Self, SweepError> {
        let columns = across_columns(strategy, by, passing);
        match TableFormat::of(path) {
            TableFormat::Csv => {
                let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
                let file = AtomicFile::create(path).map_err(io_error(path))?;
                Ok(Self::Csv { path: path.to_owned(), file, text: format!("{}\n", names.join(",")), passing })
            }
            format => Ok(Self::Columnar(Box::new(ColumnarWriter::create(path, format, &columns)?), passing)),
        }
    }

    fn push(&mut self, strategy: &Strategy, c: &ComboAcross) -> Result<(), SweepError> {
        let numbers = [c.mean, c.median, c.min, c.positive_return_share];
        match self {
            Self::Csv { path, file, text, passing } => {
                push_combo_params(text, strategy, c.combo, &c.values);
                text.push(',');
                crate::decimal::push_u64(text, c.symbols);
                for v in numbers {
                    text.push(',');
                    if !v.is_nan() {
                        crate::decimal::push_f64(text, v);
                    }
                }
                if *passing {
                    text.push(',');
                    crate::decimal::push_u64(text, c.passing);
                }
                text.push('\n');
                if text.len() >= crate::results_file::TEXT_PIECE {
                    file.write_all(text.as_bytes()).map_err(io_error(path))?;
                    text.clear();
                }
                Ok(())
            }
            Self::Columnar(w, passing) => push_across(w, strategy, c, *passing),
        }
    }

    fn finish(self) -> Result<(), SweepError> {
        match self {
            Self::Csv { path, mut file, text, .. } => {
                file.write_all(text.as_bytes()).map_err(io_error(&path))?;
                file.commit().map_err(io_error(&path))
            }
            Self::Columnar(w, _) => w.commit(),
        }
    }
}

/// `results.csv` → `results-by-combo.csv` (the same folder and format).
pub fn by_combo_path(out: &Path) -> PathBuf {
    let stem = out.file_stem().unwrap_or_default().to_string_lossy();
    let name = match out.extension() {
        Some(ext) => format!("{stem}-by-combo.{}", ext.to_string_lossy()),
        None => format!("{stem}-by-combo"),
    };
    out.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_mean_min_and_the_best_list() {
        let params = ParamValues::new(&[1.0]);
        let mut scratch = Vec::new();
        let each = [(3.0, 0.1, true), (-1.0, 0.2, false), (2.0, 0.3, true), (10.0, -0.1, true), (f64::NAN, 0.0, true)];
        let c = summarise(7, params, each.into_iter(), &mut scratch);
        assert_eq!((c.symbols, c.mean, c.median, c.min, c.positive_return_share), (4, 3.5, 2.5, -1.0, 0.6));
        assert_eq!(c.passing, 4);
        let odd = [(5.0, 0.0, true), (1.0, 0.0, true), (3.0, 0.0, true)];
        assert_eq!(summarise(1, params, odd.into_iter(), &mut scratch).median, 3.0);
        let none = [(f64::NAN, 0.0, true); 3];
        assert!(summarise(1, params, none.into_iter(), &mut scratch).median.is_nan());
        // Largest first, or smallest first; NaN last either way, ties by the lower combo.
        for (minimize, want) in [(false, [2, 4, 0]), (true, [0, 3, 4])] {
            let mut best = Vec::new();
            for (combo, median) in [(0, 1.0), (1, f64::NAN), (2, 3.0), (3, 1.0), (4, 2.0)] {
                let line = ComboAcross { combo, median, ..c };
                keep_best(&mut best, line, 3, minimize);
            }
            assert_eq!(best.iter().map(|b| b.combo).collect::<Vec<_>>(), want, "minimize {minimize}");
        }
    }
}
