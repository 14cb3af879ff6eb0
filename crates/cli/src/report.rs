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
use threadx_sweep::{SweepSpec, data_fingerprint};

/// `threadx report INPUT.json [--out FILE.html]`.
pub fn run(input: &Path, out: Option<&Path>, mode: DeviceMode) -> Result<()> {
    let out = out.map_or_else(|| input.with_extension("html"), Path::to_path_buf);
    refuse_output_over_input(&[out.as_path()], &[input]).map_err(anyhow::Error::msg)?;
    let text = std::fs::read_to_string(input).with_context(|| format!("reading {}", input.display()))?;
    let json: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}, line {}, column {}: not JSON: {e}", input.display(), e.line(), e.column()))?;
    let read = files_read(input, &json);
    let read: Vec<&Path> = read.iter().map(PathBuf::as_path).collect();
    crate::outputs::check_every_output(&[("--out", out.clone())], &read)?;
    let dispatcher = Dispatcher::from_env(Some(mode)).map_err(anyhow::Error::msg)?;
    if json["identity"].is_object() {
        sweep_from_summary(input, &json, &dispatcher, mode, &out)?;
    } else if json["windows"].is_array() {
        bail!(
            "{}: a walk-forward's summary: its report comes with the run, `threadx sweep --walk-forward ... --report FILE.html`",
            input.display()
        );
    } else if json["strategy"].is_string() && json["params"].is_object() {
        backtest_from_json(input, &json, &dispatcher, mode, &out)?;
    } else {
        bail!(
            "{}: neither a sweep's summary (written beside `threadx sweep --out`) nor a backtest's JSON (`threadx backtest --json`)",
            input.display()
        );
    }
    if let Err(e) = dispatcher.flush() {
        tracing::warn!("could not save the timing profile: {e}");
    }
    outln!("wrote the report to {}", out.display());
    Ok(())
}

/// Every file a report of `json` (read from `input`) reads: the JSON itself, a sweep's
/// results and plots beside it, and the data it names.
fn files_read(input: &Path, json: &Value) -> Vec<PathBuf> {
    let mut read = vec![input.to_path_buf()];
    if let Some(results) = results_beside(input, json) {
        read.extend([crate::outputs::sibling(&results, "-pbo.svg"), crate::outputs::sibling(&results, "-oos.svg")]);
        read.push(results);
    }
    let origin = json["data"]["origin"].as_str().or_else(|| json["data"].as_str());
    read.extend(origin.map(PathBuf::from));
    read
}

/// The results file a sweep's summary names, beside the summary.
fn results_beside(input: &Path, summary: &Value) -> Option<PathBuf> {
    summary["results"].as_str().and_then(|r| Path::new(r).file_name()).map(|name| input.with_file_name(name))
}

/// The data a run's JSON names, loaded again.
fn load_data(input: &Path, origin: &Value) -> Result<Ohlcv> {
    let origin = origin.as_str().with_context(|| format!("{}: no `data.origin`", input.display()))?;
    Ohlcv::load(origin).with_context(|| {
        format!(
            "{}: loading its data `{origin}` again (a DataFrame's run gets its report from Python)",
            input.display()
        )
    })
}

fn sweep_from_summary(
    input: &Path,
    summary: &Value,
    dispatcher: &Dispatcher,
    mode: DeviceMode,
    out: &Path,
) -> Result<()> {
    if summary["shard"]["count"].as_u64().is_some_and(|n| n > 1) {
        bail!(
            "{}: a shard's summary: a shard is part of a sweep and gets no page; `threadx merge` the shards, then \
             `threadx report MERGED.json`",
            input.display()
        );
    }
    if summary["symbols"].is_array() || summary["symbols"].is_object() {
        bail!(
            "{}: a universe's summary: its page is not drawn yet; sweep one symbol (`--data FILE`) for its report",
            input.display()
        );
    }
    let identity = &summary["identity"];
    let spec = SweepSpec::from_identity(&identity["spec"]).with_context(|| format!("reading {}", input.display()))?;
    let data = load_data(input, &summary["data"]["origin"])?;
    let want = identity["data"]["fingerprint"].as_str().unwrap_or_default();
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
        data: &data,
        summary,
        results: results.as_deref(),
        overfitting_plots,
        walk_forward_csv: None,
    };
    write_sweep(&page, dispatcher, mode, out).with_context(|| format!("reporting {}", input.display()))
}

fn backtest_from_json(input: &Path, json: &Value, dispatcher: &Dispatcher, mode: DeviceMode, out: &Path) -> Result<()> {
    let name = json["strategy"].as_str().unwrap_or_default();
    let strategy = match (json["rules"].as_str(), json["rule_file"].as_str()) {
        (Some(rules), Some(file)) => Strategy::from_toml(rules, file),
        _ => Strategy::load(name),
    }
    .with_context(|| format!("{}: strategy `{name}`", input.display()))?;
    let values = params_of(&strategy, &json["params"])?;
    let number = |key: &str| json[key].as_f64();
    let costs = Costs::new(number("fee").unwrap_or(0.001), number("slippage").unwrap_or(0.0))?;
    let data = load_data(input, &json["data"])?;
    let (report, seconds) = timed_backtest(&data, dispatcher, &strategy, &values, costs, number("periods_per_year"))?;
    let device = backtest_device(mode);
    write_backtest(&BacktestRun::new(&data, &strategy, &values, costs, &report).ran_on(&device, seconds), out)
}
