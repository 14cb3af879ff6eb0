//! `threadx._threadx.simulate`: a user's own signals (and vectorbt's stop arguments) run
//! through the book's simulation, one metrics row per column.

use crate::bars::Bars;
use crate::table::Table;
use crate::{device_mode, dispatcher, flush, sweep_error, value};
use numpy::PyReadonlyArray2;
use pyo3::prelude::*;
use threadx_backtest::{Backtester, ComboPlan, Costs, Fill, Fills, SignalBook, UserSignals, check_bars_per_year};

/// The metrics of every column of the signals, as a table, and where they ran.
#[pyfunction]
#[pyo3(signature = (
    bars, entries, exits, short_entries=None, short_exits=None, stop=None, sl_stop=None, tp_stop=None,
    sl_trail=Vec::new(), intrabar=false, next_open=false, fee=0.001, slippage=0.0, periods_per_year=None, device=None
))]
#[allow(clippy::too_many_arguments)] // One per keyword of `threadx.simulate`.
pub fn simulate<'py>(
    py: Python<'py>,
    bars: &Bars,
    entries: PyReadonlyArray2<'py, bool>,
    exits: PyReadonlyArray2<'py, bool>,
    short_entries: Option<PyReadonlyArray2<'py, bool>>,
    short_exits: Option<PyReadonlyArray2<'py, bool>>,
    stop: Option<PyReadonlyArray2<'py, f64>>,
    sl_stop: Option<PyReadonlyArray2<'py, f64>>,
    tp_stop: Option<PyReadonlyArray2<'py, f64>>,
    sl_trail: Vec<bool>,
    intrabar: bool,
    next_open: bool,
    fee: f64,
    slippage: f64,
    periods_per_year: Option<f64>,
    device: Option<&str>,
) -> PyResult<(Table, String)> {
    let costs = Costs::new(fee, slippage).map_err(value)?;
    let per_year = match (periods_per_year, bars.timed) {
        (Some(p), _) => check_bars_per_year(p).map_err(value)?,
        (None, true) => bars.data.bars_per_year(),
        (None, false) => f64::NAN,
    };
    let mode = device_mode(device)?;
    let signals = UserSignals {
        entries: entries.as_array(),
        exits: exits.as_array(),
        short_entries: short_entries.as_ref().map(|a| a.as_array()),
        short_exits: short_exits.as_ref().map(|a| a.as_array()),
        stop: stop.as_ref().map(|a| a.as_array()),
        sl_stop: sl_stop.as_ref().map(|a| a.as_array()),
        tp_stop: tp_stop.as_ref().map(|a| a.as_array()),
        sl_trail: &sl_trail,
        fills: Fills { fill: if next_open { Fill::NextOpen } else { Fill::Close }, intrabar },
    };
    // Packed into bit rows while the GIL keeps the arrays still.
    let book = SignalBook::from_signals(&bars.data, signals).map_err(value)?.with_bars_per_year(per_year);
    let (metrics, device) = py.detach(move || -> PyResult<_> {
        let dispatcher = dispatcher(mode)?;
        let plans: Vec<ComboPlan> = (0..book.grid_len()).map(|c| book.combo_plan(c)).collect();
        let outcome = Backtester::new(&book, costs).run(&dispatcher, &plans);
        flush(&dispatcher);
        Ok((outcome.value, outcome.device.to_string()))
    })?;
    let table = threadx_sweep::metrics_table(&metrics).map_err(sweep_error)?;
    Ok((Table::plain(table), device))
}
