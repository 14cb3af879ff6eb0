//! The market rules a portfolio takes, through the CLI: a trail and stops inside the bar
//! (`examples/strategies/trend_trail.toml`), shorts and reversals
//! (`examples/strategies/bb_long_short.toml`). One symbol with all the cash is its single
//! backtest; every row of a sweep is its parameter set's backtest; the trades name the
//! trail and fill inside the bar, and a short's profit adds up with the rest.

use crate::common::{text, threadx};
use crate::portfolio::{csv_rows, make_data};

fn example(name: &str) -> String {
    format!("{}/../../examples/strategies/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn json_of(run: &std::process::Output) -> serde_json::Value {
    assert!(run.status.success(), "{}", text(&run.stderr));
    serde_json::from_slice(&run.stdout).unwrap()
}

#[test]
fn one_symbol_of_a_trail_inside_the_bar_with_all_the_cash_is_the_single_backtest() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let trail = example("trend_trail.toml");
    let single = ["backtest", "--data", "data/CCC.csv", "--strategy", &trail, "--set", "trail_mult=2", "--json"];
    let single = json_of(&threadx(dir.path(), &single));
    let account = json_of(&threadx(
        dir.path(),
        &["backtest", "--data", "data/CCC.csv", "--strategy", &trail, "--set", "trail_mult=2", "--portfolio", "--json"],
    ));
    assert!(single["trades"].as_u64().unwrap() > 20, "{single}");
    assert_eq!(account["trades"], single["trades"]);
    for metric in ["total_return", "sharpe", "max_drawdown", "win_rate", "sortino", "sqn"] {
        let (a, b) = (account[metric].as_f64().unwrap(), single[metric].as_f64().unwrap());
        assert!((a - b).abs() <= 1e-10 * b.abs().max(1e-6), "{metric}: {a} against {b}");
    }
}

#[test]
fn a_trail_inside_the_bar_sweeps_rows_are_its_backtests_and_its_trades_name_the_trail() {
    let dir = tempfile::tempdir().unwrap();
    let closes = make_data(dir.path());
    let trail = example("trend_trail.toml");
    let base = ["--data", "data", "--portfolio", "--size", "0.4", "--strategy", &trail];
    let grid = ["--grid", "fast=5,10", "--grid", "slow=40,60", "--grid", "trail_mult=1.5,3", "--out", "r.csv"];
    let swept = threadx(dir.path(), &[&["sweep"][..], &base, &grid].concat());
    assert!(swept.status.success(), "{}", text(&swept.stderr));
    let rows = csv_rows(&dir.path().join("r.csv"));
    assert_eq!(rows.len(), 8);
    for row in &rows {
        let set: Vec<String> = ["fast", "slow", "trail_mult"].iter().map(|p| format!("{p}={}", row[*p])).collect();
        let sets: Vec<&str> = set.iter().flat_map(|s| ["--set", s.as_str()]).collect();
        let account = json_of(&threadx(dir.path(), &[&["backtest"][..], &base, &sets, &["--json"]].concat()));
        for metric in ["total_return", "sharpe", "turnover", "mean_positions"] {
            let swept: f64 = row[metric].parse().unwrap();
            assert_eq!(swept, account[metric].as_f64().unwrap(), "{set:?} {metric}");
        }
    }
    // One account's trades: trail exits, some filled inside the bar (not at its close),
    // at a price within the bar's range below the close of that symbol's bar.
    let run = threadx(dir.path(), &[&["backtest"][..], &base, &["--trades", "t.csv"]].concat());
    assert!(run.status.success(), "{}", text(&run.stderr));
    let trades = csv_rows(&dir.path().join("t.csv"));
    let trailed: Vec<_> = trades.iter().filter(|t| t["exit_reason"] == "trail").collect();
    assert!(trailed.len() > 10, "{} trail exits", trailed.len());
    let inside = trailed
        .iter()
        .filter(|t| {
            let close = closes[&t["symbol"]][&t["exit_time"]];
            t["exit_price"].parse::<f64>().unwrap() != close
        })
        .count();
    assert!(inside > 5, "{inside} of {} trail exits inside the bar", trailed.len());
}

#[test]
fn shorts_and_reversals_sweep_as_they_backtest_and_every_trades_profit_adds_up() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let both = example("bb_long_short.toml");
    let base = ["--data", "data", "--portfolio", "--size", "0.3", "--init-cash", "10000", "--strategy", &both];
    let grid = ["--grid", "bb_period=10,20", "--grid", "bb_std=1.5,2", "--out", "r.csv"];
    let swept = threadx(dir.path(), &[&["sweep"][..], &base, &grid].concat());
    assert!(swept.status.success(), "{}", text(&swept.stderr));
    let rows = csv_rows(&dir.path().join("r.csv"));
    assert_eq!(rows.len(), 4);
    for row in &rows {
        let set: Vec<String> = ["bb_period", "bb_std"].iter().map(|p| format!("{p}={}", row[*p])).collect();
        let sets: Vec<&str> = set.iter().flat_map(|s| ["--set", s.as_str()]).collect();
        let account = json_of(&threadx(dir.path(), &[&["backtest"][..], &base, &sets, &["--json"]].concat()));
        for metric in ["total_return", "sharpe", "turnover", "mean_positions", "trades"] {
            let swept: f64 = row[metric].parse().unwrap();
            assert_eq!(swept, account[metric].as_f64().unwrap(), "{set:?} {metric}");
        }
    }
    let files = ["--trades", "t.csv", "--equity", "e.csv", "--report", "p.html"];
    let run = threadx(dir.path(), &[&["backtest"][..], &base, &files].concat());
    assert!(run.status.success(), "{}", text(&run.stderr));
    let trades = csv_rows(&dir.path().join("t.csv"));
    let count = |f: &dyn Fn(&std::collections::HashMap<String, String>) -> bool| trades.iter().filter(|t| f(t)).count();
    assert!(count(&|t| t["side"] == "short") > 20 && count(&|t| t["side"] == "long") > 20, "{} trades", trades.len());
    assert!(count(&|t| t["exit_reason"] == "reverse") > 0, "a reversal");
    // A short's units are held below zero; every trade's profit (an open one's at its
    // symbol's last close) adds up to the account's.
    let equity = csv_rows(&dir.path().join("e.csv"));
    assert!(equity.iter().any(|r| ["AAA", "BBB", "CCC"].iter().any(|s| r[*s].parse::<f64>().unwrap() < 0.0)));
    let pnl: f64 = trades.iter().map(|t| t["pnl"].parse::<f64>().unwrap()).sum();
    let last: f64 = equity.last().unwrap()["equity"].parse().unwrap();
    assert!((10000.0 + pnl - last).abs() < 1e-6, "{pnl} against {last}");
    // The page's allocation stacks what each short owes (the gross exposure), no cash.
    let page = std::fs::read_to_string(dir.path().join("p.html")).unwrap();
    assert!(page.contains("the bands add up to the gross exposure"), "the allocation's note");
    assert!(page.contains(">side<") && page.contains(">short<"), "the trades' side");
}
