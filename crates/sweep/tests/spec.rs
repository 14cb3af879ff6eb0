//! SweepRequest → SweepSpec: lists, ranges and TOML, every refusal before work, and the combo order.

use threadx_backtest::{Axis, Strategy};
use threadx_dispatch::DeviceMode;
use threadx_sweep::{Shard, SweepRequest, SweepSpec, WalkForward, WholeGrid};

/// `strategy` with `grid` (as `--grid` takes it), checked.
fn spec(strategy: &str, grid: &[(&str, &str)]) -> SweepSpec {
    request(strategy, grid).check().unwrap()
}

fn request(strategy: &str, grid: &[(&str, &str)]) -> SweepRequest {
    SweepRequest { device: Some(DeviceMode::Cpu), ..SweepRequest::new(strategy, grid) }
}

/// Why `strategy` with `name=text` is refused.
fn err(strategy: &str, name: &str, text: &str) -> String {
    request(strategy, &[(name, text)]).check().unwrap_err().to_string()
}

#[test]
fn lists_and_inclusive_ranges() {
    let spec = spec("bb_atr", &[("bb_period", "10:50:5"), ("bb_std", "1.5,2,2.5"), ("atr_mult", "0.1:0.5:0.1")]);
    assert_eq!(spec.axes()[0], [10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0, 45.0, 50.0]);
    assert_eq!(spec.axes()[1], [1.5, 2.0, 2.5]);
    assert_eq!(spec.axes()[2], [14.0], "an unnamed parameter keeps its default");
    // Decimal steps land on the decimal values, the stop included.
    assert_eq!(spec.axes()[3], [0.1, 0.2, 0.3, 0.4, 0.5]);
    assert_eq!(spec.grid_len(), 9 * 3 * 5);
    // A range that does not land on its stop ends before it.
    assert_eq!(self::spec("bb_atr", &[("bb_period", "10:20:4")]).axes()[0], [10.0, 14.0, 18.0]);
    let ma = self::spec("ma_cross", &[("ma_type", "sma, EMA")]);
    assert_eq!(ma.axes()[0], [0.0, 1.0]);
    // Typed axes (a TOML list or table, Python's lists) give the same values as text.
    let typed = SweepRequest {
        grid: Some(vec![
            ("bb_period".into(), Axis::Range { start: 10.0, stop: 50.0, step: 5.0 }),
            ("bb_std".into(), Axis::numbers(&[1.5, 2.0, 2.5])),
            ("atr_mult".into(), Axis::Range { start: 0.1, stop: 0.5, step: 0.1 }),
        ]),
        ..request("bb_atr", &[])
    };
    assert_eq!(typed.check().unwrap(), spec);
}

#[test]
fn bad_grids_are_refused_with_the_reason() {
    assert_eq!(
        err("bb_atr", "bb_perid", "10"),
        "bb_atr: unknown parameter `bb_perid` (known: bb_period, bb_std, atr_period, atr_mult; did you mean 'bb_period'?)"
    );
    assert_eq!(err("bb_atr", "bb_period", "50:10:5"), "bb_period=50:10:5: empty range: start 50 is after stop 10");
    assert_eq!(err("bb_atr", "bb_period", "10:50:0"), "bb_period=10:50:0: the step must be positive");
    assert_eq!(err("bb_atr", "bb_period", "10:50:-5"), "bb_period=10:50:-5: the step must be positive");
    assert_eq!(
        err("bb_atr", "bb_period", "10:50"),
        "bb_period=10:50: a range is start:stop:step (inclusive), e.g. 10:50:5"
    );
    assert_eq!(err("bb_atr", "bb_period", "1:5:1"), "bb_period=1: out of range: must be ≥ 2 and ≤ 100000");
    assert_eq!(err("bb_atr", "bb_period", "10:12:0.5"), "bb_period=10.5: must be a whole number");
    assert_eq!(err("bb_atr", "atr_mult", "0,1"), "atr_mult=0: out of range: must be > 0 and ≤ 100");
    assert_eq!(err("bb_atr", "bb_std", "2,2.0"), "bb_std=2,2.0: 2 is listed twice");
    assert_eq!(err("bb_atr", "bb_std", "2,,3"), "bb_std=2,,3: empty value in the list");
    assert_eq!(err("bb_atr", "bb_std", "two"), "bb_std=two: not a number (expected > 0 and ≤ 10)");
    assert!(err("bb_atr", "bb_period", "2:100000000:1").contains("at most 1000000 per parameter"));
    assert_eq!(
        err("ma_cross", "ma_type", "0:1:1"),
        "ma_type=0:1:1: a range needs numbers; list the names instead (one of sma, ema)"
    );
    // The spec as a whole.
    let ma = request("ma_cross", &[("fast", "50,60"), ("slow", "20,30")]);
    assert_eq!(
        ma.check().unwrap_err().to_string(),
        "ma_cross: no combo of the grid passes `require = \"fast < slow\"`"
    );
    let fee = SweepRequest { fee: Some(-0.001), ..request("bb_atr", &[]) };
    assert!(fee.check().unwrap_err().to_string().starts_with("fee -0.001 is outside [0, 1)"));
    let random = SweepRequest {
        random: Some(threadx_sweep::Sample { n: 10_001, seed: 1 }),
        device: Some(DeviceMode::Cpu),
        ..SweepRequest::default()
    };
    // More than the grid has: the whole grid runs, each combo once, as samplers do.
    let whole = random.check().unwrap();
    assert_eq!(
        (whole.sample(), whole.whole_grid(), whole.grid_len()),
        (None, Some(WholeGrid { asked: 10_001 }), 10_000)
    );
    assert_eq!(
        whole.whole_grid().unwrap().note(whole.grid_len()),
        "10,001 combos asked, more than the grid has (10,000): the whole grid runs, each combo once"
    );
    let search = SweepRequest {
        search: Some(threadx_sweep::SearchRequest::new(threadx_sweep::SearchMethod::Lhs, 20_000)),
        ..random.clone()
    };
    let err = search.check().unwrap_err().to_string();
    assert!(err.contains("--search and --random cannot be combined"), "{err}");
    let search = SweepRequest { random: None, ..search };
    let capped = search.check().unwrap();
    assert_eq!((capped.search().unwrap().trials, capped.whole_grid()), (10_000, Some(WholeGrid { asked: 20_000 })));
}

#[test]
fn the_default_grid_has_ten_thousand_bb_atr_combos() {
    let default = SweepRequest { device: Some(DeviceMode::Cpu), ..SweepRequest::default() };
    assert_eq!(default.check().unwrap().grid_len(), 10_000);
    for s in Strategy::builtins() {
        SweepRequest { strategy: Some(s.locator().into()), ..default.clone() }.check().unwrap();
    }
}

#[test]
fn toml_configs() {
    let spec = SweepRequest::from_toml(
        r#"
        strategy = "rsi_reversion"
        fee = 0.0005
        [grid]
        rsi_period = "7:21:7"
        rsi_low = [20, 25.5]
        atr_mult = 2
        [random]
        n = 3
        seed = 9
        "#,
    )
    .unwrap();
    let spec = SweepRequest { device: Some(DeviceMode::Cpu), ..spec }.check().unwrap();
    assert_eq!(*spec.strategy(), Strategy::parse("rsi_reversion").unwrap());
    assert_eq!(spec.costs().fee, 0.0005);
    assert_eq!(spec.axes()[0], [7.0, 14.0, 21.0]);
    assert_eq!(spec.axes()[1], [20.0, 25.5]);
    assert_eq!(spec.axes()[4], [2.0]);
    assert_eq!(spec.sample(), Some(threadx_sweep::Sample { n: 3, seed: 9 }));
    let wf = SweepRequest::from_toml("[walk_forward]\ntrain = 100\ntest = 20\n").unwrap();
    assert_eq!(wf.walk_forward, Some(WalkForward { train: 100, test: 20, step: 20 }));
    for (text, message) in [
        (
            "strategy = \"nope\"",
            "unknown strategy `nope` (known: bb_atr, ma_cross, rsi_reversion, or a rule file such as my_strategy.toml)",
        ),
        (
            "colour = 1",
            "config: line 1, column 1: unknown field `colour`, expected one of `strategy`, `grid`, `fee`, \
             `slippage`, `periods_per_year`, `chunk_size`, `random`, `search`, `walk_forward`, `overfitting`, `threads`, `device`, `max_memory`",
        ),
        ("[grid]\nbb_period = \"10:5:1\"", "bb_period=10:5:1: empty range: start 10 is after stop 5"),
        (
            "[grid]\nbb_period = true",
            "config: line 2, column 13: invalid type: boolean `true`, expected a list, a range or a value",
        ),
        ("[random]\nseed = 1", "config: line 1, column 1: missing field `n`"),
        ("[search]\nmethod = \"tpe\"", "config: line 1, column 1: missing field `trials`"),
        (
            "[search]\nmethod = \"grid\"\ntrials = 5",
            "config: line 2, column 10: unknown search method `grid` (known: random, sobol, lhs, tpe)",
        ),
        (
            "[search]\nmethod = \"tpe\"\ntrials = 1\nconstraints = [\"trades ~ 3\"]",
            "constraint `trades ~ 3`: expected METRIC OP VALUE with OP one of >=, >, <=, < (e.g. `trades >= 30`)",
        ),
        (
            "[search]\nmethod = \"tpe\"\ntrials = 1\nby = \"profit\"",
            "unknown metric `profit` (known: total_return, trades, closed_trades, win_rate, max_drawdown, sharpe, sharpe_annual, exposure, cagr, volatility, sortino, calmar, profit_factor, expectancy, sqn; a portfolio's: turnover, mean_positions)",
        ),
        (
            "[search]\nmethod = \"tpe\"\ntrials = 1\n[random]\nn = 1",
            "--search and --random cannot be combined (--random N is --search random --trials N)",
        ),
        ("grid = 3", "config: line 1, column 8: invalid type: integer `3`, expected a map"),
        ("max_memory = \"8Q\"", "config: line 1, column 14: `8Q`: use a number with k, M, G or T, e.g. 8G"),
        (
            "[walk_forward]\ntrain = 0\ntest = 5",
            "config: line 1, column 1: walk_forward train, test and step must be ≥ 1",
        ),
    ] {
        let refused =
            SweepRequest::from_toml(text).and_then(|r| SweepRequest { device: Some(DeviceMode::Cpu), ..r }.check());
        assert_eq!(refused.unwrap_err().to_string(), message, "{text}");
    }
    assert!(SweepRequest::from_toml("[grid").unwrap_err().to_string().starts_with("config: line 1, column 6: "));
}

#[test]
fn walk_forward_windows_and_shards_parse() {
    let wf = WalkForward::parse("train=100,test=20").unwrap();
    assert_eq!(wf.step, 20);
    assert_eq!(wf.windows(160), [(0, 100, 120), (20, 120, 140), (40, 140, 160)]);
    assert_eq!(
        WalkForward::parse("train=100,test=20,step=50").unwrap().windows(230),
        [(0, 100, 120), (50, 150, 170), (100, 200, 220)]
    );
    assert!(
        WalkForward::parse("train=100").unwrap_err().to_string().contains("train=BARS and test=BARS are both needed")
    );
    assert!(
        WalkForward::parse("train=0,test=5")
            .unwrap_err()
            .to_string()
            .contains("train must be a positive whole number of bars, got `0`")
    );
    assert!(WalkForward::parse("train=10,test=5,size=3").unwrap_err().to_string().contains("unknown key `size`"));
    // The key is named before its value is read: an unknown key with a bad value is unknown.
    assert!(WalkForward::parse("train=10,test=5,folds=0").unwrap_err().to_string().contains("unknown key `folds`"));
    assert!(WalkForward::parse("train=10,test=5,train=20").unwrap_err().to_string().contains("train is given twice"));
    // A request's table (Python's dict, a config's [walk_forward]) names what it lacks or
    // what it cannot take, instead of serde's "did not match any variant".
    let table = |json: &str| serde_json::from_str::<WalkForward>(json).map_err(|e| e.to_string());
    assert_eq!(table(r#"{"train": 100, "test": 20}"#), Ok(WalkForward { train: 100, test: 20, step: 20 }));
    assert_eq!(table(r#""train=100,test=20,step=5""#), Ok(WalkForward { train: 100, test: 20, step: 5 }));
    assert!(table(r#"{"train": 100}"#).unwrap_err().contains("train and test are both needed"));
    for bad in [r#"{"train": 100, "test": 20, "folds": 3}"#, r#"{"train": -1, "test": 20}"#, "[100, 20]"] {
        assert!(table(bad).unwrap_err().contains("or a table of train, test[, step]"), "{bad}");
    }
    assert!(table(r#"{"train": 0, "test": 20}"#).unwrap_err().contains("must be ≥ 1"));
    assert_eq!(Shard::parse("2/4").unwrap(), Shard { index: 2, count: 4 });
    for bad in ["4/4", "1/0", "x/2", "3"] {
        assert!(Shard::parse(bad).is_err(), "{bad}");
    }
}
