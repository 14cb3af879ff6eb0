//! `threadx.search`: a session's search, its trials as columns in evaluation order; of one
//! data set, or of a universe's symbols traded as one account.

use crate::bars::Bars;
use crate::portfolio::{account, portfolio_session};
use crate::universe::Universe;
use crate::{detached, dispatcher, note, request, rows_table, sweep_error};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use threadx_sweep::{ChunkResult, Overfitting, SearchOptions, SearchReport, Session, SweepError};

/// The trials of the request's search: `{"trials", "best", "stop", "seconds",
/// "search_seconds"}`, the trials a table in trial order, `best` the best trial's number or None.
#[pyfunction]
#[pyo3(signature = (bars, request_json, progress=None))]
pub fn search<'py>(
    py: Python<'py>,
    bars: &Bars,
    request_json: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = request(request_json)?;
    let options = options_of(&spec)?;
    let data = bars.data.clone();
    let dispatcher = dispatcher(spec.device())?;
    let searched = detached(py, &dispatcher, progress, |hook| {
        let session = Session::new(&spec, data.clone(), dispatcher.clone(), &mut note)?;
        run(session, &options, hook)
    })?;
    trials_dict(py, searched, &options)
}

/// [`search`] over `universe`'s symbols as one account, sized as `threadx.search(...,
/// portfolio=True, size=...)` says.
#[pyfunction]
#[pyo3(signature = (
    universe, request_json, progress=None, size=None, size_type=None, lot=None, min_size=None, init_cash=None,
    max_positions=None, leverage=None
))]
#[allow(clippy::too_many_arguments)] // One per keyword of `threadx.search(..., portfolio=True)`.
pub fn search_portfolio<'py>(
    py: Python<'py>,
    universe: &Universe,
    request_json: &str,
    progress: Option<Py<PyAny>>,
    size: Option<f64>,
    size_type: Option<&str>,
    lot: Option<f64>,
    min_size: Option<f64>,
    init_cash: Option<f64>,
    max_positions: Option<usize>,
    leverage: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let spec = request(request_json)?;
    let options = options_of(&spec)?;
    let sizing = (size, size_type, lot, min_size);
    let account = account(spec.strategy().sizing(), sizing, (init_cash, max_positions, leverage), spec.costs())?;
    let dispatcher = dispatcher(spec.device())?;
    let searched = detached(py, &dispatcher, progress, |hook| {
        run(portfolio_session(&spec, universe, account, &dispatcher)?, &options, hook)
    })?;
    trials_dict(py, searched, &options)
}

/// A search's session, report, trials and their overfitting statistics.
type Searched = (Session, SearchReport, ChunkResult, Option<Overfitting>);

fn options_of(spec: &threadx_sweep::SweepSpec) -> PyResult<SearchOptions> {
    spec.search().cloned().ok_or_else(|| sweep_error(SweepError::Spec("the request has no search".into())))
}

/// Runs the search of `session`, `hook` told each batch's progress.
fn run(
    session: Session,
    options: &SearchOptions,
    hook: &mut dyn FnMut(u64, u64) -> Result<(), SweepError>,
) -> Result<Searched, SweepError> {
    let (report, rows) = session.search(options, &mut |r| hook(r.trials.len() as u64, options.trials))?;
    let overfitting = session.search_overfitting(&report, options, &rows)?;
    Ok((session, report, rows, overfitting))
}

/// What Python's `search` reads of a search.
fn trials_dict<'py>(
    py: Python<'py>,
    (session, report, rows, overfitting): Searched,
    options: &SearchOptions,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    if let Some(o) = overfitting {
        out.set_item("overfitting", threadx_sweep::section_json(&o.summary()))?;
    }
    out.set_item("trials", rows_table(&session, &rows, true)?)?;
    let grid = session.spec().grid();
    let search = threadx_sweep::search_summary(options, &report, session.spec().strategy(), |c| grid.values(c));
    out.set_item("search_json", threadx_sweep::section_json(&search))?;
    out.set_item("best", report.best)?;
    out.set_item("stop", report.stop.name())?;
    out.set_item("seconds", report.seconds)?;
    out.set_item("search_seconds", report.search_seconds)?;
    Ok(out)
}
