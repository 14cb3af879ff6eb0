//! A sweep over many symbols as a user runs it: a folder (CSV, Parquet and Feather files
//! of different lengths, one with gaps), a glob pattern or one long file give the rows of
//! the single-symbol runs, symbol by symbol, with a `symbol` column; the by-combo table
//! holds their mean, median and minimum; a run stopped part-way resumes, and shards
//! merge, to the same bytes; what a universe cannot do is refused by name.

use crate::common;

use common::{SMALL, text, threadx};
use std::path::Path;

/// The small sweep's grid, on the data `data`, into `out`, with `more` flags.
fn sweep(dir: &Path, data: &str, out: &str, more: &[&str]) -> String {
    let mut args = SMALL.to_vec();
    args[4] = data;
    args.extend(["--out", out]);
    args.extend(more);
    let run = threadx(dir, &args);
    assert!(run.status.success(), "{data} {more:?}: {}", text(&run.stderr));
    text(&run.stdout)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The symbols: AAA (a CSV with every 7th bar left out: gaps), BBB (Parquet, 2,500
/// bars), CCC (Feather, 4,000 bars), in `dir/data`; their bars as CSV text, by name.
fn make_data(dir: &Path) -> Vec<(&'static str, String)> {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let synth = |bars: &str, seed: &str, out: &str| {
        let run = threadx(dir, &["data", "synth", "--bars", bars, "--seed", seed, "--out", out]);
        assert!(run.status.success(), "{}", text(&run.stderr));
    };
    synth("3500", "1", "full.csv");
    let full = read(&dir.join("full.csv"));
    let gappy: Vec<&str> = full.lines().enumerate().filter(|(i, _)| *i == 0 || i % 7 != 3).map(|(_, l)| l).collect();
    std::fs::write(dir.join("data/AAA.csv"), gappy.join("\n") + "\n").unwrap();
    synth("2500", "2", "data/BBB.parquet");
    synth("2500", "2", "BBB.csv");
    synth("4000", "3", "data/CCC.feather");
    synth("4000", "3", "CCC.csv");
    vec![
        ("AAA", read(&dir.join("data/AAA.csv"))),
        ("BBB", read(&dir.join("BBB.csv"))),
        ("CCC", read(&dir.join("CCC.csv"))),
    ]
}

/// The rows of the single-symbol runs, each after its symbol, under the universe's header.
fn single_runs(dir: &Path, symbols: &[(&str, String)]) -> String {
    let mut joined = String::new();
    for (name, _) in symbols {
        let file = std::fs::read_dir(dir.join("data"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_stem().is_some_and(|s| s == *name))
            .unwrap();
        let out = format!("{name}-alone.csv");
        sweep(dir, file.to_str().unwrap(), &out, &[]);
        let rows = read(&dir.join(&out));
        let (header, rows) = rows.split_once('\n').unwrap();
        if joined.is_empty() {
            joined = format!("symbol,{header}\n");
        }
        for line in rows.lines() {
            joined += &format!("{name},{line}\n");
        }
    }
    joined
}

/// The by-combo table computed here from the universe's rows: mean (summed in symbol
/// order), median, min of sharpe over the symbols with one, share of positive returns.
fn by_combo(results: &str) -> Vec<(u64, u64, f64, f64, f64, f64)> {
    let mut lines = results.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (combo, sharpe, ret) = (column("combo"), column("sharpe"), column("total_return"));
    let mut per_combo: std::collections::BTreeMap<u64, (Vec<f64>, u64, u64)> = Default::default();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let entry = per_combo.entry(f[combo].parse().unwrap()).or_default();
        if !f[sharpe].is_empty() {
            entry.0.push(f[sharpe].parse().unwrap());
        }
        entry.1 += u64::from(f[ret].parse::<f64>().unwrap() > 0.0);
        entry.2 += 1;
    }
    per_combo
        .into_iter()
        .map(|(c, (values, positive, symbols))| {
            let n = values.len();
            let mean = values.iter().sum::<f64>() / n as f64;
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
            (c, n as u64, mean, median, sorted[0], positive as f64 / symbols as f64)
        })
        .collect()
}

fn parse_by_combo(table: &str) -> Vec<(u64, u64, f64, f64, f64, f64)> {
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    assert!(header.ends_with(",symbols,mean_sharpe,median_sharpe,min_sharpe,positive_return_share"), "{header}");
    lines
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            let n = f.len();
            let x = |k: usize| f[n - k].parse::<f64>().unwrap();
            (f[0].parse().unwrap(), f[n - 5].parse().unwrap(), x(4), x(3), x(2), x(1))
        })
        .collect()
}

#[test]
fn a_universe_equals_its_single_symbol_runs_and_its_by_combo_table_their_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let symbols = make_data(d);
    let expected = single_runs(d, &symbols);
    assert_eq!(expected.lines().count(), 1 + 3 * 24);

    let printed = sweep(d, "data", "folder.csv", &[]);
    assert!(printed.contains("over 3 symbols (AAA, BBB, CCC)"), "{printed}");
    assert!(printed.contains("top 10 combos across 3 symbols, by median sharpe"), "{printed}");
    assert_eq!(read(&d.join("folder.csv")), expected);
    let table = read(&d.join("folder-by-combo.csv"));
    assert_eq!(parse_by_combo(&table), by_combo(&expected));
    let summary: serde_json::Value = serde_json::from_str(&read(&d.join("folder.json"))).unwrap();
    assert_eq!(summary["combos"]["rows"], 72);
    assert_eq!(summary["symbols"][0]["bars"], 3000);
    assert_eq!(summary["by_combo"]["best_by_median"].as_array().unwrap().len(), 10);

    // A glob pattern, and one long file whose `symbol` column interleaves the symbols by time.
    sweep(d, "data/*.*", "glob.csv", &[]);
    assert_eq!(read(&d.join("glob.csv")), expected);
    let mut long: Vec<(String, String)> = Vec::new();
    for (name, csv) in &symbols {
        for line in csv.lines().skip(1) {
            let (time, rest) = line.split_once(',').unwrap();
            long.push((time.to_owned(), format!("{time},{name},{rest}")));
        }
    }
    long.sort();
    let long: Vec<String> = long.into_iter().map(|(_, l)| l).collect();
    std::fs::write(d.join("long.csv"), format!("timestamp,symbol,open,high,low,close,volume\n{}\n", long.join("\n")))
        .unwrap();
    sweep(d, "long.csv", "long-out.csv", &[]);
    assert_eq!(read(&d.join("long-out.csv")), expected);

    // Parquet results and by-combo table: read back through merge, the CSV's bytes.
    sweep(d, "data", "folder.parquet", &[]);
    let merged = threadx(d, &["merge", "folder.parquet", "--out", "back.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    assert_eq!(read(&d.join("back.csv")), expected);
    assert_eq!(read(&d.join("back-by-combo.csv")), table);
    let by_combo_parquet = std::fs::read(d.join("folder-by-combo.parquet")).unwrap();
    assert!(by_combo_parquet.starts_with(b"PAR1"));
}

#[test]
fn a_stopped_universe_resumes_and_its_shards_merge_to_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_data(d);
    sweep(d, "data", "whole.csv", &["--chunk-size", "5"]);
    let whole = read(&d.join("whole.csv"));

    // CCC's file is damaged: the run stops there, keeping AAA and BBB finished.
    let ccc = std::fs::read(d.join("data/CCC.feather")).unwrap();
    std::fs::write(d.join("data/CCC.feather"), &ccc[..ccc.len() / 2]).unwrap();
    let mut args = SMALL.to_vec();
    args[4] = "data";
    args.extend(["--out", "stopped.csv", "--chunk-size", "5"]);
    let failed = threadx(d, &args);
    assert!(!failed.status.success());
    assert!(text(&failed.stderr).contains("CCC.feather"), "{}", text(&failed.stderr));
    assert!(!d.join("stopped.csv").exists());
    let again = threadx(d, &args);
    assert!(text(&again.stderr).contains("pass --resume"), "{}", text(&again.stderr));
    std::fs::write(d.join("data/CCC.feather"), &ccc).unwrap();
    let printed = sweep(d, "data", "stopped.csv", &["--chunk-size", "5", "--resume"]);
    assert!(printed.contains("for 1 symbol run now"), "{printed}");
    assert_eq!(read(&d.join("stopped.csv")), whole);
    assert_eq!(read(&d.join("stopped-by-combo.csv")), read(&d.join("whole-by-combo.csv")));

    // Three shards, as Parquet, CSV and Arrow, merge to the one-process bytes.
    for (i, out) in ["s0.parquet", "s1.csv", "s2.arrow"].iter().enumerate() {
        let printed = sweep(d, "data", out, &["--chunk-size", "5", "--shard", &format!("{i}/3")]);
        assert!(printed.contains("`threadx merge` joins the shards"), "{printed}");
        assert!(!d.join(out.replace('.', "-by-combo.")).exists());
    }
    let merged = threadx(d, &["merge", "s2.arrow", "s0.parquet", "s1.csv", "--out", "merged.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    assert!(text(&merged.stdout).contains("top 10 combos across 3 symbols"), "{}", text(&merged.stdout));
    assert_eq!(read(&d.join("merged.csv")), whole);
    assert_eq!(read(&d.join("merged-by-combo.csv")), read(&d.join("whole-by-combo.csv")));
    // A shard run on other bars of a symbol does not merge.
    std::fs::copy(d.join("BBB.csv"), d.join("data/AAA.csv")).unwrap();
    sweep(d, "data", "other.csv", &["--chunk-size", "5", "--shard", "1/3"]);
    let refused = threadx(d, &["merge", "s0.parquet", "other.csv", "s2.arrow", "--out", "bad.csv"]);
    assert!(text(&refused.stderr).contains("was run on other data"), "{}", text(&refused.stderr));
}

#[test]
fn what_a_universe_cannot_do_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_data(d);
    for (flags, expected) in [
        (&["--overfitting"][..], "--overfitting run on one symbol's data"),
        (&["--search", "tpe", "--trials", "8"][..], "a search, --walk-forward"),
        (&["--heatmap", "h.svg"][..], "this --data holds 3 symbols"),
        (&["--out", "data/BBB.parquet"][..], "BBB.parquet"),
    ] {
        let mut args = SMALL.to_vec();
        args[4] = "data";
        args.extend(flags);
        if !flags.contains(&"--out") {
            args.extend(["--out", "x.csv"]);
        }
        let run = threadx(d, &args);
        assert!(!run.status.success(), "{flags:?}");
        assert!(text(&run.stderr).contains(expected), "{flags:?}: {}", text(&run.stderr));
    }
    let run = threadx(d, &["sweep", "--data", "data/*.xlsx", "--quiet"]);
    assert!(text(&run.stderr).contains("no file matches the pattern"), "{}", text(&run.stderr));
    // What takes one data set names a folder or a pattern as the universe it is (it said
    // "Is a directory (os error 21)" and "No such file or directory").
    for (command, data) in [
        (&["backtest"][..], "data"),
        (&["backtest"][..], "data/*.parquet"),
        (&["indicators", "--ind", "sma", "--out", "i.csv"][..], "data"),
    ] {
        let run = threadx(d, &[command, &["--data", data]].concat());
        assert!(
            !run.status.success()
                && text(&run.stderr).contains("is many symbols' files (a universe), and this takes one data set"),
            "{command:?} {data}: {}",
            text(&run.stderr)
        );
    }
    // A symbol too short for the grid's warm-up is named, with its file and bars.
    std::fs::create_dir(d.join("short")).unwrap();
    for (name, bars) in [("AAA", "3000"), ("BBB", "150")] {
        let out = format!("short/{name}.csv");
        assert!(threadx(d, &["data", "synth", "--bars", bars, "--out", &out]).status.success());
    }
    let run = threadx(d, &["--device", "cpu", "sweep", "--data", "short", "--grid", "bb_period=10,200", "--quiet"]);
    let stderr = text(&run.stderr);
    assert!(!run.status.success() && stderr.contains("symbol `BBB` (short/BBB.csv, 150 bars): "), "{stderr}");
    assert!(stderr.contains("needs at least 200 bars"), "{stderr}");
    assert!(
        stderr.contains("every combo of a universe's sweep must trade on every symbol: leave this one out"),
        "{stderr}"
    );
}

#[test]
fn a_universe_with_a_constraint_ranks_the_combos_that_keep_it_on_every_symbol() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let symbols = make_data(d);
    // A bound some combos keep on every symbol and some do not: the median trade count
    // of the single-symbol runs.
    let alone = single_runs(d, &symbols);
    let mut lines = alone.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<(String, u64, u32)> = lines
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            (c[0].to_owned(), c[at("combo")].parse().unwrap(), c[at("trades")].parse().unwrap())
        })
        .collect();
    let mut trades: Vec<u32> = rows.iter().map(|r| r.2).collect();
    trades.sort_unstable();
    let bound = trades[trades.len() / 2];
    let rule = format!("trades >= {bound}");
    let said = sweep(d, "data", "k.csv", &["--constraint", &rule, "--top", "50"]);
    assert!(said.contains(&format!("among combos keeping {rule} on every symbol")), "{said}");
    // The table's passing_symbols: the symbols on which each combo keeps the rule.
    let table = read(&d.join("k-by-combo.csv"));
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let (combo_at, passing_at) = (
        header.iter().position(|h| *h == "combo").unwrap(),
        header.iter().position(|h| *h == "passing_symbols").unwrap(),
    );
    let mut everywhere = Vec::new();
    for line in lines {
        let c: Vec<&str> = line.split(',').collect();
        let combo: u64 = c[combo_at].parse().unwrap();
        let want = rows.iter().filter(|r| r.1 == combo && r.2 >= bound).count();
        assert_eq!(c[passing_at].parse::<usize>().unwrap(), want, "combo {combo}");
        if want == symbols.len() {
            everywhere.push(combo);
        }
    }
    assert!(!everywhere.is_empty() && everywhere.len() < table.lines().count() - 1, "{everywhere:?}");
    let summary: serde_json::Value = serde_json::from_str(&read(&d.join("k.json"))).unwrap();
    let by_combo = &summary["by_combo"];
    assert_eq!(by_combo["constraints"], serde_json::json!([rule]));
    let best: Vec<u64> =
        by_combo["best_by_median"].as_array().unwrap().iter().map(|c| c["combo"].as_u64().unwrap()).collect();
    assert!(!best.is_empty() && best.iter().all(|c| everywhere.contains(c)), "{best:?} {everywhere:?}");
    assert_eq!(best.len(), everywhere.len().min(50));
    // Shards merge to the same table and the same best list, smallest first too.
    for minimize in [false, true] {
        let mut flags = vec!["--constraint", rule.as_str(), "--top", "50"];
        if minimize {
            flags.push("--minimize");
        }
        let whole = format!("w{minimize}.csv");
        sweep(d, "data", &whole, &flags);
        let mut shards = Vec::new();
        for i in 0..2 {
            let out = format!("s{minimize}{i}.csv");
            let shard = format!("{i}/2");
            let mut more = flags.clone();
            more.extend(["--shard", shard.as_str()]);
            sweep(d, "data", &out, &more);
            shards.push(out);
        }
        let merged = format!("m{minimize}.csv");
        let run = threadx(d, &["merge", &shards[0], &shards[1], "--top", "50", "--out", &merged]);
        assert!(run.status.success(), "{}", text(&run.stderr));
        let stem = |name: &str| name.trim_end_matches(".csv").to_owned();
        assert_eq!(
            read(&d.join(format!("{}-by-combo.csv", stem(&merged)))),
            read(&d.join(format!("{}-by-combo.csv", stem(&whole))))
        );
        let by_combo = |name: &str| {
            let s: serde_json::Value = serde_json::from_str(&read(&d.join(format!("{}.json", stem(name))))).unwrap();
            s["by_combo"].clone()
        };
        let (a, b) = (by_combo(&whole), by_combo(&merged));
        assert_eq!(
            (&a["best_by_median"], &a["minimize"], &a["constraints"]),
            (&b["best_by_median"], &b["minimize"], &b["constraints"])
        );
    }
}
