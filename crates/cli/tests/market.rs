//! Strategies that trade like a market, as a user runs them: shorts and reversals in the
//! trades file, slippage on the command line, the same rows whatever `--device` says (a
//! GPU runs them on its market kernel), and rule-file mistakes at their line and column.

use crate::common;

use common::{text, threadx};
use std::path::Path;

fn example(name: &str) -> String {
    format!("{}/../../examples/strategies/{name}.toml", env!("CARGO_MANIFEST_DIR"))
}

const DATA: &str = "synthetic:bars=4000,seed=3";

#[test]
fn a_long_short_backtest_writes_both_sides_and_its_reversals() {
    let dir = tempfile::tempdir().unwrap();
    let out = threadx(
        dir.path(),
        &[
            "backtest",
            "--data",
            DATA,
            "--strategy",
            &example("breakout_next_open"),
            "--slippage",
            "0.0005",
            "--trades",
            "t.csv",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((json["fee"].as_f64(), json["slippage"].as_f64()), (Some(0.001), Some(0.0005)));
    let trades = std::fs::read_to_string(dir.path().join("t.csv")).unwrap();
    let rows: Vec<Vec<&str>> = trades.lines().skip(1).map(|l| l.split(',').collect()).collect();
    let count = |side: &str, reason: &str| rows.iter().filter(|r| r[1] == side && r[9] == reason).count();
    assert!(count("long", "reverse") > 0 && count("short", "reverse") > 0, "{trades:.400}");
    assert!(count("short", "max_bars") > 0 && count("long", "max_bars") > 0, "{trades:.400}");
    assert_eq!(rows.len() as u64, json["trades"].as_u64().unwrap());
    // Slippage costs a long: the same trades without it end higher.
    let long_only = |slippage: &str| {
        let args =
            ["backtest", "--data", DATA, "--strategy", &example("trend_trail"), "--slippage", slippage, "--json"];
        let out = threadx(dir.path(), &args);
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (json["total_return"].as_f64().unwrap(), json["trades"].as_u64().unwrap())
    };
    let (free, slipped) = (long_only("0"), long_only("0.001"));
    assert_eq!(free.1, slipped.1);
    assert!(free.0 > slipped.0, "{free:?} {slipped:?}");
}

#[test]
fn a_market_sweep_is_the_same_bytes_on_every_device_and_a_gpu_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = |device: &str, out: &str| {
        let args = ["sweep", "--data", DATA, "--strategy", &example("trend_trail"), "--device", device, "--out", out];
        let output = threadx(dir.path(), &args);
        assert!(output.status.success(), "{device}: {}", text(&output.stderr));
        (std::fs::read(dir.path().join(out)).unwrap(), text(&output.stdout) + &text(&output.stderr))
    };
    let (cpu, _) = run("cpu", "cpu.csv");
    assert!(cpu.len() > 1_000);
    for device in ["gpu", "all"] {
        let (rows, said) = run(device, &format!("{device}.csv"));
        assert_eq!(rows, cpu, "--device {device}: the CPU's bytes");
        assert!(!said.contains("not supported on the GPU"), "--device {device}: {said}");
    }
}

#[test]
fn strategy_check_says_how_a_strategy_trades_and_where_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    for (name, want) in [
        (
            "trend_trail",
            "trading: long only, filled at the close, stops checked inside the bar, a trailing stop; every device runs it (on a GPU, the market kernel)",
        ),
        (
            "breakout_next_open",
            "trading: long and short (an opposite entry reverses), filled at the next open, stops checked at the close; every device runs it (on a GPU, the market kernel)",
        ),
        ("donchian", "trading: long only, filled at the close, stops checked at the close; every device runs it"),
    ] {
        let out = threadx(dir.path(), &["strategy", "check", &example(name)]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains(want), "{name}: {}", text(&out.stdout));
        // A rule that reads no parameter is one row, named so.
        assert!(!text(&out.stdout).contains(" 1 rows"), "{name}: {}", text(&out.stdout));
    }
    let file = dir.path().join("one_row.toml");
    let rules = std::fs::read_to_string(example("trend_trail")).unwrap().replace("trail_mult * atr(14)", "0.02");
    std::fs::write(&file, rules).unwrap();
    let out = threadx(dir.path(), &["strategy", "check", file.to_str().unwrap()]);
    assert!(text(&out.stdout).contains("reads no parameter; 1 row\n"), "{}", text(&out.stdout));
}

#[test]
fn mistakes_in_trading_rules_and_costs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, rules: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "name = \"x\"\n[params]\nn = {{ kind = \"int\", default = 20, min = 2, max = 100 }}\n[rules]\n{rules}"
            ),
        )
        .unwrap();
        path.to_string_lossy().into_owned()
    };
    let fails = |args: &[&str], want: &str| {
        let out = threadx(dir.path(), args);
        assert!(!out.status.success(), "{args:?} should fail");
        let said = text(&out.stderr);
        assert!(said.contains(want), "{args:?}: {said}");
        assert!(!said.contains("panicked"), "{said}");
    };
    let typo = write("typo.toml", "entry = \"close > sma(n)\"\nfill = \"next_opn\"\n");
    fails(
        &["backtest", "--data", DATA, "--strategy", &typo],
        "typo.toml:6:8: `fill` is \"close\" (at the bar's close) or \"next_open\"",
    );
    fails(&["backtest", "--data", DATA, "--strategy", &typo], "did you mean 'next_open'?");
    let orphan = write("orphan.toml", "entry = \"close > sma(n)\"\nshort_stop = \"close + 1\"\n");
    fails(
        &["backtest", "--data", DATA, "--strategy", &orphan],
        "orphan.toml:6:14: `short_stop` applies to positions `short_entry` opens, and there is no `short_entry`",
    );
    let none = write("none.toml", "exit = \"close > sma(n)\"\n");
    fails(
        &["sweep", "--data", DATA, "--strategy", &none],
        "a strategy needs `entry` (longs), `short_entry` (shorts) or both",
    );
    fails(&["backtest", "--data", DATA, "--slippage", "1.5"], "slippage 1.5 is outside [0, 1)");
    fails(&["sweep", "--data", DATA, "--slippage", "-0.1"], "slippage -0.1 is outside [0, 1)");
    assert!(Path::new(&typo).exists());
}
