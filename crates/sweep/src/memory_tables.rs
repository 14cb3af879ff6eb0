//! A sweep's tables in memory as Arrow record batches: the columns, types and values its
//! Parquet and Arrow files hold (the same writer makes both), for Python's DataFrames.

use crate::error::SweepError;
use crate::results_file::ResultsKind;
use crate::rows::{Lead, columns, metric_cells, metric_columns, push_row};
use crate::runner::ChunkResult;
use crate::spec::SweepSpec;
use crate::table::{ArrowTable, ColumnarWriter, table_of_csv};
use crate::walk::WalkForwardReport;
use threadx_backtest::{GridCursor, MetricSet, Metrics};

/// A grid's rows (`combo`, the parameters, `set`'s metrics) as `--out x.parquet` holds
/// them; with `trials`, a search's: each row's place first, as `trial`.
pub fn rows_table(
    spec: &SweepSpec,
    rows: &ChunkResult,
    (trials, set): (bool, MetricSet),
) -> Result<ArrowTable, SweepError> {
    let kind = if trials { ResultsKind::Trials(set) } else { ResultsKind::Grid(set) };
    let mut table = ColumnarWriter::in_memory("the rows", &columns((spec.strategy(), set), kind.lead()));
    let lead = |k: usize| if trials { Lead::Trial(k as u64) } else { Lead::None };
    push_rows(&mut table, (spec, set), &mut spec.grid().cursor(), rows, lead)?;
    table.into_table()
}

/// A universe's rows, `symbol` first: each symbol's (`rows[i]` those of `symbols[i]`)
/// after the previous symbol's, as the universe's results file holds them.
pub fn universe_table(spec: &SweepSpec, symbols: &[String], rows: &[ChunkResult]) -> Result<ArrowTable, SweepError> {
    let lead = ResultsKind::Universe.lead();
    let set = ResultsKind::Universe.metrics();
    let mut table = ColumnarWriter::in_memory("the universe's rows", &columns((spec.strategy(), set), lead));
    let mut cursor = spec.grid().cursor();
    for (symbol, rows) in symbols.iter().zip(rows) {
        push_rows(&mut table, (spec, set), &mut cursor, rows, |_| Lead::Symbol(symbol))?;
    }
    table.into_table()
}

/// Appends `rows` (with `set`'s metrics) to `table`, row `k` after its `lead(k)`.
fn push_rows<'a>(
    table: &mut ColumnarWriter<std::io::Sink>,
    (spec, set): (&SweepSpec, MetricSet),
    cursor: &mut GridCursor,
    rows: &ChunkResult,
    lead: impl Fn(usize) -> Lead<'a>,
) -> Result<(), SweepError> {
    for (k, (&combo, metrics)) in rows.combos.iter().zip(&rows.metrics).enumerate() {
        let values = spec.grid().values_at(cursor.index(combo));
        push_row(table, (spec.strategy(), set), lead(k), combo, &values, metrics)?;
    }
    Ok(())
}

/// A walk-forward's windows (`times`: the clock they were cut from), the columns of its
/// `--out x.parquet`.
pub fn walk_forward_table(
    report: &WalkForwardReport,
    times: &[i64],
    spec: &SweepSpec,
) -> Result<ArrowTable, SweepError> {
    table_of_csv("the walk-forward windows", &report.to_csv(times, spec), &report.column_types(spec))
}

/// Metrics rows alone (one per signal column of `threadx.simulate`), the metrics' columns
/// of a sweep's rows.
pub fn metrics_table(metrics: &[Metrics]) -> Result<ArrowTable, SweepError> {
    let mut table = ColumnarWriter::in_memory("the metrics", &metric_columns(MetricSet::Run).collect());
    let mut cells = Vec::with_capacity(Metrics::NAMES.len());
    for m in metrics {
        cells.clear();
        cells.extend(metric_cells(m, MetricSet::Run));
        table.push(&cells)?;
    }
    table.into_table()
}
