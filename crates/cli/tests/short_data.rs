//! A grid some of whose combos need more bars than the data has: the rest run, those rows
//! are empty (no trade, every other metric an empty cell) and counted in the terminal and
//! the summary, every device gives the same bytes, shards merge to them; they are no
//! trials of the deflated Sharpe ratio; a grid none of whose combos can trade is refused,
//! naming its fastest combo.

use crate::common;

use common::{text, threadx};
use std::path::Path;
use threadx_sweep::Summary;

const DATA: &str = "synthetic:bars=199,seed=1";

fn sweep(dir: &Path, grid: &str, out: &str, more: &[&str]) -> std::process::Output {
    let mut args = vec!["sweep", "--data", DATA, "--grid", grid, "--grid", "atr_mult=1,2", "--out", out];
    args.extend(more);
    threadx(dir, &args)
}

#[test]
fn combos_that_need_more_bars_than_the_data_has_get_empty_rows_and_the_rest_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = sweep(dir.path(), "bb_period=10:500:10", "r.csv", &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    let said = text(&run.stdout);
    // bb_period ≥ 200 needs 200 bars or more: 31 periods × 2 multipliers.
    assert!(said.contains("wrote 100 rows to r.csv"), "{said}");
    assert!(
        said.contains(
            "62 combos need more bars than the data has (199) for their indicators: they cannot trade and their metrics are empty"
        ),
        "{said}"
    );
    let csv = std::fs::read_to_string(dir.path().join("r.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (period, total, trades, sharpe) = (at("bb_period"), at("total_return"), at("trades"), at("sharpe"));
    let mut empty = 0;
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let p: f64 = cells[period].parse().unwrap();
        if p >= 200.0 {
            empty += 1;
            assert_eq!((cells[total], cells[trades], cells[sharpe]), ("", "0", ""), "{line}");
        } else {
            assert!(cells[total].parse::<f64>().unwrap().is_finite(), "{line}");
        }
    }
    assert_eq!(empty, 62);
    let summary = Summary::read(&dir.path().join("r.json")).unwrap();
    let combos = summary.combos.unwrap();
    assert_eq!((combos.rows, combos.empty), (100, Some(62)));
    // The best list ranks only combos that traded.
    assert!(summary.best.unwrap().rows.iter().all(|r| r.metrics.total_return.is_finite()));

    // Every device, and two shards merged: the same bytes.
    for device in ["gpu", "all"] {
        let out = format!("{device}.csv");
        let run = sweep(dir.path(), "bb_period=10:500:10", &out, &["--device", device]);
        assert!(run.status.success(), "{device}: {}", text(&run.stderr));
        assert_eq!(std::fs::read(dir.path().join(&out)).unwrap(), csv.as_bytes(), "--device {device}");
    }
    for shard in ["0/2", "1/2"] {
        let out = format!("s{}.csv", &shard[..1]);
        let run = sweep(dir.path(), "bb_period=10:500:10", &out, &["--shard", shard]);
        assert!(run.status.success(), "{shard}: {}", text(&run.stderr));
    }
    let merged = threadx(dir.path(), &["merge", "s0.csv", "s1.csv", "--out", "m.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    assert_eq!(std::fs::read(dir.path().join("m.csv")).unwrap(), csv.as_bytes(), "merged shards");
    let merged = Summary::read(&dir.path().join("m.json")).unwrap();
    assert_eq!(merged.combos.unwrap().empty, Some(62));

    // Without such combos, the summary has no `empty` key (its bytes as before).
    let run = sweep(dir.path(), "bb_period=10:50:10", "n.csv", &[]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert!(!std::fs::read_to_string(dir.path().join("n.json")).unwrap().contains("\"empty\""));
    assert!(!text(&run.stdout).contains("need more bars"));
}

#[test]
fn combos_that_cannot_trade_are_no_trials_of_the_deflated_sharpe_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let trials = |name: &str| {
        let summary = Summary::read(&dir.path().join(name)).unwrap();
        let o = summary.overfitting.unwrap();
        (o.trials.n, o.top.len())
    };
    let run = sweep(dir.path(), "bb_period=10:500:10", "o.csv", &["--overfitting", "--blocks", "4"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    // 100 combos, 62 of which cannot trade: 38 trials.
    assert_eq!(trials("o.json").0, 38.0);
    // Shards merged count the same.
    for shard in ["0/2", "1/2"] {
        let out = format!("o{}.csv", &shard[..1]);
        let run = sweep(dir.path(), "bb_period=10:500:10", &out, &["--overfitting", "--blocks", "4", "--shard", shard]);
        assert!(run.status.success(), "{shard}: {}", text(&run.stderr));
    }
    let merged = threadx(dir.path(), &["merge", "o0.csv", "o1.csv", "--out", "om.csv"]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    assert_eq!(trials("om.json"), trials("o.json"));
    // A grid whose combos all trade counts them all.
    let run = sweep(dir.path(), "bb_period=10:100:10", "a.csv", &["--overfitting", "--blocks", "4"]);
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_eq!(trials("a.json").0, 20.0);
}

#[test]
fn a_grid_none_of_whose_combos_can_trade_is_refused_naming_its_fastest() {
    let dir = tempfile::tempdir().unwrap();
    let run = sweep(dir.path(), "bb_period=200:500:10", "r.csv", &[]);
    assert!(!run.status.success());
    let said = text(&run.stderr);
    assert!(
        said.contains("bb_atr with bb_period=200,bb_std=2,atr_period=14,atr_mult=1 needs at least 200 bars to trade; the data has 199"),
        "{said}"
    );
    assert!(!dir.path().join("r.csv").exists());
}
