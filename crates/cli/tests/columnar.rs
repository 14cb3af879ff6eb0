//! Parquet and Arrow as a user meets them: data files in those formats give the CSV's
//! rows; results, search trials and blocks written as Parquet or Arrow read back to the
//! CSV's values; a killed Parquet sweep resumes and Parquet shards merge to the
//! one-process rows; a damaged data file is refused by name.

use crate::common;

use common::{SMALL, kill_once_checkpointed, small_sweep, text, threadx};
use std::path::Path;
use threadx_backtest::{MetricSet, Strategy};
use threadx_sweep::{read_results, write_row};

fn sweep(dir: &Path, data: &str, more: &[&str]) {
    let mut args = small_sweep(data);
    args.extend(more);
    let run = threadx(dir, &args);
    assert!(run.status.success(), "{:?}: {}", more, text(&run.stderr));
}

fn synth(dir: &Path, out: &str) {
    let run = threadx(dir, &["data", "synth", "--bars", "3000", "--seed", "2", "--out", out]);
    assert!(run.status.success(), "{}", text(&run.stderr));
}

/// A results file read back (any format) and written as the CSV's rows.
fn as_csv(path: &Path) -> String {
    let strategy = Strategy::parse("bb_atr").unwrap();
    let mut csv = threadx_sweep::header(&strategy, MetricSet::Run);
    for row in read_results(path, &strategy).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
        write_row(&mut csv, (&strategy, MetricSet::Run), row.combo, &row.values, &row.metrics);
    }
    csv
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn csv_parquet_and_arrow_data_give_identical_rows() {
    let dir = tempfile::tempdir().unwrap();
    for (data, out) in [("d.csv", "r-csv.csv"), ("d.parquet", "r-parquet.csv"), ("d.feather", "r-feather.csv")] {
        synth(dir.path(), data);
        sweep(dir.path(), data, &["--out", out]);
    }
    let csv = read(&dir.path().join("r-csv.csv"));
    assert_eq!(csv.lines().count(), 1 + 24);
    assert_eq!(read(&dir.path().join("r-parquet.csv")), csv);
    assert_eq!(read(&dir.path().join("r-feather.csv")), csv);
    // The synthetic spec itself gives those bars too.
    sweep(dir.path(), "synthetic:bars=3000,seed=2", &["--out", "r-synth.csv"]);
    assert_eq!(read(&dir.path().join("r-synth.csv")), csv);
}

#[test]
fn parquet_and_arrow_results_read_back_to_the_csv() {
    let dir = tempfile::tempdir().unwrap();
    let data = "synthetic:bars=3000,seed=2";
    let more = ["--overfitting", "--blocks", "4"];
    for (out, blocks) in [("r.csv", "b.csv"), ("p.parquet", "b.parquet"), ("a.arrow", "b.arrow")] {
        let mut args = vec!["--out", out, "--blocks-out", blocks];
        args.extend(more);
        sweep(dir.path(), data, &args);
    }
    let csv = read(&dir.path().join("r.csv"));
    assert_eq!(as_csv(&dir.path().join("p.parquet")), csv);
    assert_eq!(as_csv(&dir.path().join("a.arrow")), csv);
    assert!(std::fs::read(dir.path().join("p.parquet")).unwrap().starts_with(b"PAR1"));
    // The summaries agree on the best rows and the statistics.
    let summary = |name: &str| -> serde_json::Value { serde_json::from_str(&read(&dir.path().join(name))).unwrap() };
    for other in ["p.json", "a.json"] {
        assert_eq!(summary(other)["best"], summary("r.json")["best"]);
        assert_eq!(summary(other)["overfitting"]["pbo"], summary("r.json")["overfitting"]["pbo"]);
    }
    // The blocks table: typed columns, the CSV's values.
    let blocks_csv = read(&dir.path().join("b.csv"));
    let file = std::fs::File::open(dir.path().join("b.parquet")).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let mut lines = vec!["combo,block,bars,sum_r,sum_r2".to_owned()];
    for batch in reader {
        use arrow::array::AsArray;
        use arrow::datatypes::{Float64Type, Int64Type};
        let batch = batch.unwrap();
        let int = |c: usize| batch.column(c).as_primitive::<Int64Type>().clone();
        let float = |c: usize| batch.column(c).as_primitive::<Float64Type>().clone();
        for i in 0..batch.num_rows() {
            lines.push(format!(
                "{},{},{},{},{}",
                int(0).value(i),
                int(1).value(i),
                int(2).value(i),
                float(3).value(i),
                float(4).value(i)
            ));
        }
    }
    assert_eq!(lines.join("\n") + "\n", blocks_csv);
}

#[test]
fn a_search_writes_its_trials_as_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let search = ["--search", "tpe", "--trials", "12", "--batch", "4", "--seed", "3"];
    let mut csv = search.to_vec();
    csv.extend(["--out", "t.csv"]);
    sweep(dir.path(), "synthetic:bars=3000,seed=2", &csv);
    let mut pq = search.to_vec();
    pq.extend(["--out", "t.parquet"]);
    sweep(dir.path(), "synthetic:bars=3000,seed=2", &pq);
    let file = std::fs::File::open(dir.path().join("t.parquet")).unwrap();
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let names: Vec<String> = builder.schema().fields().iter().map(|f| f.name().clone()).collect();
    let header = read(&dir.path().join("t.csv")).lines().next().unwrap().to_owned();
    assert_eq!(names.join(","), header);
    let rows: usize = builder.build().unwrap().map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 12);
    // Shards of a search merge from Parquet into the CSV the whole search wrote.
    let merged = threadx(dir.path(), &["merge", "t.parquet", "--out", "m.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    assert_eq!(read(&dir.path().join("m.csv")), read(&dir.path().join("t.csv")));
}

#[test]
fn sigkilled_parquet_and_arrow_sweeps_resume_to_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let args = |out: &'static str| {
        let mut a = SMALL.to_vec();
        a.extend(["--grid", "atr_period=5:100:1"]);
        a.extend(["--chunk-size", "4", "--threads", "1", "--out", out]);
        a
    };
    for whole in ["whole.csv", "whole.parquet", "whole.arrow"] {
        let out = threadx(dir.path(), &args(whole));
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    // Parquet and Arrow keep each chunk as binary rows.
    for (out, chunk) in [("r.parquet", "rows"), ("r.arrow", "rows")] {
        let parts = dir.path().join(format!("{out}.parts"));
        kill_once_checkpointed(dir.path(), &args(out), &parts, chunk, 3);
        assert!(!dir.path().join(out).exists(), "a killed sweep leaves no results file");
        // One byte of a checkpointed chunk changed on disk: the chunk is run again.
        let first = parts.join(format!("chunk-00000000.{chunk}"));
        let mut bytes = std::fs::read(&first).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&first, bytes).unwrap();
        let mut resume = args(out);
        resume.push("--resume");
        let resumed = threadx(dir.path(), &resume);
        assert!(resumed.status.success(), "{}", text(&resumed.stderr));
        assert!(text(&resumed.stderr).contains("rows do not match their checksum"), "{}", text(&resumed.stderr));
        assert_eq!(as_csv(&dir.path().join(out)), read(&dir.path().join("whole.csv")), "{out}");
        // The same bytes as the run that was never stopped.
        let ext = out.rsplit('.').next().unwrap();
        assert!(
            std::fs::read(dir.path().join(out)).unwrap()
                == std::fs::read(dir.path().join(format!("whole.{ext}"))).unwrap(),
            "{out}"
        );
    }
}

#[test]
fn parquet_and_csv_shards_merge_into_the_one_process_rows() {
    let dir = tempfile::tempdir().unwrap();
    let data = "synthetic:bars=3000,seed=2";
    sweep(dir.path(), data, &["--chunk-size", "5", "--out", "whole.parquet"]);
    sweep(dir.path(), data, &["--chunk-size", "5", "--out", "whole.csv"]);
    for (shard, out) in [("0/3", "s0.parquet"), ("1/3", "s1.csv"), ("2/3", "s2.arrow")] {
        sweep(dir.path(), data, &["--chunk-size", "5", "--shard", shard, "--out", out]);
    }
    for out in ["m.parquet", "m.csv"] {
        let merged = threadx(dir.path(), &["merge", "s2.arrow", "s0.parquet", "s1.csv", "--out", out]);
        assert!(merged.status.success(), "{}", text(&merged.stderr));
    }
    let whole = read(&dir.path().join("whole.csv"));
    assert_eq!(read(&dir.path().join("m.csv")), whole);
    assert_eq!(as_csv(&dir.path().join("m.parquet")), whole);
    assert_eq!(as_csv(&dir.path().join("whole.parquet")), whole);
    // Shards merged: the bytes of the one process's Parquet.
    let bytes = |name: &str| std::fs::read(dir.path().join(name)).unwrap();
    assert!(bytes("m.parquet") == bytes("whole.parquet"), "the merged Parquet differs from the one process's");
    // Another strategy's Parquet is no shard of this one.
    let mut other = SMALL.to_vec();
    other.truncate(3);
    other.extend(["--strategy", "ma_cross", "--data", data, "--quiet", "--out", "ma.parquet"]);
    assert!(threadx(dir.path(), &other).status.success());
    std::fs::copy(dir.path().join("s1.json"), dir.path().join("ma.json")).unwrap();
    let refused = threadx(dir.path(), &["merge", "s0.parquet", "ma.parquet", "s2.arrow", "--out", "x.csv"]);
    assert!(text(&refused.stderr).contains("ma.parquet was changed after its shard ran"), "{}", text(&refused.stderr));
    // Without the checksum (an older shard's summary) its columns still tell it apart.
    let mut summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("s1.json")).unwrap()).unwrap();
    summary.as_object_mut().unwrap().remove("results_checksum");
    std::fs::write(dir.path().join("ma.json"), summary.to_string()).unwrap();
    let refused = threadx(dir.path(), &["merge", "s0.parquet", "ma.parquet", "s2.arrow", "--out", "x.csv"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("ma.parquet: not a bb_atr results file (its columns are"),
        "{}",
        text(&refused.stderr)
    );
    // A shard cut short or damaged: an error naming it, and no merged file.
    let whole_shard = std::fs::read(dir.path().join("s0.parquet")).unwrap();
    for (what, bytes) in [
        ("cut", whole_shard[..whole_shard.len() / 2].to_vec()),
        ("flipped", {
            let mut b = whole_shard.clone();
            let middle = b.len() / 2;
            b[middle..middle + 64].iter_mut().for_each(|x| *x ^= 0xa5);
            b
        }),
    ] {
        std::fs::write(dir.path().join("s0.parquet"), bytes).unwrap();
        let refused = threadx(dir.path(), &["merge", "s0.parquet", "s1.csv", "s2.arrow", "--out", "y.parquet"]);
        assert!(!refused.status.success(), "{what}");
        assert!(text(&refused.stderr).contains("s0.parquet"), "{what}: {}", text(&refused.stderr));
        assert!(!dir.path().join("y.parquet").exists(), "{what}");
    }
}

#[test]
fn a_csv_through_a_pipe_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    synth(dir.path(), "d.csv");
    sweep(dir.path(), "d.csv", &["--out", "file.csv"]);
    // A FIFO fed by another process: its first bytes are not consumed by a format check.
    assert!(std::process::Command::new("mkfifo").arg(dir.path().join("pipe")).status().unwrap().success());
    let feeder = {
        let (from, to) = (dir.path().join("d.csv"), dir.path().join("pipe"));
        std::thread::spawn(move || std::fs::write(to, std::fs::read(from).unwrap()).unwrap())
    };
    sweep(dir.path(), "pipe", &["--out", "pipe.csv"]);
    feeder.join().unwrap();
    assert_eq!(read(&dir.path().join("pipe.csv")), read(&dir.path().join("file.csv")));
}

#[test]
fn damaged_data_files_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    synth(dir.path(), "d.parquet");
    let bytes = std::fs::read(dir.path().join("d.parquet")).unwrap();
    std::fs::write(dir.path().join("cut.parquet"), &bytes[..bytes.len() * 2 / 3]).unwrap();
    let mut args = small_sweep("cut.parquet");
    args.extend(["--out", "r.parquet"]);
    let run = threadx(dir.path(), &args);
    assert!(!run.status.success());
    assert!(text(&run.stderr).contains("cut.parquet: not a readable Parquet file"), "{}", text(&run.stderr));
    assert!(!dir.path().join("r.parquet").exists());
    // Results over their own data file are refused.
    let mut args = small_sweep("d.parquet");
    args.extend(["--out", "d.parquet"]);
    let run = threadx(dir.path(), &args);
    assert!(!run.status.success());
    assert_eq!(std::fs::read(dir.path().join("d.parquet")).unwrap(), bytes);
}
