//! The summary as one typed struct: every kind of run's summary (a grid's with overfitting,
//! constraints and telemetry, a search's, a universe's, a shard's, a merge's, a
//! walk-forward's) reads back into `threadx_sweep::Summary` and writes out as the very
//! bytes on disk; a summary of a newer schema, or one whose field has the wrong type, is
//! refused with the file's name by every command that reads summaries.

use crate::common;

use common::{SMALL, text, threadx};
use std::path::Path;
use threadx_sweep::{SCHEMA, Summary};

/// Runs `threadx ARGS` in `dir`; fails the test if it fails.
fn run(dir: &Path, args: &[&str]) -> String {
    let out = threadx(dir, args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// [`SMALL`]'s sweep into `out` with `more` flags.
fn small(dir: &Path, out: &str, more: &[&str]) {
    let mut args = SMALL.to_vec();
    args.extend(["--out", out]);
    args.extend(more);
    run(dir, &args);
}

/// The summary at `path` read into the struct and written out again: the same bytes.
fn round_trip(path: &Path) -> Summary {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let summary = Summary::read(path).unwrap();
    assert_eq!(summary.to_text(), text, "{}", path.display());
    assert_eq!(summary.schema, SCHEMA);
    summary
}

#[test]
fn every_kind_of_runs_summary_reads_back_into_the_struct_and_writes_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small(d, "grid.csv", &["--overfitting", "--constraint", "trades >= 5", "--monitor"]);
    let grid = round_trip(&d.join("grid.json"));
    let best = grid.best.as_ref().unwrap();
    assert_eq!(best.constraints.as_deref(), Some(&["trades >= 5".to_owned()][..]));
    assert!(best.rows.iter().all(|r| r.metrics.trades >= 5), "{best:?}");
    let overfitting = grid.overfitting.as_ref().unwrap();
    assert_eq!(overfitting.top[0].combo, best.rows[0].combo);
    assert!(!grid.telemetry.as_ref().unwrap().gpu_status.is_empty());
    assert_eq!(grid.combos.unwrap().rows, 24);

    small(d, "search.csv", &["--search", "tpe", "--trials", "12", "--overfitting"]);
    let search = round_trip(&d.join("search.json"));
    let outcome = search.search.as_ref().unwrap().outcome.as_ref().unwrap();
    assert_eq!(outcome.trials, 12);
    assert_eq!(outcome.best.as_ref().unwrap().combo, search.best.as_ref().unwrap().rows[0].combo);

    for i in ["0/2", "1/2"] {
        let out = format!("shard{}.csv", &i[..1]);
        small(d, &out, &["--shard", i, "--overfitting"]);
    }
    let shard = round_trip(&d.join("shard0.json"));
    assert!(shard.results_checksum.is_some() && shard.overfitting_shard.is_some());
    run(d, &["merge", "shard0.csv", "shard1.csv", "--out", "merged.csv"]);
    let merged = round_trip(&d.join("merged.json"));
    assert_eq!(merged.overfitting.as_ref().unwrap().pbo, overfitting_without_constraint(d).pbo);

    std::fs::create_dir(d.join("data")).unwrap();
    for (seed, name) in [("1", "AAA"), ("2", "BBB")] {
        run(d, &["data", "synth", "--bars", "3000", "--seed", seed, "--out", &format!("data/{name}.csv")]);
    }
    let mut args = SMALL.to_vec();
    args[4] = "data";
    args.extend(["--out", "universe.csv"]);
    run(d, &args);
    let universe = round_trip(&d.join("universe.json"));
    let sections = universe.universe.as_ref().unwrap();
    assert_eq!(sections.symbols.iter().map(|s| s.symbol.as_str()).collect::<Vec<_>>(), ["AAA", "BBB"]);
    assert_eq!(sections.by_combo.as_ref().unwrap().combos, 24);

    let mut args = SMALL.to_vec();
    args.extend(["--walk-forward", "train=1000,test=500", "--out", "walk.csv"]);
    run(d, &args);
    let walk = round_trip(&d.join("walk.json"));
    assert_eq!(walk.windows.as_ref().unwrap().len(), 4);
}

/// The statistics of the grid without `--constraint` (what the merged shards computed).
fn overfitting_without_constraint(d: &Path) -> threadx_sweep::OverfittingSummary {
    small(d, "whole.csv", &["--overfitting"]);
    round_trip(&d.join("whole.json")).overfitting.unwrap()
}

#[test]
fn a_summary_of_a_newer_schema_or_a_field_of_the_wrong_type_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for i in ["0/2", "1/2"] {
        small(d, &format!("shard{}.csv", &i[..1]), &["--shard", i]);
    }
    small(d, "whole.csv", &[]);
    let edit = |file: &str, from: &str, to: &str| {
        let path = d.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file}: {from}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
    };
    edit("whole.json", "\"schema\": 1,", "\"schema\": 7,");
    let report = threadx(d, &["report", "whole.json", "--out", "whole.html"]);
    assert!(!report.status.success());
    let err = text(&report.stderr);
    assert!(err.contains("whole.json: a summary of schema 7") && err.contains("reads schema 1 and older"), "{err}");
    assert!(!d.join("whole.html").exists());

    edit("shard1.json", "\"schema\": 1,", "\"schema\": 7,");
    let merge = threadx(d, &["merge", "shard0.csv", "shard1.csv", "--out", "merged.csv"]);
    let err = text(&merge.stderr);
    assert!(!merge.status.success() && err.contains("shard1.json: a summary of schema 7"), "{err}");
    edit("shard1.json", "\"schema\": 7,", "\"schema\": 1,");
    edit("shard1.json", "\"index\": 1", "\"index\": \"one\"");
    let merge = threadx(d, &["merge", "shard0.csv", "shard1.csv", "--out", "merged.csv"]);
    let err = text(&merge.stderr);
    assert!(!merge.status.success() && err.contains("shard1.json: unreadable summary"), "{err}");
    assert!(!d.join("merged.csv").exists());
}
