//! `threadx sweep --search` as a user runs it: trials in order with their summary and
//! plot, constraints, patience, a SIGKILL followed by --resume, design shards joined by
//! merge, `--random` as an alias, more trials than the grid (the whole grid, once), the
//! run's time phase by phase, and the refusals.

use crate::common;

use common::{command, text, threadx};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

fn ok(dir: &Path, args: &[&str]) -> String {
    let out = threadx(dir, args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

fn search_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--device", "cpu", "sweep", "--data", "synthetic:bars=2000,seed=5", "--quiet"];
    args.extend(extra);
    args
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap()
}

fn summary(dir: &Path, name: &str) -> serde_json::Value {
    serde_json::from_str(&read(dir, name)).unwrap()
}

/// The CSV's rows as (trial, trades, sharpe), in file order.
fn trials(csv: &str) -> Vec<(u64, f64, f64)> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (trades, sharpe) = (col("trades"), col("sharpe"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap(), f[trades].parse().unwrap(), f[sharpe].parse().unwrap_or(f64::NAN))
        })
        .collect()
}

#[test]
fn a_tpe_search_writes_every_trial_in_order_and_its_best_obeys_the_constraint() {
    let dir = tempfile::tempdir().unwrap();
    let args = search_args(&[
        "--search",
        "tpe",
        "--trials",
        "90",
        "--batch",
        "16",
        "--seed",
        "7",
        "--constraint",
        "trades >= 50",
        "--out",
        "r.csv",
    ]);
    let stdout = ok(dir.path(), &args);
    assert!(stdout.contains("bb_atr tpe search on synthetic:bars=2000,seed=5"), "{stdout}");
    assert!(stdout.contains("tpe search: 90 trials evaluated, stopped after its 90 trials"), "{stdout}");
    let csv = read(dir.path(), "r.csv");
    assert!(csv.starts_with("trial,combo,bb_period,"), "{csv:.100}");
    let rows = trials(&csv);
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), (0..90).collect::<Vec<_>>());
    // The best is the largest sharpe among the trials with at least 50 trades, the first of equals.
    let feasible = rows.iter().filter(|r| r.1 >= 50.0 && !r.2.is_nan());
    let best = feasible.fold(None::<(u64, f64)>, |b, r| if b.is_none_or(|b| r.2 > b.1) { Some((r.0, r.2)) } else { b });
    let (best_trial, best_sharpe) = best.unwrap();
    let s = summary(dir.path(), "r.json");
    let search = &s["search"];
    assert_eq!(search["method"], "tpe");
    assert_eq!(search["trials"], 90);
    assert_eq!(search["stop"], "trials");
    assert_eq!(search["best"]["trial"], best_trial);
    assert_eq!(search["best"]["value"], best_sharpe);
    assert_eq!(s["best"]["rows"][0]["combo"], search["best"]["combo"]);
    assert!(s["best"]["rows"].as_array().unwrap().iter().all(|r| r["metrics"]["trades"].as_u64().unwrap() >= 50));
    // The curve: each step a new best, rising, ending at the best.
    let curve: Vec<(u64, f64)> = search["best_so_far"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap(), p[1].as_f64().unwrap()))
        .collect();
    assert!(curve.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1), "{curve:?}");
    assert_eq!(*curve.last().unwrap(), (best_trial, best_sharpe));
    assert_eq!(search["request"]["constraints"][0], "trades >= 50");
    assert!(search["evaluations_per_s"].as_f64().unwrap() > 0.0);
    let svg = read(dir.path(), "r-search.svg");
    assert!(svg.contains("best so far") && svg.contains("sharpe (maximised)"), "{svg:.300}");
}

#[test]
fn a_constraint_changes_the_winner_never_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let base = search_args(&["--search", "random", "--trials", "200"]);
    ok(dir.path(), &[&base[..], &["--out", "free.csv"]].concat());
    ok(dir.path(), &[&base[..], &["--constraint", "trades >= 40", "--out", "bound.csv"]].concat());
    assert_eq!(read(dir.path(), "free.csv"), read(dir.path(), "bound.csv"));
    let rows = trials(&read(dir.path(), "free.csv"));
    let best = |feasible: &dyn Fn(f64) -> bool| {
        rows.iter()
            .filter(|r| feasible(r.1) && !r.2.is_nan())
            .fold(None::<(u64, f64)>, |b, r| if b.is_none_or(|b| r.2 > b.1) { Some((r.0, r.2)) } else { b })
    };
    let (free, bound) = (best(&|_| true).unwrap(), best(&|trades| trades >= 40.0).unwrap());
    assert_ne!(free.0, bound.0, "the unconstrained winner trades fewer than 40 times");
    let (a, b) = (summary(dir.path(), "free.json"), summary(dir.path(), "bound.json"));
    assert_eq!(
        (a["search"]["best"]["trial"].as_u64(), a["search"]["best"]["value"].as_f64()),
        (Some(free.0), Some(free.1))
    );
    assert_eq!(
        (b["search"]["best"]["trial"].as_u64(), b["search"]["best"]["value"].as_f64()),
        (Some(bound.0), Some(bound.1))
    );
    assert!(b["best"]["rows"].as_array().unwrap().iter().all(|r| r["metrics"]["trades"].as_u64().unwrap() >= 40));
}

#[test]
fn patience_stops_after_k_trials_without_improvement() {
    let dir = tempfile::tempdir().unwrap();
    let args = search_args(&["--search", "random", "--trials", "2000", "--patience", "40", "--out", "p.csv"]);
    let stdout = ok(dir.path(), &args);
    let rows = trials(&read(dir.path(), "p.csv"));
    // The rule, recomputed: the run ends at the first trial that is the 40th in a row
    // without a better sharpe.
    let (mut best, mut since, mut stop) = (f64::NAN, 0, None);
    for (i, r) in rows.iter().enumerate() {
        if !r.2.is_nan() && (best.is_nan() || r.2 > best) {
            best = r.2;
            since = 0;
        } else {
            since += 1;
        }
        if since == 40 {
            stop = Some(i);
            break;
        }
    }
    assert_eq!(stop, Some(rows.len() - 1), "{} rows", rows.len());
    assert!(rows.len() < 2000);
    assert_eq!(summary(dir.path(), "p.json")["search"]["stop"], "patience");
    assert!(stdout.contains("without improvement (--patience)"), "{stdout}");
}

#[test]
fn a_killed_search_resumes_to_the_bytes_of_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let base = [
        "--device",
        "cpu",
        "sweep",
        "--data",
        "synthetic:bars=60000,seed=3",
        "--quiet",
        "--threads",
        "1",
        "--search",
        "tpe",
        "--trials",
        "150",
        "--batch",
        "2",
    ];
    let mut whole = base.to_vec();
    whole.extend(["--out", "whole.csv"]);
    ok(dir.path(), &whole);

    let mut cut = base.to_vec();
    cut.extend(["--out", "cut.csv"]);
    let mut child = command(dir.path(), &cut).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let parts = dir.path().join("cut.csv.parts");
    let batches = || std::fs::read_dir(&parts).map_or(0, |d| d.filter(|e| e.is_ok()).count());
    while batches() < 6 {
        assert!(child.try_wait().unwrap().is_none(), "the search ended before it could be killed");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!dir.path().join("cut.csv").exists());
    // Without --resume the checkpoint is not overwritten.
    let refused = threadx(dir.path(), &cut);
    assert!(text(&refused.stderr).contains("pass --resume"));
    cut.push("--resume");
    ok(dir.path(), &cut);
    assert_eq!(read(dir.path(), "cut.csv"), read(dir.path(), "whole.csv"));
    let (a, b) = (summary(dir.path(), "whole.json"), summary(dir.path(), "cut.json"));
    assert!(b["search"]["resumed_batches"].as_u64().unwrap() >= 3, "{}", b["search"]);
    assert_eq!(a["search"]["best_so_far"], b["search"]["best_so_far"]);
    assert_eq!(a["best"], b["best"]);
    assert!(!parts.exists());
}

#[test]
fn design_shards_merge_into_the_bytes_of_one_process() {
    let dir = tempfile::tempdir().unwrap();
    for method in ["sobol", "lhs", "random"] {
        let base = search_args(&["--search", method, "--trials", "150", "--batch", "20", "--seed", "11"]);
        let mut whole = base.clone();
        let name = format!("{method}.csv");
        whole.extend(["--out", &name]);
        ok(dir.path(), &whole);
        let names: Vec<String> = (0..3).map(|i| format!("{method}-{i}.csv")).collect();
        let shards: Vec<String> = (0..3).map(|i| format!("{i}/3")).collect();
        for (name, shard) in names.iter().zip(&shards) {
            let mut part = base.clone();
            part.extend(["--shard", shard, "--out", name]);
            ok(dir.path(), &part);
        }
        let mut merge = vec!["merge"];
        merge.extend(names.iter().map(String::as_str));
        let merged = format!("{method}-merged.csv");
        merge.extend(["--out", &merged]);
        ok(dir.path(), &merge);
        assert_eq!(read(dir.path(), &merged), read(dir.path(), &name), "{method}");
        let (a, b) =
            (summary(dir.path(), &format!("{method}.json")), summary(dir.path(), &format!("{method}-merged.json")));
        assert_eq!(a["search"]["best"], b["search"]["best"], "{method}");
        assert_eq!(a["search"]["best_so_far"], b["search"]["best_so_far"], "{method}");
        // Every combo once.
        let rows = read(dir.path(), &name);
        let mut combos: Vec<&str> = rows.lines().skip(1).map(|l| l.split(',').nth(1).unwrap()).collect();
        combos.sort_unstable();
        combos.dedup();
        assert_eq!(combos.len(), 150, "{method}");
    }
}

#[test]
fn a_search_is_the_same_bytes_on_any_thread_count_and_device() {
    let dir = tempfile::tempdir().unwrap();
    let base = search_args(&["--search", "tpe", "--trials", "150", "--batch", "24", "--seed", "2"]);
    ok(dir.path(), &[&base[..], &["--threads", "1", "--out", "one.csv"]].concat());
    ok(dir.path(), &[&base[..], &["--threads", "3", "--out", "three.csv"]].concat());
    assert_eq!(read(dir.path(), "one.csv"), read(dir.path(), "three.csv"));
    // Every device the machine has: its GPUs beside the CPU, where it has any.
    let mut all = base.clone();
    all[1] = "all";
    ok(dir.path(), &[&all[..], &["--out", "all.csv"]].concat());
    assert_eq!(read(dir.path(), "one.csv"), read(dir.path(), "all.csv"));
}

#[test]
fn a_shard_ranks_its_best_by_the_objective() {
    let dir = tempfile::tempdir().unwrap();
    let args = search_args(&[
        "--search",
        "sobol",
        "--trials",
        "120",
        "--batch",
        "20",
        "--by",
        "max_drawdown",
        "--minimize",
        "--shard",
        "1/2",
        "--out",
        "s.csv",
    ]);
    ok(dir.path(), &args);
    let csv = read(dir.path(), "s.csv");
    let mut lines = csv.lines();
    let col = lines.next().unwrap().split(',').position(|h| h == "max_drawdown").unwrap();
    let deepest =
        lines.filter_map(|l| l.split(',').nth(col).unwrap().parse::<f64>().ok()).fold(f64::INFINITY, f64::min);
    let best = &summary(dir.path(), "s.json")["best"];
    assert_eq!(best["by"], "max_drawdown");
    assert_eq!(best["rows"][0]["metrics"]["max_drawdown"].as_f64(), Some(deepest));
}

#[test]
fn random_n_is_an_alias_of_a_random_search() {
    let dir = tempfile::tempdir().unwrap();
    let grid = ["--grid", "bb_period=10:50:5", "--grid", "bb_std=1.5,2,2.5", "--grid", "atr_mult=1:5:1"];
    let with_grid = |extra: &[&'static str]| [&grid[..], extra].concat();
    ok(dir.path(), &search_args(&with_grid(&["--random", "40", "--seed", "3", "--out", "a.csv"])));
    ok(
        dir.path(),
        &search_args(&with_grid(&["--search", "random", "--trials", "40", "--seed", "3", "--out", "b.csv"])),
    );
    assert_eq!(read(dir.path(), "a.csv"), read(dir.path(), "b.csv"));
    let config = dir.path().join("c.toml");
    std::fs::write(
        &config,
        "[random]\nn = 40\nseed = 3\n[grid]\nbb_period = \"10:50:5\"\nbb_std = [1.5, 2, 2.5]\natr_mult = \"1:5:1\"\n",
    )
    .unwrap();
    ok(dir.path(), &search_args(&["--config", "c.toml", "--out", "c.csv"]));
    assert_eq!(read(dir.path(), "a.csv"), read(dir.path(), "c.csv"));
}

#[test]
fn search_flags_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 9] = [
        (&["--search", "tpe", "--trials", "50", "--shard", "0/2"], "a tpe search learns from every trial before it"),
        (&["--search", "sobol", "--trials", "50", "--patience", "5", "--shard", "0/2"], "need one process"),
        (&["--search", "tpe"], "--search tpe needs --trials N"),
        (&["--search", "grid", "--trials", "5"], "unknown search method `grid` (known: random, sobol, lhs, tpe)"),
        (&["--patience", "5"], "--patience applies to a search"),
        (&["--search", "tpe", "--trials", "5", "--constraint", "trades = 3"], "constraint `trades = 3`: expected"),
        (&["--search", "tpe", "--trials", "5", "--constraint", "profit > 3"], "unknown metric `profit`"),
        (&["--search", "tpe", "--trials", "5", "--batch", "0"], "--batch: at least 1 is needed"),
        // A value that starts with `-` and is no digit is the flag's value, not a flag.
        (&["--search", "tpe", "--trials", "5", "--target", "-inf"], "--target -inf: a finite number is needed"),
    ];
    for (extra, message) in cases {
        let out = threadx(dir.path(), &search_args(&[extra, &["--out", "r.csv"]].concat()));
        assert!(!out.status.success(), "{extra:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(message), "{extra:?}: {stderr}");
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "{extra:?} wrote something");
    }
}

#[test]
fn a_config_files_bad_value_is_named_at_its_line_not_as_a_flag() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sweep.toml"), "strategy = \"bb_atr\"\n\n[search]\nmethod = \"tpe\"\ntrials = 0\n")
        .unwrap();
    let run = threadx(dir.path(), &["--device", "cpu", "sweep", "--config", "sweep.toml", "--quiet"]);
    let stderr = text(&run.stderr);
    assert!(
        !run.status.success() && stderr.contains("sweep.toml, line 5: trials: at least 1 is needed (`trials = 0`)")
    );
    // A flag typed on the command line is named as the flag it is.
    let run = threadx(dir.path(), &["--device", "cpu", "sweep", "--config", "sweep.toml", "--trials", "0", "--quiet"]);
    assert!(text(&run.stderr).contains("--trials: at least 1 is needed"), "{}", text(&run.stderr));
    // As is --random, which means --search random --trials N.
    let run = threadx(dir.path(), &["--device", "cpu", "sweep", "--random", "0", "--quiet"]);
    assert!(!run.status.success() && text(&run.stderr).contains("--random 0: at least 1 combo is needed"));
    assert!(!text(&run.stderr).contains("--trials"), "{}", text(&run.stderr));
}

#[test]
fn more_trials_than_the_grid_has_run_the_whole_grid_once_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let grid = ["--grid", "bb_period=10:30:10", "--grid", "bb_std=1.5,2.5", "--grid", "atr_period=7,14"];
    for (asked, flags) in
        [("100,000", &["--random", "100000"][..]), ("1,000", &["--search", "sobol", "--trials", "1000"][..])]
    {
        let mut args = vec!["--device", "cpu", "sweep", "--data", "synthetic:bars=2000,seed=5"];
        args.extend(grid);
        args.extend(flags);
        args.extend(["--out", "r.csv"]);
        let printed = ok(dir.path(), &args);
        let line = format!("{asked} combos asked, more than the grid has (12): the whole grid runs, each combo once");
        assert!(printed.contains(&line), "{printed}");
        let rows = trials(&read(dir.path(), "r.csv"));
        assert_eq!(rows.len(), 12, "{flags:?}");
        let mut combos: Vec<u64> =
            read(dir.path(), "r.csv").lines().skip(1).map(|l| l.split(',').nth(1).unwrap().parse().unwrap()).collect();
        combos.sort_unstable();
        assert_eq!(combos, (0..12).collect::<Vec<u64>>(), "each combo once: {flags:?}");
        let s = summary(dir.path(), "r.json");
        assert_eq!(
            s["whole_grid"],
            serde_json::json!({"asked": asked.replace(',', "").parse::<u64>().unwrap(), "grid": 12})
        );
    }
}

#[test]
fn a_searchs_time_is_the_whole_run_phase_by_phase() {
    let dir = tempfile::tempdir().unwrap();
    let printed = ok(dir.path(), &search_args(&["--search", "tpe", "--trials", "40", "--profile", "--out", "r.csv"]));
    assert!(
        printed.contains("time: load ") && printed.contains(", search ") && printed.contains("s in all"),
        "{printed}"
    );
    assert!(printed.contains("where the time went (wall):") && printed.contains("indicators"), "{printed}");
    assert!(printed.contains("trials/s while searching"), "{printed}");
    let s = summary(dir.path(), "r.json");
    let (total, search) = (s["timings_s"]["total"].as_f64().unwrap(), s["timings_s"]["search"].as_f64().unwrap());
    // The total is the phases' wall time, preparation included; the search is part of it.
    assert_eq!(total, s["phases"]["wall_s"].as_f64().unwrap());
    assert!(search < total, "{}", s["timings_s"]);
}
