//! `threadx backtest --portfolio`: one parameter set of a strategy over every symbol of a
//! universe against one account (docs/portfolios.md): its metrics, its equity, cash and
//! positions over time, and its trades with their symbols and sizes.

use crate::backtest::{Request, metrics_table};
use crate::request::split_assignment;
use crate::sizing::SizingFlags;
use anyhow::{Context, Result};
use serde_json::{Map, Value, json};
use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;
use threadx_backtest::{Costs, PortfolioBooks, PortfolioRecord, Strategy, check_bars_per_year};
use threadx_dispatch::{DeviceMode, Dispatcher};
use threadx_indicators::{Calendar, MarketData, Ohlcv, format_time};
use threadx_report::PortfolioRun;
use threadx_sweep::{ColumnType, write_table};

/// The symbols of `market`, read from `data`: a universe's, each loaded, or one data set
/// as a universe of one, named by its file.
pub fn symbols_of(market: MarketData, data: &str) -> Result<Vec<(String, Arc<Ohlcv>)>> {
    match market {
        MarketData::Bars(bars) => {
            let name = Path::new(data).file_stem().map_or(data.to_owned(), |s| s.to_string_lossy().into_owned());
            Ok(vec![(name, Arc::new(bars))])
        }
        MarketData::Universe(universe) => universe.load_all().with_context(|| format!("loading --data {data}")),
    }
}

pub fn run(req: &Request, sizing: &SizingFlags, mode: DeviceMode) -> Result<()> {
    let strategy = Strategy::load(&req.strategy)?;
    let pairs: Vec<(String, String)> =
        req.set.iter().map(|s| split_assignment(s)).collect::<Result<_, _>>().map_err(anyhow::Error::msg)?;
    let values = strategy.params(&pairs)?;
    let account = sizing.account(&strategy, Costs::new(req.fee, req.slippage)?)?;
    strategy.check_sizing(&account.sizing)?;
    // Its size is known before any data is read, and refused there if it cannot be one.
    account.for_params(strategy.schema(), &values)?;
    req.periods_per_year.map(check_bars_per_year).transpose()?;
    let outputs: Vec<(&'static str, std::path::PathBuf)> =
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
    let market = MarketData::load(&req.data).with_context(|| format!("loading --data {}", req.data))?;
    crate::outputs::check_outputs_over_universe(&outputs, &market)?;
    let symbols = symbols_of(market, &req.data)?;
    let dispatcher = Dispatcher::from_env(Some(mode)).map_err(anyhow::Error::msg)?;
    let named: Vec<(&str, &Ohlcv)> = symbols.iter().map(|(n, d)| (n.as_str(), d.as_ref())).collect();
    let (portfolio, account, run) =
        PortfolioBooks::run_params(&strategy, &values, &named, (&account, None), &dispatcher)?;
    let record = run.record.as_ref().expect("a detailed run keeps its record");
    let times = portfolio.times();
    let per_year = req.periods_per_year.unwrap_or_else(|| Calendar::of(times).bars_per_year(times));
    let metrics = run.metrics(times.len(), per_year);
    let names: Vec<&str> = symbols.iter().map(|(name, _)| name.as_str()).collect();
    let sizing_words = account.describe(None);
    let page = PortfolioRun {
        strategy: &strategy,
        values: &values,
        origin: &req.data,
        symbols: &names,
        times,
        prices: portfolio.prices(),
        account: &account,
        metrics: &metrics,
        record,
        bars_per_year: per_year,
        sizing: &sizing_words,
    };
    write_files(req, &portfolio, &page)?;
    if let Err(e) = dispatcher.flush() {
        tracing::warn!("could not save the timing profile: {e}");
    }
    if req.json {
        let mut object = Map::new();
        object.insert("strategy".into(), json!(strategy.name()));
        let params: Map<String, Value> =
            strategy.schema().iter().zip(&values).map(|(p, &v)| (p.name.clone(), p.to_json(v))).collect();
        object.insert("params".into(), Value::Object(params));
        object.insert(
            "portfolio".into(),
            json!({
                "symbols": names,
                "init_cash": account.init_cash,
                "size": account.sizing.size,
                "size_type": account.sizing.kind.name(),
                "lot": Some(account.sizing.lot).filter(|l| !l.is_nan()),
                "min_size": account.sizing.min_size,
                "max_positions": account.max_positions,
                "leverage": account.leverage.unwrap_or(1.0),
                "final_equity": record.equity.last(),
            }),
        );
        object.insert("fee".into(), json!(req.fee));
        object.insert("slippage".into(), json!(req.slippage));
        object.insert("data".into(), json!(req.data));
        object.insert("bars".into(), json!(times.len()));
        object.insert("periods_per_year".into(), json!(per_year));
        object.extend(metrics.to_json());
        outln!("{}", Value::Object(object));
    } else {
        outln!(
            "{} {} on {} symbols of {} ({} bars) as one account: {sizing_words}, fee {}",
            strategy,
            strategy.describe(&values),
            names.len(),
            req.data,
            times.len(),
            req.fee
        );
        out!("{}", metrics_table(&metrics, per_year));
        outln!("  {:<14} {}", "final_equity", record.equity.last().copied().unwrap_or(account.init_cash));
        outln!("  {:<14} {:.4}", "turnover", metrics.turnover);
        outln!("  {:<14} {:.4}", "mean_positions", metrics.mean_positions);
        for (what, path) in [("trades", &req.trades), ("equity", &req.equity), ("the report", &req.report)] {
            if let Some(path) = path {
                outln!("wrote {what} to {}", path.display());
            }
        }
    }
    Ok(())
}

/// `--trades`, `--equity` and `--report` of the run `page` shows, where asked for.
fn write_files(req: &Request, portfolio: &PortfolioBooks, page: &PortfolioRun<'_>) -> Result<()> {
    let (record, names, times) = (page.record, page.symbols, page.times);
    if let Some(path) = &req.trades {
        use ColumnType::{Float, Int, Key, Text, Time};
        let types = [Key, Text, Int, Time, Float, Float, Float, Int, Time, Float, Float, Float, Float, Text];
        let last_close: Vec<f64> = (0..names.len()).map(|s| portfolio.last_close(s)).collect();
        write_table(path, &trades_csv(record, names, times, &last_close), &types)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &req.equity {
        let mut types = vec![ColumnType::Key, ColumnType::Time, ColumnType::Float, ColumnType::Float];
        types.extend(names.iter().map(|_| ColumnType::Float));
        write_table(path, &equity_csv(record, names, times), &types)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &req.report {
        page.report().write(path).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The trades in the order filled; an open one marked at its symbol's last close (no
/// exit fee), its reason `end`.
fn trades_csv(record: &PortfolioRecord, names: &[&str], times: &[i64], last_close: &[f64]) -> String {
    let mut csv = String::from(
        "trade,symbol,side,entry_bar,entry_time,entry_price,size,entry_fees,exit_bar,exit_time,exit_price,exit_fees,pnl,\
         return,exit_reason\n",
    );
    let last = times.len().saturating_sub(1);
    for (i, t) in record.trades.iter().enumerate() {
        let x = t.exit_bar.unwrap_or(last);
        let (exit_price, exit_fees) = t.exit.map_or((last_close[t.symbol], 0.0), |x| (x.price, x.fee));
        let _ = writeln!(
            csv,
            "{i},{},{},{},{},{},{},{},{x},{},{exit_price},{exit_fees},{},{},{}",
            names[t.symbol],
            t.side.name(),
            t.entry_bar,
            format_time(times[t.entry_bar]),
            t.entry.price,
            t.entry.size,
            t.entry.fee,
            format_time(times[x]),
            t.profit(last_close[t.symbol]),
            t.return_at(last_close[t.symbol]),
            t.reason
        );
    }
    csv
}

/// Per bar: the account's equity and cash, and each symbol's units held.
fn equity_csv(record: &PortfolioRecord, names: &[&str], times: &[i64]) -> String {
    let mut csv = String::from("bar,timestamp,equity,cash");
    for name in names {
        let _ = write!(csv, ",{name}");
    }
    csv.push('\n');
    for (t, units) in record.positions.chunks(names.len()).enumerate() {
        let _ = write!(csv, "{t},{},{},{}", format_time(times[t]), record.equity[t], record.cash[t]);
        for u in units {
            let _ = write!(csv, ",{u}");
        }
        csv.push('\n');
    }
    csv
}
