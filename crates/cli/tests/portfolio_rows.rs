//! A portfolio sweep's own metrics, `turnover` and `mean_positions`, as a user ranks and
//! constrains by them (a single run's rows have neither, and say so); a rank rule's series
//! per parameter value, counted in the memory a sweep checks.

use crate::common::{text, threadx};
use crate::portfolio::{csv_rows, make_data};

#[test]
fn a_portfolio_sweep_ranks_and_constrains_by_its_own_metrics_and_a_single_run_cannot() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let args =
        ["sweep", "--data", "data", "--portfolio", "--size", "0.3", "--grid", "bb_period=10:30:5", "--by", "turnover"];
    let more = ["--minimize", "--constraint", "mean_positions > 0.4", "--top", "2", "--out", "r.csv"];
    let run = threadx(dir.path(), &[&args[..], &more].concat());
    assert!(run.status.success(), "{}", text(&run.stderr));
    let mut kept: Vec<(f64, u64)> = csv_rows(&dir.path().join("r.csv"))
        .iter()
        .filter(|r| r["mean_positions"].parse::<f64>().unwrap() > 0.4)
        .map(|r| (r["turnover"].parse().unwrap(), r["combo"].parse().unwrap()))
        .collect();
    kept.sort_by(|a, b| a.0.total_cmp(&b.0));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    let best: Vec<u64> =
        summary["best"]["rows"].as_array().unwrap().iter().map(|r| r["combo"].as_u64().unwrap()).collect();
    assert!(kept.len() >= 2 && best == [kept[0].1, kept[1].1], "{best:?} against {kept:?}");
    for single in [
        vec!["sweep", "--data", "data/CCC.csv", "--by", "turnover"],
        vec!["sweep", "--data", "data/CCC.csv", "--constraint", "mean_positions > 1"],
    ] {
        let run = threadx(dir.path(), &single);
        assert!(
            text(&run.stderr).contains("is a portfolio's metric: a single run's rows have none"),
            "{}",
            text(&run.stderr)
        );
    }
}

#[test]
fn a_rank_that_reads_a_parameter_is_counted_in_the_memory_a_sweep_checks() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let rules = "name = \"ranked\"\n[params]\nn = { kind = \"int\", default = 14, min = 2, max = 100 }\n[rules]\n\
                 entry = \"rsi(n) < 30\"\nexit = \"rsi(n) > 70\"\nrank = \"-rsi(n)\"\n";
    std::fs::write(dir.path().join("ranked.toml"), rules).unwrap();
    let args = ["sweep", "--data", "data", "--portfolio", "--strategy", "ranked.toml", "--grid", "n=2:50:1"];
    let run = threadx(dir.path(), &[&args[..], &["--max-memory", "1M"]].concat());
    let said = text(&run.stderr);
    assert!(!run.status.success() && said.contains("49 rank series for each of 3 symbols"), "{said}");
    let run = threadx(dir.path(), &[&args[..], &["--out", "r.csv", "--quiet"]].concat());
    assert!(run.status.success(), "{}", text(&run.stderr));
    assert_eq!(csv_rows(&dir.path().join("r.csv")).len(), 49);
}

/// A symbol whose history is too short for a combo never trades in that combo's account,
/// whichever grid holds it: the combo's sweep row, alone or beside faster combos, is its
/// `backtest --portfolio`, which refused it ("symbol DDD: ... needs at least 20 bars").
/// With no symbol long enough, the longest is named.
#[test]
fn a_symbol_too_short_for_a_combo_sits_out_its_account_in_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_data(d);
    assert!(threadx(d, &["data", "synth", "--bars", "15", "--seed", "4", "--out", "data/DDD.csv"]).status.success());
    let sweep = |grid: &str, out: &str| {
        let run = threadx(
            d,
            &["--device", "cpu", "sweep", "--data", "data", "--portfolio", "--grid", grid, "--quiet", "--out", out],
        );
        assert!(run.status.success(), "{grid}: {}", text(&run.stderr));
        csv_rows(&d.join(out))
    };
    let (both, alone) = (sweep("bb_period=10,20", "both.csv"), sweep("bb_period=20", "alone.csv"));
    let backtest = threadx(
        d,
        &["--device", "cpu", "backtest", "--data", "data", "--portfolio", "--set", "bb_period=20", "--json"],
    );
    assert!(backtest.status.success(), "{}", text(&backtest.stderr));
    let json: serde_json::Value = serde_json::from_slice(&backtest.stdout).unwrap();
    for row in [&both[1], &alone[0]] {
        assert_eq!(row["bb_period"], "20");
        assert_eq!(row["total_return"].parse::<f64>().unwrap(), json["total_return"].as_f64().unwrap());
        assert_eq!(row["trades"].parse::<u64>().unwrap(), json["trades"].as_u64().unwrap());
    }
    std::fs::create_dir(d.join("short")).unwrap();
    for (name, bars) in [("A", "12"), ("B", "15")] {
        assert!(threadx(d, &["data", "synth", "--bars", bars, "--out", &format!("short/{name}.csv")]).status.success());
    }
    let none = threadx(d, &["backtest", "--data", "short", "--portfolio"]);
    assert!(
        !none.status.success()
            && text(&none.stderr).contains("no symbol has the bars to trade; the longest, short/B.csv: bb_atr with"),
        "{}",
        text(&none.stderr)
    );
}
