//! The results table's rows: `combo`, every parameter, every metric. One formatter and one
//! parser of the CSV, so chunk files, resumed chunks, shards and merges read and write the
//! same bytes; and the same rows as columnar cells (`table.rs`), typed: combo, integer
//! parameters and trade counts as integers, choices as text, NaN as null.

use crate::decimal::{push_f64, push_u64};
use crate::error::SweepError;
use crate::table::{Cell, ColumnType, ColumnarWriter, Columns, RowRef};
use threadx_backtest::{
    Grid, GridCursor, MAX_PARAMS, MOST_METRICS, MetricSet, Metrics, ParamKind, ParamSpec, ParamValues, Strategy,
};

/// The header line (with its newline) of rows carrying `set`'s metrics.
pub fn header(strategy: &Strategy, set: MetricSet) -> String {
    let mut line = String::from("combo");
    for p in strategy.schema() {
        line.push(',');
        line.push_str(&p.name);
    }
    for m in set.names() {
        line.push(',');
        line.push_str(m);
    }
    line.push('\n');
    line
}

/// Appends one row (with its newline) carrying `set`'s metrics. Numbers are written in
/// Rust's shortest form that reads back to the same f64; NaN (no closed trade, flat
/// equity) is written empty.
pub fn write_row(
    out: &mut String,
    (strategy, set): (&Strategy, MetricSet),
    combo: u64,
    values: &[f64],
    metrics: &Metrics,
) {
    push_combo_params(out, strategy, combo, values);
    push_metrics(out, metrics, set);
}

/// Appends a row's metrics of `set`, each after a comma, and the newline.
fn push_metrics(out: &mut String, metrics: &Metrics, set: MetricSet) {
    for &v in &MetricSet::values(metrics)[..set.count()] {
        out.push(',');
        if !v.is_nan() {
            push_f64(out, v);
        }
    }
    out.push('\n');
}

/// Appends parameter `p`'s value `v`: a choice's name, else the number.
fn push_param(out: &mut String, p: &ParamSpec, v: f64) {
    match &p.kind {
        ParamKind::Choice(names) if v >= 0.0 && (v as usize) < names.len() => out.push_str(&names[v as usize]),
        _ => push_f64(out, v),
    }
}

/// A grid's parameter values as the CSV writes them, each axis value formatted once: a
/// chunk's rows then copy their parameters' text instead of formatting a third of their
/// numbers again. Gives [`write_row`]'s bytes.
pub(crate) struct ParamTexts {
    cursor: GridCursor,
    /// Per parameter, `,` and each axis value's text.
    texts: Vec<Vec<String>>,
    set: MetricSet,
}

impl ParamTexts {
    /// The texts of `grid`'s rows carrying `set`'s metrics.
    pub(crate) fn new(grid: &Grid, set: MetricSet) -> Self {
        let schema = grid.strategy().schema();
        let texts = schema
            .iter()
            .zip(grid.axes())
            .map(|(p, axis)| {
                axis.iter()
                    .map(|&v| {
                        let mut text = String::from(",");
                        push_param(&mut text, p, v);
                        text
                    })
                    .collect()
            })
            .collect();
        Self { cursor: grid.cursor(), texts, set }
    }

    /// Appends one row of combo `combo` (with its newline), as [`write_row`] does.
    pub(crate) fn write_row(&mut self, out: &mut String, combo: u64, metrics: &Metrics) {
        push_u64(out, combo);
        for (texts, &k) in self.texts.iter().zip(self.cursor.index(combo)) {
            out.push_str(&texts[k]);
        }
        push_metrics(out, metrics, self.set);
    }
}

/// Appends a row's combo and parameters (no comma after them).
pub(crate) fn push_combo_params(out: &mut String, strategy: &Strategy, combo: u64, values: &[f64]) {
    push_u64(out, combo);
    for (p, &v) in strategy.schema().iter().zip(values) {
        out.push(',');
        push_param(out, p, v);
    }
}

/// A row read back: its combo, parameters and metrics, as written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    pub combo: u64,
    pub values: ParamValues,
    pub metrics: Metrics,
}

/// Parses a line written by [`write_row`] (without its newline).
pub fn parse_row((strategy, set): (&Strategy, MetricSet), line: &str) -> Result<Row, SweepError> {
    let bad = || SweepError::Results(format!("malformed results row `{line}`"));
    let schema = strategy.schema();
    let mut fields = line.split(',');
    let combo: u64 = fields.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
    let mut values = [0.0; threadx_backtest::MAX_PARAMS];
    for (slot, p) in values.iter_mut().zip(schema) {
        let text = fields.next().ok_or_else(bad)?;
        *slot = match &p.kind {
            ParamKind::Choice(names) => names.iter().position(|n| *n == text).ok_or_else(bad)? as f64,
            _ => text.parse().map_err(|_| bad())?,
        };
    }
    let mut m = [f64::NAN; MOST_METRICS];
    for slot in &mut m[..set.count()] {
        let text = fields.next().ok_or_else(bad)?;
        if !text.is_empty() {
            *slot = text.parse().map_err(|_| bad())?;
        }
    }
    if fields.next().is_some() {
        return Err(bad());
    }
    Ok(Row { combo, values: ParamValues::new(&values[..schema.len()]), metrics: set.metrics(&m) })
}

/// Whether metric `name` counts (an integer column).
fn is_count(name: &str) -> bool {
    matches!(name, "trades" | "closed_trades")
}

/// The results table's columns, the CSV header's names with their types; `lead` names
/// columns before them (a search's `trial`, a universe's `symbol`).
pub(crate) fn columns((strategy, set): (&Strategy, MetricSet), lead: &[(&str, ColumnType)]) -> Columns {
    let mut columns = combo_param_columns(strategy, lead);
    columns.extend(metric_columns(set));
    columns
}

/// `set`'s metrics' columns, in [`MetricSet::names`] order: counts are integers.
pub(crate) fn metric_columns(set: MetricSet) -> impl Iterator<Item = (String, ColumnType)> {
    set.names().iter().map(|&m| (m.to_owned(), if is_count(m) { ColumnType::Int } else { ColumnType::Float }))
}

/// `set`'s metrics' cells, in [`metric_columns`] order.
pub(crate) fn metric_cells(metrics: &Metrics, set: MetricSet) -> impl Iterator<Item = Cell<'static>> {
    set.names()
        .iter()
        .zip(MetricSet::values(metrics))
        .map(|(name, v)| if is_count(name) { Cell::Int(v as i64) } else { Cell::Float(v) })
}

/// The value of a row's lead column: none, a search's trial or a universe's symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lead<'a> {
    None,
    Trial(u64),
    Symbol(&'a str),
}

impl Lead<'_> {
    /// Appends the lead field and its comma to a CSV row.
    pub(crate) fn push(self, out: &mut String) {
        match self {
            Self::None => return,
            Self::Trial(t) => push_u64(out, t),
            Self::Symbol(s) => out.push_str(s),
        }
        out.push(',');
    }
}

/// The `lead` columns, `combo` and the parameters' columns, typed.
pub(crate) fn combo_param_columns(strategy: &Strategy, lead: &[(&str, ColumnType)]) -> Columns {
    let mut columns: Columns = lead.iter().map(|&(n, t)| (n.to_owned(), t)).collect();
    columns.push(("combo".to_owned(), ColumnType::Key));
    for p in strategy.schema() {
        let t = match p.kind {
            ParamKind::Int => ColumnType::Int,
            ParamKind::Float => ColumnType::Float,
            ParamKind::Choice(_) => ColumnType::Text,
        };
        columns.push((p.name.clone(), t));
    }
    columns
}

/// Parameter `p`'s value `v` as a cell of its column.
pub(crate) fn param_cell(p: &ParamSpec, v: f64) -> Cell<'_> {
    match &p.kind {
        ParamKind::Int => Cell::Int(v as i64),
        ParamKind::Float => Cell::Float(v),
        ParamKind::Choice(names) => Cell::Text(names.get(v as usize).map_or("", String::as_str)),
    }
}

/// Appends one row to a columnar results table of [`columns`], its `lead` value first.
pub(crate) fn push_row<W: std::io::Write + Send>(
    out: &mut ColumnarWriter<W>,
    (strategy, set): (&Strategy, MetricSet),
    lead: Lead<'_>,
    combo: u64,
    values: &[f64],
    metrics: &Metrics,
) -> Result<(), SweepError> {
    const MOST: usize = 2 + MAX_PARAMS + MOST_METRICS;
    let mut cells = [Cell::Int(0); MOST];
    let mut n = 0;
    let mut put = |cell| {
        cells[n] = cell;
        n += 1;
    };
    match lead {
        Lead::None => {}
        Lead::Trial(t) => put(Cell::Int(t as i64)),
        Lead::Symbol(s) => put(Cell::Text(s)),
    }
    put(Cell::Int(combo as i64));
    for (p, &v) in strategy.schema().iter().zip(values) {
        put(param_cell(p, v));
    }
    for cell in metric_cells(metrics, set) {
        put(cell);
    }
    out.push(&cells[..n])
}

/// A row of a columnar results table read back, its combo at column `first`.
pub(crate) fn row_of(
    (strategy, set): (&Strategy, MetricSet),
    row: &RowRef<'_>,
    first: usize,
) -> Result<Row, SweepError> {
    let bad = |what: &str| SweepError::Results(format!("a results row with {what}"));
    let combo = row.int(first).filter(|&c| c >= 0).ok_or_else(|| bad("no combo"))? as u64;
    let schema = strategy.schema();
    let mut values = [0.0; MAX_PARAMS];
    for (k, (slot, p)) in values.iter_mut().zip(schema).enumerate() {
        let c = first + 1 + k;
        *slot = match &p.kind {
            ParamKind::Int => row.int(c).ok_or_else(|| bad(&format!("no {}", p.name)))? as f64,
            ParamKind::Float => row.float(c),
            ParamKind::Choice(names) => {
                let text = row.text(c).unwrap_or_default();
                names.iter().position(|n| n == text).ok_or_else(|| bad(&format!("{} `{text}`", p.name)))? as f64
            }
        };
    }
    let mut m = [f64::NAN; MOST_METRICS];
    for (k, (slot, name)) in m.iter_mut().zip(set.names()).enumerate() {
        let c = first + 1 + schema.len() + k;
        *slot =
            if is_count(name) { row.int(c).ok_or_else(|| bad(&format!("no {name}")))? as f64 } else { row.float(c) };
    }
    Ok(Row { combo, values: ParamValues::new(&values[..schema.len()]), metrics: set.metrics(&m) })
}

#[cfg(test)]
mod tests {
    use super::{ParamTexts, write_row};
    use crate::SweepRequest;
    use threadx_backtest::{MetricSet, Metrics};

    #[test]
    fn param_texts_give_write_rows_bytes_for_every_combo() {
        for (strategy, grid) in [
            ("ma_cross", vec![("ma_type", "sma,ema"), ("fast", "5:50:5"), ("slow", "20:200:10")]),
            ("bb_atr", vec![("bb_period", "5:30:5"), ("bb_std", "1:3.8:0.1"), ("atr_mult", "0.5:4:0.25")]),
        ] {
            let spec = SweepRequest::new(strategy, &grid).check().expect("a grid");
            let grid = spec.grid();
            let mut texts = ParamTexts::new(grid, MetricSet::Run);
            let metrics = Metrics::from_values([
                0.1,
                3.0,
                2.0,
                f64::NAN,
                -0.25,
                1e-7,
                12.5,
                0.3,
                0.05,
                0.2,
                1.5,
                0.2,
                f64::NAN,
                0.01,
                2.5,
            ]);
            for combo in 0..grid.len() {
                let (mut fast, mut slow) = (String::new(), String::new());
                texts.write_row(&mut fast, combo, &metrics);
                write_row(&mut slow, (grid.strategy(), MetricSet::Run), combo, &grid.values(combo), &metrics);
                assert_eq!(fast, slow, "{strategy} combo {combo}");
            }
        }
    }
}
