//! `threadx backtest`: one parameter set of a strategy, its metrics, trades and equity.

use crate::console::pct;
use crate::request::split_assignment;
use anyhow::{Context, Result};
use serde_json::{Map, Value, json};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use threadx_backtest::{BacktestReport, Costs, Metrics, Strategy, check_bars_per_year};
use threadx_dispatch::{DeviceMode, Dispatcher};
use threadx_indicators::{Ohlcv, format_time};
use threadx_sweep::{ColumnType, write_table};

/// What `threadx backtest` was asked for.
#[derive(Debug)]
pub struct Request {
    pub data: String,
    pub strategy: String,
    pub set: Vec<String>,
    pub fee: f64,
    pub slippage: f64,
    pub periods_per_year: Option<f64>,
    pub trades: Option<PathBuf>,
    pub equity: Option<PathBuf>,
    pub json: bool,
    pub report: Option<PathBuf>,
}

pub fn run(req: &Request, mode: DeviceMode) -> Result<()> {
    // Everything the user typed is checked before data is read or anything computed.
    let strategy = Strategy::load(&req.strategy)?;
    let pairs: Vec<(String, String)> =
        req.set.iter().map(|s| split_assignment(s)).collect::<Result<_, _>>().map_err(anyhow::Error::msg)?;
    let values = strategy.params(&pairs)?;
    let costs = Costs::new(req.fee, req.slippage)?;
    req.periods_per_year.map(check_bars_per_year).transpose()?;
    let outputs: Vec<(&'static str, PathBuf)> =
        [("--trades", &req.trades), ("--equity", &req.equity), ("--report", &req.report)]
            .into_iter()
            .filter_map(|(flag, path)| path.clone().map(|p| (flag, p)))
            .collect();
    crate::outputs::check_every_output(&outputs, &[Path::new(&req.data), Path::new(&req.strategy)])?;
    use crate::outputs::Written::{Page, Table};
    crate::outputs::check_names(&[
        ("--trades", req.trades.as_deref(), Table),
        ("--equity", req.equity.as_deref(), Table),
        ("--report", req.report.as_deref(), Page),
    ])?;
    let data = Ohlcv::load(&req.data).with_context(|| format!("loading --data {}", req.data))?;
    let dispatcher = Dispatcher::from_env(Some(mode)).map_err(anyhow::Error::msg)?;
    let (report, seconds) =
        threadx_report::timed_backtest(&data, &dispatcher, &strategy, &values, costs, req.periods_per_year)?;
    if let Some(path) = &req.trades {
        use ColumnType::{Float, Int, Key, Text, Time};
        let types = [Key, Text, Int, Time, Float, Int, Time, Float, Float, Text];
        write_table(path, &trades_csv(&report), &types).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &req.equity {
        use ColumnType::{Float, Key, Time};
        write_table(path, &equity_csv(&data, &report), &[Key, Time, Float, Float])
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &req.report {
        let device = crate::pages::backtest_device(mode);
        let run = threadx_report::BacktestRun::new(&data, &strategy, &values, costs, &report).ran_on(&device, seconds);
        crate::pages::write_backtest(&run, path)?;
    }
    if let Err(e) = dispatcher.flush() {
        tracing::warn!("could not save the timing profile: {e}");
    }
    let m = &report.metrics;
    if req.json {
        let mut object = Map::new();
        object.insert("strategy".into(), json!(strategy.name()));
        if !strategy.is_builtin() {
            // The rules themselves, so that `threadx report` runs what ran (the file may move or change).
            object.insert("rule_file".into(), json!(strategy.origin()));
            object.insert("rules".into(), json!(strategy.source()));
        }
        let params: Map<String, Value> =
            strategy.schema().iter().zip(&values).map(|(p, &v)| (p.name.clone(), p.to_json(v))).collect();
        object.insert("params".into(), Value::Object(params));
        object.insert("fee".into(), json!(req.fee));
        object.insert("slippage".into(), json!(req.slippage));
        object.insert("data".into(), json!(data.origin()));
        object.insert("bars".into(), json!(data.len()));
        object.insert("periods_per_year".into(), json!(report.bars_per_year));
        let annualisation = threadx_sweep::annualisation(req.periods_per_year, &data);
        object.insert("annualisation".into(), serde_json::to_value(annualisation)?);
        object.extend(m.to_json());
        outln!("{}", Value::Object(object));
    } else {
        outln!(
            "{} {} on {} ({} bars), fee {}{}",
            strategy,
            strategy.describe(&values),
            data.origin(),
            data.len(),
            req.fee,
            if req.slippage > 0.0 { format!(", slippage {}", req.slippage) } else { String::new() }
        );
        out!("{}", metrics_table(m, report.bars_per_year));
        for (what, path) in [("trades", &req.trades), ("equity", &req.equity), ("the report", &req.report)] {
            if let Some(path) = path {
                outln!("wrote {what} to {}", path.display());
            }
        }
    }
    Ok(())
}

pub(crate) fn metrics_table(m: &Metrics, bars_per_year: f64) -> String {
    let ratio = |v: f64, what: String| if v.is_nan() { "-".to_owned() } else { format!("{v:.4}  {what}") };
    let rows = [
        ("total_return", pct(m.total_return)),
        ("trades", m.trades.to_string()),
        ("closed_trades", m.closed_trades.to_string()),
        ("win_rate", pct(m.win_rate)),
        ("max_drawdown", pct(m.max_drawdown)),
        ("sharpe", ratio(m.sharpe, "per bar".into())),
        ("sharpe_annual", ratio(m.sharpe_annual, format!("× √{bars_per_year:.0} bars per year"))),
        ("exposure", pct(m.exposure)),
        ("cagr", pct(m.cagr)),
        ("volatility", pct(m.volatility)),
        ("sortino", ratio(m.sortino, "annual".into())),
        ("calmar", ratio(m.calmar, "cagr over max drawdown".into())),
        ("profit_factor", ratio(m.profit_factor, "gains over losses of closed trades".into())),
        ("expectancy", pct(m.expectancy)),
        ("sqn", ratio(m.sqn, format!("over {} closed trades", m.closed_trades))),
    ];
    let mut out = String::new();
    for (name, value) in rows {
        let _ = writeln!(out, "  {name:<14} {value}");
    }
    out
}

fn trades_csv(report: &BacktestReport) -> String {
    let mut csv =
        String::from("trade,side,entry_bar,entry_time,entry_price,exit_bar,exit_time,exit_price,return,exit_reason\n");
    for (i, t) in report.trades.iter().enumerate() {
        let _ = writeln!(
            csv,
            "{i},{},{},{},{},{},{},{},{},{}",
            t.side,
            t.entry_bar,
            format_time(t.entry_time),
            t.entry_price,
            t.exit_bar,
            format_time(t.exit_time),
            t.exit_price,
            t.return_,
            t.reason
        );
    }
    csv
}

fn equity_csv(data: &Ohlcv, report: &BacktestReport) -> String {
    let mut csv = String::from("bar,timestamp,close,equity\n");
    for (t, (&ms, (&close, &equity))) in
        data.timestamps().iter().zip(data.close().iter().zip(&report.equity)).enumerate()
    {
        let _ = writeln!(csv, "{t},{},{close},{equity}", format_time(ms));
    }
    csv
}
