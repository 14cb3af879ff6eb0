//! Where outputs go, as a user names them: an output that is one of the command's inputs
//! is refused before any work, naming both; a character device or FIFO is written in
//! place (nothing beside it), a symbolic link's target is replaced.

#![allow(clippy::print_stderr)] // A check that cannot run here says why.

use crate::common;

use common::{command, text, threadx};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::Command;

const GRID: [&str; 5] = ["--grid", "bb_period=10,20", "--grid", "bb_std=2", "--quiet"];

fn sweep<'a>(data: &'a str, out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--device", "cpu", "sweep", "--data", data, "--out", out];
    args.extend(GRID);
    args.extend(extra);
    args
}

#[test]
fn outputs_that_name_one_file_or_cannot_be_written_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = "synthetic:bars=600,seed=1";
    let two_axes = ["--grid", "bb_period=10,20", "--grid", "bb_std=2,3", "--quiet", "--device", "cpu"];
    let long = format!("{}.csv", "a".repeat(245));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--out", "r.csv", "--report", "r.csv"], "--report r.csv and --out r.csv are one file"),
        (vec!["--out", "r.csv", "--heatmap", "r.csv"], "--heatmap r.csv and --out r.csv are one file"),
        (
            vec!["--out", "r.csv", "--search", "random", "--trials", "3", "--search-plot", "r.csv"],
            "--search-plot r.csv and --out",
        ),
        (vec!["--out", "r.csv", "--blocks-out", "r.csv"], "--blocks-out r.csv and --out r.csv"),
        (vec!["--out", "r.csv", "--blocks-out", "r.json"], "--blocks-out r.json and the summary (--out as .json)"),
        (vec!["--out", "r.csv", "--heatmap", "r.json"], "--heatmap r.json and the summary"),
        (
            vec!["--out", "r.csv", "--blocks-out", "r-heatmap.svg"],
            "--blocks-out r-heatmap.svg and the heatmap (beside --out)",
        ),
        (vec!["--out", "r.csv", "--report", "r.csv.parts"], "and the checkpoint folder (--out + .parts)"),
        (vec!["--out", "r.csv", "--blocks-out", "bo/"], "it names a folder"),
        (vec!["--out", "r.csv", "--blocks-out", "/nonexistent/d/b.csv"], "folder /nonexistent/d does not exist"),
        (vec!["--out", &long], "the temporary file written beside it needs 15 more"),
    ];
    for (outputs, message) in cases {
        let mut args = vec!["sweep", "--data", data];
        args.extend(two_axes);
        args.extend(outputs);
        let run = threadx(d, &args);
        let stderr = text(&run.stderr);
        assert!(!run.status.success() && stderr.contains(message), "{args:?}: {stderr}");
        assert!(!text(&run.stdout).contains("preparing"), "{args:?}: refused before any work");
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 0, "{args:?}: nothing written");
    }
    // The same for one backtest's outputs.
    for (a, b) in [("--trades", "--equity"), ("--trades", "--report")] {
        let run = threadx(d, &["--device", "cpu", "backtest", "--data", data, a, "x.csv", b, "x.csv"]);
        let stderr = text(&run.stderr);
        assert!(!run.status.success() && stderr.contains(&format!("{b} x.csv and {a} x.csv are one file")), "{stderr}");
    }
    assert_eq!(std::fs::read_dir(d).unwrap().count(), 0);
}

/// A table named for a format tables are not written in (a spreadsheet, JSON, a
/// compressed or tab-separated file) is refused before any work by every command that
/// writes one, instead of CSV text under that name; any other name is CSV. So are a
/// drawing named as a raster image and a report named as a PDF.
#[test]
fn an_output_named_for_another_format_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = "synthetic:bars=600,seed=1";
    let cases: [(Vec<&str>, &str); 7] = [
        (sweep(data, "r.xlsx", &[]), "--out r.xlsx: `.xlsx` is a spreadsheet: name it .csv"),
        (
            sweep(data, "r.csv", &["--overfitting", "--blocks-out", "b.csv.gz"]),
            "--blocks-out b.csv.gz: `.gz` is a compressed file",
        ),
        (
            vec!["--device", "cpu", "backtest", "--data", data, "--trades", "t.tsv"],
            "--trades t.tsv: `.tsv` is tab-separated",
        ),
        (
            vec!["--device", "cpu", "backtest", "--data", data, "--equity", "e.JSON"],
            "--equity e.JSON: `.json` is not a table's format",
        ),
        (
            vec!["--device", "cpu", "indicators", "--data", data, "--ind", "sma", "--out", "i.h5"],
            "--out i.h5: `.h5` is a format ThreadX does not write",
        ),
        (vec!["data", "synth", "--bars", "600", "--out", "d.zip"], "--out d.zip: `.zip` is a compressed file"),
        (vec!["merge", "p0.csv", "--out", "m.xls"], "--out m.xls: `.xls` is a spreadsheet"),
    ];
    for (args, message) in cases {
        let run = threadx(d, &args);
        let stderr = text(&run.stderr);
        assert!(!run.status.success() && stderr.contains(message), "{args:?}: {stderr}");
        assert!(stderr.contains("Parquet (.parquet, .pq) or Arrow IPC (.arrow, .feather, .ipc)"), "{stderr}");
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 0, "{args:?}: nothing written");
    }
    let drawings_and_pages: [(Vec<&str>, &str); 3] = [
        (
            sweep(data, "r.csv", &["--heatmap", "h.png"]),
            "--heatmap h.png: the drawing is SVG, not `.png`: name it .svg",
        ),
        (vec!["monitor", "--duration", "1", "--plot", "p.JPG"], "--plot p.JPG: the drawing is SVG, not `.jpg`"),
        (
            vec!["--device", "cpu", "backtest", "--data", data, "--report", "r.pdf"],
            "--report r.pdf: the report is one HTML page, not `.pdf`: name it .html",
        ),
    ];
    for (args, message) in drawings_and_pages {
        let run = threadx(d, &args);
        let stderr = text(&run.stderr);
        assert!(!run.status.success() && stderr.contains(message), "{args:?}: {stderr}");
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 0, "{args:?}: nothing written");
    }
    // Another name is CSV, as before.
    let run = threadx(d, &sweep(data, "r.dat", &[]));
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(std::fs::read_to_string(d.join("r.dat")).unwrap().starts_with("combo,bb_period,"));
}

/// Data written to stdout (`--out /dev/stdout`, here a pipe) is the data alone, the bytes
/// a file gets: the command's messages go to stderr instead of into it.
#[test]
fn data_written_to_stdout_is_not_mixed_with_messages() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = "synthetic:bars=600,seed=1";
    let piped = threadx(d, &sweep(data, "/dev/stdout", &[]));
    assert!(piped.status.success(), "{}", text(&piped.stderr));
    assert!(threadx(d, &sweep(data, "r.csv", &[])).status.success());
    assert_eq!(text(&piped.stdout), text(&std::fs::read(d.join("r.csv")).unwrap()));
    assert!(text(&piped.stderr).contains("rows to /dev/stdout"), "{}", text(&piped.stderr));
    let trades = threadx(d, &["--device", "cpu", "backtest", "--data", data, "--trades", "/dev/stdout"]);
    let (stdout, stderr) = (text(&trades.stdout), text(&trades.stderr));
    assert!(stdout.starts_with("trade,side,") && !stdout.contains("total_return"), "{stdout}");
    assert!(stderr.contains("total_return"), "the metrics table: {stderr}");
    let indicators = threadx(d, &["indicators", "--data", data, "--ind", "sma", "--out", "/dev/stdout"]);
    assert_eq!(text(&indicators.stdout).lines().count(), 601, "a header and a line a bar");
    // A reader that stops early (`| head -1`) ends the sweep quietly, as for its messages.
    let mut child = command(d, &["--device", "cpu", "sweep", "--data", data, "--quiet", "--out", "/dev/stdout"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut first).unwrap();
    assert!(first.starts_with("combo,"), "{first}");
    let done = child.wait_with_output().unwrap();
    assert!(done.status.success() && !text(&done.stderr).contains("Broken pipe"), "{}", text(&done.stderr));
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(threadx(d, &["data", "synth", "--bars", "600", "--out", "in.csv"]).status.success());
    std::fs::hard_link(d.join("in.csv"), d.join("same.csv")).unwrap();
    let original = std::fs::read(d.join("in.csv")).unwrap();
    let refused = |args: &[&str], output: &str| {
        let out = threadx(d, args);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} ran");
        assert!(
            stderr.contains(&format!("the output {output} is the input ")) && stderr.contains("in.csv"),
            "{args:?}: {stderr}"
        );
        assert_eq!(std::fs::read(d.join("in.csv")).unwrap(), original, "{args:?} changed the input");
    };
    refused(&sweep("in.csv", "in.csv", &[]), "in.csv");
    refused(&sweep("in.csv", "./in.csv", &[]), "./in.csv");
    refused(&sweep("in.csv", "r.csv", &["--heatmap", "same.csv"]), "same.csv");
    refused(&["--device", "cpu", "indicators", "--data", "in.csv", "--ind", "sma", "--out", "same.csv"], "same.csv");
    refused(&["--device", "cpu", "backtest", "--data", "in.csv", "--trades", "in.csv"], "in.csv");
    refused(&["--device", "cpu", "backtest", "--data", "in.csv", "--equity", "same.csv"], "same.csv");

    // A universe's files are inputs, each one: a portfolio's outputs and a universe sweep's.
    std::fs::create_dir(d.join("u")).unwrap();
    assert!(threadx(d, &["data", "synth", "--bars", "600", "--seed", "2", "--out", "u/B.csv"]).status.success());
    std::fs::hard_link(d.join("in.csv"), d.join("u/A.csv")).unwrap();
    let b = std::fs::read(d.join("u/B.csv")).unwrap();
    let refused_in_universe = |args: &[&str]| {
        let out = threadx(d, args);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{args:?} ran");
        assert!(stderr.contains("the output u/A.csv is the input u/A.csv"), "{args:?}: {stderr}");
        assert_eq!(std::fs::read(d.join("in.csv")).unwrap(), original, "{args:?} changed the input");
        assert_eq!(std::fs::read(d.join("u/B.csv")).unwrap(), b, "{args:?} changed the input");
    };
    for flag in ["--equity", "--trades", "--report"] {
        refused_in_universe(&["--device", "cpu", "backtest", "--data", "u", "--portfolio", flag, "u/A.csv"]);
    }
    refused_in_universe(&["--device", "cpu", "sweep", "--data", "u", "--portfolio", "--out", "u/A.csv"]);
    refused_in_universe(&["--device", "cpu", "sweep", "--data", "u", "--out", "u/A.csv"]);

    // Merge: the merged file (or its summary) may not be a shard's.
    for i in 0..2 {
        let shard = format!("{i}/2");
        let out = format!("p{i}.csv");
        let run = threadx(d, &sweep("synthetic:bars=600,seed=3", &out, &["--shard", &shard, "--chunk-size", "1"]));
        assert!(run.status.success(), "{}", text(&run.stderr));
    }
    let shard0 = std::fs::read(d.join("p0.csv")).unwrap();
    let merge = threadx(d, &["merge", "p0.csv", "p1.csv", "--out", "p0.csv"]);
    assert!(!merge.status.success());
    assert!(text(&merge.stderr).contains("the output p0.csv is the input p0.csv"), "{}", text(&merge.stderr));
    assert_eq!(std::fs::read(d.join("p0.csv")).unwrap(), shard0);
    let merge = threadx(d, &["merge", "p0.csv", "p1.csv", "--out", "all.csv"]);
    assert!(merge.status.success(), "the shards are intact: {}", text(&merge.stderr));
}

/// Makes a character device as /dev/null's (1, 3) or /dev/full's (1, 7) in `dir`; `None`
/// where mknod is not allowed (not root).
fn device(dir: &Path, name: &str, minor: &str) -> Option<String> {
    let made = Command::new("mknod").arg(dir.join(name)).args(["c", "1", minor]).status().ok()?;
    made.success().then(|| name.to_owned())
}

#[test]
fn devices_are_written_in_place_with_nothing_beside_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (Some(null), Some(full)) = (device(d, "null", "3"), device(d, "full", "7")) else {
        eprintln!("mknod needs root: skipped");
        return;
    };
    let data = "synthetic:bars=600,seed=1";
    for args in [
        sweep(data, &null, &[]),
        vec!["--device", "cpu", "indicators", "--data", data, "--ind", "sma", "--out", &null],
        vec!["--device", "cpu", "backtest", "--data", data, "--trades", &null, "--equity", &null],
        vec!["data", "synth", "--bars", "100", "--out", &null],
    ] {
        let out = threadx(d, &args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert!(std::fs::metadata(d.join("null")).unwrap().file_type().is_char_device(), "{args:?}");
    }
    for args in [
        sweep(data, &full, &[]),
        vec!["--device", "cpu", "indicators", "--data", data, "--ind", "sma", "--out", &full],
        vec!["data", "synth", "--bars", "100", "--out", &full],
    ] {
        // A run that fails late leaves no scratch checkpoint behind for a later process
        // with its pid to trip on.
        let tmp = tempfile::tempdir().unwrap();
        let out = command(d, &args).env("TMPDIR", tmp.path()).output().unwrap();
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "{args:?} left its scratch folder");
        assert!(!out.status.success(), "{args:?} wrote to a full device");
        assert!(text(&out.stderr).contains("No space left on device"), "{args:?}: {}", text(&out.stderr));
        assert!(std::fs::metadata(d.join("full")).unwrap().file_type().is_char_device());
    }
    let sweep_out = threadx(d, &sweep(data, &null, &[]));
    assert!(text(&sweep_out.stdout).contains("no summary: null is not a regular file"), "{}", text(&sweep_out.stdout));
    let mut left: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with("profile.json"))
        .collect();
    left.sort();
    assert_eq!(left, ["full", "null"], "nothing beside the devices");
    let resume = threadx(d, &sweep(data, &null, &["--resume"]));
    assert!(text(&resume.stderr).contains("--resume needs --out to be a regular file"), "{}", text(&resume.stderr));
}

#[test]
fn a_fifo_without_a_reader_is_an_error_at_once_and_a_link_replaces_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert!(Command::new("mkfifo").arg(d.join("fifo")).status().unwrap().success());
    let started = std::time::Instant::now();
    let out = threadx(d, &["data", "synth", "--bars", "100", "--out", "fifo"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("no process is reading"), "{}", text(&out.stderr));
    assert!(started.elapsed() < std::time::Duration::from_secs(30));

    std::fs::write(d.join("target.csv"), "old").unwrap();
    std::os::unix::fs::symlink("target.csv", d.join("link.csv")).unwrap();
    assert!(threadx(d, &["data", "synth", "--bars", "100", "--out", "link.csv"]).status.success());
    assert!(std::fs::symlink_metadata(d.join("link.csv")).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(d.join("target.csv")).unwrap().starts_with("timestamp,"));
}

#[test]
fn an_output_that_fails_late_leaves_the_old_results_and_summary_whole() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = "synthetic:bars=3000,seed=1";
    for (format, grid) in [("csv", "bb_period=10,20,30"), ("parquet", "bb_period=10:40:1")] {
        let out = format!("r.{format}");
        let first =
            threadx(d, &["--device", "cpu", "sweep", "--data", data, "--grid", "bb_period=10,20", "--out", &out]);
        assert!(first.status.success(), "{}", text(&first.stderr));
        let old = |name: &str| std::fs::read(d.join(name)).unwrap();
        let (results, summary) = (old(&out), old("r.json"));
        // The heatmap (a FIFO nobody reads) fails after the new results are assembled.
        let fifo = d.join("heat.fifo");
        let _ = std::fs::remove_file(&fifo);
        assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let args = ["--device", "cpu", "sweep", "--data", data, "--grid", grid, "--grid", "bb_std=2,3"];
        let second = threadx(d, &[&args[..], &["--out", &out, "--heatmap", "heat.fifo"]].concat());
        assert!(!second.status.success() && text(&second.stderr).contains("no process is reading"));
        assert_eq!((old(&out), old("r.json")), (results, summary), "{format}: the old set, whole");
        let left: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(!left.iter().any(|n| n.to_string_lossy().contains(".tmp-")), "no temporary left: {left:?}");
        std::fs::remove_file(d.join("r.json")).unwrap();
    }
}
