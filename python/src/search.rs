//! `threadx.search`: a session's search, its trials as columns in evaluation order.

use crate::{Bars, dispatcher, flush, note, request, row_columns, sweep_error};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use threadx_sweep::{ChunkResult, SweepError};

/// The trials of the request's search: `{"columns", "best", "stop", "seconds",
/// "search_seconds"}`, the columns in trial order, `best` the best trial's number or None.
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
    let (session, report) = py.detach(|| -> PyResult<_> {
        // What stopped the search from Python's side (Ctrl-C, or the progress callback raising).
        let mut stopped: Option<PyErr> = None;
        let mut run = || -> Result<_, SweepError> {
            let session = threadx_sweep::Session::new(&spec, data.clone(), dispatcher.clone(), &mut note)?;
            let report = session.search(&options, &mut |r| {
                Python::attach(|py| {
                    let checked = py.check_signals().and_then(|()| match &progress {
                        Some(callback) => callback.call1(py, (r.trials.len(), options.trials)).map(drop),
                        None => Ok(()),
                    });
                    checked.map_err(|e| {
                        stopped = Some(e);
                        SweepError::Cancelled
                    })
                })
            })?;
            Ok((session, report))
        };
        let result = run();
        flush(&dispatcher);
        match result {
            Ok(done) => Ok(done),
            Err(SweepError::Cancelled) => Err(stopped.take().unwrap_or_else(|| PyKeyboardInterrupt::new_err(()))),
            Err(e) => Err(sweep_error(e)),
        }
    })?;
    let rows = ChunkResult {
        combos: report.trials.iter().map(|t| t.combo).collect(),
        metrics: report.trials.iter().map(|t| t.metrics).collect(),
    };
    let out = PyDict::new(py);
    out.set_item("columns", row_columns(py, &session, &rows)?)?;
    out.set_item("best", report.best)?;
    out.set_item("stop", report.stop.name())?;
    out.set_item("seconds", report.seconds)?;
    out.set_item("search_seconds", report.search_seconds)?;
    Ok(out)
}
