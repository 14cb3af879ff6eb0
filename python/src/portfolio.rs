//! `threadx._threadx.simulate_portfolio`: one account over many symbols' signals
//! (`threadx.simulate(..., cash_sharing=True)`): its metrics row and, with `details`, its
//! equity, cash, positions and trades, from [`simulate_portfolio`].

use crate::table::Table;
use crate::{sweep_error, value};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use threadx_backtest::{
    Account, Costs, PortfolioRecord, PortfolioSignals, SizeType, Sizing, check_bars_per_year, simulate_portfolio,
};
use threadx_indicators::Calendar;

/// The account's metrics as a one-row table, and its record when `details`.
#[pyfunction]
#[pyo3(name = "simulate_portfolio", signature = (
    close, entries, exits, size=1.0, size_type="percent", lot=None, min_size=0.0, init_cash=1.0, fee=0.001,
    slippage=0.0, periods_per_year=None, times=None, details=false
))]
#[allow(clippy::too_many_arguments)] // One per keyword of `threadx.simulate(..., cash_sharing=True)`.
pub fn simulate_portfolio_py<'py>(
    py: Python<'py>,
    close: PyReadonlyArray2<'py, f64>,
    entries: PyReadonlyArray2<'py, bool>,
    exits: PyReadonlyArray2<'py, bool>,
    size: f64,
    size_type: &str,
    lot: Option<f64>,
    min_size: f64,
    init_cash: f64,
    fee: f64,
    slippage: f64,
    periods_per_year: Option<f64>,
    times: Option<PyReadonlyArray1<'py, i64>>,
    details: bool,
) -> PyResult<(Table, Option<Bound<'py, PyDict>>)> {
    let sizing = Sizing::new(size, SizeType::parse(size_type).map_err(value)?, lot, min_size).map_err(value)?;
    let account = Account::new(init_cash, sizing, Costs::new(fee, slippage).map_err(value)?).map_err(value)?;
    let per_year = match (periods_per_year, &times) {
        (Some(p), _) => check_bars_per_year(p).map_err(value)?,
        (None, Some(times)) => {
            let times = times.as_slice()?;
            Calendar::of(times).bars_per_year(times)
        }
        (None, None) => f64::NAN,
    };
    // Owned copies, so that the run needs no GIL (bars × symbols, as the account's record).
    let (close, entries, exits) =
        (close.as_array().to_owned(), entries.as_array().to_owned(), exits.as_array().to_owned());
    let run = py.detach(move || {
        let signals = PortfolioSignals { close: close.view(), entries: entries.view(), exits: exits.view() };
        simulate_portfolio(&signals, &account, details).map(|run| (run, close.nrows(), close.ncols()))
    });
    let (run, bars, symbols) = run.map_err(value)?;
    let metrics = run.totals.metrics(bars, per_year);
    let table = threadx_sweep::metrics_table(&[metrics]).map_err(sweep_error)?;
    let record = match run.record {
        Some(record) => Some(record_dict(py, record, bars, symbols)?),
        None => None,
    };
    Ok((Table::plain(table), record))
}

/// The record as numpy arrays: `equity` and `cash` per bar, `positions` (bars, symbols),
/// and `trades`, one array per field (an open trade's exit bar −1, its exit fields NaN).
fn record_dict(py: Python<'_>, record: PortfolioRecord, bars: usize, symbols: usize) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("equity", record.equity.into_pyarray(py))?;
    out.set_item("cash", record.cash.into_pyarray(py))?;
    let positions = Array2::from_shape_vec((bars, symbols), record.positions).map_err(value)?;
    out.set_item("positions", positions.into_pyarray(py))?;
    let t = &record.trades;
    let trades = PyDict::new(py);
    let ints = |f: fn(&threadx_backtest::PortfolioTrade) -> i64| t.iter().map(f).collect::<Vec<_>>();
    let floats = |f: fn(&threadx_backtest::PortfolioTrade) -> f64| t.iter().map(f).collect::<Vec<_>>();
    trades.set_item("symbol", ints(|t| t.symbol as i64).into_pyarray(py))?;
    trades.set_item("entry_bar", ints(|t| t.entry_bar as i64).into_pyarray(py))?;
    trades.set_item("exit_bar", ints(|t| t.exit_bar.map_or(-1, |x| x as i64)).into_pyarray(py))?;
    trades.set_item("size", floats(|t| t.entry.size).into_pyarray(py))?;
    trades.set_item("entry_price", floats(|t| t.entry.price).into_pyarray(py))?;
    trades.set_item("exit_price", floats(|t| t.exit.map_or(f64::NAN, |x| x.price)).into_pyarray(py))?;
    trades.set_item("entry_fees", floats(|t| t.entry.fee).into_pyarray(py))?;
    trades.set_item("exit_fees", floats(|t| t.exit.map_or(f64::NAN, |x| x.fee)).into_pyarray(py))?;
    trades.set_item("pnl", floats(|t| t.pnl().unwrap_or(f64::NAN)).into_pyarray(py))?;
    trades.set_item("return", floats(|t| t.ret().unwrap_or(f64::NAN)).into_pyarray(py))?;
    out.set_item("trades", trades)?;
    Ok(out)
}
