//! One account over many symbols: `threadx._threadx.simulate_portfolio`, a user's signals
//! (`threadx.simulate(..., cash_sharing=True)`): its metrics row and, with `details`, its
//! equity, cash, positions and trades, from [`simulate_portfolio`]; and
//! `threadx._threadx.sweep_portfolio`, a strategy's grid over a universe, each combo one
//! account (`threadx.sweep(..., portfolio=True)`), through a portfolio [`Session`].

use crate::table::Table;
use crate::universe::Universe;
use crate::{constraints_of, detached, dispatcher, flush, request, sweep_error, value};
use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;
use threadx_backtest::{
    Account, Costs, MetricSet, PortfolioBooks, PortfolioRecord, PortfolioSignals, SignalLevels, SizeType,
    SizingRequest, Strategy, check_bars_per_year, simulate_portfolio,
};
use threadx_dispatch::{DeviceMode, Dispatcher};
use threadx_indicators::{Calendar, Ohlcv};
use threadx_sweep::{Session, SweepData, SweepError, SweepPlan, SweepSpec};

/// The account's metrics as a one-row table, and its record when `details`.
#[pyfunction]
#[pyo3(name = "simulate_portfolio", signature = (
    close, entries, exits, size=None, size_type=None, lot=None, min_size=None, init_cash=None, fee=0.001,
    slippage=0.0, periods_per_year=None, times=None, details=false, max_positions=None, sl_stop=None, tp_stop=None,
    sl_trail=false, range=None, shorts=None
))]
#[allow(clippy::too_many_arguments)] // One per keyword of `threadx.simulate(..., cash_sharing=True)`.
pub fn simulate_portfolio_py<'py>(
    py: Python<'py>,
    close: PyReadonlyArray2<'py, f64>,
    entries: PyReadonlyArray2<'py, bool>,
    exits: PyReadonlyArray2<'py, bool>,
    size: Option<f64>,
    size_type: Option<&str>,
    lot: Option<f64>,
    min_size: Option<f64>,
    init_cash: Option<f64>,
    fee: f64,
    slippage: f64,
    periods_per_year: Option<f64>,
    times: Option<PyReadonlyArray1<'py, i64>>,
    details: bool,
    max_positions: Option<usize>,
    sl_stop: Option<PyReadonlyArray2<'py, f64>>,
    tp_stop: Option<PyReadonlyArray2<'py, f64>>,
    sl_trail: bool,
    range: Option<[PyReadonlyArray2<'py, f64>; 3]>,
    shorts: Option<[PyReadonlyArray2<'py, bool>; 2]>,
) -> PyResult<(Table, Option<Bound<'py, PyDict>>)> {
    let costs = Costs::new(fee, slippage).map_err(value)?;
    let sizing = (size, size_type, lot, min_size);
    let account = account(&SizingRequest::default(), sizing, (init_cash, max_positions, None), costs)?;
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
    let owned = |a: &Option<PyReadonlyArray2<'py, f64>>| a.as_ref().map(|a| a.as_array().to_owned());
    let (sl_stop, tp_stop) = (owned(&sl_stop), owned(&tp_stop));
    let range = range.map(|r| r.map(|a| a.as_array().to_owned()));
    let shorts = shorts.map(|s| s.map(|a| a.as_array().to_owned()));
    let run = py.detach(move || {
        let levels = SignalLevels {
            sl_stop: sl_stop.as_ref().map(|a| a.view()),
            tp_stop: tp_stop.as_ref().map(|a| a.view()),
            sl_trail,
            range: range.as_ref().map(|r| r.each_ref().map(|a| a.view())),
        };
        let signals = PortfolioSignals {
            close: close.view(),
            entries: entries.view(),
            exits: exits.view(),
            shorts: shorts.as_ref().map(|s| s.each_ref().map(|a| a.view())),
            levels,
        };
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

/// The session of `spec` over `universe`'s symbols traded as `account`, on the CPU.
pub(crate) fn portfolio_session(
    spec: &SweepSpec,
    universe: &Universe,
    account: Account,
    dispatcher: &Arc<Dispatcher>,
) -> Result<Session, SweepError> {
    let market = &universe.universe;
    let symbols = market.load_all().map_err(|e| SweepError::Spec(e.to_string()))?;
    let plan = SweepPlan::for_symbols(spec, &symbols, dispatcher.policy())?;
    Session::portfolio(plan, (market.origin(), &symbols), account, dispatcher.clone(), &mut |_| {})
}

/// The account the keywords describe (`(size, size_type, lot, min_size)` and the rest,
/// None where not given) over `base` (a rule file's `[sizing]`), checked, each problem a
/// `ValueError` naming its keyword.
pub(crate) fn account(
    base: &SizingRequest,
    (size, size_type, lot, min_size): (Option<f64>, Option<&str>, Option<f64>, Option<f64>),
    (init_cash, max_positions, leverage): (Option<f64>, Option<usize>, Option<f64>),
    costs: Costs,
) -> PyResult<Account> {
    let size_type = size_type.map(SizeType::parse).transpose().map_err(value)?;
    let given = SizingRequest { size, size_type, lot, min_size, init_cash, max_positions, leverage, size_param: None };
    Account::requested(&base.overridden_by(&given), costs).map_err(value)
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
    trades.set_item("side", t.iter().map(|t| t.side.name()).collect::<Vec<_>>())?;
    trades.set_item("entry_bar", ints(|t| t.entry_bar as i64).into_pyarray(py))?;
    trades.set_item("exit_bar", ints(|t| t.exit_bar.map_or(-1, |x| x as i64)).into_pyarray(py))?;
    trades.set_item("size", floats(|t| t.entry.size).into_pyarray(py))?;
    trades.set_item("entry_price", floats(|t| t.entry.price).into_pyarray(py))?;
    trades.set_item("exit_price", floats(|t| t.exit.map_or(f64::NAN, |x| x.price)).into_pyarray(py))?;
    trades.set_item("entry_fees", floats(|t| t.entry.fee).into_pyarray(py))?;
    trades.set_item("exit_fees", floats(|t| t.exit.map_or(f64::NAN, |x| x.fee)).into_pyarray(py))?;
    trades.set_item("pnl", floats(|t| t.pnl().unwrap_or(f64::NAN)).into_pyarray(py))?;
    trades.set_item("return", floats(|t| t.ret().unwrap_or(f64::NAN)).into_pyarray(py))?;
    trades.set_item("exit_reason", t.iter().map(|t| t.reason.to_string()).collect::<Vec<_>>())?;
    out.set_item("trades", trades)?;
    Ok(out)
}

/// Every combo of the request's grid as one account over the universe's symbols: the
/// rows of `threadx sweep --portfolio`, in combo order, as `{"rows": Table}`, with
/// `"overfitting"` (JSON) when the request asks for the statistics; `by`, `minimize` and
/// `constraints` rank their best combos. A walk-forward's request gives `{"windows": Table}`.
#[pyfunction]
#[pyo3(signature = (
    universe, request_json, size=None, size_type=None, lot=None, min_size=None, init_cash=None, progress=None,
    max_positions=None, by="sharpe", minimize=false, constraints=Vec::new(), leverage=None
))]
#[allow(clippy::too_many_arguments)] // One per keyword of `threadx.sweep(..., portfolio=True)`.
pub fn sweep_portfolio<'py>(
    py: Python<'py>,
    universe: &Universe,
    request_json: &str,
    size: Option<f64>,
    size_type: Option<&str>,
    lot: Option<f64>,
    min_size: Option<f64>,
    init_cash: Option<f64>,
    progress: Option<Py<PyAny>>,
    max_positions: Option<usize>,
    by: &str,
    minimize: bool,
    constraints: Vec<String>,
    leverage: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = request(request_json)?;
    let constraints = constraints_of(&constraints)?;
    threadx_sweep::metric_index(by).map_err(sweep_error)?;
    let sizing = (size, size_type, lot, min_size);
    let account = account(spec.strategy().sizing(), sizing, (init_cash, max_positions, leverage), spec.costs())?;
    let dispatcher = dispatcher(spec.device())?;
    if spec.walk_forward().is_some() {
        let windows = py.detach(|| -> Result<_, SweepError> {
            let symbols = universe.universe.load_all().map_err(|e| SweepError::Spec(e.to_string()))?;
            let clock = SweepData::portfolio_clock(&symbols);
            let data = SweepData::Portfolio {
                origin: universe.universe.origin(),
                symbols: &symbols,
                account: &account,
                clock: &clock,
            };
            let ranking = threadx_sweep::WindowRanking { by, minimize, constraints: &constraints };
            let report = threadx_sweep::walk_forward(data, &dispatcher, &spec, ranking, &mut |_, _| {});
            flush(&dispatcher);
            Ok(threadx_sweep::walk_forward_table(&report?, &clock, &spec))
        });
        let out = PyDict::new(py);
        out.set_item("windows", Table::new(windows.map_err(sweep_error)?, &spec, None)?)?;
        return Ok(out);
    }
    let (rows, overfitting) = detached(py, &dispatcher, progress, |report| {
        let session = portfolio_session(&spec, universe, account, &dispatcher)?;
        let rows = session.run_in_memory(report)?;
        let overfitting = session.overfitting(&rows, by, minimize, &constraints)?;
        Ok((rows, overfitting))
    })?;
    let out = PyDict::new(py);
    let rows = threadx_sweep::rows_table(&spec, &rows, (false, MetricSet::Portfolio));
    out.set_item("rows", Table::new(rows, &spec, None)?)?;
    if let Some(o) = overfitting {
        out.set_item("overfitting", threadx_sweep::section_json(&o.summary()))?;
    }
    Ok(out)
}

/// One parameter set of a strategy over the universe's symbols as one account: its
/// metrics, the clock (epoch ms), the symbols, each one's last close, and its record.
#[pyfunction]
#[pyo3(signature = (
    universe, strategy, params, fee, slippage=0.0, size=None, size_type=None, lot=None, min_size=None,
    init_cash=None, periods_per_year=None, max_positions=None, leverage=None
))]
#[allow(clippy::too_many_arguments)] // One per keyword of `threadx.backtest(..., portfolio=True)`.
pub fn backtest_portfolio<'py>(
    py: Python<'py>,
    universe: &Universe,
    strategy: &str,
    params: Vec<(String, String)>,
    fee: f64,
    slippage: f64,
    size: Option<f64>,
    size_type: Option<&str>,
    lot: Option<f64>,
    min_size: Option<f64>,
    init_cash: Option<f64>,
    periods_per_year: Option<f64>,
    max_positions: Option<usize>,
    leverage: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let strategy = Strategy::load(strategy).map_err(value)?;
    let values = strategy.params(&params).map_err(value)?;
    let costs = Costs::new(fee, slippage).map_err(value)?;
    let sizing = (size, size_type, lot, min_size);
    let account = account(strategy.sizing(), sizing, (init_cash, max_positions, leverage), costs)?;
    strategy.check_sizing(&account.sizing).map_err(value)?;
    // Its size is known before any data is read, and refused there if it cannot be one.
    account.for_params(strategy.schema(), &values).map_err(value)?;
    let per_year = periods_per_year.map(check_bars_per_year).transpose().map_err(value)?;
    let market = &universe.universe;
    let dispatcher = dispatcher(DeviceMode::Cpu)?;
    let (books, account, run) = py.detach(|| -> PyResult<_> {
        let symbols = market.load_all().map_err(value)?;
        let named: Vec<(&str, &Ohlcv)> = symbols.iter().map(|(n, d)| (n.as_str(), d.as_ref())).collect();
        PortfolioBooks::run_params(&strategy, &values, &named, (&account, None), &dispatcher).map_err(value)
    })?;
    let times = books.times();
    let per_year = per_year.unwrap_or_else(|| Calendar::of(times).bars_per_year(times));
    let out = PyDict::new(py);
    let metrics = run.metrics(times.len(), per_year);
    out.set_item("metrics", crate::metrics_dict(py, &metrics)?)?;
    let schema = strategy.schema().iter().zip(&values);
    out.set_item("params", schema.map(|(p, &v)| (p.name.clone(), v)).collect::<Vec<_>>())?;
    out.set_item("bars_per_year", per_year)?;
    out.set_item("times", times.to_vec().into_pyarray(py))?;
    out.set_item("symbols", market.names().map(str::to_owned).collect::<Vec<_>>())?;
    let last: Vec<f64> = (0..books.symbols()).map(|s| books.last_close(s)).collect();
    out.set_item("last_close", last.into_pyarray(py))?;
    let record = run.record.expect("a detailed run keeps its record");
    out.set_item("turnover", metrics.turnover)?;
    out.set_item("mean_positions", metrics.mean_positions)?;
    let page = PortfolioPage {
        strategy: strategy.clone(),
        values: values.clone(),
        origin: market.origin().to_owned(),
        symbols: market.names().map(str::to_owned).collect(),
        times: times.to_vec(),
        prices: books.prices().to_vec(),
        account,
        metrics,
        record: record.clone(),
        bars_per_year: per_year,
    };
    out.set_item("page", page)?;
    out.set_item("record", record_dict(py, record, times.len(), books.symbols())?)?;
    Ok(out)
}

/// What one portfolio backtest ran and gave, kept for its report.
#[pyclass(frozen, module = "threadx._threadx")]
pub(crate) struct PortfolioPage {
    strategy: Strategy,
    values: Vec<f64>,
    origin: String,
    symbols: Vec<String>,
    times: Vec<i64>,
    prices: Vec<f64>,
    account: Account,
    metrics: threadx_backtest::Metrics,
    record: PortfolioRecord,
    bars_per_year: f64,
}

#[pymethods]
impl PortfolioPage {
    /// The report as one HTML document (`threadx backtest --portfolio --report`'s page).
    fn html(&self) -> String {
        let symbols: Vec<&str> = self.symbols.iter().map(String::as_str).collect();
        let sizing = self.account.describe(None);
        let run = threadx_report::PortfolioRun {
            strategy: &self.strategy,
            values: &self.values,
            origin: &self.origin,
            symbols: &symbols,
            times: &self.times,
            prices: &self.prices,
            account: &self.account,
            metrics: &self.metrics,
            record: &self.record,
            bars_per_year: self.bars_per_year,
            sizing: &sizing,
        };
        run.report().to_html()
    }
}
