//! Strategies written only as rule files (examples/strategies: a Donchian breakout, a
//! trend-filtered RSI with a time exit, a MACD cross with a take-profit and a stop),
//! checked against plain per-bar loops written here from the same definitions, on the CPU
//! and on every adapter; and the rule language's refusals as a user sees them.

#![allow(clippy::print_stdout)] // What was compared is printed for the record (--nocapture).

use crate::common;

use common::{
    Rules, Trades, assert_close_metrics, closed_returns, metrics_of_equity, one_test_on_the_gpus, plain_loop,
};
use threadx_backtest::{
    BarTables, ComboPlan, ExitReason, GpuBacktester, SignalBook, SizeType, SizingRequest, Strategy, simulate_cpu,
    simulate_detailed,
};
use threadx_dispatch::DeviceMode;
use threadx_dispatch::testing::{adapters, dispatcher_in};
use threadx_indicators::{Indicator, IndicatorBank, Ohlcv};

use common::COSTS;

fn example(name: &str) -> Strategy {
    let path = format!("{}/../../examples/strategies/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    Strategy::load(&path).unwrap()
}

/// The max (or min) of `x[t - n ..= t - 1]`, the n bars before t; NaN before bar n.
fn channel(x: &[f64], n: usize, t: usize, max: bool) -> f64 {
    if t < n {
        return f64::NAN;
    }
    let window = &x[t - n..t];
    if max { window.iter().copied().fold(f64::MIN, f64::max) } else { window.iter().copied().fold(f64::MAX, f64::min) }
}

/// Every indicator the plain rules read, from the bank (the values the indicator tests
/// check against TA-Lib).
struct Series {
    data: Ohlcv,
    dir: tempfile::TempDir,
}

impl Series {
    fn new(source: &str) -> Self {
        Self { data: Ohlcv::load(source).unwrap(), dir: tempfile::tempdir().unwrap() }
    }

    fn get(&self, indicator: Indicator, output: usize) -> Vec<f64> {
        let dispatcher = dispatcher_in(self.dir.path(), DeviceMode::Cpu);
        IndicatorBank::new(&self.data, &dispatcher).get(&indicator).unwrap().output(output).to_vec()
    }

    fn book(&self, strategy: &Strategy, axes: &[Vec<f64>]) -> SignalBook {
        let dispatcher = dispatcher_in(self.dir.path(), DeviceMode::Cpu);
        SignalBook::build(&IndicatorBank::new(&self.data, &dispatcher), strategy, axes).unwrap()
    }
}

/// The plain rules of each example file, written here from its definition.
fn plain_rules<'a>(name: &str, s: &'a Series, v: &[f64], atr14: &'a [f64]) -> Rules<'a> {
    let close = s.data.close();
    match name {
        "donchian" => {
            let (n, m) = (v[0] as usize, v[1]);
            let (high, low) = (s.data.high(), s.data.low());
            Rules {
                warmup: n.max(14),
                entry: Box::new(move |t| close[t] > channel(high, n, t, true)),
                exit: Box::new(move |t| close[t] < channel(low, n, t, false)),
                stop: Some(Box::new(move |e| close[e] - m * atr14[e])),
                take_profit: None,
                max_bars: 0,
            }
        }
        "trend_rsi" => {
            let (trend, period, buy, sell, hold) = (v[0] as usize, v[1] as usize, v[2], v[3], v[4] as usize);
            let sma = kept(s, Indicator::Sma { period: trend }, 0);
            let rsi = kept(s, Indicator::Rsi { period }, 0);
            Rules {
                warmup: (trend - 1).max(period),
                entry: Box::new(move |t| close[t] > sma[t] && rsi[t] < buy),
                exit: Box::new(move |t| rsi[t] > sell),
                stop: None,
                take_profit: None,
                max_bars: hold,
            }
        }
        "macd_tp" => {
            let (fast, slow, signal) = (v[0] as usize, v[1] as usize, v[2] as usize);
            let (tp, sl) = (v[3], v[4]);
            let macd = Indicator::Macd { fast, slow, signal };
            let (line, sig) = (kept(s, macd, 0), kept(s, macd, 1));
            let (line2, sig2) = (line, sig);
            Rules {
                warmup: (slow + signal - 1).max(14),
                entry: Box::new(move |t| t >= 1 && line[t] > sig[t] && line[t - 1] <= sig[t - 1]),
                exit: Box::new(move |t| t >= 1 && line2[t] < sig2[t] && line2[t - 1] >= sig2[t - 1]),
                stop: Some(Box::new(move |e| close[e] - sl * atr14[e])),
                take_profit: Some(Box::new(move |e| close[e] + tp * atr14[e])),
                max_bars: 0,
            }
        }
        other => panic!("no plain rules for {other}"),
    }
}

/// An indicator's values for the rest of the test process (the rules' closures keep them).
fn kept(s: &Series, indicator: Indicator, output: usize) -> &'static [f64] {
    Vec::leak(s.get(indicator, output))
}

/// The examples with a small grid each.
fn cases() -> Vec<(&'static str, Vec<Vec<f64>>)> {
    vec![
        ("donchian", vec![vec![5.0, 20.0, 55.0], vec![1.0, 2.5]]),
        ("trend_rsi", vec![vec![50.0, 200.0], vec![7.0, 14.0], vec![30.0, 40.0], vec![55.0, 70.0], vec![5.0, 40.0]]),
        ("macd_tp", vec![vec![8.0, 12.0], vec![21.0, 26.0], vec![5.0, 9.0], vec![1.5, 3.0], vec![1.0, 2.0]]),
    ]
}

#[test]
fn rule_files_trade_as_plain_loops_of_their_definitions() {
    for source in ["synthetic:bars=4000,seed=31", "synthetic:bars=4000,seed=5,market=fx"] {
        let series = Series::new(source);
        let atr14 = kept(&series, Indicator::Atr { period: 14 }, 0);
        for (name, axes) in cases() {
            let strategy = example(name);
            let book = series.book(&strategy, &axes);
            let tables = BarTables::new(&book, COSTS);
            let plans: Vec<ComboPlan> = (0..book.grid_len()).map(|c| book.combo_plan(c)).collect();
            let totals = simulate_cpu(&book, &tables, &plans).totals;
            let mut reasons = std::collections::BTreeSet::new();
            for combo in 0..book.grid_len() {
                let values = book.combo_values(combo);
                let rules = plain_rules(name, &series, &values, atr14);
                let (trades, equity) = plain_loop(series.data.close(), &rules);
                let plan = &plans[combo as usize];
                assert_eq!(plan.warmup as usize, rules.warmup, "{name} {values:?}: warm-up");
                let report = simulate_detailed(&book, plan, COSTS);
                let got: Trades = report.trades.iter().map(|t| (t.entry_bar, t.exit_bar, t.reason)).collect();
                assert_eq!(got, trades, "{source} {name} {}", strategy.describe(&values));
                reasons.extend(trades.iter().map(|t| t.2.name()));
                let wins =
                    report.trades.iter().filter(|t| t.reason != ExitReason::OpenAtEnd && t.return_ > 0.0).count();
                let n = series.data.len();
                let held: usize =
                    trades.iter().map(|&(e, x, r)| if r == ExitReason::OpenAtEnd { n - e } else { x - e }).sum();
                let closed = closed_returns(&equity, &trades);
                let want =
                    metrics_of_equity(&equity, (trades.len() as u32, wins as u32, held), &closed, book.bars_per_year());
                let m = totals[combo as usize].metrics(book.bars(), book.bars_per_year());
                assert_close_metrics(&m, &want, 1e-9, &format!("{name} {values:?}"));
            }
            let trades: u32 = totals.iter().map(|t| t.trades).sum();
            println!("{source} {name}: {} combos, {trades} trades, exits {reasons:?}", plans.len());
            assert!(trades as usize > 5 * plans.len(), "{name} trades ({trades})");
            let expected: &[&str] = match name {
                "donchian" => &["signal", "stop"],
                "trend_rsi" => &["max_bars", "signal"],
                _ => &["signal", "stop", "take_profit"],
            };
            for reason in expected {
                assert!(reasons.contains(reason), "{source} {name}: some exit by {reason} ({reasons:?})");
            }
        }
    }
}

#[test]
fn gpu_totals_of_rule_files_are_the_cpus_bits_on_every_adapter() {
    let _gpus = one_test_on_the_gpus();
    for source in ["synthetic:bars=12000,seed=8", "synthetic:bars=6000,seed=2,market=fx"] {
        let series = Series::new(source);
        for (name, axes) in cases() {
            let book = series.book(&example(name), &axes);
            let tables = BarTables::new(&book, COSTS);
            let plans: Vec<ComboPlan> = (0..book.grid_len()).map(|c| book.combo_plan(c)).collect();
            let cpu = simulate_cpu(&book, &tables, &plans).totals;
            for ctx in adapters() {
                let gpu = GpuBacktester::new(ctx.clone(), &book, &tables)
                    .unwrap()
                    .run(&book, &tables, &plans)
                    .unwrap()
                    .totals;
                println!("{source} {name}: {} combos on {}", plans.len(), ctx.report().label());
                assert_eq!(cpu, gpu, "{source} {name} on {}", ctx.report().label());
            }
        }
    }
}

/// The trades of `combo` of `book` closed before bar `k − 1`: what bars from `k` on must
/// not change.
fn closed_before(book: &SignalBook, combo: u64, k: usize) -> Trades {
    simulate_detailed(book, &book.combo_plan(combo), COSTS)
        .trades
        .iter()
        .filter(|t| t.reason != ExitReason::OpenAtEnd && t.exit_bar < k - 1)
        .map(|t| (t.entry_bar, t.exit_bar, t.reason))
        .collect()
}

#[test]
fn no_decision_reads_a_later_bar() {
    // Bars after k must not change a trade closed by bar k: the rules only look back.
    let full = Series::new("synthetic:bars=3000,seed=12");
    let k = 1800;
    let cut = Series { data: full.data.slice(0..k), dir: tempfile::tempdir().unwrap() };
    for (name, axes) in cases() {
        let strategy = example(name);
        let (a, b) = (full.book(&strategy, &axes), cut.book(&strategy, &axes));
        for combo in 0..a.grid_len() {
            assert_eq!(closed_before(&a, combo, k), closed_before(&b, combo, k), "{name} combo {combo}");
        }
    }
}

#[test]
fn mistakes_in_a_rule_file_point_at_the_text() {
    let base =
        std::fs::read_to_string(format!("{}/../../examples/strategies/donchian.toml", env!("CARGO_MANIFEST_DIR")))
            .unwrap();
    let err = |from: &str, to: &str| {
        assert!(base.contains(from), "{from}");
        Strategy::from_toml(&base.replacen(from, to, 1), "donchian.toml").unwrap_err().to_string()
    };
    let typo = err("atr(14)", "atrr(14)");
    assert!(
        typo.starts_with("donchian.toml:14:22: rule `stop`: unknown function 'atrr' (did you mean 'atr'?)"),
        "{typo}"
    );
    assert!(typo.ends_with("14 | stop  = \"close - m * atrr(14)\"\n   |                      ^^^^"), "{typo}");
    let future = err("highest(high, n)[1]", "highest(high, n)[-1]");
    assert!(future.contains("rule `entry`: `highest(high, n)[-1]` looks 1 bar(s) into the future"), "{future}");
    assert!(future.contains("^^"), "{future}");
    assert!(err("kind = \"float\"", "kind = \"real\"").contains("unknown kind `real`"));
    assert!(err("n = {", "m2 = {").contains("unknown name 'n'"));
    // A lookback whose length is a parameter is refused at the value that reaches ahead.
    let strategy =
        Strategy::from_toml(&base.replacen("highest(high, n)[1]", "highest(high, n)[m - 2]", 1), "x.toml").unwrap();
    let e = strategy.params(&[("m", "1")]).unwrap_err().to_string();
    // At its text in the file, with the values that made it.
    assert_eq!(
        e,
        "x.toml:12:35: rule `entry` with n=20, m=1: `highest(high, n)[m - 2]` with m - 2=-1 does not look back a whole number of bars (lookahead refused)\n   |\n12 | entry = \"close > highest(high, n)[m - 2]\"\n   |                                   ^^^^^"
    );
    assert!(strategy.params(&[("m", "3")]).is_ok());
}

#[test]
fn a_sizing_table_is_read_and_its_mistakes_point_at_the_text() {
    let base =
        std::fs::read_to_string(format!("{}/../../examples/strategies/donchian.toml", env!("CARGO_MANIFEST_DIR")))
            .unwrap();
    let lines = base.lines().count();
    let with = |table: &str| Strategy::from_toml(&format!("{base}[sizing]\n{table}\n"), "d.toml");
    let sized = with("size = 250\nsize_type = \"value\"\nlot = 1\nmin_size = 2\ninit_cash = 10_000\nmax_positions = 4")
        .unwrap();
    let request = sized.sizing();
    assert_eq!(
        (request.size, request.size_type, request.lot, request.min_size, request.init_cash, request.max_positions),
        (Some(250.0), Some(SizeType::Value), Some(1.0), Some(2.0), Some(10_000.0), Some(4))
    );
    assert!(!request.is_all_in());
    assert!(sized.require_all_in().unwrap_err().to_string().starts_with("d.toml: its [sizing] sizes each entry"));
    // Without a table, or all in outright: nothing asked, a single run's strategy.
    assert_eq!(*Strategy::from_toml(&base, "d.toml").unwrap().sizing(), SizingRequest::default());
    assert!(with("size = 1\ninit_cash = 100").unwrap().require_all_in().is_ok());
    // Each mistake at its line and column, with the carets under it.
    let at = |table: &str| with(table).unwrap_err().to_string();
    let line = lines + 2;
    let big = at("size = 1.5");
    assert!(
        big.starts_with(&format!(
            "d.toml:{line}:8: [sizing] `size`: a percent size is a fraction of the account in (0, 1] (e.g. 0.2)"
        )),
        "{big}"
    );
    assert!(big.ends_with(&format!("{line} | size = 1.5\n   |        ^^^")), "{big}");
    let kind = at("size_type = \"shares\"");
    assert!(
        kind.starts_with(&format!("d.toml:{line}:13: [sizing] `size_type` is one of percent, value, targetpercent")),
        "{kind}"
    );
    assert!(at("size_type = \"valeu\"").contains("(did you mean 'value'?)"));
    assert!(at("max_positions = 0").contains("[sizing] `max_positions` is at least 1"));
    assert!(at("lot = -1").contains(&format!("d.toml:{line}:7: [sizing] `lot`: a lot step is a positive number")));
    assert!(at("init_cash = 0").contains("[sizing] `init_cash`: the starting cash must be a positive number"));
    assert!(
        at("leverage = 0").contains(&format!("d.toml:{line}:12: [sizing] `leverage`: a leverage cap is a positive"))
    );
    assert_eq!(with("leverage = 2").unwrap().sizing().leverage, Some(2.0));
    assert!(with("leverage = 1").unwrap().require_all_in().is_ok(), "a cap of 1 is the cash alone");
    // A size may be a float parameter's name: each parameter set's value is its size.
    let swept = Strategy::from_toml(&format!("{base}[sizing]\nsize = \"m\"\n"), "d.toml").unwrap();
    assert_eq!((swept.sizing().size, swept.sizing().size_param), (None, Some(1)));
    assert!(swept.require_all_in().is_err());
    assert!(at("size = \"n\"").contains("[sizing] `size`: parameter `n` must be of kind \"float\""));
    let typo = at("size = \"mm\"");
    assert!(
        typo.contains(&format!("d.toml:{line}:8: [sizing] `size` is a number or a float parameter's name, not `mm`")),
        "{typo}"
    );
    let unknown = at("leverge = 2");
    assert!(unknown.contains(&format!("d.toml:{line}:1: unknown field `leverge`")), "{unknown}");
}

#[test]
fn built_in_strategies_are_rule_files_that_read_back_the_same() {
    for s in Strategy::builtins() {
        assert!(s.is_builtin());
        let again = Strategy::from_toml(s.source(), "copy.toml").unwrap();
        assert_eq!(again.schema(), s.schema());
        assert_eq!(again.default_axes(), s.default_axes());
        assert!(!again.is_builtin());
    }
    let bb = Strategy::parse("bb_atr").unwrap();
    assert_eq!(bb.depends_on(threadx_backtest::RuleKind::Exit), ["bb_period"]);
    assert_eq!(bb.depends_on(threadx_backtest::RuleKind::Entry), ["bb_period", "bb_std"]);
    assert_eq!(bb.depends_on(threadx_backtest::RuleKind::Stop), ["atr_period", "atr_mult"]);
}

/// A strategy written with the indicators users reach for first (stochastic, Williams'
/// %R, CCI, OBV, ADX and DI, VWAP, Keltner, an average of the volume and of the RSI),
/// both sides: every
/// adapter gives the CPU's totals, and no decision reads a later bar.
#[test]
fn a_strategy_of_the_new_indicators_runs_on_every_device_without_lookahead() {
    let _gpus = one_test_on_the_gpus();
    let source = r#"
name = "oscillators"
[params]
k = { kind = "int", default = 14, min = 2, max = 100 }
level = { kind = "float", default = 100, min = 0, max = 300 }
[rules]
entry = "crosses_above(stoch_k(k, 3, 3), stoch_d(k, 3, 3)) and cci(20) < -level and volume > sma(volume, 20)"
exit = "willr(k) > -20 or close > keltner_upper(20, 2) or (adx(14) > 40 and minus_di(14) > plus_di(14))"
short_entry = "crosses_below(stoch_k(k, 3, 3), stoch_d(k, 3, 3)) and cci(20) > level and ema(rsi(14), 5) > 60"
short_exit = "willr(k) < -80 or obv() < sma(obv(), 50) or close < vwap() - 2 * atr(14)"
stop = "keltner_lower(20, 3)"
"#;
    let strategy = Strategy::from_toml(source, "oscillators.toml").unwrap();
    let axes = [vec![5.0, 14.0], vec![50.0, 100.0]];
    let full = Series::new("synthetic:bars=6000,seed=3");
    let book = full.book(&strategy, &axes);
    let tables = BarTables::new(&book, COSTS);
    let plans: Vec<ComboPlan> = (0..book.grid_len()).map(|c| book.combo_plan(c)).collect();
    let cpu = simulate_cpu(&book, &tables, &plans).totals;
    assert!(cpu.iter().all(|t| t.trades > 5), "{cpu:?}");
    for ctx in adapters() {
        let gpu = GpuBacktester::new(ctx.clone(), &book, &tables).unwrap().run(&book, &tables, &plans).unwrap().totals;
        assert_eq!(cpu, gpu, "on {}", ctx.report().label());
    }
    let k = 4000;
    let cut = Series { data: full.data.slice(0..k), dir: tempfile::tempdir().unwrap() };
    let short = cut.book(&strategy, &axes);
    for combo in 0..book.grid_len() {
        assert_eq!(closed_before(&book, combo, k), closed_before(&short, combo, k), "combo {combo}");
    }
}
