//! Rule files at the limits of the language: expressions nested or long enough to
//! overflow a recursive parser's stack are refused with an error at the text, never a
//! crash; a long rule inside the limits parses, checks and runs on a worker thread's
//! small stack. Fuzz-style: random token soup never panics the parser.

use crate::common;

use common::{all_plans, cpu_book};
use proptest::prelude::*;
use threadx_backtest::{BarTables, Costs, Strategy, simulate_cpu};
use threadx_indicators::Ohlcv;

fn file(entry: &str) -> String {
    format!(
        "name = \"deep\"\n[params]\nn = {{ kind = \"int\", default = 5, min = 2 }}\n[rules]\nentry = \"{entry}\"\nexit = \"close < 0\"\n"
    )
}

/// Parses on a thread with a 2 MiB stack, as a rayon worker has.
fn parse_small_stack(source: String) -> Result<Strategy, String> {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || Strategy::from_toml(&source, "deep.toml").map_err(|e| e.to_string()))
        .unwrap()
        .join()
        .expect("the parser crashed")
}

#[test]
fn deep_nesting_is_refused_at_the_text() {
    let cases = [
        ("brackets", format!("{}close{} > 1", "(".repeat(3_355), ")".repeat(3_355))),
        ("calls", format!("{}close{} > 1", "abs(".repeat(3_353), ")".repeat(3_353))),
        ("unary minus", format!("{}close > 1", "-".repeat(13_769))),
        ("not", format!("{}close > 1", "not ".repeat(14_147))),
        ("lookbacks", format!("close{} > 1", "[1]".repeat(14_142))),
        ("brackets within the token limit", format!("{}close{} > 1", "(".repeat(100), ")".repeat(100))),
        ("minus within the token limit", format!("{}close > 1", "-".repeat(100))),
        ("a long sum", format!("{} > 1", vec!["close"; 300].join(" + "))),
    ];
    for (what, entry) in cases {
        let err = parse_small_stack(file(&entry)).unwrap_err();
        assert!(err.starts_with("deep.toml:5:"), "{what}: {err}");
        assert!(
            ["tokens, more than the 1000", "nested more than 64 deep", "nested more than 100 deep"]
                .iter()
                .any(|m| err.contains(m)),
            "{what}: {err}"
        );
        // The line is shown cut to a window, not whole.
        let shown = err.lines().nth(2).unwrap();
        assert!(shown.starts_with("5 | ") && shown.chars().count() < 100, "{what}: {err}");
    }
}

#[test]
fn a_long_rule_within_the_limits_runs() {
    // A left-deep sum 95 levels down (the deepest a tree may be is 100) and 60 nested
    // brackets.
    let sum = vec!["close"; 95].join(" + ");
    let nested = format!("{}close{}", "(".repeat(60), ")".repeat(60));
    let entry = format!("{sum} > 95 * sma(close, n) and {nested} > 0");
    let source = file(&entry);
    let strategy = parse_small_stack(source).unwrap();
    let data = Ohlcv::load("synthetic:bars=2000,seed=4").unwrap();
    let book = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || cpu_book(&data, strategy, &[vec![5.0, 20.0]]))
        .unwrap()
        .join()
        .expect("evaluation crashed");
    let tables = BarTables::new(&book, Costs { fee: 0.001, slippage: 0.0 });
    let totals = simulate_cpu(&book, &tables, &all_plans(&book)).totals;
    assert!(totals.iter().all(|t| t.trades == 1), "close above its mean once, never sold: {totals:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// Random sequences of the language's tokens and stray characters: an error or a
    /// strategy, never a panic.
    #[test]
    fn random_rules_never_panic(parts in prop::collection::vec(prop::sample::select(vec![
        "close", "open", "n", "(", ")", "[", "]", "1", "-1", "0.5", "1e309", "+", "-", "*", "/", "<", ">=", "==",
        "and", "or", "not", "sma(", "abs(", "highest(high,", ",", "if(", "nan", "crosses_above(", "x", "$", "é", "\\\\",
    ]), 0..40)) {
        let entry = parts.join(" ");
        let _ = Strategy::from_toml(&file(&entry), "fuzz.toml");
    }
}
