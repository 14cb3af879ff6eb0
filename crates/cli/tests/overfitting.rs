//! `threadx sweep --overfitting` as a user runs it: the summary's object and sentences,
//! the plots and the blocks CSV; a SIGKILLed run resumed (a chunk's blocks damaged on disk)
//! gives the same statistics; a search keeps its trials' blocks, the grid's bytes, and
//! resumes to the same statistics; the refusals.

use crate::common;

use common::{kill_once_checkpointed, text, threadx};

const ARGS: [&str; 12] = [
    "--device",
    "cpu",
    "sweep",
    "--data",
    "synthetic:bars=4000,seed=3",
    "--grid",
    "bb_period=10:40:5",
    "--grid",
    "bb_std=1.5,2,2.5",
    "--grid",
    "atr_mult=1:4:1",
    "--overfitting",
];

/// A summary's statistics without the time they took.
fn statistics(summary: &serde_json::Value) -> serde_json::Value {
    let mut o = summary["overfitting"].clone();
    o.as_object_mut().unwrap().remove("seconds");
    o
}

fn run(dir: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    run_with(dir, &[&ARGS[..], extra].concat())
}

/// `threadx args`, which must succeed, and the summary of its `--out`.
fn run_with(dir: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let out = threadx(dir, args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let name = args.iter().position(|a| *a == "--out").map(|i| args[i + 1]).unwrap();
    let summary = dir.join(name).with_extension("json");
    serde_json::from_slice(&std::fs::read(summary).unwrap()).unwrap()
}

#[test]
fn the_summary_holds_the_statistics_and_the_terminal_says_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = ARGS.to_vec();
    args.extend(["--out", "r.csv", "--blocks", "8", "--blocks-out", "blocks.csv"]);
    let out = threadx(dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("PBO ") && said.contains("of the splits") && said.contains("DSR "), "{said}");
    // One verdict above the statistics' own lines, by the documented rule from the summary.
    let lines: Vec<&str> = said.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("Verdict: ")).expect(&said);
    assert!(lines[at + 1].starts_with("PBO "), "{said}");
    let typed = threadx_sweep::Summary::read(&dir.path().join("r.json")).unwrap();
    let verdict = threadx_sweep::Verdict::of(typed.overfitting.as_ref().unwrap()).unwrap();
    assert_eq!(lines[at], format!("Verdict: {verdict}"));
    // The time line says what the statistics took.
    assert!(said.lines().any(|l| l.starts_with("time: ") && l.contains(", overfitting statistics ")), "{said}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    let o = &summary["overfitting"];
    let pbo = o["pbo"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&pbo));
    assert_eq!(o["splits"]["count"], 70);
    assert_eq!(o["blocks"], serde_json::json!({"count": 8, "bars": 500, "dropped": 0}));
    assert_eq!(o["trials"]["n"], 84.0);
    assert_eq!(o["top"].as_array().unwrap().len(), 10);
    for key in ["dsr", "psr", "sr0", "skew", "kurtosis", "degradation_slope", "prob_oos_loss"] {
        assert!(o[key].is_number(), "{key}: {}", o[key]);
    }
    let q = &o["logit_quantiles"];
    assert!(q["p05"].as_f64() <= q["p50"].as_f64() && q["p50"].as_f64() <= q["p95"].as_f64());
    for plot in ["r-pbo.svg", "r-oos.svg"] {
        let svg = std::fs::read_to_string(dir.path().join(plot)).unwrap();
        assert!(svg.contains("<svg") && svg.contains("rect"), "{plot}");
        // The report's type sizes, and counts as whole numbers (`70`, not `70.0`).
        let sizes: Vec<f64> =
            svg.split("font-size=\"").skip(1).filter_map(|t| t.split('"').next()?.parse().ok()).collect();
        assert!(!sizes.is_empty() && sizes.iter().all(|&px| px >= 13.0), "{plot}: font sizes {sizes:?}");
        let texts: Vec<&str> = svg
            .split("<text")
            .skip(1)
            .filter_map(|t| t.split_once('>')?.1.split_once("</text>").map(|p| p.0))
            .collect();
        assert!(texts.iter().any(|t| t.trim().parse::<f64>().is_ok()), "{plot}: no tick labels in {texts:?}");
        assert!(!texts.iter().any(|t| t.trim().ends_with(".0")), "{plot}: {texts:?}");
    }
    // The blocks CSV: 84 combos × 8 blocks, each block's rows summing to the combo's.
    let blocks = std::fs::read_to_string(dir.path().join("blocks.csv")).unwrap();
    let mut lines = blocks.lines();
    assert_eq!(lines.next(), Some("combo,block,bars,sum_r,sum_r2"));
    let rows: Vec<Vec<String>> = lines.map(|l| l.split(',').map(str::to_owned).collect()).collect();
    assert_eq!(rows.len(), 84 * 8);
    assert!(rows.iter().all(|r| r[2] == "500"));
    assert_eq!(rows[8][0], rows[15][0]);
    // --effective-trials replaces N, and says so.
    let given = run(dir.path(), &["--out", "e.csv", "--effective-trials", "5"]);
    assert_eq!(given["overfitting"]["trials"], serde_json::json!({"n": 5.0, "source": "--effective-trials"}));
    assert!(given["overfitting"]["sr0"].as_f64() < o["sr0"].as_f64());
}

#[test]
fn a_killed_run_resumes_to_the_same_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let many = ["--grid", "atr_period=5:40:1", "--chunk-size", "4", "--threads", "1"];
    let whole = run(dir.path(), &[&many[..], &["--out", "whole.csv"]].concat());
    let mut args = ARGS.to_vec();
    args.extend(many);
    args.extend(["--out", "r.csv"]);
    // A damaged blocks file: its chunk is run again, never taken.
    kill_and_damage(dir.path(), &args, "r.csv.parts", "chunk-00000000.blocks");
    assert!(!dir.path().join("r.csv").exists(), "a killed sweep leaves no results file");
    args.push("--resume");
    let resumed = threadx(dir.path(), &args);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    for chunk in [0, 1] {
        let again = format!("running chunk {chunk} again");
        assert!(text(&resumed.stderr).contains(&again), "{}", text(&resumed.stderr));
    }
    let again: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(statistics(&again), statistics(&whole));
    assert_eq!(std::fs::read(dir.path().join("r.csv")).unwrap(), std::fs::read(dir.path().join("whole.csv")).unwrap());
}

/// Kills `args` once its checkpoint holds three blocks files, flips a byte of the first
/// and zeroes the second (what a crash may leave of a blocks file, which is not synced).
fn kill_and_damage(dir: &std::path::Path, args: &[&str], parts: &str, first: &str) {
    let parts = dir.join(parts);
    kill_once_checkpointed(dir, args, &parts, "blocks", 3);
    let path = parts.join(first);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[3] ^= 1;
    std::fs::write(&path, bytes).unwrap();
    let second = parts.join(first.replace("00000000", "00000001"));
    let zeroed = vec![0u8; std::fs::read(&second).unwrap().len()];
    std::fs::write(&second, zeroed).unwrap();
}

#[test]
fn a_search_keeps_its_trials_blocks_and_resumes_to_the_same_statistics() {
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), &["--out", "grid.csv", "--blocks-out", "grid-blocks.csv"]);
    let search = ["--search", "sobol", "--trials", "40", "--batch", "4", "--threads", "1"];
    let whole = run(dir.path(), &[&search[..], &["--out", "s.csv", "--blocks-out", "s-blocks.csv"]].concat());
    let o = &whole["overfitting"];
    assert_eq!(o["trials"], serde_json::json!({"n": 40.0, "source": "combos evaluated"}));
    assert_eq!(o["splits"]["count"], 12_870);
    // The trials' blocks, in trial order, are the bytes the grid run gave those combos.
    let lines = |name: &str| -> Vec<String> {
        std::fs::read_to_string(dir.path().join(name)).unwrap().lines().skip(1).map(str::to_owned).collect()
    };
    let grid = lines("grid-blocks.csv");
    let trials: Vec<String> = lines("s.csv").iter().map(|l| l.split(',').nth(1).unwrap().to_owned()).collect();
    assert_eq!(trials.len(), 40);
    let expected: Vec<&String> =
        trials.iter().flat_map(|c| grid.iter().filter(move |l| l.split(',').next() == Some(c.as_str()))).collect();
    let got = lines("s-blocks.csv");
    assert_eq!(got.len(), 40 * 16);
    assert!(got.iter().eq(expected), "a search's blocks differ from the grid's");
    // Killed, a batch's blocks damaged, resumed: the same statistics and rows.
    let mut args = ARGS.to_vec();
    args.extend(search);
    args.extend(["--out", "r.csv"]);
    kill_and_damage(dir.path(), &args, "r.csv.parts", "chunk-00000000.blocks");
    args.push("--resume");
    let resumed = threadx(dir.path(), &args);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert!(text(&resumed.stderr).contains("running batch 0 again"), "{}", text(&resumed.stderr));
    assert!(text(&resumed.stdout).contains("PBO "), "{}", text(&resumed.stdout));
    let again: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(statistics(&again), statistics(&whole));
    assert_eq!(std::fs::read(dir.path().join("r.csv")).unwrap(), std::fs::read(dir.path().join("s.csv")).unwrap());
    // A stopping rule ends the trials inside a batch: the statistics are of those trials.
    let stopped = run(
        dir.path(),
        &["--search", "random", "--trials", "84", "--batch", "32", "--patience", "5", "--out", "p.csv"],
    );
    assert_eq!(stopped["search"]["stop"], "patience");
    let rows = stopped["combos"]["rows"].as_u64().unwrap();
    assert!(!rows.is_multiple_of(32), "{rows} trials: the stop should fall inside a batch");
    assert_eq!(stopped["overfitting"]["trials"]["n"], rows as f64);
    // One trial: nothing to rank against, and no spread to deflate by; said so.
    let mut args = ARGS.to_vec();
    args.extend(["--search", "sobol", "--trials", "1", "--out", "one.csv"]);
    let one = threadx(dir.path(), &args);
    assert!(one.status.success(), "{}", text(&one.stderr));
    let said = text(&one.stdout);
    assert!(said.contains("PBO: undefined with 1 combo"), "{said}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("one.json")).unwrap()).unwrap();
    assert!(summary["overfitting"]["pbo"].is_null(), "undefined is null, not 1.0: {}", summary["overfitting"]);
}

#[test]
fn degenerate_sweeps_say_undefined_and_equal_neighbours_are_a_plateau_whatever_the_sign() {
    let dir = tempfile::tempdir().unwrap();
    // Flat prices: no entry fires, no trades, every ratio NaN.
    let mut csv = String::from("timestamp,open,high,low,close,volume\n");
    for t in 0..4000 {
        csv += &format!("{},100,100,100,100,1\n", 1_700_000_000 + 900 * t);
    }
    std::fs::write(dir.path().join("flat-data.csv"), csv).unwrap();
    let flat = ["--grid", "bb_std=1,2", "--grid", "bb_period=10,20", "--overfitting", "--out", "flat.csv"];
    let out = threadx(dir.path(), &[&["--device", "cpu", "sweep", "--data", "flat-data.csv"][..], &flat].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("PBO: undefined: in each of the") && !said.contains("NaN"), "{said}");
    assert!(!said.contains("Verdict"), "no PBO, no verdict: {said}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("flat.json")).unwrap()).unwrap();
    assert!(summary["overfitting"]["pbo"].is_null(), "{}", summary["overfitting"]);
    // Ranked by drawdown (negative; shallower is better): the verdict follows the rule.
    let out = threadx(dir.path(), &[&ARGS[..], &["--by", "max_drawdown", "--out", "dd.csv"]].concat());
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("dd.json")).unwrap()).unwrap();
    let best = &summary["overfitting"]["top"][0];
    let (o, mean) = (best["objective"].as_f64().unwrap(), best["neighbour_mean"].as_f64().unwrap());
    let shape = if mean >= o - 0.5 * o.abs() { "a plateau" } else { "a spike" };
    let said = text(&out.stdout);
    assert!(said.contains("Stability: the best's max_drawdown") && said.contains(&format!(": {shape}")), "{said}");
}

#[test]
fn shards_merged_give_a_whole_runs_statistics_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let many = ["--grid", "atr_period=5:40:5", "--chunk-size", "20"];
    let whole = run(dir.path(), &[&many[..], &["--out", "whole.csv"]].concat());
    for i in ["0/3", "1/3", "2/3"] {
        let out = format!("s{}.csv", &i[..1]);
        let shard = run(dir.path(), &[&many[..], &["--shard", i, "--out", out.as_str()]].concat());
        assert!(shard.get("overfitting").is_none(), "a shard's statistics would be of its part only");
        assert_eq!(shard["overfitting_shard"]["blocks"], format!("s{}.blocks", &i[..1]));
    }
    let merged = threadx(dir.path(), &["merge", "s2.csv", "s0.csv", "s1.csv", "--out", "m.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    assert!(text(&merged.stdout).contains("PBO "), "{}", text(&merged.stdout));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("m.json")).unwrap()).unwrap();
    assert_eq!(statistics(&m), statistics(&whole));
    let read = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    for (a, b) in [("m.csv", "whole.csv"), ("m-pbo.svg", "whole-pbo.svg"), ("m-oos.svg", "whole-oos.svg")] {
        assert_eq!(read(a), read(b), "{a} differs from {b}");
    }
    // A shard's blocks changed on disk are refused by name.
    let mut bytes = read("s1.blocks");
    bytes[9] ^= 1;
    std::fs::write(dir.path().join("s1.blocks"), bytes).unwrap();
    let refused = threadx(dir.path(), &["merge", "s2.csv", "s0.csv", "s1.csv", "--out", "m2.csv"]);
    assert!(!refused.status.success());
    assert!(text(&refused.stderr).contains("s1.blocks"), "{}", text(&refused.stderr));
}

/// Fewer combos than the ten best the statistics detail, in shards of fewer still: the
/// merge details every combo, as one process does (it had kept as many as its largest
/// shard's best).
#[test]
fn a_merge_of_small_shards_details_as_many_best_combos_as_one_process() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--device", "cpu", "sweep", "--data", "synthetic:bars=4000,seed=3", "--overfitting", "--blocks", "8"];
    let small = [&args[..], &["--grid", "bb_period=10:30:10", "--grid", "atr_mult=1,2", "--chunk-size", "2"]].concat();
    let whole = run_with(dir.path(), &[&small[..], &["--out", "whole.csv"]].concat());
    for i in ["0/2", "1/2"] {
        let out = format!("s{}.csv", &i[..1]);
        run_with(dir.path(), &[&small[..], &["--shard", i, "--out", out.as_str()]].concat());
    }
    let merged = threadx(dir.path(), &["merge", "s0.csv", "s1.csv", "--out", "m.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("m.json")).unwrap()).unwrap();
    assert_eq!(whole["overfitting"]["top"].as_array().map(Vec::len), Some(6));
    assert_eq!(statistics(&m), statistics(&whole));
}

#[test]
fn refusals_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, says) in [
        (&["--blocks", "7"][..], "even number of blocks"),
        (&["--blocks", "0"][..], "even number of blocks"),
        (&["--pbo-splits", "0"][..], "--pbo-splits must be at least 1"),
        (&["--effective-trials", "0.5"][..], "--effective-trials"),
        (&["--search", "sobol", "--trials", "10", "--shard", "1/2"][..], "cannot be combined with --shard"),
        (&["--walk-forward", "train=1000,test=500"][..], "--walk-forward cannot be combined"),
    ] {
        let mut args = ARGS.to_vec();
        args.extend(extra);
        args.extend(["--out", "x.csv"]);
        let out = threadx(dir.path(), &args);
        assert!(!out.status.success(), "{extra:?} succeeded");
        assert!(text(&out.stderr).contains(says), "{extra:?}: {}", text(&out.stderr));
    }
    // Data too short for the blocks, named before any work.
    let out = threadx(
        dir.path(),
        &[
            "--device",
            "cpu",
            "sweep",
            "--data",
            "synthetic:bars=60,seed=1",
            "--grid",
            "bb_period=10",
            "--grid",
            "atr_period=5",
            "--blocks",
            "64",
            "--out",
            "y.csv",
        ],
    );
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("too few to cut into 64 blocks"), "{}", text(&out.stderr));
}

#[test]
fn a_summary_lists_its_runs_files_and_an_earlier_runs_plots_are_not_among_them() {
    let dir = tempfile::tempdir().unwrap();
    let run = |more: &[&str]| {
        let mut args = vec!["--device", "cpu", "sweep", "--data", "synthetic:bars=3000,seed=2", "--quiet"];
        args.extend(["--grid", "bb_period=10,20,30", "--grid", "bb_std=1.5,2.5", "--out", "r.csv"]);
        args.extend(more);
        let out = threadx(dir.path(), &args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
        let files: Vec<String> = summary["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| std::path::Path::new(f.as_str().unwrap()).file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        files
    };
    assert_eq!(run(&["--overfitting"]), ["r.csv", "r-heatmap.svg", "r-pbo.svg", "r-oos.svg"]);
    // The next run without --overfitting leaves the plots beside it, but not in its list.
    assert_eq!(run(&[]), ["r.csv", "r-heatmap.svg"]);
    assert!(dir.path().join("r-pbo.svg").exists());
}
