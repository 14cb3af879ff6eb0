//! Many symbols from Python: a [`Universe`] of bars (a dict of frames, a long table with a
//! `symbol` column, a folder or a glob pattern) swept symbol by symbol on one device pool.

use crate::bars::Bars;
use crate::table::Table;
use crate::{data_error, detached, dispatcher, note, request};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;
use threadx_indicators::MarketData;
use threadx_sweep::SweepError;

/// Many symbols' bars, sorted by name.
#[pyclass(frozen, module = "threadx._threadx")]
pub(crate) struct Universe {
    pub(crate) universe: threadx_indicators::Universe,
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

/// Every symbol's rows and the by-combo lines, `{"rows": Table, "by_combo": Table}`: the
/// universe's results file and its `-by-combo` table (with `passing_symbols` when
/// `constraints` are given).
#[pyfunction]
#[pyo3(signature = (universe, request_json, by="sharpe", progress=None, constraints=Vec::new()))]
pub(crate) fn sweep_universe<'py>(
    py: Python<'py>,
    universe: &Universe,
    request_json: &str,
    by: &str,
    progress: Option<Py<PyAny>>,
    constraints: Vec<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = request(request_json)?;
    let constraints = crate::constraints_of(&constraints)?;
    let dispatcher = dispatcher(spec.device())?;
    let (rows, across) = detached(py, &dispatcher, progress, |report| {
        let mut hook = |p: threadx_sweep::UniverseProgress<'_>| -> Result<(), SweepError> {
            let symbols = p.symbols as u64;
            report(p.total * p.symbol as u64 + p.done, p.total * symbols)
        };
        let ranking = (by, constraints.as_slice());
        threadx_sweep::universe_in_memory(&universe.universe, &spec, dispatcher.clone(), ranking, &mut hook, &mut note)
    })?;
    let out = PyDict::new(py);
    let names = universe.names();
    let rows = threadx_sweep::universe_table(&spec, &names, &rows);
    out.set_item("rows", Table::new(rows, &spec, Some(names))?)?;
    let across = threadx_sweep::across_table(spec.strategy(), by, &across, !constraints.is_empty());
    out.set_item("by_combo", Table::new(across, &spec, None)?)?;
    Ok(out)
}
