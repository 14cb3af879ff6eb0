//! A book of a user's own decisions: one entry row, one exit row and optionally one
//! stop-level series per column of the user's arrays, a column being a combo.

use super::stops::{Stop, StopSeries};
use super::{Combos, SignalBook, close_and_returns};
use crate::error::BacktestError;
use ndarray::ArrayView2;
use rayon::prelude::*;
use threadx_indicators::Ohlcv;

impl SignalBook {
    /// A book of a user's own decisions over `data`'s closes: `entries` and `exits` of
    /// shape (bars, columns), and optionally `stop` levels of the same shape, each column
    /// a combo (combo `c` is column `c`). The rules are the built-in strategies': an entry
    /// from the first bar, exits checked from the bar after the entry, the stop level of
    /// the entry bar frozen for the trade (a NaN or non-positive level: no stop), no entry
    /// view, column stride 0) is held once.
    pub fn from_signals(
        data: &Ohlcv,
        entries: ArrayView2<'_, bool>,
        exits: ArrayView2<'_, bool>,
        stop: Option<ArrayView2<'_, f64>>,
    ) -> Result<Self, BacktestError> {
        let bars = data.len();
        let columns = entries.ncols();
        let shape = |what: &str, view: (usize, usize)| {
            if view == (bars, columns) {
                Ok(())
            } else {
                Err(BacktestError::Signals(format!(
                    "{what} has shape ({}, {}); expected ({bars}, {columns}): one row per bar of the prices and one column per entries column",
                    view.0, view.1
                )))
            }
        };
        shape("entries", entries.dim())?;
        shape("exits", exits.dim())?;
        if columns == 0 {
            return Err(BacktestError::Signals("the signals have no columns".into()));
        }
        if columns > u32::MAX as usize {
            return Err(BacktestError::Signals(format!("{columns} columns: more than a book can number")));
        }
        let (stop_series, stops) = match stop {
            None => (Vec::new(), Vec::new()),
            Some(levels) => {
                shape("stop", levels.dim())?;
                if let Some(((t, c), _)) = levels.indexed_iter().find(|(_, v)| **v == f64::INFINITY) {
                    return Err(BacktestError::Signals(format!(
                        "stop level +inf at bar {t}, column {c}: every close would be at or below it (NaN means no stop)"
                    )));
                }
                let shared = columns == 1 || levels.strides()[1] == 0;
                let kept = if shared { 1 } else { columns };
                let series = (0..kept).map(|c| StopSeries::levels(levels.column(c).iter().copied())).collect();
                let stops = (0..columns).map(|c| Stop::Level { series: if shared { 0 } else { c as u32 } }).collect();
                (series, stops)
            }
        };
        let words = bars.div_ceil(64);
        let rows = [pack_columns(entries, words), pack_columns(exits, words)];
        Ok(Self::assemble(Combos::Signals { columns }, data, close_and_returns(data), rows, stop_series, stops))
    }
}

/// Each column of `signals` (bars × columns) as a bit row of `words` u64 words.
fn pack_columns(signals: ArrayView2<'_, bool>, words: usize) -> Vec<u64> {
    let mut rows = vec![0u64; signals.ncols() * words];
    rows.par_chunks_mut(words.max(1)).enumerate().for_each(|(c, row)| {
        for (t, &on) in signals.column(c).iter().enumerate() {
            row[t / 64] |= u64::from(on) << (t % 64);
        }
    });
    rows
}
