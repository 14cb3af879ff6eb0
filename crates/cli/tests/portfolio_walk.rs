//! `threadx sweep --portfolio --walk-forward`: the windows are cut from the account's
//! clock; one symbol's is the single walk-forward; each window's winner is the best
//! account of the portfolio sweep of its train window's bars, cut by hand.

use crate::common;
use crate::portfolio::{csv_rows, make_data};

use common::{text, threadx};
use std::path::Path;

const GRID: [&str; 4] = ["--grid", "bb_period=10,20,30", "--grid", "bb_std=1.5,2"];

fn walk(
    dir: &Path,
    data: &str,
    portfolio: bool,
    window: &str,
    out: &str,
) -> Vec<std::collections::HashMap<String, String>> {
    let mut args = vec!["sweep", "--data", data, "--walk-forward", window, "--out", out, "--quiet"];
    args.extend(GRID);
    if portfolio {
        args.push("--portfolio");
    }
    let run = threadx(dir, &args);
    assert!(run.status.success(), "{args:?}: {}", text(&run.stderr));
    csv_rows(&dir.join(out))
}

#[test]
fn one_symbols_portfolio_walk_forward_is_its_single_walk_forward() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let single = walk(dir.path(), "data/CCC.csv", false, "train=1500,test=500", "single.csv");
    let account = walk(dir.path(), "data/CCC.csv", true, "train=1500,test=500", "account.csv");
    assert_eq!(account.len(), 5);
    assert_eq!(account.len(), single.len());
    for (a, s) in account.iter().zip(&single) {
        for exact in ["window", "train_start", "test_end", "combo", "bb_period", "bb_std", "trades", "closed_trades"] {
            assert_eq!(a[exact], s[exact], "window {}: {exact}", a["window"]);
        }
        // The account's fills are vectorbt's arithmetic, the single run's ThreadX's own:
        // the same to rounding.
        for metric in ["in_sample_sharpe", "total_return", "sharpe", "max_drawdown", "exposure", "win_rate"] {
            let (x, y) = (a[metric].parse::<f64>().unwrap(), s[metric].parse::<f64>().unwrap());
            assert!((x - y).abs() <= 1e-9 * y.abs().max(1e-6), "window {}: {metric} {x} against {y}", a["window"]);
        }
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("account.json")).unwrap()).unwrap();
    assert_eq!(summary["identity"]["portfolio"]["symbols"], serde_json::json!(["CCC"]));
    assert_eq!(summary["windows"].as_array().unwrap().len(), 5);
}

/// Each symbol's CSV rows whose time is in `from..=to`, into `dir/name/` (a symbol with
/// none left out, as the walk-forward leaves it out of the window); how many had some.
fn cut(dir: &Path, name: &str, (from, to): (&str, &str)) -> usize {
    std::fs::create_dir_all(dir.join(name)).unwrap();
    let mut kept = 0;
    for symbol in ["AAA", "BBB", "CCC"] {
        let body = std::fs::read_to_string(dir.join(format!("data/{symbol}.csv"))).unwrap();
        let mut lines = body.lines();
        let header = lines.next().unwrap();
        let rows: Vec<&str> = lines.filter(|l| (from..=to).contains(&&l[..20])).collect();
        if !rows.is_empty() {
            std::fs::write(dir.join(format!("{name}/{symbol}.csv")), format!("{header}\n{}\n", rows.join("\n")))
                .unwrap();
            kept += 1;
        }
    }
    kept
}

#[test]
fn each_windows_winner_is_the_best_account_of_its_train_bars() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_data(d);
    let windows = walk(d, "data", true, "train=1000,test=500", "w.csv");
    assert_eq!(windows.len(), 6, "a 4,000-bar clock: train 1,000 then 6 tests of 500");
    let mut symbols_kept = Vec::new();
    for w in &windows {
        let name = format!("train{}", w["window"]);
        symbols_kept.push(cut(d, &name, (&w["train_start"], &w["train_end"])));
        let mut args = vec!["sweep", "--data", &name, "--portfolio", "--out", "r.csv", "--quiet"];
        args.extend(GRID);
        // The walk-forward annualises every window as the whole clock: per-bar Sharpe
        // ratios do not depend on it.
        let run = threadx(d, &args);
        assert!(run.status.success(), "{name}: {}", text(&run.stderr));
        let rows = csv_rows(&d.join("r.csv"));
        let sharpe = |r: &std::collections::HashMap<String, String>| r["sharpe"].parse::<f64>().unwrap();
        let best = rows.iter().fold(&rows[0], |best, r| if sharpe(r) > sharpe(best) { r } else { best });
        assert_eq!(w["combo"], best["combo"], "{name}");
        assert_eq!(w["in_sample_sharpe"].parse::<f64>().unwrap(), sharpe(best), "{name}");
        assert!(w["trades"].parse::<u32>().unwrap() > 0, "{name}");
    }
    // BBB's 2,500 bars end before the last train window: it trades AAA and CCC alone.
    assert_eq!(symbols_kept, [3, 3, 3, 3, 3, 2]);
}
