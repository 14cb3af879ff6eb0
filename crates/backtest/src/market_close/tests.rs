//! [`super`], the twin, against the market simulation: every total and block snapshot the
//! same bits, on user signals (longs, shorts and reversals; fraction stops, take-profits,
//! fraction trails, price-level stops), on rule files (ATR stops and take-profits on both
//! sides, ATR trails, max_bars) and on every example rule file filled at the close, with
//! stops against closes and inside bars with gaps, fees and slippage.

use super::*;
use crate::blocks::BlockCuts;
use crate::costs::{Costs, Fills};
use crate::trade_parts::Nothing;
use crate::{Strategy, UserSignals};
use ndarray::Array2;
use proptest::prelude::*;
use threadx_dispatch::DeviceMode;
use threadx_dispatch::testing::dispatcher_in;
use threadx_indicators::{IndicatorBank, Ohlcv};
use threadx_stats::SeededRng;

/// Random bars with gaps (opens away from the last close), moves of a few percent.
fn random_bars(n: usize, rng: &mut SeededRng) -> Ohlcv {
    let (mut open, mut high, mut low, mut close) = (vec![], vec![], vec![], vec![]);
    let mut c = 100.0_f64;
    for _ in 0..n {
        let o = c * (1.0 + 0.02 * (rng.uniform() - 0.5));
        c = o * (1.0 + 0.04 * (rng.uniform() - 0.5));
        open.push(o);
        close.push(c);
        high.push(o.max(c) * (1.0 + 0.01 * rng.uniform()));
        low.push(o.min(c) * (1.0 - 0.01 * rng.uniform()));
    }
    let ts = (0..n as i64).map(|i| 1_700_000_000_000 + i * 900_000).collect();
    Ohlcv::new("random", ts, open, high, low, close, vec![1.0; n]).unwrap()
}

/// Every plan of `book`: the twin's totals and snapshots against the market
/// simulation's, with and without blocks.
fn assert_twins(book: &SignalBook, costs: Costs, blocks: u32) -> usize {
    let cuts = BlockCuts::new(book.bars(), blocks).unwrap();
    let tables = BarTables::new(book, costs);
    let mut compared = 0;
    for combo in 0..book.grid_len() {
        let plan = book.combo_plan(combo);
        assert!(runs_at_close(book));
        let (mut fast, mut market) = (vec![0u128; cuts.snapshot_len()], vec![0u128; cuts.snapshot_len()]);
        let a = simulate_at_close(book, &tables, &plan, Some(&mut Snapshots::new(&cuts, &mut fast)));
        let b = crate::market::simulate_market(
            book,
            &tables,
            &plan,
            Some(Snapshots::new(&cuts, &mut market)),
            &mut Nothing,
        );
        assert_eq!(a, b, "combo {combo}: {plan:?}");
        assert_eq!(fast, market, "combo {combo}: block snapshots");
        assert_eq!(simulate_at_close(book, &tables, &plan, None), a, "combo {combo} without blocks");
        compared += usize::from(a.trades > 0);
    }
    compared
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_twin_is_the_market_simulation_on_signals(
        seed in any::<u64>(),
        n in 64usize..1500,
        intrabar in any::<bool>(),
        sides in 0u8..3,
        stop_kind in 0u8..4,
        take_profit in any::<bool>(),
        fee in prop_oneof![Just(0.0), 0.0..0.01],
        slippage in prop_oneof![Just(0.0), 0.0..0.01],
        blocks in prop_oneof![Just(2u32), Just(4), Just(16)],
    ) {
        let mut rng = SeededRng::new(seed);
        let data = random_bars(n, &mut rng);
        let columns = 4;
        let mut draw = |p: f64| Array2::from_shape_fn((n, columns), |_| rng.uniform() < p);
        let (entries, exits) = (draw(0.15), draw(0.05));
        // Shorts (1: leaving only at stops and reversals; 2: with their own exits).
        let (short_entries, short_exits) = (draw(0.1), draw(0.05));
        // Fractions of a few percent, with some NaN, 0 and +inf (none) among them.
        let fraction = |rng: &mut SeededRng| match (rng.uniform() * 20.0) as u32 {
            0 => f64::NAN,
            1 => 0.0,
            2 => f64::INFINITY,
            _ => 0.002 + 0.04 * rng.uniform(),
        };
        let sl = Array2::from_shape_fn((n, columns), |_| fraction(&mut rng));
        let tp = Array2::from_shape_fn((n, columns), |_| fraction(&mut rng));
        let closes = data.close().to_vec();
        let levels = Array2::from_shape_fn((n, columns), |(t, _)| closes[t] * (0.9 + 0.09 * rng.uniform()));
        let mut signals = UserSignals::long(entries.view(), exits.view());
        if sides > 0 {
            signals.short_entries = Some(short_entries.view());
        }
        if sides > 1 {
            signals.short_exits = Some(short_exits.view());
        }
        match stop_kind {
            1 => signals.sl_stop = Some(sl.view()),
            2 => (signals.sl_stop, signals.sl_trail) = (Some(sl.view()), &[true]),
            3 => signals.stop = Some(levels.view()),
            _ => {}
        }
        if take_profit {
            signals.tp_stop = Some(tp.view());
        }
        signals.fills = Fills { intrabar, ..Fills::default() };
        let book = SignalBook::from_signals(&data, signals).unwrap();
        prop_assume!(!book.is_plain());
        let traded = assert_twins(&book, Costs { fee, slippage }, blocks);
        prop_assert!(traded == columns, "{traded} of {columns} columns traded");
    }
}

#[test]
fn the_twin_is_the_market_simulation_on_a_million_bars() {
    let bb_atr = Strategy::parse("bb_atr").unwrap().source().to_owned();
    let data = Ohlcv::load("synthetic:bars=1000000,seed=5").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dispatcher = dispatcher_in(dir.path(), DeviceMode::Cpu);
    let bank = IndicatorBank::new(&data, &dispatcher);
    for extra in [
        "trail = \"atr_mult * atr(atr_period)\"\nintrabar = true\ntake_profit = \"close + 3 * atr(atr_period)\"\n",
        concat!(
            "short_entry = \"close > bbands_upper(bb_period, bb_std)\"\n",
            "short_exit = \"close < bbands_middle(bb_period)\"\n",
            "short_stop = \"close + atr_mult * atr(atr_period)\"\n",
            "trail = \"atr_mult * atr(atr_period)\"\nintrabar = true\n",
        ),
    ] {
        let strategy = Strategy::from_toml(&format!("{bb_atr}{extra}"), "bb_atr_market.toml").unwrap();
        let book =
            SignalBook::build(&bank, &strategy, &[vec![20.0, 50.0], vec![2.0], vec![14.0], vec![1.0, 2.5]]).unwrap();
        assert_eq!(assert_twins(&book, Costs { fee: 0.001, slippage: 0.0002 }, 16), 4, "{extra}");
    }
}

#[test]
fn the_twin_is_the_market_simulation_on_rule_files() {
    let bb_atr = Strategy::parse("bb_atr").unwrap().source().to_owned();
    let extras = [
        "trail = \"atr_mult * atr(atr_period)\"\nintrabar = true\n",
        "trail = \"atr_mult * atr(atr_period)\"\n",
        "trail = \"atr_mult * atr(atr_period)\"\nintrabar = true\ntake_profit = \"close + 2 * atr(atr_period)\"\nmax_bars = \"bb_period\"\n",
        "take_profit = \"close + 1.5 * atr(atr_period)\"\nintrabar = true\n",
        "trail = \"0.5 * atr(atr_period)\"\ntake_profit = \"close * 1.01\"\n",
        // Both sides: reversals, each side's stop and take-profit, trails, max_bars.
        concat!(
            "short_entry = \"close > bbands_upper(bb_period, bb_std)\"\n",
            "short_exit = \"close < bbands_middle(bb_period)\"\n",
            "short_stop = \"close + atr_mult * atr(atr_period)\"\n",
        ),
        concat!(
            "short_entry = \"close > bbands_upper(bb_period, bb_std)\"\n",
            "short_stop = \"close + atr_mult * atr(atr_period)\"\n",
            "short_take_profit = \"close - 2 * atr(atr_period)\"\n",
            "take_profit = \"close + 2 * atr(atr_period)\"\nintrabar = true\n",
        ),
        concat!(
            "short_entry = \"close > bbands_upper(bb_period, bb_std)\"\n",
            "short_exit = \"close < bbands_middle(bb_period)\"\n",
            "trail = \"atr_mult * atr(atr_period)\"\nmax_bars = \"bb_period\"\n",
        ),
        concat!(
            "short_entry = \"close > bbands_upper(bb_period, bb_std)\"\n",
            "short_stop = \"close * 1.02\"\n",
            "trail = \"atr_mult * atr(atr_period)\"\nintrabar = true\nmax_bars = \"bb_period\"\n",
        ),
    ];
    let axes = [vec![10.0, 20.0], vec![1.5, 2.0], vec![7.0, 14.0], vec![0.5, 1.0, 3.0]];
    let dir = tempfile::tempdir().unwrap();
    let dispatcher = dispatcher_in(dir.path(), DeviceMode::Cpu);
    let mut rng = SeededRng::new(7);
    for (k, extra) in extras.iter().enumerate() {
        let data = random_bars(5000 + 700 * k, &mut rng);
        let bank = IndicatorBank::new(&data, &dispatcher);
        let strategy = Strategy::from_toml(&format!("{bb_atr}{extra}"), "bb_atr_market.toml").unwrap();
        let book = SignalBook::build(&bank, &strategy, &axes).unwrap();
        assert!(!book.is_plain(), "{extra}");
        let traded = assert_twins(&book, Costs { fee: 0.001, slippage: 0.0005 }, 16);
        assert_eq!(traded as u64, book.grid_len(), "{extra}");
    }
}

#[test]
fn the_twin_is_the_market_simulation_on_every_example_filled_at_the_close() {
    let dir = tempfile::tempdir().unwrap();
    let dispatcher = dispatcher_in(dir.path(), DeviceMode::Cpu);
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/strategies");
    let mut rng = SeededRng::new(11);
    let data = random_bars(6000, &mut rng);
    let bank = IndicatorBank::new(&data, &dispatcher);
    let mut compared = 0;
    for entry in std::fs::read_dir(examples).unwrap() {
        let path = entry.unwrap().path();
        let strategy = Strategy::load(path.to_str().unwrap()).unwrap();
        // Each parameter's grid's ends.
        let axes: Vec<Vec<f64>> = strategy.default_axes().iter().map(|a| vec![a[0], a[a.len() - 1]]).collect();
        let book = SignalBook::build(&bank, &strategy, &axes).unwrap();
        // Plain books too: the market rules trade every book (sweeps run those plainly).
        if !runs_at_close(&book) {
            continue;
        }
        let traded = assert_twins(&book, Costs { fee: 0.0005, slippage: 0.0003 }, 4);
        assert!(traded > 0, "{}", path.display());
        compared += 1;
    }
    // Every example but breakout_next_open, which fills at the next open.
    assert_eq!(compared, 5);
}
