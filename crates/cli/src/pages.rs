//! The HTML pages of a run (threadx-report), written where `--report FILE.html` asks:
//! a backtest's, a sweep's with its best combo backtested and the plots its summary
//! vouches for. The `report` command and the runs that take `--report` write them here.

use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};
use threadx_backtest::{PortfolioBooks, Strategy};
use threadx_dispatch::{DeviceMode, Dispatcher};
use threadx_indicators::Ohlcv;
use threadx_report::{BacktestRun, BestRun, OutOfSampleCurve, PortfolioRun, SweepRows, SweepRun, timed_backtest};
use threadx_sweep::{OutputOptions, Params, Session, Shard, Summary, SweepData, SweepSpec, plot_checksum};

/// Where a backtest's report says it ran: the device policy picks the indicators' device;
/// the trade-by-trade simulation runs on the CPU.
pub fn backtest_device(mode: DeviceMode) -> String {
    format!("indicators on `--device {mode}`; trades simulated on the CPU")
}

/// Writes the page of `run` to `path`.
pub fn write_backtest(run: &BacktestRun<'_>, path: &Path) -> Result<()> {
    run.report().write(path).with_context(|| format!("writing {}", path.display()))
}

/// What a sweep's page is made of, beside its summary.
pub struct SweepPage<'a> {
    pub spec: &'a SweepSpec,
    pub data: SweepData<'a>,
    pub summary: &'a Summary,
    /// The results file, read again for the heatmaps and the distribution.
    pub results: Option<&'a Path>,
    /// The overfitting plots the run wrote (logit histogram, out-of-sample scatter).
    pub overfitting_plots: Option<(PathBuf, PathBuf)>,
    /// A walk-forward's test windows back to back.
    pub out_of_sample: Option<OutOfSampleCurve>,
}

/// Writes the page of a sweep to `path`: its sections, then the backtest of its best
/// combo (the summary's first row), run here on `dispatcher`: one data set's, or a
/// portfolio's account.
pub fn write_sweep(page: &SweepPage<'_>, dispatcher: &Dispatcher, mode: DeviceMode, path: &Path) -> Result<()> {
    let spec = page.spec;
    let strategy = spec.strategy();
    let values = page.summary.best_params().map(|best| cell_params(strategy, best)).transpose()?;
    match (page.data, values) {
        (SweepData::One(data), Some(values)) => {
            let (report, seconds) =
                timed_backtest(data, dispatcher, strategy, &values, spec.costs(), spec.periods_per_year())?;
            let device = backtest_device(mode);
            let best = BacktestRun::new(data, strategy, &values, spec.costs(), &report).ran_on(&device, seconds);
            write_sweep_with(page, Some(BestRun::Backtest(best)), path)
        }
        (SweepData::Portfolio { origin, symbols, account, clock }, Some(values)) => {
            let named: Vec<(&str, &Ohlcv)> = symbols.iter().map(|(n, d)| (n.as_str(), d.as_ref())).collect();
            let (books, account, run) =
                PortfolioBooks::run_params(strategy, &values, &named, (account, None), dispatcher)?;
            let per_year = spec.periods_per_year().unwrap_or_else(|| page.data.bars_per_year());
            let metrics = run.metrics(clock.len(), per_year);
            let record = run.record.unwrap_or_default();
            let symbol_names: Vec<&str> = symbols.iter().map(|(n, _)| n.as_str()).collect();
            let sizing = account.describe(None);
            let best = PortfolioRun {
                strategy,
                values: &values,
                origin,
                symbols: &symbol_names,
                times: books.times(),
                prices: books.prices(),
                account: &account,
                metrics: &metrics,
                record: &record,
                bars_per_year: per_year,
                sizing: &sizing,
            };
            write_sweep_with(page, Some(BestRun::Portfolio(best)), path)
        }
        (_, None) => write_sweep_with(page, None, path),
    }
}

/// Writes the page of a sweep with `best`, its best combo run again, to `path`.
fn write_sweep_with(page: &SweepPage<'_>, best: Option<BestRun<'_>>, path: &Path) -> Result<()> {
    let spec = page.spec;
    let by = page.summary.best.as_ref().map_or("sharpe", |b| b.by.as_str()).to_owned();
    let figures = page.overfitting_plots.as_ref().map_or_else(Vec::new, |plots| vouched_plots(plots, page.summary));
    let run = SweepRun {
        spec,
        summary: page.summary,
        rows: page.results.map(|path| SweepRows::File { path, trials: page.summary.is_search() }),
        by: &by,
        overfitting_figures: figures,
        out_of_sample: page.out_of_sample.clone(),
        best,
    };
    run.report()?.write(path).with_context(|| format!("writing {}", path.display()))
}

/// The overfitting plots beside a run's results that its summary vouches for: a file is
/// embedded only while its checksum is the one the summary recorded when the run drew it,
/// so a file replaced or left by another run never reaches the page (it is named instead).
fn vouched_plots((histogram, scatter): &(PathBuf, PathBuf), summary: &Summary) -> Vec<(String, String)> {
    let plots = summary.overfitting.as_ref().and_then(|o| o.plots.as_ref());
    let mut figures = Vec::new();
    for (caption, file, key) in [
        ("CSCV logits: above 0, the in-sample best beat the median out of sample", histogram, "pbo"),
        ("Each split's best: out of sample against in sample", scatter, "oos"),
    ] {
        let Ok(svg) = std::fs::read_to_string(file) else { continue };
        match plots.and_then(|p| p.of(key)) {
            Some(sum) if sum == plot_checksum(svg.as_bytes()) => figures.push((caption.to_owned(), svg)),
            _ => tracing::warn!(
                "{}: left out of the report: it is not the plot its summary recorded (changed or from another run)",
                file.display()
            ),
        }
    }
    figures
}

/// Refuses a sweep's `--report` that cannot be drawn: its results must be read back (a
/// regular file), and a shard is part of a sweep (its merge's summary gets the report).
pub fn check_sweep_report(path: &Path, out: &Path, shard: Shard) -> Result<()> {
    crate::outputs::check_writable(path)?;
    if !shard.is_whole() {
        bail!("--report draws a whole sweep: after `threadx merge`, run `threadx report MERGED.json`");
    }
    if threadx_profile_store::is_special_file(out) {
        bail!("--report reads the results back: --out must be a regular file, not {}", out.display());
    }
    Ok(())
}

/// The report of a grid sweep or search just finished (when `path` asks for one).
pub fn after_sweep(
    (path, data): (Option<&Path>, SweepData<'_>),
    session: &Session,
    summary: &Summary,
    opts: &OutputOptions,
    mode: DeviceMode,
) -> Result<()> {
    let Some(path) = path else { return Ok(()) };
    let page = SweepPage {
        spec: session.spec(),
        data,
        summary,
        results: Some(&opts.out),
        overfitting_plots: opts.overfitting_plots.clone(),
        out_of_sample: None,
    };
    write_sweep(&page, session.dispatcher(), mode, path)?;
    outln!("wrote the report to {}", path.display());
    Ok(())
}

/// A JSON object of parameters (`{"bb_period": 20, "ma_type": "ema"}`, a summary's row or
/// `backtest --json`'s) as `strategy`'s values, checked as `--set` checks them.
pub fn params_of(strategy: &Strategy, params: &Value) -> Result<Vec<f64>> {
    let pairs: Vec<(String, String)> = params
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
        .collect();
    Ok(strategy.params(&pairs)?)
}

/// A summary's parameters (its best row's) as `strategy`'s values, checked as `--set`
/// checks them.
pub fn cell_params(strategy: &Strategy, params: &Params) -> Result<Vec<f64>> {
    let pairs: Vec<(String, String)> = params.iter().map(|(k, v)| (k.clone(), v.to_string())).collect();
    Ok(strategy.params(&pairs)?)
}
