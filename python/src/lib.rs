//! The native module of the `threadx` Python package, `threadx._threadx`: thin PyO3
//! wrappers over the library crates. The pandas side (DataFrames in and out, progress
//! bars, argument conversion) is the pure-Python package in `python/threadx`; here, numpy
//! arrays and Arrow streams come in (arrays read in place, whatever their strides), a
//! sweep's tables go out as Arrow ([`table::Table`], the columns of the CLI's Parquet files)
//! and series as numpy arrays (numpy takes over the Rust buffers), the GIL is released while anything is computed, Ctrl-C is
//! checked between a sweep's chunks, and every error becomes a Python exception:
//! `ValueError` for bad input (with the CLI's message), `FileNotFoundError` and `OSError`
//! for files, `RuntimeError` for a device failure that could not fall back,
//! `KeyboardInterrupt` for Ctrl-C.
//!
//! It holds no ThreadX logic of its own: what an embedding user needs lives in the crates
//! ([`threadx_sweep::Session`], [`SignalBook::from_signals`], [`IndicatorBank::table`]), and
//! this crate, like the CLI, stands on top of all of them.

mod bars;
mod overfit;
mod portfolio;
mod report;
mod search;
mod simulate;
mod table;
mod universe;

use bars::{Bars, columns_of, epoch_ms};
use numpy::{IntoPyArray, PyReadonlyArray2};
use pyo3::exceptions::{PyFileNotFoundError, PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::io::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use table::Table;
use threadx_backtest::{Costs, MetricSet, Metrics, ParamKind, ParamSpec, Strategy, Trade, check_bars_per_year};
use threadx_dispatch::{DeviceMode, Dispatcher, select_gpu};
use threadx_indicators::{DataError, Indicator, IndicatorBank};
use threadx_sweep::{ChunkResult, SweepData, SweepError, SweepRequest, SweepSpec};

/// The indicators' columns: (name, values) in the order asked.
#[pyfunction]
#[pyo3(signature = (bars, specs, device=None))]
fn indicators<'py>(
    py: Python<'py>,
    bars: &Bars,
    specs: Vec<String>,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyList>> {
    if specs.is_empty() {
        return Err(PyValueError::new_err(
            "no indicator asked for: name one or more, e.g. indicators(data, \"bbands:period=20,std=2\")",
        ));
    }
    let wanted: Vec<Indicator> = specs.iter().map(|s| Indicator::parse(s)).collect::<Result<_, _>>().map_err(value)?;
    let mode = device_mode(device)?;
    let data = bars.data.clone();
    let columns = py.detach(move || -> PyResult<_> {
        let dispatcher = dispatcher(mode)?;
        let bank = IndicatorBank::new(&data, &dispatcher);
        let table = bank.table(&wanted).map_err(value)?;
        let columns: Vec<(String, Vec<f64>)> =
            table.into_iter().map(|(name, values, i)| (name, values.output(i).to_vec())).collect();
        flush(&dispatcher);
        Ok(columns)
    })?;
    let out = PyList::empty(py);
    for (name, values) in columns {
        out.append((name, values.into_pyarray(py)))?;
    }
    Ok(out)
}

/// One parameter set of a strategy: its metrics, trades and equity curve.
#[pyfunction]
#[pyo3(signature = (bars, strategy, params, fee, slippage=0.0, periods_per_year=None, device=None))]
#[allow(clippy::too_many_arguments)] // One per keyword of `threadx.backtest`.
fn backtest<'py>(
    py: Python<'py>,
    bars: &Bars,
    strategy: &str,
    params: Vec<(String, String)>,
    fee: f64,
    slippage: f64,
    periods_per_year: Option<f64>,
    device: Option<&str>,
) -> PyResult<Bound<'py, PyDict>> {
    let strategy = Strategy::load(strategy).map_err(value)?;
    let values = strategy.params(&params).map_err(value)?;
    let costs = Costs::new(fee, slippage).map_err(value)?;
    periods_per_year.map(check_bars_per_year).transpose().map_err(value)?;
    let mode = device_mode(device)?;
    let data = bars.data.clone();
    let run_values = values.clone();
    let run_strategy = strategy.clone();
    let (report, seconds) = py.detach(move || -> PyResult<_> {
        let dispatcher = dispatcher(mode)?;
        let done =
            threadx_report::timed_backtest(&data, &dispatcher, &run_strategy, &run_values, costs, periods_per_year)
                .map_err(value)?;
        flush(&dispatcher);
        Ok(done)
    })?;
    let out = PyDict::new(py);
    let chosen = PyDict::new(py);
    for (spec, &v) in strategy.schema().iter().zip(&values) {
        chosen.set_item(&spec.name, param_object(py, spec, v)?)?;
    }
    out.set_item("params", chosen)?;
    out.set_item("description", strategy.describe(&values))?;
    out.set_item("metrics", metrics_dict(py, &report.metrics)?)?;
    out.set_item("bars_per_year", report.bars_per_year)?;
    out.set_item("trades", trades_dict(py, &report.trades)?)?;
    let page = report::BacktestPage {
        data: bars.data.clone(),
        strategy,
        values,
        costs,
        report: report.clone(),
        device: report::device_line(&mode.to_string()),
        seconds,
    };
    out.set_item("page", page)?;
    out.set_item("equity", report.equity.into_pyarray(py))?;
    Ok(out)
}

/// The request Python built (JSON of `threadx_sweep::SweepRequest`), checked.
fn request(json: &str) -> PyResult<SweepSpec> {
    // The JSON is ours, not the user's: a position in it would say nothing to them.
    let request: SweepRequest = serde_json::from_str(json).map_err(|e| {
        let text = e.to_string();
        value(in_python_words(text.rfind(" at line ").map_or(&text, |at| &text[..at])))
    })?;
    request.check().map_err(sweep_error)
}

/// `constraints` (`"trades >= 30"`) parsed, or the first bad one named.
pub(crate) fn constraints_of(constraints: &[String]) -> PyResult<Vec<threadx_sweep::Constraint>> {
    constraints.iter().map(|c| c.parse().map_err(sweep_error)).collect()
}

/// The engine's message with each command-line flag named as the keyword a Python caller
/// passes: `--trials 500` → `trials 500`, `--search` → `method`, `--pbo-splits` →
/// `pbo_splits`.
fn in_python_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("--") {
        let name_len =
            rest[at + 2..].find(|c: char| !(c.is_ascii_lowercase() || c == '-')).unwrap_or(rest.len() - at - 2);
        let flag = &rest[at + 2..at + 2 + name_len];
        out.push_str(&rest[..at]);
        match flag {
            "" => out.push_str("--"),
            "search" => out.push_str("method"),
            "constraint" => out.push_str("constraints"),
            flag => out.push_str(&flag.replace('-', "_")),
        }
        rest = &rest[at + 2 + name_len..];
    }
    out.push_str(rest);
    out
}

/// A sweep's rows: `{"rows": Table, "overfitting": JSON}`, or `{"windows": Table}` for a
/// walk-forward; `minimize` ranks `by` smallest first and `constraints` (`trades >= 30`)
/// rank only the combos that keep them (each window's winner, the overfitting
/// statistics' top combos).
#[pyfunction]
#[pyo3(signature = (bars, request_json, by="sharpe", progress=None, minimize=false, constraints=Vec::new()))]
#[allow(clippy::too_many_arguments)] // The data, the request, and how the rows rank.
fn sweep<'py>(
    py: Python<'py>,
    bars: &Bars,
    request_json: &str,
    by: &str,
    progress: Option<Py<PyAny>>,
    minimize: bool,
    constraints: Vec<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = request(request_json)?;
    let constraints = constraints_of(&constraints)?;
    let names = std::iter::once(by).chain(constraints.iter().map(|c| c.metric()));
    threadx_sweep::check_ranked_metrics(names, MetricSet::Run).map_err(sweep_error)?;
    let data = bars.data.clone();
    let by = by.to_owned();
    let out = PyDict::new(py);
    let dispatcher = dispatcher(spec.device())?;
    if spec.walk_forward().is_some() {
        let (windows, spec) = py.detach(move || -> PyResult<_> {
            let ranking = threadx_sweep::WindowRanking { by: &by, minimize, constraints: &constraints };
            let report =
                threadx_sweep::walk_forward(SweepData::One(&data), &dispatcher, &spec, ranking, &mut |_, _| {})
                    .map_err(sweep_error)?;
            flush(&dispatcher);
            Ok((threadx_sweep::walk_forward_table(&report, data.timestamps(), &spec), spec))
        })?;
        out.set_item("windows", Table::new(windows, &spec, None)?)?;
        return Ok(out);
    }
    let (session, rows) = detached(py, &dispatcher, progress, |report| {
        let session = threadx_sweep::Session::new(&spec, data.clone(), dispatcher.clone(), &mut note)?;
        let rows = session.run_in_memory(report)?;
        Ok((session, rows))
    })?;
    out.set_item("rows", rows_table(&session, &rows, false)?)?;
    if let Some(o) = session.overfitting(&rows, &by, minimize, &constraints).map_err(sweep_error)? {
        out.set_item("overfitting", threadx_sweep::section_json(&o.summary()))?;
    }
    Ok(out)
}

/// Runs `work` with the GIL released, handing it a progress hook `(done, total)` that
/// calls `progress` and checks for Ctrl-C; either stops the work between batches and is
/// raised as Python's error. The dispatcher's timing samples are saved either way.
fn detached<T: Send>(
    py: Python<'_>,
    dispatcher: &Dispatcher,
    progress: Option<Py<PyAny>>,
    work: impl FnOnce(&mut dyn FnMut(u64, u64) -> Result<(), SweepError>) -> Result<T, SweepError> + Send,
) -> PyResult<T> {
    py.detach(|| {
        // What stopped the run from Python's side (Ctrl-C, or the progress callback raising).
        let mut stopped: Option<PyErr> = None;
        let result = work(&mut |done, total| {
            Python::attach(|py| {
                let checked = py.check_signals().and_then(|()| match &progress {
                    Some(callback) => callback.call1(py, (done, total)).map(drop),
                    None => Ok(()),
                });
                checked.map_err(|e| {
                    stopped = Some(e);
                    SweepError::Cancelled
                })
            })
        });
        flush(dispatcher);
        match result {
            Ok(done) => Ok(done),
            Err(SweepError::Cancelled) => Err(stopped.take().unwrap_or_else(|| PyKeyboardInterrupt::new_err(()))),
            Err(e) => Err(sweep_error(e)),
        }
    })
}

/// A note of the device pool (a balance being measured) on stderr, as the CLI prints it.
fn note(note: &str) {
    let _ = writeln!(std::io::stderr(), "{note}");
}

/// A session's rows as a table: combo (a search's trial first), the parameters, the metrics.
fn rows_table(session: &threadx_sweep::Session, rows: &ChunkResult, trials: bool) -> PyResult<Table> {
    let set = session.sweep().metric_set();
    Table::new(threadx_sweep::rows_table(session.spec(), rows, (trials, set)), session.spec(), None)
}

/// A sweep prepared once (indicators, signal book, device pool) that evaluates batches
/// of combos: the rows the full sweep would give for them.
#[pyclass(frozen, module = "threadx._threadx")]
struct Session {
    session: Arc<threadx_sweep::Session>,
}

#[pymethods]
impl Session {
    #[new]
    fn new(py: Python<'_>, bars: &Bars, request_json: &str) -> PyResult<Self> {
        let spec = request(request_json)?;
        let data = bars.data.clone();
        let dispatcher = dispatcher(spec.device())?;
        let session =
            py.detach(move || threadx_sweep::Session::new(&spec, data, dispatcher, &mut note)).map_err(sweep_error)?;
        Ok(Self { session: Arc::new(session) })
    }

    /// The parameters: `[(name, kind, choices or None, axis values)]`, schema order.
    fn parameters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        let spec = self.session.spec();
        for (p, axis) in spec.strategy().schema().iter().zip(spec.axes()) {
            let (kind, choices) = match &p.kind {
                ParamKind::Int => ("int", None),
                ParamKind::Float => ("float", None),
                ParamKind::Choice(names) => ("choice", Some(names.clone())),
            };
            out.append((&p.name, kind, choices, axis.clone().into_pyarray(py)))?;
        }
        Ok(out)
    }

    /// Combos in the session's grid.
    #[getter]
    fn grid_len(&self) -> u64 {
        self.session.spec().grid_len()
    }

    /// Where the batches run: the device pool's workers.
    #[getter]
    fn workers(&self) -> Vec<String> {
        self.session.workers()
    }

    /// The rows of parameter sets, one per row of `params` (bars × parameters, schema
    /// order; a choice by its index), as a table; the GIL is released while they run.
    fn evaluate(&self, py: Python<'_>, params: PyReadonlyArray2<'_, f64>) -> PyResult<Table> {
        let sets: Vec<Vec<f64>> = params.as_array().rows().into_iter().map(|r| r.to_vec()).collect();
        let session = self.session.clone();
        let rows = py.detach(move || session.evaluate_params(&sets)).map_err(sweep_error)?;
        rows_table(&self.session, &rows, false)
    }

    fn __repr__(&self) -> String {
        let spec = self.session.spec();
        let data = self.session.run_data();
        format!(
            "Session({} on {} bars of {}, a grid of {} combos, workers {})",
            spec.strategy(),
            data.bars(),
            data.origin(),
            spec.grid_len(),
            self.session.workers().join(", ")
        )
    }
}

/// The GPU adapters (`threadx devices --json`'s `adapters`) as JSON, and the default's rank.
#[pyfunction]
fn devices(py: Python<'_>) -> PyResult<(String, Option<usize>)> {
    let selection = py.detach(select_gpu);
    let json = serde_json::to_string(&selection.adapters).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok((json, selection.chosen_report().map(|a| a.rank)))
}

/// Every strategy with its parameters: {strategy: [{name, kind, default, range, help}]}.
#[pyfunction]
fn strategies(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    for s in Strategy::builtins() {
        let params = PyList::empty(py);
        for p in s.schema() {
            let d = PyDict::new(py);
            d.set_item("name", &p.name)?;
            let kind = match p.kind {
                ParamKind::Int => "int",
                ParamKind::Float => "float",
                ParamKind::Choice(_) => "choice",
            };
            d.set_item("kind", kind)?;
            d.set_item("default", param_object(py, p, p.default)?)?;
            d.set_item("range", p.range())?;
            d.set_item("help", &p.help)?;
            params.append(d)?;
        }
        out.set_item(s.name(), params)?;
    }
    Ok(out)
}

/// One dispatcher per device mode for the life of the process: adapters are enumerated
/// and devices opened once, not per call.
fn dispatcher(mode: DeviceMode) -> PyResult<Arc<Dispatcher>> {
    static OPEN: Mutex<Vec<(DeviceMode, Arc<Dispatcher>)>> = Mutex::new(Vec::new());
    let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, d)) = open.iter().find(|(m, _)| *m == mode) {
        return Ok(d.clone());
    }
    let d = Arc::new(Dispatcher::from_env(Some(mode)).map_err(PyRuntimeError::new_err)?);
    open.push((mode, d.clone()));
    Ok(d)
}

/// Saves the timing samples of a call (the CLI does it once per process).
fn flush(dispatcher: &Dispatcher) {
    if let Err(e) = dispatcher.flush() {
        let _ = writeln!(std::io::stderr(), "threadx: could not save the timing profile: {e}");
    }
}

/// `None`: `THREADX_DEVICE`, else auto.
fn device_mode(device: Option<&str>) -> PyResult<DeviceMode> {
    match device {
        Some(d) => d.parse().map_err(PyValueError::new_err),
        None => DeviceMode::from_env().map_err(PyValueError::new_err),
    }
}

/// A parameter value as Python has it: int, float or the choice's name.
fn param_object<'py>(py: Python<'py>, spec: &ParamSpec, v: f64) -> PyResult<Bound<'py, PyAny>> {
    Ok(match spec.kind {
        ParamKind::Int => (v as i64).into_pyobject(py)?.into_any(),
        ParamKind::Float => v.into_pyobject(py)?.into_any(),
        ParamKind::Choice(_) => spec.format(v).into_pyobject(py)?.into_any(),
    })
}

/// Trades as columns of numpy arrays (sides and reasons as names), what
/// `python/threadx/_tables.py::trades_frame` makes a frame of.
pub(crate) fn trades_dict<'py>(py: Python<'py>, t: &[Trade]) -> PyResult<Bound<'py, PyDict>> {
    let trades = PyDict::new(py);
    trades.set_item("side", t.iter().map(|t| t.side.to_string()).collect::<Vec<_>>())?;
    trades.set_item("entry_bar", t.iter().map(|t| t.entry_bar as i64).collect::<Vec<_>>().into_pyarray(py))?;
    trades.set_item("entry_price", t.iter().map(|t| t.entry_price).collect::<Vec<_>>().into_pyarray(py))?;
    trades.set_item("exit_bar", t.iter().map(|t| t.exit_bar as i64).collect::<Vec<_>>().into_pyarray(py))?;
    trades.set_item("exit_price", t.iter().map(|t| t.exit_price).collect::<Vec<_>>().into_pyarray(py))?;
    trades.set_item("return", t.iter().map(|t| t.return_).collect::<Vec<_>>().into_pyarray(py))?;
    trades.set_item("exit_reason", t.iter().map(|t| t.reason.to_string()).collect::<Vec<_>>())?;
    Ok(trades)
}

/// Whether a metric is a count (`trades`, `closed_trades`): an integer in Python.
fn is_count(name: &str) -> bool {
    matches!(name, "trades" | "closed_trades")
}

pub(crate) fn metrics_dict<'py>(py: Python<'py>, m: &Metrics) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (&name, v) in Metrics::NAMES.iter().zip(m.values()) {
        match is_count(name) {
            true => out.set_item(name, v as i64)?,
            false => out.set_item(name, v)?,
        }
    }
    Ok(out)
}

pub(crate) fn value(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn data_error(e: DataError) -> PyErr {
    match &e {
        DataError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(format!("{e}: {source}"))
        }
        DataError::Io { source, .. } => PyOSError::new_err(format!("{e}: {source}")),
        _ => value(e),
    }
}

fn sweep_error(e: SweepError) -> PyErr {
    match e {
        SweepError::Pool(e) => PyRuntimeError::new_err(e.to_string()),
        SweepError::Io { .. } => PyOSError::new_err(e.to_string()),
        SweepError::Cancelled => PyKeyboardInterrupt::new_err(e.to_string()),
        e => value(in_python_words(&e.to_string())),
    }
}

#[pymodule]
fn _threadx(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Warnings (a GPU that fell back, a bad tick) go to stderr as the CLI's do;
    // THREADX_LOG sets the level. A host that installed its own subscriber keeps it.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("THREADX_LOG").unwrap_or_else(|_| "warn,wgpu_hal=off".into()),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .try_init();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // The metrics' columns in the engine's order: Python reads them here, not from a copy.
    m.add("METRICS", Metrics::NAMES.to_vec())?;
    m.add_class::<Bars>()?;
    m.add_class::<Session>()?;
    m.add_class::<table::Table>()?;
    m.add_class::<report::BacktestPage>()?;
    m.add_class::<portfolio::PortfolioPage>()?;
    m.add_function(wrap_pyfunction!(report::sweep_report, m)?)?;
    m.add_function(wrap_pyfunction!(report::write_page, m)?)?;
    m.add_class::<universe::Universe>()?;
    m.add_function(wrap_pyfunction!(universe::load_market, m)?)?;
    m.add_function(wrap_pyfunction!(universe::market_from_arrow, m)?)?;
    m.add_function(wrap_pyfunction!(universe::sweep_universe, m)?)?;
    m.add_function(wrap_pyfunction!(columns_of, m)?)?;
    m.add_function(wrap_pyfunction!(epoch_ms, m)?)?;
    m.add_function(wrap_pyfunction!(indicators, m)?)?;
    m.add_function(wrap_pyfunction!(backtest, m)?)?;
    m.add_function(wrap_pyfunction!(overfit::pbo, m)?)?;
    m.add_function(wrap_pyfunction!(overfit::deflated_sharpe_table, m)?)?;
    m.add_function(wrap_pyfunction!(sweep, m)?)?;
    m.add_function(wrap_pyfunction!(search::search, m)?)?;
    m.add_function(wrap_pyfunction!(search::search_portfolio, m)?)?;
    m.add_function(wrap_pyfunction!(simulate::simulate, m)?)?;
    m.add_function(wrap_pyfunction!(portfolio::simulate_portfolio_py, m)?)?;
    m.add_function(wrap_pyfunction!(portfolio::sweep_portfolio, m)?)?;
    m.add_function(wrap_pyfunction!(portfolio::backtest_portfolio, m)?)?;
    m.add_function(wrap_pyfunction!(devices, m)?)?;
    m.add_function(wrap_pyfunction!(strategies, m)?)?;
    Ok(())
}
