//! `threadx._threadx.simulate`: a user's own signals (and vectorbt's stop arguments) run
//! through the book's simulation, one metrics row per column; with `details`, each
//! column's trades and equity curve too (the CPU reference's, whose metrics are the rows').

use crate::bars::Bars;
use crate::table::Table;
use crate::{device_mode, dispatcher, flush, sweep_error, trades_dict, value};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rayon::prelude::*;
use threadx_backtest::{
    BacktestReport, Backtester, ComboPlan, Costs, Fill, Fills, SignalBook, Trade, UserSignals, check_bars_per_year,
    simulate_detailed,
};

/// The metrics of every column of the signals, as a table, and where they ran.
#[pyfunction]
#[pyo3(signature = (
    bars, entries, exits, short_entries=None, short_exits=None, stop=None, sl_stop=None, tp_stop=None,
    sl_trail=Vec::new(), intrabar=false, next_open=false, fee=0.001, slippage=0.0, periods_per_year=None, device=None,
    details=false
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
    details: bool,
) -> PyResult<(Table, String, Option<Bound<'py, PyDict>>)> {
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
    let (metrics, device, reports) = py.detach(move || -> PyResult<_> {
        let dispatcher = dispatcher(mode)?;
        let plans: Vec<ComboPlan> = (0..book.grid_len()).map(|c| book.combo_plan(c)).collect();
        let outcome = Backtester::new(&book, costs).run(&dispatcher, &plans);
        flush(&dispatcher);
        let reports: Vec<BacktestReport> = match details {
            true => plans.par_iter().map(|plan| simulate_detailed(&book, plan, costs)).collect(),
            false => Vec::new(),
        };
        Ok((outcome.value, outcome.device.to_string(), reports))
    })?;
    let table = threadx_sweep::metrics_table(&metrics).map_err(sweep_error)?;
    let details = match details {
        true => Some(details_dict(py, &reports)?),
        false => None,
    };
    Ok((Table::plain(table), device, details))
}

/// Every column's trades (with their column's position, `column`) and the equity curves,
/// (bars, columns), starting from 1.
fn details_dict<'py>(py: Python<'py>, reports: &[BacktestReport]) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let trades: Vec<Trade> = reports.iter().flat_map(|r| r.trades.iter().cloned()).collect();
    let columns: Vec<i64> =
        reports.iter().enumerate().flat_map(|(c, r)| std::iter::repeat_n(c as i64, r.trades.len())).collect();
    let dict = trades_dict(py, &trades)?;
    dict.set_item("column", columns.into_pyarray(py))?;
    out.set_item("trades", dict)?;
    let bars = reports.first().map_or(0, |r| r.equity.len());
    let equity = Array2::from_shape_fn((bars, reports.len()), |(bar, column)| reports[column].equity[bar]);
    out.set_item("equity", equity.into_pyarray(py))?;
    Ok(out)
}
