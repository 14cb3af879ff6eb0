//! Many symbols from Python: a [`Universe`] of bars (a dict of frames, a long table with a
//! `symbol` column, a folder or a glob pattern) swept symbol by symbol on one device pool.

use crate::{Bars, combo_param_columns, data_error, detached, dispatcher, metric_columns, note, request};
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::sync::Arc;
use threadx_indicators::MarketData;
use threadx_sweep::{ComboAcross, SweepError, SweepSpec};

/// Many symbols' bars, sorted by name.
#[pyclass(frozen, module = "threadx._threadx")]
pub(crate) struct Universe {
    universe: threadx_indicators::Universe,
}

#[pymethods]
impl Universe {
    /// Symbols given as bars by name (`origin` names them all in messages).
    #[staticmethod]
    fn from_bars(origin: &str, symbols: Vec<(String, PyRef<'_, Bars>)>) -> PyResult<Self> {
        let symbols = symbols.into_iter().map(|(name, bars)| (name, (*bars.data).clone())).collect();
        Ok(Self { universe: threadx_indicators::Universe::new(origin, symbols).map_err(data_error)? })
    }

    /// The symbols' names, sorted.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.universe.names().map(str::to_owned).collect()
    }

    fn __len__(&self) -> usize {
        self.universe.len()
    }
}

/// One data set ([`Bars`]) or a [`Universe`], as Python receives it.
fn market<'py>(py: Python<'py>, data: MarketData) -> PyResult<Bound<'py, PyAny>> {
    Ok(match data {
        MarketData::Bars(bars) => Bound::new(py, Bars { data: Arc::new(bars), timed: true })?.into_any(),
        MarketData::Universe(universe) => Bound::new(py, Universe { universe })?.into_any(),
    })
}

/// A `--data` source: bars, or a universe (a glob pattern, a folder, a long file).
#[pyfunction]
pub(crate) fn load_market<'py>(py: Python<'py>, source: String) -> PyResult<Bound<'py, PyAny>> {
    let data = py.detach(move || MarketData::load(&source)).map_err(data_error)?;
    market(py, data)
}

/// An Arrow IPC stream: bars, or a universe when its `symbol` column holds several.
#[pyfunction]
pub(crate) fn market_from_arrow<'py>(py: Python<'py>, origin: String, stream: Vec<u8>) -> PyResult<Bound<'py, PyAny>> {
    let data = py.detach(move || MarketData::from_arrow_stream(&origin, &stream)).map_err(data_error)?;
    market(py, data)
}

/// Every symbol's rows, `{"columns": [symbol, combo, parameters, metrics], "by_combo":
/// [combo, parameters, symbols, mean_<by>, median_<by>, min_<by>, positive_return_share]}`.
#[pyfunction]
#[pyo3(signature = (universe, request_json, by="sharpe", progress=None))]
pub(crate) fn sweep_universe<'py>(
    py: Python<'py>,
    universe: &Universe,
    request_json: &str,
    by: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = request(request_json)?;
    let dispatcher = dispatcher(spec.device())?;
    let (rows, across) = detached(py, &dispatcher, progress, |report| {
        let mut hook = |p: threadx_sweep::UniverseProgress<'_>| -> Result<(), SweepError> {
            let symbols = p.symbols as u64;
            report(p.total * p.symbol as u64 + p.done, p.total * symbols)
        };
        threadx_sweep::universe_in_memory(&universe.universe, &spec, dispatcher.clone(), by, &mut hook, &mut note)
    })?;
    let out = PyDict::new(py);
    let columns = PyList::empty(py);
    let codes: Vec<i64> =
        rows.iter().enumerate().flat_map(|(s, r)| std::iter::repeat_n(s as i64, r.combos.len())).collect();
    columns.append(("symbol", codes.into_pyarray(py), universe.names()))?;
    let combos: Vec<u64> = rows.iter().flat_map(|r| r.combos.iter().copied()).collect();
    combo_param_columns(py, &spec, &columns, &combos)?;
    let metrics: Vec<_> = rows.iter().flat_map(|r| r.metrics.iter().copied()).collect();
    for (name, column) in metric_columns(py, &metrics)? {
        columns.append((name, column, py.None()))?;
    }
    out.set_item("columns", columns)?;
    out.set_item("by_combo", across_columns(py, &spec, &across, by)?)?;
    Ok(out)
}

/// The by-combo lines as columns.
fn across_columns<'py>(
    py: Python<'py>,
    spec: &SweepSpec,
    across: &[ComboAcross],
    by: &str,
) -> PyResult<Bound<'py, PyList>> {
    let columns = PyList::empty(py);
    let combos: Vec<u64> = across.iter().map(|c| c.combo).collect();
    combo_param_columns(py, spec, &columns, &combos)?;
    let symbols: Vec<i64> = across.iter().map(|c| c.symbols as i64).collect();
    columns.append(("symbols", symbols.into_pyarray(py), py.None()))?;
    let names = [format!("mean_{by}"), format!("median_{by}"), format!("min_{by}"), "positive_return_share".into()];
    for (k, name) in names.into_iter().enumerate() {
        let column: Vec<f64> = across.iter().map(|c| [c.mean, c.median, c.min, c.positive_return_share][k]).collect();
        columns.append((name, column.into_pyarray(py), py.None()))?;
    }
    Ok(columns)
}
