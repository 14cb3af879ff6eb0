//! `threadx.search`: a session's search, its trials as columns in evaluation order.

use crate::bars::Bars;
use crate::{detached, dispatcher, note, request, rows_table, sweep_error};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use threadx_sweep::SweepError;

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
    let Some(options) = spec.search().cloned() else {
        return Err(sweep_error(SweepError::Spec("the request has no search".into())));
    };
    let data = bars.data.clone();
    let dispatcher = dispatcher(spec.device())?;
    let (session, report, rows, overfitting) = detached(py, &dispatcher, progress, |hook| {
        let session = threadx_sweep::Session::new(&spec, data.clone(), dispatcher.clone(), &mut note)?;
        let (report, rows) = session.search(&options, &mut |r| hook(r.trials.len() as u64, options.trials))?;
        let overfitting = session.search_overfitting(&report, &options, &rows)?;
        Ok((session, report, rows, overfitting))
    })?;
    let out = PyDict::new(py);
    if let Some(o) = overfitting {
        out.set_item("overfitting", threadx_sweep::section_json(&o.summary()))?;
    }
    out.set_item("trials", rows_table(&session, &rows, true)?)?;
    let grid = session.spec().grid();
    let search = threadx_sweep::search_summary(&options, &report, session.spec().strategy(), |c| grid.values(c));
    out.set_item("search_json", threadx_sweep::section_json(&search))?;
    out.set_item("best", report.best)?;
    out.set_item("stop", report.stop.name())?;
    out.set_item("seconds", report.seconds)?;
    out.set_item("search_seconds", report.search_seconds)?;
    Ok(out)
}
