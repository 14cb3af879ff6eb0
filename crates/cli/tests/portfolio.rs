//! `threadx backtest --portfolio` as a user runs it: a folder of symbols on different
//! clocks (one with gaps) traded as one account; its equity file holds the cash and each
//! symbol's units and adds up to them at every bar; its trades name their symbols and
//! sizes and their profits add up to the account's; one symbol with all the cash is the
//! single backtest; what a portfolio cannot take is refused by name (its flags before any data is read).

use crate::common;

use common::{text, threadx};
use std::collections::HashMap;
use std::path::Path;

/// AAA (every 7th bar missing), BBB (later start, 2,500 bars), CCC (4,000 bars), as CSV
/// in `dir/data`; each symbol's closes by time.
pub fn make_data(dir: &Path) -> HashMap<String, HashMap<String, f64>> {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let synth = |bars: &str, seed: &str, out: &str| {
        let run = threadx(dir, &["data", "synth", "--bars", bars, "--seed", seed, "--out", out]);
        assert!(run.status.success(), "{}", text(&run.stderr));
    };
    synth("3500", "1", "full.csv");
    let full = std::fs::read_to_string(dir.join("full.csv")).unwrap();
    let gappy: Vec<&str> = full.lines().enumerate().filter(|(i, _)| *i == 0 || i % 7 != 3).map(|(_, l)| l).collect();
    std::fs::write(dir.join("data/AAA.csv"), gappy.join("\n") + "\n").unwrap();
    synth("2500", "2", "data/BBB.csv");
    synth("4000", "3", "data/CCC.csv");
    let mut closes = HashMap::new();
    for name in ["AAA", "BBB", "CCC"] {
        let body = std::fs::read_to_string(dir.join(format!("data/{name}.csv"))).unwrap();
        let by_time = body.lines().skip(1).map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].to_owned(), f[4].parse::<f64>().unwrap())
        });
        closes.insert(name.to_owned(), by_time.collect());
    }
    closes
}

fn rows(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let body = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = body.lines();
    let header = lines.next().unwrap().split(',').map(str::to_owned).collect();
    (header, lines.map(|l| l.split(',').map(str::to_owned).collect()).collect())
}

fn json_of(output: &std::process::Output) -> serde_json::Value {
    assert!(output.status.success(), "{}", text(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

#[test]
fn a_folder_traded_as_one_account_writes_equity_cash_positions_and_its_trades() {
    let dir = tempfile::tempdir().unwrap();
    let closes = make_data(dir.path());
    let args = [
        "backtest",
        "--data",
        "data",
        "--portfolio",
        "--size",
        "2500",
        "--size-type",
        "value",
        "--init-cash",
        "10000",
        "--lot",
        "0.01",
        "--equity",
        "e.csv",
        "--trades",
        "t.csv",
    ];
    let run = threadx(dir.path(), &args);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let out = text(&run.stdout);
    assert!(
        out.contains("on 3 symbols of data (4000 bars) as one account: cash 10000, 2500 per entry in lots of 0.01"),
        "{out}"
    );
    let (header, equity) = rows(&dir.path().join("e.csv"));
    assert_eq!(header, ["bar", "timestamp", "equity", "cash", "AAA", "BBB", "CCC"]);
    assert_eq!(equity.len(), 4000);
    // Every bar: equity = cash + each symbol's units at its last close.
    let mut last = HashMap::new();
    for row in &equity {
        let time = row[1].trim_end_matches('Z').replace('T', " ");
        let mut value: f64 = row[3].parse().unwrap();
        for (i, name) in ["AAA", "BBB", "CCC"].iter().enumerate() {
            let close =
                closes[*name].iter().find(|(t, _)| t.replace('T', " ").trim_end_matches('Z') == time).map(|(_, c)| *c);
            if let Some(c) = close {
                last.insert(*name, c);
            }
            let units: f64 = row[4 + i].parse().unwrap();
            assert!(units >= 0.0 && (units * 100.0 - (units * 100.0).round()).abs() < 1e-6, "lots of 0.01: {units}");
            if units > 0.0 {
                value += units * last[name];
            }
        }
        let equity: f64 = row[2].parse().unwrap();
        assert!((equity - value).abs() <= 1e-9 * equity, "bar {}: {equity} against {value}", row[0]);
        assert!(row[3].parse::<f64>().unwrap() >= 0.0);
    }
    let (header, trades) = rows(&dir.path().join("t.csv"));
    assert_eq!(header[..7], ["trade", "symbol", "side", "entry_bar", "entry_time", "entry_price", "size"]);
    assert!(trades.len() > 50, "{} trades", trades.len());
    for name in ["AAA", "BBB", "CCC"] {
        assert!(trades.iter().any(|t| t[1] == name), "{name} trades");
    }
    // The profits (open trades marked at their last close) add up to the account's.
    let pnl: f64 = trades.iter().map(|t| t[12].parse::<f64>().unwrap()).sum();
    let final_equity: f64 = equity.last().unwrap()[2].parse().unwrap();
    assert!((10000.0 + pnl - final_equity).abs() < 1e-6, "{pnl} against {final_equity}");
    // The turnover (the value of every fill over the mean equity) and the positions held
    // on average, from the two files by hand.
    let account = json_of(&threadx(dir.path(), &[&args[..], &["--json"]].concat()));
    let f = |t: &[String], i: usize| t[i].parse::<f64>().unwrap_or(0.0);
    // An open trade (reason `end`) has no exit fill.
    let traded: f64 = trades.iter().map(|t| f(t, 6) * (f(t, 5) + if t[14] == "end" { 0.0 } else { f(t, 10) })).sum();
    let mean_equity = equity.iter().map(|r| f(r, 2)).sum::<f64>() / 4000.0;
    let held = equity.iter().map(|r| (4..7).filter(|&i| f(r, i) != 0.0).count()).sum::<usize>() as f64 / 4000.0;
    let turnover = account["turnover"].as_f64().unwrap();
    assert!((turnover - traded / mean_equity).abs() <= 1e-9 * turnover, "{turnover} against {}", traded / mean_equity);
    assert!((account["mean_positions"].as_f64().unwrap() - held).abs() < 1e-12, "{account}");
}

#[test]
fn one_symbol_with_all_the_cash_is_the_single_backtest() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let single = json_of(&threadx(dir.path(), &["backtest", "--data", "data/CCC.csv", "--json"]));
    let account = json_of(&threadx(dir.path(), &["backtest", "--data", "data/CCC.csv", "--portfolio", "--json"]));
    assert_eq!(account["portfolio"]["symbols"], serde_json::json!(["CCC"]));
    for metric in ["total_return", "sharpe", "max_drawdown", "win_rate", "sortino", "sqn"] {
        let (a, b) = (account[metric].as_f64().unwrap(), single[metric].as_f64().unwrap());
        assert!((a - b).abs() <= 1e-10 * b.abs().max(1e-6), "{metric}: {a} against {b}");
    }
    assert_eq!(account["trades"], single["trades"]);
}

#[test]
fn what_a_portfolio_cannot_take_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for (args, message) in [
        (vec!["backtest", "--size", "0.5"], "--size: sizing needs --portfolio"),
        (
            vec!["backtest", "--portfolio", "--size-type", "shares"],
            "size_type=shares: one of percent, value, targetpercent",
        ),
        (
            vec!["backtest", "--portfolio", "--size", "1.5"],
            "--size 1.5 (over the [sizing] of built-in bb_atr.toml): size=1.5: a percent size is a fraction of the account in (0, 1]",
        ),
        (
            vec!["backtest", "--portfolio", "--init-cash", "0"],
            "--init-cash 0 (over the [sizing] of built-in bb_atr.toml): init_cash=0: the starting cash must be a positive number",
        ),
        (
            vec!["backtest", "--portfolio", "--strategy", "ma_cross", "--size-type", "risk", "--size", "0.02"],
            "ma_cross.toml: risk sizing sizes each entry from its distance to its stop, and the strategy has no `stop` rule",
        ),
    ] {
        let run = threadx(dir.path(), &args);
        assert!(!run.status.success(), "{args:?}");
        assert!(text(&run.stderr).contains(message), "{args:?}: {}", text(&run.stderr));
    }
}

pub fn csv_rows(path: &Path) -> Vec<HashMap<String, String>> {
    let (header, rows) = rows(path);
    rows.into_iter().map(|r| header.iter().cloned().zip(r).collect()).collect()
}

/// `sweep --portfolio`: one row per combo, each the account `backtest --portfolio` gives
/// for its parameters; the same bytes on one thread, in two shards merged, and resumed.
#[test]
fn a_portfolio_sweep_writes_one_account_a_combo_in_any_cut() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let sweep = |out: &str, more: &[&str]| {
        let mut args = vec![
            "sweep",
            "--data",
            "data",
            "--portfolio",
            "--size",
            "0.4",
            "--init-cash",
            "5000",
            "--grid",
            "bb_period=10:30:10",
            "--grid",
            "atr_mult=1,2",
            "--out",
            out,
        ];
        args.extend(more);
        let run = threadx(dir.path(), &args);
        assert!(run.status.success(), "{more:?}: {}", text(&run.stderr));
        text(&run.stdout)
    };
    let out = sweep("all.csv", &[]);
    assert!(out.contains("bb_atr portfolio sweep over 3 symbols on data: 6 combos, each one account (cash 5000, 40% of the cash left per entry)"), "{out}");
    let rows = csv_rows(&dir.path().join("all.csv"));
    assert_eq!(rows.len(), 6);
    for row in [&rows[0], &rows[5]] {
        let set: Vec<String> =
            ["bb_period", "bb_std", "atr_period", "atr_mult"].iter().map(|p| format!("{p}={}", row[*p])).collect();
        let mut args =
            vec!["backtest", "--data", "data", "--portfolio", "--size", "0.4", "--init-cash", "5000", "--json"];
        for s in &set {
            args.extend(["--set", s.as_str()]);
        }
        let account = json_of(&threadx(dir.path(), &args));
        let metrics = ["total_return", "sharpe", "max_drawdown", "trades", "win_rate", "sortino", "sqn", "exposure"];
        // A portfolio's row carries its turnover and mean positions held, the backtest's bits.
        for metric in metrics.into_iter().chain(["turnover", "mean_positions"]) {
            let ours: f64 = row[metric].parse().unwrap();
            assert_eq!(ours, account[metric].as_f64().unwrap(), "{set:?} {metric}");
        }
        assert!(row["turnover"].parse::<f64>().unwrap() > 1.0 && row["mean_positions"].parse::<f64>().unwrap() > 0.1);
    }
    let all = std::fs::read(dir.path().join("all.csv")).unwrap();
    // The same rows in Parquet, read back (binary checkpoint rows, then the columnar file).
    sweep("all.parquet", &["--chunk-size", "2"]);
    let strategy = threadx_backtest::Strategy::parse("bb_atr").unwrap();
    let bits = |file: &str| -> Vec<(u64, Vec<u64>)> {
        let rows = threadx_sweep::read_results(&dir.path().join(file), &strategy).unwrap();
        let set = threadx_backtest::MetricSet::Portfolio;
        rows.iter()
            .map(|r| {
                (
                    r.combo,
                    threadx_backtest::MetricSet::values(&r.metrics)[..set.count()]
                        .iter()
                        .map(|v| v.to_bits())
                        .collect(),
                )
            })
            .collect()
    };
    assert_eq!(bits("all.parquet"), bits("all.csv"));
    sweep("one.csv", &["--threads", "1", "--chunk-size", "2"]);
    assert_eq!(std::fs::read(dir.path().join("one.csv")).unwrap(), all, "one thread, chunks of 2");
    // Watched by --monitor: the same rows, and the machine in the summary.
    let said = sweep("watched.csv", &["--monitor"]);
    assert!(said.contains("telemetry: "), "{said}");
    assert_eq!(std::fs::read(dir.path().join("watched.csv")).unwrap(), all, "--monitor");
    let watched: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("watched.json")).unwrap()).unwrap();
    assert!(watched["telemetry"]["duration_s"].as_f64().is_some(), "{}", watched["telemetry"]);
    sweep("s1.csv", &["--shard", "0/2", "--chunk-size", "2"]);
    sweep("s2.csv", &["--shard", "1/2", "--chunk-size", "2"]);
    let merged = threadx(dir.path(), &["merge", "s1.csv", "s2.csv", "--out", "merged.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    assert_eq!(std::fs::read(dir.path().join("merged.csv")).unwrap(), all, "two shards merged");
    // The account is part of the run's identity: a resume or merge of another account's
    // chunks is refused as of another run.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("all.json")).unwrap()).expect("the summary");
    let portfolio = &summary["identity"]["portfolio"];
    assert_eq!(portfolio["symbols"], serde_json::json!(["AAA", "BBB", "CCC"]));
    assert_eq!((portfolio["size"].as_f64(), portfolio["init_cash"].as_f64()), (Some(0.4), Some(5000.0)));
    assert_eq!(portfolio["size_type"], "percent");
    assert_eq!(summary["data"]["bars"], 4000);
}

/// `sweep --portfolio --overfitting`: each account's blocks are its equity's returns cut
/// by the rule (checked against `backtest --portfolio --equity`), and shards merged give
/// the one process's rows and statistics.
#[test]
fn a_portfolio_sweeps_overfitting_statistics_come_from_each_accounts_equity() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let sweep = |out: &str, more: &[&str]| {
        let mut args =
            vec!["sweep", "--data", "data", "--portfolio", "--size", "0.4", "--overfitting", "--blocks", "8"];
        args.extend(["--grid", "bb_period=10:30:10", "--grid", "atr_mult=1,2", "--out", out]);
        args.extend(more);
        let run = threadx(dir.path(), &args);
        assert!(run.status.success(), "{more:?}: {}", text(&run.stderr));
        text(&run.stdout)
    };
    let out = sweep("all.csv", &["--blocks-out", "blocks.csv"]);
    assert!(out.contains("PBO "), "{out}");
    // Combo 5 (bb_period=30, atr_mult=2): its account bar by bar.
    let args = ["backtest", "--data", "data", "--portfolio", "--size", "0.4", "--equity", "e.csv"];
    let run = threadx(dir.path(), &[&args[..], &["--set", "bb_period=30", "--set", "atr_mult=2"]].concat());
    assert!(run.status.success(), "{}", text(&run.stderr));
    let equity: Vec<f64> = csv_rows(&dir.path().join("e.csv")).iter().map(|r| r["equity"].parse().unwrap()).collect();
    // (The starting cash is 1 without --init-cash.)
    let mut before = 1.0;
    let r: Vec<f64> = equity.iter().map(|&e| e / std::mem::replace(&mut before, e) - 1.0).collect();
    let (first, len) = (r.len() % 8, r.len() / 8);
    let blocks: Vec<HashMap<String, String>> =
        csv_rows(&dir.path().join("blocks.csv")).into_iter().filter(|b| b["combo"] == "5").collect();
    assert_eq!(blocks.len(), 8);
    for (k, block) in blocks.iter().enumerate() {
        let cut = &r[first + k * len..first + (k + 1) * len];
        let (sum, sq) = (cut.iter().sum::<f64>(), cut.iter().map(|x| x * x).sum::<f64>());
        assert_eq!(block["bars"], len.to_string());
        let (got, got_sq): (f64, f64) = (block["sum_r"].parse().unwrap(), block["sum_r2"].parse().unwrap());
        assert!((got - sum).abs() < 1e-9 && (got_sq - sq).abs() < 1e-9, "block {k}: {got} {got_sq} vs {sum} {sq}");
    }
    // Two shards merged: the same rows and statistics (their time aside).
    sweep("s1.csv", &["--shard", "0/2", "--chunk-size", "2"]);
    sweep("s2.csv", &["--shard", "1/2", "--chunk-size", "2"]);
    let merged = threadx(dir.path(), &["merge", "s1.csv", "s2.csv", "--out", "merged.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    let read = |f: &str| std::fs::read(dir.path().join(f)).unwrap();
    assert_eq!(read("merged.csv"), read("all.csv"));
    let statistics = |f: &str| {
        let mut summary: serde_json::Value = serde_json::from_slice(&read(f)).unwrap();
        summary["overfitting"].as_object_mut().unwrap().remove("seconds");
        summary["overfitting"].take()
    };
    let whole = statistics("all.json");
    assert_eq!(statistics("merged.json"), whole);
    assert_eq!((whole["bars"].as_u64(), whole["trials"]["n"].as_f64()), (Some(r.len() as u64), Some(6.0)));
    assert_eq!(whole["top"].as_array().map(Vec::len), Some(6), "every combo is among the best 10");
    assert!((0.0..=1.0).contains(&whole["pbo"].as_f64().unwrap()), "{whole}");
}

/// A search or a sample of a portfolio's grid: each trial is the account the grid's run
/// gives its combo; a design's shards merged are one process's search.
#[test]
fn a_portfolio_search_evaluates_the_grids_accounts() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let grid = ["--grid", "bb_period=10:30:10", "--grid", "atr_mult=1,2,3", "--grid", "bb_std=1.5,2"];
    let sweep = |out: &str, more: &[&str]| {
        let args = [&["sweep", "--data", "data", "--portfolio", "--size", "0.4"][..], &grid[..], more, &["--out", out]];
        let run = threadx(dir.path(), &args.concat());
        assert!(run.status.success(), "{more:?}: {}", text(&run.stderr));
        text(&run.stdout)
    };
    sweep("grid.csv", &[]);
    let grid_rows: HashMap<String, HashMap<String, String>> =
        csv_rows(&dir.path().join("grid.csv")).into_iter().map(|r| (r["combo"].clone(), r)).collect();
    assert_eq!(grid_rows.len(), 18);
    for (out, more) in [
        ("tpe.csv", &["--search", "tpe", "--trials", "12", "--seed", "3"][..]),
        ("random.csv", &["--random", "5", "--seed", "4"][..]),
    ] {
        let said = sweep(out, more);
        let rows = csv_rows(&dir.path().join(out));
        assert_eq!(rows.len(), if out == "tpe.csv" { 12 } else { 5 }, "{said}");
        for row in &rows {
            let whole = &grid_rows[&row["combo"]];
            for (column, value) in whole {
                assert_eq!(&row[column], value, "{out}: combo {} {column}", row["combo"]);
            }
        }
    }
    // A Sobol design in two shards, merged: one process's bytes.
    sweep("sobol.csv", &["--search", "sobol", "--trials", "8"]);
    sweep("s0.csv", &["--search", "sobol", "--trials", "8", "--shard", "0/2"]);
    sweep("s1.csv", &["--search", "sobol", "--trials", "8", "--shard", "1/2"]);
    let merged = threadx(dir.path(), &["merge", "s0.csv", "s1.csv", "--out", "merged.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    let read = |f: &str| std::fs::read(dir.path().join(f)).unwrap();
    assert_eq!(read("merged.csv"), read("sobol.csv"));
}

/// donchian.toml with `sizing` as its `[sizing]` table, written to `dir/name`.
fn sized_donchian(dir: &Path, name: &str, sizing: &str) -> String {
    let rules = format!("{}/../../examples/strategies/donchian.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(rules).unwrap();
    std::fs::write(dir.join(name), format!("{text}\n[sizing]\n{sizing}\n")).unwrap();
    name.to_owned()
}

/// A rule file's `[sizing]`: the account the same flags give, each flag given in its
/// place; all-in sizing leaves a single run's bytes as they were; other sizing is an
/// account's, refused in a single run.
#[test]
fn a_rule_files_sizing_table_sizes_the_account_and_flags_take_its_place() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let sized =
        sized_donchian(dir.path(), "sized.toml", "size = 0.25\ninit_cash = 5000\nmax_positions = 2\nleverage = 0.8");
    let run = |args: &[&str]| {
        let out = threadx(dir.path(), &[&["backtest", "--data", "data", "--portfolio", "--json"][..], args].concat());
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        json_of(&out)
    };
    let plain = format!("{}/../../examples/strategies/donchian.toml", env!("CARGO_MANIFEST_DIR"));
    let flags = ["--size", "0.25", "--init-cash", "5000", "--max-positions", "2", "--leverage", "0.8"];
    let by_table = run(&["--strategy", &sized]);
    assert_eq!(by_table, run(&[&["--strategy", plain.as_str()][..], &flags].concat()));
    assert_eq!(by_table["portfolio"]["max_positions"], 2, "{by_table}");
    assert_eq!(by_table["portfolio"]["leverage"], 0.8, "{by_table}");
    // A flag takes its field's place; the table gives the rest.
    let overridden = run(&["--strategy", &sized, "--size", "0.5"]);
    let by_flags = run(&[&["--strategy", plain.as_str()][..], &flags[2..], &["--size", "0.5"]].concat());
    assert_eq!(overridden, by_flags);
    assert_ne!(overridden["total_return"], by_table["total_return"]);

    // All in, as a table says outright: a single run's bytes as without it.
    let all_in = sized_donchian(dir.path(), "all_in.toml", "size = 1.0\nsize_type = \"percent\"\ninit_cash = 100");
    let sweep = |strategy: &str, out: &str| {
        let args = ["sweep", "--data", "data/CCC.csv", "--strategy", strategy, "--grid", "n=10:40:10", "--out", out];
        let run = threadx(dir.path(), &args);
        assert!(run.status.success(), "{}", text(&run.stderr));
    };
    sweep(&plain, "plain.csv");
    sweep(&all_in, "all_in.csv");
    let read = |f: &str| std::fs::read(dir.path().join(f)).unwrap();
    assert_eq!(read("all_in.csv"), read("plain.csv"));
    // Anything else is an account's.
    for args in [
        vec!["backtest", "--data", "data/CCC.csv", "--strategy", &sized],
        vec!["sweep", "--data", "data/CCC.csv", "--strategy", &sized, "--out", "r.csv"],
        vec!["sweep", "--data", "data", "--strategy", &sized, "--out", "u.csv"],
    ] {
        let out = threadx(dir.path(), &args);
        assert!(!out.status.success(), "{args:?}");
        let said = text(&out.stderr);
        assert!(
            said.contains("sized.toml: its [sizing] sizes each entry as an account does: run it with --portfolio"),
            "{args:?}: {said}"
        );
    }
}

/// A rule file's `[sizing]` that sweeps the size as a parameter: each row the account of
/// its fixed size; a swept value that is no size refused by name.
#[test]
fn a_size_swept_as_a_parameter_gives_each_rows_fixed_size_account() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let plain = format!("{}/../../examples/strategies/donchian.toml", env!("CARGO_MANIFEST_DIR"));
    let run = |args: &[&str]| {
        let out = threadx(dir.path(), &[&["backtest", "--data", "data", "--portfolio", "--json"][..], args].concat());
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        json_of(&out)
    };
    let rules = std::fs::read_to_string(&plain).unwrap().replace(
        "m = { kind",
        "frac = { kind = \"float\", default = 0.5, min = 0.05, max = 2, grid = \"0.25,1\" }\nm = { kind",
    );
    std::fs::write(dir.path().join("frac.toml"), format!("{rules}\n[sizing]\nsize = \"frac\"\ninit_cash = 1000\n"))
        .unwrap();
    let sweep = |grid: &str, out: &str| {
        let args = ["sweep", "--data", "data", "--portfolio", "--strategy", "frac.toml", "--grid", grid, "--out", out];
        threadx(dir.path(), &args)
    };
    let swept = sweep("frac=0.25,1", "f.csv");
    assert!(swept.status.success(), "{}", text(&swept.stderr));
    assert!(text(&swept.stdout).contains("each entry sized by parameter frac (percent)"), "{}", text(&swept.stdout));
    let rows = csv_rows(&dir.path().join("f.csv"));
    assert_eq!(rows.iter().map(|r| r["frac"].as_str()).collect::<Vec<_>>(), ["0.25", "1"]);
    for row in &rows {
        let fixed = run(&[
            "--strategy",
            &plain,
            "--set",
            &format!("n={}", row["n"]),
            "--size",
            &row["frac"],
            "--init-cash",
            "1000",
        ]);
        assert_eq!(row["total_return"].parse::<f64>().unwrap(), fixed["total_return"].as_f64().unwrap(), "{row:?}");
    }
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("f.json")).unwrap()).unwrap();
    assert_eq!(summary["identity"]["portfolio"]["size_param"], "frac");
    // A value the grid sweeps must be a size too: 1.5 of the cash left is not.
    let beyond = sweep("frac=0.5,1.5", "b.csv");
    assert!(!beyond.status.success());
    assert!(
        text(&beyond.stderr).contains("frac=1.5")
            && text(&beyond.stderr).contains("as [sizing]'s size, a percent size is a fraction"),
        "{}",
        text(&beyond.stderr)
    );
}

/// A `rank` rule orders the entries in a sweep as in a backtest: each row is the ranked
/// account of its parameters.
#[test]
fn a_ranked_portfolio_sweeps_rows_are_its_backtests() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    // Entries on many shared bars: a close above its short average.
    let rules = "name = \"often\"\n[params]\nn = { kind = \"int\", default = 5, min = 2, max = 50 }\n[rules]\n\
                 entry = \"close > sma(close, n)\"\nexit = \"close < sma(close, n)\"\n";
    std::fs::write(dir.path().join("plain.toml"), rules).unwrap();
    std::fs::write(dir.path().join("ranked.toml"), format!("{rules}rank = \"-close\"\n")).unwrap();
    // A rank that reads the swept parameter: each row ranks by its own n's series.
    std::fs::write(dir.path().join("ranked_n.toml"), format!("{rules}rank = \"sma(close, n) - close\"\n")).unwrap();
    let plain = "plain.toml";
    let total = |strategy: &str, n: &str| {
        let args = ["backtest", "--data", "data", "--portfolio", "--size", "0.6", "--strategy", strategy, "--set", n];
        json_of(&threadx(dir.path(), &[&args[..], &["--json"]].concat()))["total_return"].as_f64().unwrap()
    };
    for strategy in ["ranked.toml", "ranked_n.toml"] {
        let args = ["sweep", "--data", "data", "--portfolio", "--size", "0.6", "--strategy", strategy];
        let swept = threadx(dir.path(), &[&args[..], &["--grid", "n=5,20", "--out", "r.csv"]].concat());
        assert!(swept.status.success(), "{}", text(&swept.stderr));
        for row in &csv_rows(&dir.path().join("r.csv")) {
            let n = format!("n={}", row["n"]);
            assert_eq!(row["total_return"].parse::<f64>().unwrap(), total(strategy, &n), "{strategy} {n}");
        }
    }
    assert_ne!(total("ranked_n.toml", "n=5"), total("ranked.toml", "n=5"));
    // The order matters here: 60 % of the cash left per entry runs short on shared bars.
    assert_ne!(total("ranked.toml", "n=5"), total(plain, "n=5"));
}

#[test]
fn what_a_portfolio_sweep_cannot_run_yet_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    for (args, message) in [
        (
            vec!["sweep", "--data", "data", "--portfolio", "--walk-forward", "train=20,test=500"],
            "--walk-forward train=20: a train window of 20 bars is too short",
        ),
        (vec!["sweep", "--data", "data", "--size", "0.5"], "--size: sizing needs --portfolio"),
        (
            vec!["sweep", "--data", "data", "--portfolio", "--max-memory", "1M"],
            "decision rows, 101 stops for each of 3 symbols), more than the 1 MiB of memory available; use \
             fewer values, fewer bars or fewer symbols",
        ),
    ] {
        let run = threadx(dir.path(), &args);
        assert!(!run.status.success(), "{args:?}");
        assert!(text(&run.stderr).contains(message), "{args:?}: {}", text(&run.stderr));
    }
}

#[test]
fn max_positions_holds_at_most_that_many_symbols_at_every_bar() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let args =
        ["backtest", "--data", "data", "--portfolio", "--size", "0.3", "--max-positions", "1", "--equity", "e.csv"];
    let run = threadx(dir.path(), &args);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(text(&run.stdout).contains("30% of the cash left per entry, at most 1 position"), "{}", text(&run.stdout));
    let (_, equity) = rows(&dir.path().join("e.csv"));
    let held = |row: &Vec<String>| row[4..].iter().filter(|u| u.parse::<f64>().unwrap() > 0.0).count();
    assert_eq!(equity.iter().map(held).max(), Some(1));
    let zero = threadx(dir.path(), &["backtest", "--data", "data", "--portfolio", "--max-positions", "0"]);
    assert!(text(&zero.stderr).contains("max_positions=0: at least 1 position"), "{}", text(&zero.stderr));
}

/// A leverage cap: after every bar an entry filled on, the positions are worth at most
/// that multiple of the account (no fees here); above 1 the cash is borrowed.
#[test]
fn a_leverage_cap_bounds_the_positions_at_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    for leverage in ["0.6", "1.8"] {
        let args = ["backtest", "--data", "data", "--portfolio", "--size", "0.5", "--fee", "0", "--equity", "e.csv"];
        let run = threadx(dir.path(), &[&args[..], &["--leverage", leverage]].concat());
        assert!(run.status.success(), "{}", text(&run.stderr));
        assert!(
            text(&run.stdout).contains(&format!("positions at most {leverage}× its value")),
            "{}",
            text(&run.stdout)
        );
        let (_, rows) = rows(&dir.path().join("e.csv"));
        let num = |row: &Vec<String>, i: usize| row[i].parse::<f64>().unwrap();
        let cap: f64 = leverage.parse().unwrap();
        let mut entries = 0;
        for pair in rows.windows(2) {
            let (equity, cash) = (num(&pair[1], 2), num(&pair[1], 3));
            if cash < num(&pair[0], 3) {
                entries += 1;
                assert!(equity - cash <= cap * equity * (1.0 + 1e-12), "bar {}: {equity} {cash}", pair[1][0]);
            }
        }
        assert!(entries > 20);
        let lowest = rows.iter().map(|r| num(r, 3)).fold(f64::INFINITY, f64::min);
        assert_eq!(lowest < 0.0, cap > 1.0, "borrowed cash, {leverage}: {lowest}");
    }
    let bad = threadx(dir.path(), &["backtest", "--data", "data", "--portfolio", "--leverage", "-1"]);
    assert!(text(&bad.stderr).contains("leverage=-1: a leverage cap is a positive multiple"), "{}", text(&bad.stderr));
}
