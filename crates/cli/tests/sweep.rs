//! `threadx sweep` and `threadx merge` as a user runs them: files, refusals, a SIGKILL
//! followed by --resume, shards joined by merge.

use crate::common;

use common::{SMALL, command, small_sweep, text, threadx};
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn sweep_writes_results_summary_heatmap_and_prints_the_top() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = SMALL.to_vec();
    args.extend(["--out", "r.csv", "--top", "3", "--by", "total_return"]);
    let out = threadx(dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("bb_atr sweep on synthetic:bars=3000,seed=2 (3,000 bars): 24 combos"), "{stdout}");
    assert!(stdout.contains("top 3 by total_return:"), "{stdout}");
    assert!(stdout.contains("wrote 24 rows to r.csv"), "{stdout}");
    let csv = std::fs::read_to_string(dir.path().join("r.csv")).unwrap();
    assert_eq!(csv.lines().count(), 25);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let best = &summary["best"]["rows"][0];
    // The best row of the summary is the largest total_return of the CSV.
    let top =
        csv.lines().skip(1).map(|l| l.split(',').nth(5).unwrap().parse::<f64>().unwrap()).fold(f64::MIN, f64::max);
    assert_eq!(best["metrics"]["total_return"].as_f64().unwrap(), top);
    assert!(stdout.contains(&format!("{:.2}%", top * 100.0)), "{stdout}");
    let svg = std::fs::read_to_string(dir.path().join("r-heatmap.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("bb_period") && svg.contains("bb_std"));
    // bb_period (3) × bb_std (2) cells, the best one's outline, the legend's 50 steps and
    // its "no value" box, and the background.
    assert_eq!(svg.matches("<rect").count(), 3 * 2 + 1 + 50 + 1 + 1);
    // The outline is drawn over the cell of the largest value.
    let at = |line: &str| {
        let attr =
            |name: &str| line.split(&format!(" {name}=\"")).nth(1).unwrap().split('"').next().unwrap().to_owned();
        (attr("x"), attr("y"))
    };
    let value =
        |line: &str| line.split(": total_return ").nth(1).unwrap().split(' ').next().unwrap().parse::<f64>().unwrap();
    let best_cell = svg.lines().filter(|l| l.contains(": total_return ")).max_by(|a, b| value(a).total_cmp(&value(b)));
    let outline = svg.lines().find(|l| l.contains("class=\"best\"")).expect("the best cell outlined");
    assert_eq!(at(outline), at(best_cell.unwrap()));
    assert_eq!(format!("{:.4}", value(best_cell.unwrap())), format!("{top:.4}"));
    assert!(svg.contains("total_return: the best over atr_mult in each cell"), "{svg:.400}");
    assert!(!svg.contains("not run"), "a whole grid has no cell left unrun");
    // One tick label per value on each axis: no empty band past the last value.
    for label in ["10", "20", "30", "1.5", "2.5"] {
        assert_eq!(svg.matches(&format!("\n{label}\n</text>")).count(), 1, "{label}: {svg:.2000}");
    }

    // A sample of the grid: cells no sampled combo fell in are told apart from no trades.
    let mut sampled = SMALL.to_vec();
    sampled.extend(["--random", "5", "--seed", "1", "--out", "s.csv"]);
    let out = threadx(dir.path(), &sampled);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let svg = std::fs::read_to_string(dir.path().join("s-heatmap.svg")).unwrap();
    assert!(svg.contains("not run") && svg.contains("(not sampled)") && svg.contains("sharpe (per bar)"), "{svg:.400}");
}

#[test]
fn sweep_refuses_bad_input_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 13] = [
        (&["--threads", "100000"], "invalid value '100000' for '--threads <N>': 100000 is more than the"),
        (&["--threads", "0"], "invalid value '0' for '--threads <N>': at least 1 is needed"),
        (&["--grid", "bb_std=1,2", "--grid", "bb_std=3"], "bb_std is given twice (bb_std=1,2 and bb_std=3)"),
        (&["--walk-forward", "train=10,test=10"], "--walk-forward train=10: a train window of 10 bars is too short"),
        (&["--seed", "3"], "--seed applies to a search; pass --search METHOD --trials N (or --random N) too"),
        (&["--periods-per-year", "0"], "periods_per_year=0"),
        (&["--grid", "bb_period=50:10:5"], "bb_period=50:10:5: empty range: start 50 is after stop 10"),
        (&["--grid", "bb_period=10:50:0"], "the step must be positive"),
        (&["--grid", "colour=1"], "unknown parameter `colour`"),
        (&["--grid", "bb_period=1"], "out of range"),
        (&["--by", "profit"], "unknown metric `profit`"),
        (&["--out", "r.json"], "the summary (--out as .json) r.json and --out r.json are one file"),
        (&["--data", "nope.csv"], "nope.csv"),
    ];
    for (extra, message) in cases {
        let mut args = vec!["--device", "cpu", "sweep", "--quiet"];
        args.extend(extra);
        if !extra.contains(&"--out") {
            args.extend(["--out", "r.csv"]);
        }
        let out = threadx(dir.path(), &args);
        assert!(!out.status.success(), "{extra:?} should fail");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(message), "{extra:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(!dir.path().join("r.csv").exists() && !dir.path().join("r.csv.parts").exists());
    }
    // --out in folders that do not exist yet: they are made, as the default artifacts/sweep/ is.
    let run = threadx(dir.path(), &["--device", "cpu", "sweep", "--quiet", "--out", "new/deeper/r.csv"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(dir.path().join("new/deeper/r.csv").is_file() && dir.path().join("new/deeper/r.json").is_file());
}

#[test]
fn shards_merge_into_the_one_process_file() {
    let dir = tempfile::tempdir().unwrap();
    let args = |out: &'static str, shard: Option<&'static str>| {
        let mut a = SMALL.to_vec();
        a.extend(["--chunk-size", "5", "--out", out]);
        if let Some(s) = shard {
            a.extend(["--shard", s]);
        }
        a
    };
    assert!(threadx(dir.path(), &args("whole.csv", None)).status.success());
    for (i, out) in [("0/2", "s0.csv"), ("1/2", "s1.csv")] {
        let run = threadx(dir.path(), &args(out, Some(i)));
        assert!(run.status.success(), "{}", text(&run.stderr));
        assert!(text(&run.stdout).contains(&format!("shard {i}")));
    }
    let missing = threadx(dir.path(), &["merge", "s0.csv", "--out", "m.csv"]);
    assert!(text(&missing.stderr).contains("missing shard(s) 1/2"), "{}", text(&missing.stderr));
    let merged = threadx(dir.path(), &["merge", "s1.csv", "s0.csv", "--out", "m.csv", "--top", "2"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    assert!(text(&merged.stdout).contains("merged 2 shards, 24 rows, into m.csv"));
    assert_eq!(std::fs::read(dir.path().join("m.csv")).unwrap(), std::fs::read(dir.path().join("whole.csv")).unwrap());
    // The heatmap a one-process run draws, drawn again from the merged rows.
    assert!(text(&merged.stdout).contains("wrote the sharpe heatmap to m-heatmap.svg"), "{}", text(&merged.stdout));
    assert_eq!(
        std::fs::read(dir.path().join("m-heatmap.svg")).unwrap(),
        std::fs::read(dir.path().join("whole-heatmap.svg")).unwrap()
    );
    // A row broken by hand is named with its file and line when the results are read again.
    let whole = dir.path().join("whole.csv");
    let mut rows = std::fs::read_to_string(&whole).unwrap();
    rows.push_str("7,not a row\n");
    std::fs::write(&whole, &rows).unwrap();
    let lines = rows.lines().count();
    let broken = threadx(dir.path(), &["report", "whole.json", "--out", "b.html"]);
    assert!(
        text(&broken.stderr).contains(&format!("whole.csv: line {lines}: malformed results row `7,not a row`")),
        "{}",
        text(&broken.stderr)
    );
}

#[test]
fn walk_forward_prints_windows_and_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    // The heatmap of a grid sweep written to the same results before.
    std::fs::write(dir.path().join("wf-heatmap.svg"), "<svg/>").unwrap();
    let mut args = small_sweep("synthetic:bars=4000,seed=2");
    args.extend(["--walk-forward", "train=2000,test=500", "--out", "wf.csv"]);
    let out = threadx(dir.path(), &args);
    assert!(!dir.path().join("wf-heatmap.svg").exists(), "the replaced sweep's heatmap is gone");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("out of sample overall: return"), "{stdout}");
    let csv = std::fs::read_to_string(dir.path().join("wf.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4);
    assert!(csv.starts_with("window,train_start,train_end,test_start,test_end,combo,bb_period"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("wf.json")).unwrap()).unwrap();
    assert_eq!(json["windows"].as_array().unwrap().len(), 4);
    // Each window's line ends with its out-of-sample DSR, and a sentence counts those ≥ 0.95.
    // (null in the JSON, "-" in the table: a window without a variance has none)
    let dsrs: Vec<f64> = json["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["out_of_sample_dsr"]["dsr"].as_f64().unwrap_or(f64::NAN))
        .collect();
    let lines: Vec<&str> =
        stdout.lines().filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())).collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    for (line, dsr) in lines.iter().zip(&dsrs) {
        let shown = if dsr.is_finite() { format!(" {dsr:.2}") } else { " -".into() };
        assert!(line.ends_with(&shown), "{line} should end with{shown}");
    }
    let significant = dsrs.iter().filter(|&&d| d >= 0.95).count();
    assert!(stdout.contains(&format!("DSR ≥ 0.95 in {significant} of 4 windows")), "{stdout}");
}

/// Whether every adapter of this machine is a CPU-software one (lavapipe in CI).
/// The adapters the binary finds (`devices --json`). Tests decide from these, not from
/// `THREADX_REQUIRE_GPU`, which only makes a missing adapter a failure.
/// The 10^12-combo grid: 1,000 values of each bb_atr parameter.
const TRILLION: [&str; 8] = [
    "--grid",
    "bb_period=2:1001:1",
    "--grid",
    "bb_std=0.01:10:0.01",
    "--grid",
    "atr_period=1:1000:1",
    "--grid",
    "atr_mult=0.1:100:0.1",
];

#[test]
fn a_trillion_combo_grid_says_what_it_prepares_at_once_and_is_refused_when_it_cannot_fit() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["--device", "cpu", "sweep", "--quiet", "--out", "r.csv"];
    // Too big for the memory given: refused before any work, with the estimate and the
    // flag that helps.
    let mut args = base.to_vec();
    args.extend(TRILLION);
    args.extend(["--max-memory", "2G"]);
    let out = threadx(dir.path(), &args);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("needs about 6.8 GiB") && stderr.contains("--random N"), "{stderr}");
    assert!(!dir.path().join("r.csv.parts").exists());

    // Allowed to run, it says what it prepares before preparing it (it used to spend
    // minutes in silence): the line comes within seconds, then we stop it.
    let mut args = base.to_vec();
    args.extend(TRILLION);
    args.extend(["--max-memory", "1T"]);
    let mut child = command(dir.path(), &args).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let started = Instant::now();
    let mut first = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(30)) {
        first.push(line);
        if first.len() == 2 {
            break;
        }
    }
    let waited = started.elapsed();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(first[0].contains("1,000,000,000,000 combos"), "{first:?}");
    assert!(
        first[1].starts_with("preparing 3,000 indicator series of 35,040 bars, 1,001,000 decision rows"),
        "{first:?}"
    );
    assert!(waited < Duration::from_secs(10), "the first lines took {waited:?}");

    // A sample of it prepares only its own series and runs to the end.
    let mut args = base.to_vec();
    args.extend(TRILLION);
    args.extend(["--random", "10", "--seed", "4"]);
    let out = threadx(dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let preparing = stdout.lines().find(|l| l.starts_with("preparing ")).unwrap();
    let series: usize = preparing.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(series <= 30, "{preparing}");
    assert_eq!(std::fs::read_to_string(dir.path().join("r.csv")).unwrap().lines().count(), 11);
}

#[test]
fn profile_prints_where_the_time_went_and_monitor_adds_telemetry() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = small_sweep("synthetic:bars=20000,seed=3");
    args.extend(["--out", "r.csv", "--profile", "--monitor"]);
    let out = threadx(dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let table: Vec<&str> =
        stdout.lines().skip_while(|l| !l.starts_with("where the time went")).skip(2).take(9).collect();
    let phases: Vec<&str> = table.iter().filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(
        phases,
        ["load", "indicators", "book", "devices", "backtests", "merge", "write", "unaccounted", "total"],
        "{stdout}"
    );
    assert!(
        stdout.contains("  worker    upload    kernel  readback  simulate     write      idle\n  cpu "),
        "{stdout}"
    );
    assert!(stdout.contains("telemetry: ") && stdout.contains("wrote the monitor plot to r-monitor.svg"), "{stdout}");

    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let rows = summary["phases"]["phases"].as_array().unwrap();
    let sum: f64 = rows.iter().map(|r| r["s"].as_f64().unwrap()).sum();
    let wall = summary["phases"]["wall_s"].as_f64().unwrap();
    assert!((sum - wall).abs() < 1e-3, "phases and unaccounted {sum} s, wall {wall} s");
    assert!(rows.iter().all(|r| r["s"].as_f64().unwrap() >= 0.0), "{rows:?}");
    let cpu = &summary["workers"]["cpu"]["phases_s"];
    assert!(cpu["simulate"].as_f64().unwrap() > 0.0 && cpu["idle"].as_f64().unwrap() >= 0.0, "{cpu}");
    assert!(summary["workers"]["cpu"].get("kernel_s").is_none());
    let telemetry = &summary["telemetry"];
    assert!(telemetry["gpu_status"].as_str().unwrap().starts_with("NVML"), "{telemetry}");
    if telemetry["samples"].as_u64().unwrap() > 0 {
        let cpu = telemetry["cpu_percent"]["max"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&cpu) && telemetry["process_rss_bytes"]["max"].as_f64().unwrap() > 1e6);
    }
    assert!(std::fs::read_to_string(dir.path().join("r-monitor.svg")).unwrap().contains("memory, GiB"));

    // Without --profile the table is not printed, but the summary holds the phases.
    let mut args = SMALL.to_vec();
    args.extend(["--out", "q.csv"]);
    let out = threadx(dir.path(), &args);
    assert!(!text(&out.stdout).contains("where the time went"));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("q.json")).unwrap()).unwrap();
    assert_eq!(summary["phases"]["phases"].as_array().unwrap().last().unwrap()["phase"], "unaccounted");
    assert!(summary.get("telemetry").is_none());
    let out = threadx(dir.path(), &["sweep", "--monitor-plot", "x.svg"]);
    assert!(!out.status.success() && text(&out.stderr).contains("--monitor"), "{}", text(&out.stderr));
}

/// Results of the built-in strategies written by the binary before they became rule files
/// (commit 026e41a, `tests/golden/*.csv`): the rule files give the same bytes, on the CPU
/// and on the GPU. The columns from `cagr` on were appended when those metrics came (their
/// earlier columns checked unchanged, byte for byte).
#[test]
fn built_in_rule_files_give_the_bytes_of_the_hand_written_strategies() {
    let cases: [(&str, &[&str]); 3] = [
        (
            "bb_atr",
            &[
                "--data",
                "synthetic:bars=6000,seed=11",
                "--grid",
                "bb_period=5:50:15",
                "--grid",
                "bb_std=1,2.5",
                "--grid",
                "atr_period=1,14",
                "--grid",
                "atr_mult=0.5,4",
            ],
        ),
        (
            "ma_cross",
            &[
                "--data",
                "synthetic:bars=6000,seed=5,market=fx",
                "--grid",
                "ma_type=sma,ema",
                "--grid",
                "fast=2:30:7",
                "--grid",
                "slow=10:100:30",
            ],
        ),
        (
            "rsi_reversion",
            &[
                "--data",
                "synthetic:bars=6000,seed=3",
                "--grid",
                "rsi_period=2:20:6",
                "--grid",
                "rsi_low=20,40",
                "--grid",
                "rsi_high=40,70",
                "--grid",
                "atr_period=3,14",
                "--grid",
                "atr_mult=0,1.5",
            ],
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (strategy, grid) in cases {
        let golden = std::fs::read(format!("{}/tests/golden/{strategy}.csv", env!("CARGO_MANIFEST_DIR"))).unwrap();
        for device in ["cpu", "gpu"] {
            let mut args = vec!["--device", device, "sweep", "--quiet", "--out", "r.csv", "--strategy", strategy];
            args.extend(grid);
            let out = threadx(dir.path(), &args);
            assert!(out.status.success(), "{}", text(&out.stderr));
            let got = std::fs::read(dir.path().join("r.csv")).unwrap();
            assert!(got == golden, "{strategy} on the {device}: the results differ from tests/golden/{strategy}.csv");
        }
    }
}

#[test]
fn a_sample_of_a_huge_grid_runs_without_the_default_heatmap_and_a_named_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let base = [
        "--device",
        "cpu",
        "sweep",
        "--data",
        "synthetic:bars=2000,seed=1",
        "--grid",
        "bb_period=2:1000:1",
        "--grid",
        "bb_std=0.00001:10:0.00001",
        "--random",
        "10",
        "--quiet",
        "--out",
        "r.csv",
    ];
    let out = threadx(dir.path(), &base);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("no heatmap: a heatmap of bb_period × bb_std would have 999 × 1000000 cells"), "{stdout}");
    assert_eq!(std::fs::read_to_string(dir.path().join("r.csv")).unwrap().lines().count(), 11);
    assert!(!dir.path().join("r-heatmap.svg").exists());
    let mut named = base.to_vec();
    named.extend(["--heatmap", "h.svg"]);
    let out = threadx(dir.path(), &named);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("pick two parameters with fewer values"), "{}", text(&out.stderr));
}

#[test]
fn the_memory_a_run_peaks_at_is_within_the_estimate_it_printed() {
    let dir = tempfile::tempdir().unwrap();
    let rules = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/strategies/trend_rsi.toml");
    let grid = ["--grid", "trend=50:400:20", "--grid", "rsi_period=2:30:2", "--grid", "buy_below=10:45:1"];
    let shapes: Vec<Vec<&str>> = vec![
        vec!["--grid", "bb_period=10:30:1", "--overfitting"],
        [&["--strategy", rules][..], &grid, &["--search", "tpe", "--trials", "300"]].concat(),
        [&["--strategy", rules][..], &grid, &["--search", "sobol", "--trials", "3000"]].concat(),
    ];
    for shape in shapes {
        let args = [&["--device", "cpu", "sweep", "--out", "m.csv"][..], &shape].concat();
        let run = threadx(dir.path(), &args);
        assert!(run.status.success(), "{}", text(&run.stderr));
        let said = text(&run.stdout);
        let about = said.split("(about ").nth(1).and_then(|s| s.split(')').next()).unwrap();
        let (number, unit) = about.split_once(' ').unwrap();
        let scale = match unit {
            "KiB" => 1u64 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            _ => 1,
        };
        let estimate = (number.parse::<f64>().unwrap() * scale as f64) as u64;
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("m.json")).unwrap()).unwrap();
        let peak = summary["memory"]["peak_bytes"].as_u64().unwrap();
        assert!(peak <= estimate, "{shape:?}: peaked at {peak} bytes, estimated about {about}");
    }
}

#[test]
fn a_best_combo_on_the_grids_edge_is_said_in_the_terminal_the_summary_and_the_report() {
    // The README's main job: its winner has the largest bb_std and atr_period swept.
    let dir = tempfile::tempdir().unwrap();
    let out = threadx(dir.path(), &["--device", "cpu", "sweep", "--out", "r.csv", "--report", "r.html"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = "the best combo sits on the edge of the grid: bb_std=3 is the largest value swept, atr_period=50 is \
                the largest value swept; the optimum may lie beyond it";
    assert!(text(&out.stdout).contains(said), "{}", text(&out.stdout));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let edge = serde_json::json!([{"param": "bb_std", "value": 3.0, "side": "largest"},
                                  {"param": "atr_period", "value": 50, "side": "largest"}]);
    assert_eq!(summary["best"]["edge"], edge);
    assert!(std::fs::read_to_string(dir.path().join("r.html")).unwrap().contains("edge of the grid: bb_std=3 is"));
}

/// A combo the strategy's `require` refuses has no row, and the terminal says how many
/// there are, so that "380 combos" and "348 rows" do not disagree silently.
#[test]
fn the_combos_require_refuses_are_counted_beside_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let args =
        ["--device", "cpu", "sweep", "--strategy", "ma_cross", "--data", "synthetic:bars=2000", "--out", "ma.csv"];
    let mut args = args.to_vec();
    args.extend(["--grid", "fast=10:30:10", "--grid", "slow=10:30:10", "--heatmap", "/dev/null"]);
    let out = threadx(dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // fast < slow: (10,20), (10,30), (20,30) run; the other six of the nine are refused.
    assert!(stdout.contains("9 combos"), "{stdout}");
    assert!(
        stdout.contains("wrote 3 rows to ma.csv (6 combos refused by the strategy's `require` rule: no row)"),
        "{stdout}"
    );
    let rows = std::fs::read_to_string(dir.path().join("ma.csv")).unwrap().lines().count() - 1;
    assert_eq!(rows, 3);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("ma.json")).unwrap()).unwrap();
    assert_eq!(summary["combos"]["skipped"], 6);
}

/// A config's `device` is the run's device: `device = "cpu"` starts no GPU stack (it was
/// once overridden by the default `auto`, which probes for the overfitting statistics of
/// this run), and `--device` on the command line still wins.
/// Daily bars on weekdays only are annualised over 252 trading days, and the summary and
/// the report say so; `--periods-per-year` overrides it and says it was given.
#[test]
fn weekday_bars_are_annualised_over_trading_days_and_the_summary_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("timestamp,open,high,low,close\n");
    // From Monday 2024-01-01, 80 weeks of weekdays, a close that swings.
    for day in (0..560i64).filter(|d| d % 7 < 5) {
        let close = 100.0 + 10.0 * (day as f64 / 6.0).sin();
        csv += &format!("{},{close},{},{},{close}\n", 1_704_067_200 + day * 86_400, close + 1.0, close - 1.0);
    }
    std::fs::write(dir.path().join("stock.csv"), csv).unwrap();
    let run = |more: &[&str]| {
        let mut args = small_sweep("stock.csv");
        args.extend(["--out", "r.csv", "--report", "r.html"]);
        args.extend(more);
        let out = threadx(dir.path(), &args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
        let results = std::fs::read_to_string(dir.path().join("r.csv")).unwrap();
        let header: Vec<&str> = results.lines().next().unwrap().split(',').collect();
        let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
        let row: Vec<f64> = results.lines().nth(1).unwrap().split(',').map(|v| v.parse().unwrap_or(f64::NAN)).collect();
        let html = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
        (summary["annualisation"].clone(), row[column("sharpe_annual")] / row[column("sharpe")], html)
    };
    let (annualisation, ratio, html) = run(&[]);
    assert_eq!(annualisation["periods_per_year"], 252.0);
    assert_eq!(annualisation["basis"], "trading days: no bar on a weekend, a year of 252 days");
    assert!((ratio - 252f64.sqrt()).abs() < 1e-6, "{ratio}");
    assert!(html.contains("over 252 bars a year (trading days: no bar on a weekend"), "the report says it");
    let (annualisation, ratio, _) = run(&["--periods-per-year", "365"]);
    assert_eq!(annualisation["periods_per_year"], 365.0);
    assert_eq!(annualisation["basis"], "given (--periods-per-year)");
    assert!((ratio - 365f64.sqrt()).abs() < 1e-6, "{ratio}");
}

/// `--constraint` on a grid: every row is written, and the best list, its count, the
/// terminal, the report and a merge of shards rank only the combos that keep it.
#[test]
fn a_grid_ranks_only_the_combos_that_keep_its_constraints() {
    let dir = tempfile::tempdir().unwrap();
    let run = |out: &str, more: &[&str]| {
        let mut args = SMALL.to_vec();
        args.extend(["--out", out]);
        args.extend(more);
        let result = threadx(dir.path(), &args);
        assert!(result.status.success(), "{}", text(&result.stderr));
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(out).with_extension("json")).unwrap())
                .unwrap();
        (text(&result.stdout), summary)
    };
    let rule = ["--constraint", "trades >= 20"];
    run("all.csv", &[]);
    let (printed, summary) = run("kept.csv", &[&rule[..], &["--report", "kept.html"]].concat());
    // The same rows; the constraint ranks them.
    let rows = std::fs::read_to_string(dir.path().join("kept.csv")).unwrap();
    assert_eq!(rows, std::fs::read_to_string(dir.path().join("all.csv")).unwrap());
    let header: Vec<&str> = rows.lines().next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut keeping: Vec<(f64, u64)> = rows
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[at("trades")].parse::<u64>().unwrap() >= 20)
        .map(|f| (f[at("sharpe")].parse().unwrap(), f[at("combo")].parse().unwrap()))
        .collect();
    keeping.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let passing = keeping.len();
    assert!(passing > 0 && passing < 24, "the rule keeps some combos: {passing}");
    let best = &summary["best"];
    assert_eq!(best["constraints"], serde_json::json!(["trades >= 20"]));
    assert_eq!(best["passing"], passing);
    let ranked: Vec<u64> = best["rows"].as_array().unwrap().iter().map(|r| r["combo"].as_u64().unwrap()).collect();
    let expected: Vec<u64> = keeping.iter().take(10).map(|k| k.1).collect();
    assert_eq!(ranked, expected, "the best of the combos that keep the rule, by sharpe");
    assert!(printed.contains(&format!("ranked: the {passing} of 24 rows that keep trades >= 20")), "{printed}");
    let html = std::fs::read_to_string(dir.path().join("kept.html")).unwrap();
    assert!(
        html.contains(&format!("sharpe, among the {passing} of 24 combos that keep trades &gt;= 20")),
        "the report"
    );
    // Shards ranked by the rule merge into the one process's best.
    for i in 0..2 {
        let shard = format!("{i}/2");
        run(&format!("s{i}.csv"), &[&rule[..], &["--shard", &shard]].concat());
    }
    let merged = threadx(dir.path(), &["merge", "s0.csv", "s1.csv", "--out", "m.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("m.json")).unwrap()).unwrap();
    assert_eq!(m["best"], summary["best"]);
    // A malformed rule names itself (a walk-forward and a universe take rules: tests/minimize.rs
    // and tests/universe.rs).
    let mut bad = SMALL.to_vec();
    bad.extend(["--constraint", "trades ~ 5", "--out", "b.csv"]);
    assert!(text(&threadx(dir.path(), &bad).stderr).contains("constraint `trades ~ 5`: expected METRIC OP VALUE"));
}
