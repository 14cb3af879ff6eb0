//! `threadx report` given what does not fit: results of another run beside a summary, an
//! `--out` that is one of the files it reads, a shard's or a universe's summary; and a rule
//! file's backtest JSON, which it reports as it ran.

use crate::common;

use common::{text, threadx};
use std::path::Path;

const DATA: &str = "synthetic:bars=3000,seed=1";

fn sweep(dir: &Path, out: &str, grid: &[&str]) {
    let mut args = vec!["--device", "cpu", "sweep", "--data", DATA, "--out", out, "--quiet"];
    args.extend(grid);
    let run = threadx(dir, &args);
    assert!(run.status.success(), "{}", text(&run.stderr));
}

#[test]
fn results_of_another_run_beside_a_summary_are_refused_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    sweep(dir.path(), "a.csv", &["--grid", "bb_period=10,20,30", "--grid", "bb_std=1.5,2.5"]);
    // A bigger grid whose first six combos are a.csv's (the disk-full case: new results, old summary).
    sweep(dir.path(), "b.csv", &["--grid", "bb_period=10,20,30,40", "--grid", "bb_std=1.5,2.5"]);
    sweep(dir.path(), "c.csv", &["--grid", "bb_period=11,21,31", "--grid", "bb_std=1.5,2.5"]);
    for (other, what) in [("b.csv", "beyond the last in its 6-combo grid"), ("c.csv", "another parameter set")] {
        std::fs::copy(dir.path().join(other), dir.path().join("a.csv")).unwrap();
        let run = threadx(dir.path(), &["--device", "cpu", "report", "a.json", "--out", "a.html"]);
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("reporting a.json: the results do not belong to this summary"), "{stderr}");
        assert!(stderr.contains(what), "{stderr}");
        assert!(!dir.path().join("a.html").exists());
    }
}

#[test]
fn an_out_that_is_a_file_the_report_reads_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.csv");
    let made = threadx(dir.path(), &["data", "synth", "--bars", "3000", "--out", "data.csv"]);
    assert!(made.status.success(), "{}", text(&made.stderr));
    let mut args = vec!["--device", "cpu", "sweep", "--data", "data.csv", "--out", "r.csv", "--quiet"];
    args.extend(["--grid", "bb_period=10,20", "--overfitting"]);
    assert!(threadx(dir.path(), &args).status.success());
    let bt = threadx(dir.path(), &["--device", "cpu", "backtest", "--data", "data.csv", "--json"]);
    std::fs::write(dir.path().join("bt.json"), &bt.stdout).unwrap();
    let before = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    for (input, out) in [("r.json", "r.csv"), ("r.json", "r-pbo.svg"), ("r.json", "data.csv"), ("bt.json", "data.csv")]
    {
        let kept = before(out);
        let run = threadx(dir.path(), &["--device", "cpu", "report", input, "--out", out]);
        let stderr = text(&run.stderr);
        assert!(!run.status.success() && stderr.contains(&format!("the output {out} is the input")), "{stderr}");
        assert_eq!(before(out), kept, "{out} is left as it was");
    }
    assert!(data.exists());
}

#[test]
fn a_shards_or_a_universes_summary_is_refused_saying_what_to_report() {
    let dir = tempfile::tempdir().unwrap();
    sweep(dir.path(), "s.csv", &["--grid", "bb_period=10,20", "--shard", "1/2"]);
    let run = threadx(dir.path(), &["report", "s.json"]);
    let stderr = text(&run.stderr);
    assert!(
        !run.status.success() && stderr.contains("a shard's summary") && stderr.contains("threadx merge"),
        "{stderr}"
    );
    assert!(!dir.path().join("s.html").exists());
    let universe = dir.path().join("u");
    std::fs::create_dir(&universe).unwrap();
    for (symbol, seed) in [("AAA", "1"), ("BBB", "2")] {
        let out = format!("u/{symbol}.csv");
        let made = threadx(dir.path(), &["data", "synth", "--bars", "3000", "--seed", seed, "--out", &out]);
        assert!(made.status.success(), "{}", text(&made.stderr));
    }
    let args = ["--device", "cpu", "sweep", "--data", "u", "--out", "u.csv", "--grid", "bb_period=10,20", "--quiet"];
    assert!(threadx(dir.path(), &args).status.success());
    let run = threadx(dir.path(), &["report", "u.json"]);
    let stderr = text(&run.stderr);
    assert!(!run.status.success() && stderr.contains("a universe's summary"), "{stderr}");
}

#[test]
fn a_rule_files_backtest_is_reported_from_its_json() {
    let dir = tempfile::tempdir().unwrap();
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/strategies/donchian.toml");
    std::fs::copy(rules, dir.path().join("donchian.toml")).unwrap();
    let args =
        ["--device", "cpu", "backtest", "--strategy", "donchian.toml", "--data", DATA, "--set", "n=30", "--json"];
    let bt = threadx(dir.path(), &args);
    assert!(bt.status.success(), "{}", text(&bt.stderr));
    std::fs::write(dir.path().join("bt.json"), &bt.stdout).unwrap();
    // The file may move or change after the run: the JSON holds the rules that ran.
    std::fs::remove_file(dir.path().join("donchian.toml")).unwrap();
    let run = threadx(dir.path(), &["--device", "cpu", "report", "bt.json"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let page = std::fs::read_to_string(dir.path().join("bt.html")).unwrap();
    assert!(page.contains("donchian") && page.contains("n=30"), "the page of the run");
}

/// A portfolio sweep's page: the sweep's sections, then its best combo run again as one
/// account (its trades the best row's); a portfolio walk-forward's page; `threadx report`
/// of a portfolio's summary, or of a portfolio backtest's JSON, says where its page comes
/// from.
#[test]
fn a_portfolio_sweeps_page_shows_its_best_account() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    crate::portfolio::make_data(d);
    let grid = ["--grid", "bb_period=10,20,30", "--grid", "bb_std=1.5,2"];
    let args = ["sweep", "--data", "data", "--portfolio", "--size", "0.4", "--out", "s.csv", "--report", "s.html"];
    let run = threadx(d, &[&args[..], &grid, &["--quiet"]].concat());
    assert!(run.status.success(), "{}", text(&run.stderr));
    let page = std::fs::read_to_string(d.join("s.html")).unwrap();
    let summary: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("s.json")).unwrap()).unwrap();
    let best = &summary["best"]["rows"][0];
    let trades = best["metrics"]["trades"].as_u64().unwrap();
    for heading in [
        "The best 6 combos by sharpe",
        "Heatmaps of sharpe",
        "Best combo: Key metrics",
        "Best combo: Allocation over time",
        "Best combo: Contribution by symbol",
        &format!("Best combo: Trades ({trades})"),
    ] {
        assert!(page.contains(heading), "{heading}");
    }
    let value = |p: &str| best["params"][p].as_f64().unwrap();
    let params = format!("bb_period={},bb_std={}", value("bb_period"), value("bb_std"));
    assert!(page.contains(&params), "the note names the best combo, {params}");
    // Its turnover and mean positions held, the sweep's row's (the summary's best row).
    for figure in ["turnover", "mean_positions"] {
        let v = best["metrics"][figure].as_f64().unwrap_or_else(|| panic!("the best row's {figure}"));
        assert!(v > 0.0 && page.contains(&format!(">{v:.2}<")), "{figure} {v} on the page");
    }

    let walk = ["sweep", "--data", "data", "--portfolio", "--walk-forward", "train=1500,test=500", "--out", "w.csv"];
    let run = threadx(d, &[&walk[..], &grid, &["--report", "w.html", "--quiet"]].concat());
    assert!(run.status.success(), "{}", text(&run.stderr));
    let page = std::fs::read_to_string(d.join("w.html")).unwrap();
    assert!(page.contains("walk-forward") && page.contains("Out-of-sample"), "the windows' page");

    let run = threadx(d, &["report", "s.json", "--out", "again.html"]);
    let stderr = text(&run.stderr);
    assert!(!run.status.success() && stderr.contains("its page comes with its run"), "{stderr}");

    // So does a portfolio backtest's JSON (its data is a folder, not bars to load again).
    let bt = threadx(d, &["backtest", "--data", "data", "--portfolio", "--json"]);
    assert!(bt.status.success(), "{}", text(&bt.stderr));
    std::fs::write(d.join("bt.json"), &bt.stdout).unwrap();
    let run = threadx(d, &["report", "bt.json"]);
    let stderr = text(&run.stderr);
    assert!(
        !run.status.success()
            && stderr.contains("bt.json: a portfolio's backtest: its page comes with its run (`threadx backtest --portfolio --report FILE.html`)"),
        "{stderr}"
    );
    assert!(!d.join("bt.html").exists());
}
