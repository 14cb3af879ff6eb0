//! Reports from Python: a backtest's page from what `threadx.backtest` ran ([`BacktestPage`]),
//! and a sweep's from the rows of its DataFrame (`sweep_report`), built by threadx-report
//! as the CLI builds them.

use crate::bars::Bars;
use crate::{dispatcher, flush, request, sweep_error, value};
use numpy::{PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use std::sync::Arc;
use threadx_backtest::{BacktestReport, Costs, Metrics, Strategy};
use threadx_indicators::Ohlcv;
use threadx_report::{BacktestRun, BestRun, SweepRows, SweepRun, timed_backtest};
use threadx_sweep::{Best, Combos, Constraint, DataSummary, Leaderboard, Row, Summary, best_of};

/// What one backtest ran and gave, kept for its report.
#[pyclass(frozen, module = "threadx._threadx")]
pub(crate) struct BacktestPage {
    pub(crate) data: Arc<Ohlcv>,
    pub(crate) strategy: Strategy,
    pub(crate) values: Vec<f64>,
    pub(crate) costs: Costs,
    pub(crate) report: BacktestReport,
    pub(crate) device: String,
    pub(crate) seconds: f64,
}

#[pymethods]
impl BacktestPage {
    /// The report as one HTML document.
    fn html(&self) -> String {
        let run = BacktestRun::new(&self.data, &self.strategy, &self.values, self.costs, &self.report);
        run.ran_on(&self.device, self.seconds).report().to_html()
    }
}

/// The report of a sweep's rows (`combos` and their metrics, [`Metrics::NAMES`] order) as
/// one HTML document, with the backtest of the best of them by `by` (the smallest when
/// `minimize`) among those that keep `constraints`.
#[pyfunction]
#[pyo3(signature = (bars, request_json, by, combos, metrics, overfitting_json=None, search_json=None, minimize=false, constraints=Vec::new()))]
#[allow(clippy::too_many_arguments)] // The rows, and what the sweep said of them.
pub(crate) fn sweep_report(
    py: Python<'_>,
    bars: &Bars,
    request_json: &str,
    by: &str,
    combos: PyReadonlyArray1<'_, i64>,
    metrics: PyReadonlyArray2<'_, f64>,
    overfitting_json: Option<&str>,
    search_json: Option<&str>,
    minimize: bool,
    constraints: Vec<String>,
) -> PyResult<String> {
    let rules = crate::constraints_of(&constraints)?;
    let spec = request(request_json)?;
    let grid = spec.grid();
    let metrics = metrics.as_array();
    if metrics.ncols() != Metrics::NAMES.len() || metrics.nrows() != combos.len()? {
        return Err(value(format!("the rows need the {} metrics of each combo", Metrics::NAMES.len())));
    }
    let mut rows = Vec::with_capacity(metrics.nrows());
    for (&combo, m) in combos.as_array().iter().zip(metrics.rows()) {
        let combo = u64::try_from(combo).ok().filter(|&c| c < grid.len()).ok_or_else(|| {
            value(format!(
                "combo {combo} is not one of the grid's {} combos: the frame must be indexed by combo",
                grid.len()
            ))
        })?;
        let values: [f64; Metrics::NAMES.len()] = std::array::from_fn(|i| m[i]);
        rows.push(Row { combo, values: grid.values(combo), metrics: Metrics::from_values(values) });
    }
    let mut best = Leaderboard::new(by, 10).map_err(sweep_error)?.minimizing(minimize);
    let keeping: Vec<&Row> = rows.iter().filter(|r| Constraint::all_hold(&rules, &r.metrics)).collect();
    keeping.iter().for_each(|r| best.offer(**r));
    let data = bars.data.clone();
    let summary = Summary {
        data: Some(DataSummary::of(&data)),
        best: Some(Best {
            minimize: minimize.then_some(true),
            constraints: (!rules.is_empty()).then(|| rules.iter().map(ToString::to_string).collect()),
            passing: (!rules.is_empty()).then_some(keeping.len() as u64),
            ..best_of(spec.strategy(), spec.axes(), by, best.rows())
        }),
        combos: Some(Combos { rows: rows.len() as u64, ..Combos::default() }),
        overfitting: overfitting_json.map(serde_json::from_str).transpose().map_err(value)?,
        search: search_json.map(serde_json::from_str).transpose().map_err(value)?,
        ..Summary::new()
    };
    let top = best.rows().first().copied();
    py.detach(move || -> PyResult<String> {
        let dispatcher = dispatcher(spec.device())?;
        let best_run = match top {
            Some(row) => {
                let (report, seconds) = timed_backtest(
                    &data,
                    &dispatcher,
                    spec.strategy(),
                    &row.values,
                    spec.costs(),
                    spec.periods_per_year(),
                )
                .map_err(value)?;
                Some((row.values, report, seconds))
            }
            None => None,
        };
        flush(&dispatcher);
        let device = crate::report::device_line(&spec.device().to_string());
        let best = best_run.as_ref().map(|(values, report, seconds)| {
            BestRun::Backtest(
                BacktestRun::new(&data, spec.strategy(), values, spec.costs(), report).ran_on(&device, *seconds),
            )
        });
        let run = SweepRun {
            spec: &spec,
            summary: &summary,
            rows: Some(SweepRows::Memory(&rows)),
            by,
            overfitting_figures: Vec::new(),
            out_of_sample: None,
            best,
        };
        Ok(run.report().map_err(sweep_error)?.to_html())
    })
}

/// Writes `page` to `path` as the CLI writes its reports: whole or not at all (a special
/// file, such as /dev/stdout, in place).
#[pyfunction]
pub(crate) fn write_page(path: std::path::PathBuf, page: &str) -> PyResult<()> {
    // The CLI's check and words first (a missing folder, a read-only file, a name too long).
    if let Err(why) = threadx_profile_store::check_writable(&path) {
        use std::io::ErrorKind;
        let kind = match path.parent() {
            _ if path.is_dir() => ErrorKind::IsADirectory,
            Some(parent) if !parent.as_os_str().is_empty() && !parent.is_dir() => ErrorKind::NotFound,
            _ => ErrorKind::PermissionDenied,
        };
        return Err(std::io::Error::new(kind, why).into());
    }
    threadx_profile_store::write_file_atomic(&path, page.as_bytes())
        .map_err(|e| std::io::Error::new(e.kind(), format!("writing {}: {e}", path.display())).into())
}

/// Where a report says a backtest ran: the device policy picks the indicators' device; the
/// trade-by-trade simulation runs on the CPU.
pub(crate) fn device_line(mode: &str) -> String {
    format!("indicators on device=\"{mode}\"; trades simulated on the CPU")
}
