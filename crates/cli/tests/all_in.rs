//! One symbol with all the cash in (`size = 1.0`), for every example rule file and
//! built-in: a rule file's all-in `[sizing]` leaves a single run's sweep the same bytes;
//! and `backtest --portfolio` on one symbol is the single backtest to 1e-10 (shorts,
//! reversals and next-open fills too; vectorbt's fill arithmetic, not the single run's,
//! makes the last bits).

use crate::common::{text, threadx};
use crate::portfolio::make_data;

const EXAMPLES: [&str; 6] = ["bb_long_short", "breakout_next_open", "donchian", "macd_tp", "trend_rsi", "trend_trail"];

fn rule_file(name: &str) -> String {
    format!("{}/../../examples/strategies/{name}.toml", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn all_in_sizing_leaves_every_examples_single_run_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    for name in EXAMPLES {
        let text_of = std::fs::read_to_string(rule_file(name)).unwrap();
        let sized = format!("{name}_all_in.toml");
        std::fs::write(dir.path().join(&sized), format!("{text_of}\n[sizing]\nsize = 1.0\ninit_cash = 1000\n"))
            .unwrap();
        let sweep = |strategy: &str, out: &str| {
            let run = threadx(dir.path(), &["sweep", "--data", "data/CCC.csv", "--strategy", strategy, "--out", out]);
            assert!(run.status.success(), "{name}: {}", text(&run.stderr));
            std::fs::read(dir.path().join(out)).unwrap()
        };
        let plain = sweep(&rule_file(name), "plain.csv");
        assert!(plain.len() > 1000, "{name}: a sweep of rows");
        assert_eq!(sweep(&sized, "sized.csv"), plain, "{name}");
    }
}

#[test]
fn one_symbol_all_in_is_the_single_backtest_for_every_example() {
    let dir = tempfile::tempdir().unwrap();
    make_data(dir.path());
    let files: Vec<String> = EXAMPLES.map(rule_file).into();
    let strategies = files.iter().map(String::as_str).chain(["bb_atr", "ma_cross", "rsi_reversion"]);
    for strategy in strategies {
        let json = |extra: &[&str]| {
            let args = [&["backtest", "--data", "data/CCC.csv", "--strategy", strategy, "--json"][..], extra].concat();
            let run = threadx(dir.path(), &args);
            assert!(run.status.success(), "{strategy}: {}", text(&run.stderr));
            serde_json::from_slice::<serde_json::Value>(&run.stdout).unwrap()
        };
        let (single, account) = (json(&[]), json(&["--portfolio"]));
        assert!(single["trades"].as_u64().unwrap() >= 3, "{strategy}: {single}");
        assert_eq!(account["trades"], single["trades"], "{strategy}");
        assert_eq!(account["closed_trades"], single["closed_trades"], "{strategy}");
        for metric in ["total_return", "sharpe", "max_drawdown", "win_rate", "exposure", "sortino", "sqn"] {
            let (a, b) = (account[metric].as_f64().unwrap(), single[metric].as_f64().unwrap());
            assert!((a - b).abs() <= 1e-10 * b.abs().max(1e-6), "{strategy} {metric}: {a} against {b}");
        }
    }
}
