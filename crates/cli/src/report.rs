//! `threadx report`: the HTML page (`pages.rs`) of the JSON a run wrote (a sweep's
//! summary, `threadx backtest --json`), its data loaded again and checked to be the same.

use crate::pages::{SweepPage, backtest_device, params_of, write_backtest, write_sweep};
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};
use threadx_backtest::{Costs, Strategy};
use threadx_dispatch::{DeviceMode, Dispatcher};
use threadx_indicators::Ohlcv;
use threadx_profile_store::refuse_output_over_input;
use threadx_report::{BacktestRun, timed_backtest};
use threadx_sweep::{Summary, SweepData, SweepSpec, data_fingerprint};

/// What `threadx report` was given: a sweep's summary, or `threadx backtest --json`'s object.
enum Input {
    Sweep(Box<Summary>),
    Backtest(Value),
}

/// `threadx report INPUT.json [--out FILE.html]`.
pub fn run(input: &Path, out: Option<&Path>, mode: DeviceMode) -> Result<()> {
    let out = out.map_or_else(|| input.with_extension("html"), Path::to_path_buf);
    refuse_output_over_input(&[out.as_path()], &[input]).map_err(anyhow::Error::msg)?;
    let parsed = read_input(input)?;
    let read = files_read(input, &parsed);
    let read: Vec<&Path> = read.iter().map(PathBuf::as_path).collect();
    crate::outputs::check_every_output(&[("--out", out.clone())], &read)?;
    crate::outputs::check_names(&[("--out", Some(&out), crate::outputs::Written::Page)])?;
    let dispatcher = Dispatcher::from_env(Some(mode)).map_err(anyhow::Error::msg)?;
    match &parsed {
        Input::Sweep(summary) => sweep_from_summary(input, summary, &dispatcher, mode, &out)?,
        Input::Backtest(json) => backtest_from_json(input, json, &dispatcher, mode, &out)?,
    }
    if let Err(e) = dispatcher.flush() {
        tracing::warn!("could not save the timing profile: {e}");
    }
    outln!("wrote the report to {}", out.display());
    Ok(())
}

/// The JSON at `input`: a sweep's summary or a backtest's object, or why it is neither.
fn read_input(input: &Path) -> Result<Input> {
    let text = std::fs::read_to_string(input).with_context(|| format!("reading {}", input.display()))?;
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}, line {}, column {}: not JSON: {e}", input.display(), e.line(), e.column()))?;
    match Summary::parse_if_summary(&text, input)? {
        Some(s) if s.identity.is_some() => Ok(Input::Sweep(Box::new(s))),
        Some(s) if s.windows.is_some() => bail!(
            "{}: a walk-forward's summary: its report comes with the run, `threadx sweep --walk-forward ... --report FILE.html`",
            input.display()
        ),
        None if json["strategy"].is_string() && json["params"].is_object() => Ok(Input::Backtest(json)),
        _ => bail!(
            "{}: neither a sweep's summary (written beside `threadx sweep --out`) nor a backtest's JSON (`threadx backtest --json`)",
            input.display()
        ),
    }
}

/// Every file a report of `parsed` (read from `input`) reads: the JSON itself, a sweep's
/// results and plots beside it, and the data it names.
fn files_read(input: &Path, parsed: &Input) -> Vec<PathBuf> {
    let mut read = vec![input.to_path_buf()];
    let origin = match parsed {
        Input::Sweep(summary) => {
            if let Some(results) = results_beside(input, summary) {
                read.extend([
                    crate::outputs::sibling(&results, "-pbo.svg"),
                    crate::outputs::sibling(&results, "-oos.svg"),
                ]);
                read.push(results);
            }
            summary.data.as_ref().map(|d| d.origin.as_str())
        }
        Input::Backtest(json) => json["data"].as_str(),
    };
    read.extend(origin.map(PathBuf::from));
    read
}

/// The results file a sweep's summary names, beside the summary.
fn results_beside(input: &Path, summary: &Summary) -> Option<PathBuf> {
    summary.results.as_deref().and_then(|r| Path::new(r).file_name()).map(|name| input.with_file_name(name))
}

/// The data a run's JSON names, loaded again.
fn load_data(input: &Path, origin: Option<&str>) -> Result<Ohlcv> {
    let origin = origin.with_context(|| format!("{}: no `data.origin`", input.display()))?;
    Ohlcv::load(origin).with_context(|| {
        format!(
            "{}: loading its data `{origin}` again (a DataFrame's run gets its report from Python)",
            input.display()
        )
    })
}

fn sweep_from_summary(
    input: &Path,
    summary: &Summary,
    dispatcher: &Dispatcher,
    mode: DeviceMode,
    out: &Path,
) -> Result<()> {
    if summary.shard.is_some_and(|s| s.count > 1) {
        bail!(
            "{}: a shard's summary: a shard is part of a sweep and gets no page; `threadx merge` the shards, then \
             `threadx report MERGED.json`",
            input.display()
        );
    }
    if summary.universe.is_some() {
        bail!(
            "{}: a universe's summary: its page is not drawn yet; sweep one symbol (`--data FILE`) for its report",
            input.display()
        );
    }
    let Some(identity) = &summary.identity else { bail!("{}: no identity", input.display()) };
    if identity.portfolio.is_some() {
        bail!(
            "{}: a portfolio's summary: its page comes with its run (`threadx sweep --portfolio --report FILE.html`)",
            input.display()
        );
    }
    let spec = SweepSpec::from_identity(&identity.spec).with_context(|| format!("reading {}", input.display()))?;
    let data = load_data(input, summary.data.as_ref().map(|d| d.origin.as_str()))?;
    let want = identity.data.as_ref().map_or("", |d| d.fingerprint.as_str());
    if data_fingerprint(&data) != want {
        bail!("{}: its data `{}` changed since the run (fingerprint {want})", input.display(), data.origin());
    }
    let results = results_beside(input, summary).filter(|r| r.is_file());
    if results.is_none() {
        tracing::warn!("{}: its results file is not beside it: no heatmaps or distribution", input.display());
    }
    let overfitting_plots =
        results.as_deref().map(|r| (crate::outputs::sibling(r, "-pbo.svg"), crate::outputs::sibling(r, "-oos.svg")));
    let page = SweepPage {
        spec: &spec,
        data: SweepData::One(&data),
        summary,
        results: results.as_deref(),
        overfitting_plots,
        out_of_sample: None,
    };
    write_sweep(&page, dispatcher, mode, out).with_context(|| format!("reporting {}", input.display()))
}

fn backtest_from_json(input: &Path, json: &Value, dispatcher: &Dispatcher, mode: DeviceMode, out: &Path) -> Result<()> {
    if !json["portfolio"].is_null() {
        bail!(
            "{}: a portfolio's backtest: its page comes with its run (`threadx backtest --portfolio --report FILE.html`)",
            input.display()
        );
    }
    let name = json["strategy"].as_str().unwrap_or_default();
    let strategy = match (json["rules"].as_str(), json["rule_file"].as_str()) {
        (Some(rules), Some(file)) => Strategy::from_toml(rules, file),
        _ => Strategy::load(name),
    }
    .with_context(|| format!("{}: strategy `{name}`", input.display()))?;
    let values = params_of(&strategy, &json["params"])?;
    let number = |key: &str| json[key].as_f64();
    let costs = Costs::new(number("fee").unwrap_or(0.001), number("slippage").unwrap_or(0.0))?;
    let data = load_data(input, json["data"].as_str())?;
    let (report, seconds) = timed_backtest(&data, dispatcher, &strategy, &values, costs, number("periods_per_year"))?;
    let device = backtest_device(mode);
    write_backtest(&BacktestRun::new(&data, &strategy, &values, costs, &report).ran_on(&device, seconds), out)
}
