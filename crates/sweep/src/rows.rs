//! The results CSV's rows: `combo`, every parameter, every metric. One formatter and one
//! parser, so chunk files, resumed chunks, shards and merges read and write the same bytes.

use crate::error::SweepError;
use serde_json::{Value, json};
use std::fmt::Write;
use threadx_backtest::{Metrics, ParamKind, ParamValues, Strategy};

/// The header line (with its newline).
pub fn header(strategy: &Strategy) -> String {
    let mut line = String::from("combo");
    for p in strategy.schema() {
        line.push(',');
        line.push_str(&p.name);
    }
    for m in Metrics::NAMES {
        line.push(',');
        line.push_str(m);
    }
    line.push('\n');
    line
}

/// Appends one row (with its newline). Numbers are written in Rust's shortest form that
/// reads back to the same f64; NaN (no closed trade, flat equity) is written empty.
pub fn write_row(out: &mut String, strategy: &Strategy, combo: u64, values: &[f64], metrics: &Metrics) {
    let _ = write!(out, "{combo}");
    for (p, &v) in strategy.schema().iter().zip(values) {
        out.push(',');
        match &p.kind {
            ParamKind::Choice(_) => out.push_str(&p.format(v)),
            _ => {
                let _ = write!(out, "{v}");
            }
        }
    }
    for v in metrics.values() {
        out.push(',');
        if !v.is_nan() {
            let _ = write!(out, "{v}");
        }
    }
    out.push('\n');
}

/// A row read back: its combo, parameters and metrics, as written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    pub combo: u64,
    pub values: ParamValues,
    pub metrics: Metrics,
}

/// Parses a line written by [`write_row`] (without its newline).
pub fn parse_row(strategy: &Strategy, line: &str) -> Result<Row, SweepError> {
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
    let mut m = [f64::NAN; Metrics::NAMES.len()];
    for slot in &mut m {
        let text = fields.next().ok_or_else(bad)?;
        if !text.is_empty() {
            *slot = text.parse().map_err(|_| bad())?;
        }
    }
    if fields.next().is_some() {
        return Err(bad());
    }
    let metrics = Metrics {
        total_return: m[0],
        trades: m[1] as u32,
        closed_trades: m[2] as u32,
        win_rate: m[3],
        max_drawdown: m[4],
        sharpe: m[5],
        sharpe_annual: m[6],
        exposure: m[7],
    };
    Ok(Row { combo, values: ParamValues::new(&values[..schema.len()]), metrics })
}

/// The combo number at the start of a row, for merging without parsing the rest.
pub fn row_combo(line: &str) -> Option<u64> {
    line.split(',').next()?.parse().ok()
}

/// One row as a JSON object.
pub fn row_json(strategy: &Strategy, row: &Row) -> Value {
    let params: serde_json::Map<String, Value> =
        strategy.schema().iter().zip(row.values.iter()).map(|(p, &v)| (p.name.clone(), p.to_json(v))).collect();
    json!({"combo": row.combo, "params": params, "metrics": row.metrics.to_json()})
}
