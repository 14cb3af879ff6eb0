//! The whole-backtest kernel at any data length: it runs the bars in stretches of at most
//! `MAX_LOOP_STEPS` (lavapipe silently ends a kernel's loops after 65,535 iterations), and
//! must give the CPU's totals bit for bit on every adapter at lengths around every bound
//! (a bit-row word, a stretch, the driver's limit) and on two million bars for every
//! built-in strategy and a rule file, with the block statistics recorded as well; with
//! slippage and fraction stops too; and the market kernel on two million bars of every market book.

#![allow(clippy::print_stdout)] // What was compared is printed for the record (--nocapture).

use crate::common;

use common::{COSTS, all_plans, cpu_book, one_test_on_the_gpus};
use ndarray::Array2;
use proptest::prelude::*;
use threadx_backtest::{
    Backtester, BarTables, BatchTotals, BlockCuts, Costs, GpuBacktester, SignalBook, Strategy, UserSignals,
    simulate_cpu,
};
use threadx_dispatch::MAX_LOOP_STEPS;
use threadx_dispatch::testing::adapters;
use threadx_indicators::Ohlcv;
use threadx_stats::SeededRng;

/// Compares the GPU's totals and block statistics with the CPU's on every adapter; `what`
/// names the case.
fn assert_gpu_matches(what: &str, book: &SignalBook, tables: &BarTables, batch: &BatchTotals) {
    let _gpus = one_test_on_the_gpus();
    let plans = all_plans(book);
    let cpu = &batch.totals;
    for ctx in adapters() {
        let run = GpuBacktester::new(ctx.clone(), book, tables).unwrap().run(book, tables, &plans).unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&run.blocks), bits(&batch.blocks), "{what} on {}: blocks differ", ctx.report().label());
        let gpu = run.totals;
        let first = cpu.iter().zip(&gpu).position(|(c, g)| c != g);
        assert_eq!(
            first,
            None,
            "{what} on {}: combo {first:?} differs: {:?}",
            ctx.report().label(),
            first.map(|i| (cpu[i], gpu[i]))
        );
    }
}

/// Signal columns that make the kernel loop as much as it can and hold trades across
/// every stretch boundary: an entry and an exit on every bar (one loop step per bar), one
/// trade held from the first bar to the end, random sparse and dense signals, and random
/// stop levels.
fn signal_book(data: &Ohlcv, seed: u64) -> SignalBook {
    let n = data.len();
    let columns = 6;
    let mut rng = SeededRng::new(seed);
    let mut entries = Array2::from_elem((n, columns), false);
    let mut exits = Array2::from_elem((n, columns), false);
    let mut stop = Array2::from_elem((n, columns), f64::NAN);
    for t in 0..n {
        entries[[t, 0]] = true;
        exits[[t, 0]] = true;
        entries[[t, 1]] = t == 0;
        for c in 2..columns {
            let every = [3.0, 40.0, 2_000.0, 50_000.0][c - 2];
            entries[[t, c]] = rng.uniform() * every < 1.0;
            exits[[t, c]] = rng.uniform() * every < 1.0;
            stop[[t, c]] = data.close()[t] * (1.0 - 0.05 * rng.uniform());
        }
    }
    SignalBook::from_signals(
        data,
        UserSignals { stop: Some(stop.view()), ..UserSignals::long(entries.view(), exits.view()) },
    )
    .unwrap()
}

/// The lengths worth testing: a bit-row word, a stretch and lavapipe's loop limit.
const BOUNDS: [usize; 5] = [32, MAX_LOOP_STEPS as usize, 65_535, 2 * MAX_LOOP_STEPS as usize, 3 * 65_535];

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn gpu_totals_are_the_cpus_bits_at_lengths_around_every_bound(
        bound in prop::sample::select(BOUNDS.to_vec()),
        offset in -3i64..=3,
        seed in 0u64..1_000,
    ) {
        let n = (bound as i64 + offset).max(2) as usize;
        let data = Ohlcv::load(&format!("synthetic:bars={n},seed={seed}")).unwrap();
        let book = signal_book(&data, seed);
        // Block starts recorded too, in blocks from one bar long to thousands.
        let blocks = BlockCuts::new(n, [2, 16, 64][(seed % 3) as usize]).ok();
        let tables = BarTables::new(&book, COSTS).with_blocks(blocks);
        let batch = simulate_cpu(&book, &tables, &all_plans(&book));
        let cpu = &batch.totals;
        // The every-bar column trades about n / 2 times: the loop really ran every bar.
        prop_assert!(cpu[0].trades as usize >= n / 2 - 1, "{} trades on {n} bars", cpu[0].trades);
        assert_gpu_matches(&format!("{n} bars, {blocks:?}"), &book, &tables, &batch);
    }
}

#[test]
fn gpu_totals_are_the_cpus_bits_on_two_million_bars_for_every_strategy() {
    let bars = 2_000_000;
    let data = Ohlcv::load(&format!("synthetic:bars={bars},seed=5")).unwrap();
    let donchian = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/strategies/donchian.toml");
    let cases = [
        (Strategy::parse("bb_atr").unwrap(), vec![vec![10.0, 40.0], vec![1.5], vec![14.0], vec![1.0, 3.0]]),
        (Strategy::parse("ma_cross").unwrap(), vec![vec![0.0, 1.0], vec![10.0], vec![50.0]]),
        (
            Strategy::parse("rsi_reversion").unwrap(),
            vec![vec![14.0], vec![30.0], vec![70.0], vec![14.0], vec![0.0, 2.0]],
        ),
        (Strategy::load(donchian).unwrap(), Vec::new()),
    ];
    for (strategy, axes) in cases {
        let axes = if axes.is_empty() { strategy.schema().iter().map(|p| vec![p.default]).collect() } else { axes };
        let book = cpu_book(&data, strategy.clone(), &axes);
        let tables = BarTables::new(&book, COSTS).with_blocks(Some(BlockCuts::new(bars, 16).unwrap()));
        let batch = simulate_cpu(&book, &tables, &all_plans(&book));
        let cpu = &batch.totals;
        let trades: u32 = cpu.iter().map(|t| t.trades).sum();
        println!("{strategy}: {} combos, {trades} trades on {bars} bars", cpu.len());
        // Trades all along the data: a kernel that stopped early would miss most of them.
        assert!(cpu.iter().all(|t| t.trades > 100), "{strategy}: {cpu:?}");
        assert_gpu_matches(&format!("{strategy}, {bars} bars"), &book, &tables, &batch);
    }
}

/// Slippage (folded into the tables) and vectorbt-style fraction stops (levels the host
/// forms) run on the kernel, alone and together (a stop or take-profit fills at its level
/// with the fee alone, vectorbt's `stoplimit`: a second copy of the per-bar sums holds
/// that exit's terms): its bits at two million bars.
#[test]
fn gpu_totals_with_slippage_and_fraction_stops_are_the_cpus_bits_on_two_million_bars() {
    let bars = 2_000_000;
    let data = Ohlcv::load(&format!("synthetic:bars={bars},seed=11")).unwrap();
    let columns = 4;
    let mut rng = SeededRng::new(3);
    let entries = Array2::from_shape_fn((bars, columns), |_| rng.uniform() < 0.01);
    let exits = Array2::from_shape_fn((bars, columns), |_| rng.uniform() < 0.01);
    // As numpy broadcasts a scalar or a column: one series for every column.
    let sl = Array2::from_shape_fn((bars, 1), |(t, _)| [0.002, 0.005, 0.01, f64::NAN][t % 4]);
    let tp = Array2::from_shape_fn((bars, 1), |(t, _)| [0.01, f64::NAN, 0.004, 0.02][t % 4]);
    let stopped = UserSignals {
        sl_stop: Some(sl.broadcast((bars, columns)).unwrap()),
        tp_stop: Some(tp.broadcast((bars, columns)).unwrap()),
        ..UserSignals::long(entries.view(), exits.view())
    };
    let slipped = Costs { fee: 0.0005, slippage: 0.0003 };
    for (what, signals, costs) in [
        ("fraction stops with slippage", stopped, slipped),
        ("fraction stops, fee only", stopped, Costs { fee: 0.0005, slippage: 0.0 }),
        ("slippage, no stops", UserSignals::long(entries.view(), exits.view()), slipped),
    ] {
        let book = SignalBook::from_signals(&data, signals).unwrap();
        assert!(book.is_plain(), "{what}");
        let tables = BarTables::new(&book, costs).with_blocks(Some(BlockCuts::new(bars, 16).unwrap()));
        let batch = simulate_cpu(&book, &tables, &all_plans(&book));
        assert!(batch.totals.iter().all(|t| t.trades > 1_000), "{what}: {:?}", batch.totals);
        assert_gpu_matches(&format!("{what}, 2,000,000 bars"), &book, &tables, &batch);
    }
}

/// Market books (shorts and reversals, trails, next-open fills, stops inside the bar) run
/// on the market kernel: every example rule file that uses them, and `simulate`'s signals
/// with shorts, a trailing fraction stop and the bars' open, high and low, give the CPU's
/// totals and blocks on every adapter at two million bars; a run asked of the GPU too.
#[test]
fn market_books_are_the_cpus_bits_on_two_million_bars() {
    let bars = 2_000_000;
    let data = Ohlcv::load(&format!("synthetic:bars={bars},seed=13")).unwrap();
    let example = |name: &str| format!("{}/../../examples/strategies/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let costs = Costs { fee: 0.001, slippage: 0.0002 };
    let blocks = Some(BlockCuts::new(bars, 16).unwrap());
    for (name, features) in [
        ("bb_long_short", "shorts"),
        ("trend_trail", "trailing stops, intrabar stops"),
        ("breakout_next_open", "shorts, next-open fills"),
        ("macd_tp", ""),
    ] {
        let strategy = Strategy::load(&example(name)).unwrap();
        let axes: Vec<Vec<f64>> = strategy.schema().iter().map(|p| vec![p.default]).collect();
        let book = cpu_book(&data, strategy, &axes);
        assert_eq!(book.market_features().join(", "), features);
        let tables = BarTables::new(&book, costs).with_blocks(blocks);
        let plans = all_plans(&book);
        let cpu = simulate_cpu(&book, &tables, &plans);
        println!("{name}: {} combos, {} trades on {bars} bars", cpu.totals.len(), cpu.totals[0].trades);
        assert!(cpu.totals.iter().all(|t| t.trades > 1_000), "{name}: {:?}", cpu.totals);
        assert_gpu_matches(&format!("{name}, {bars} bars"), &book, &tables, &cpu);
        let dir = tempfile::tempdir().unwrap();
        let dispatcher = threadx_dispatch::testing::dispatcher_in(dir.path(), threadx_dispatch::DeviceMode::Gpu);
        let run = {
            let _gpus = one_test_on_the_gpus();
            Backtester::with_tables(&book, &tables).run_batch(&dispatcher, &plans)
        };
        assert_eq!(run.value, cpu, "{name}: the CPU's bytes");
    }
    // simulate(short_entries=, sl_stop=, sl_trail=True, open=, high=, low=), filled at the
    // close and at the next open.
    let columns = 3;
    let mut rng = SeededRng::new(17);
    let mut flags = |p: f64| Array2::from_shape_fn((bars, columns), |_| rng.uniform() < p);
    let (entries, exits, short_entries, short_exits) = (flags(0.004), flags(0.002), flags(0.004), flags(0.002));
    let sl = Array2::from_shape_fn((bars, 1), |(t, _)| [0.004, 0.01, f64::NAN, 0.02][t % 4]);
    for fill in [threadx_backtest::Fill::Close, threadx_backtest::Fill::NextOpen] {
        let signals = UserSignals {
            short_entries: Some(short_entries.view()),
            short_exits: Some(short_exits.view()),
            sl_stop: Some(sl.broadcast((bars, columns)).unwrap()),
            sl_trail: &[true],
            fills: threadx_backtest::Fills { fill, intrabar: true },
            ..UserSignals::long(entries.view(), exits.view())
        };
        let book = SignalBook::from_signals(&data, signals).unwrap();
        let tables = BarTables::new(&book, costs).with_blocks(blocks);
        let cpu = simulate_cpu(&book, &tables, &all_plans(&book));
        assert!(cpu.totals.iter().all(|t| t.trades > 1_000), "{fill:?}: {:?}", cpu.totals);
        assert_gpu_matches(&format!("simulate's signals, {fill:?}, {bars} bars"), &book, &tables, &cpu);
    }
}
