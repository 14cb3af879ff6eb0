//! Block statistics (Σr and Σr² per block, crates/backtest/src/blocks.rs) against the
//! per-bar returns of the detailed f64 simulation cut by the rule by hand, for strategies,
//! stops and a user's signals; and the same bits on every adapter.

use crate::common;

use common::{COSTS, all_plans, cpu_book, one_test_on_the_gpus, range};
use ndarray::Array2;
use threadx_backtest::{
    BarTables, BlockCuts, GpuBacktester, SignalBook, Strategy, UserSignals, simulate_cpu, simulate_detailed,
};
use threadx_dispatch::testing::adapters;
use threadx_indicators::Ohlcv;
use threadx_stats::SeededRng;

/// Each combo's blocks from its detailed equity curve: r[t] = E[t]/E[t−1] − 1 (E[−1] = 1),
/// the first T mod S bars dropped, then S blocks of T div S bars.
fn blocks_by_hand(book: &SignalBook, s: usize) -> Vec<f64> {
    let n = book.bars();
    let (first, len) = (n % s, n / s);
    let mut out = Vec::new();
    for plan in all_plans(book) {
        let equity = simulate_detailed(book, &plan, COSTS).equity;
        let r: Vec<f64> = (0..n).map(|t| equity[t] / if t == 0 { 1.0 } else { equity[t - 1] } - 1.0).collect();
        for k in 0..s {
            let block = &r[first + k * len..first + (k + 1) * len];
            out.push(block.iter().sum());
            out.push(block.iter().map(|x| x * x).sum());
        }
    }
    out
}

fn check(what: &str, book: &SignalBook, s: u32) {
    let cuts = BlockCuts::new(book.bars(), s).unwrap();
    assert_eq!((cuts.dropped(), cuts.bars()), (book.bars() % s as usize, book.bars() / s as usize));
    let tables = BarTables::new(book, COSTS).with_blocks(Some(cuts));
    let batch = simulate_cpu(book, &tables, &all_plans(book));
    let expected = blocks_by_hand(book, s as usize);
    assert_eq!(batch.blocks.len(), expected.len());
    for (i, (got, want)) in batch.blocks.iter().zip(&expected).enumerate() {
        // The integer sums against f64 ratios of an f64 equity curve: rounding apart.
        assert!((got - want).abs() < 1e-11, "{what}: value {i}: {got} vs {want}");
    }
    // Without blocks asked for, the totals are the same and no blocks come back.
    let plain = simulate_cpu(book, &BarTables::new(book, COSTS), &all_plans(book));
    assert_eq!(plain.totals, batch.totals);
    assert!(plain.blocks.is_empty());
    // Every device's bits: plain books on the whole-backtest kernel, others on the market kernel.
    let _gpus = one_test_on_the_gpus();
    for ctx in adapters() {
        let gpu = GpuBacktester::new(ctx.clone(), book, &tables).unwrap().run(book, &tables, &all_plans(book)).unwrap();
        assert_eq!(gpu.totals, batch.totals, "{what} on {}", ctx.report().label());
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&gpu.blocks), bits(&batch.blocks), "{what} on {}", ctx.report().label());
    }
}

#[test]
fn blocks_are_the_returns_cut_by_the_rule_on_every_device() {
    let data = Ohlcv::load("synthetic:bars=3001,seed=11").unwrap();
    let bb = cpu_book(
        &data,
        Strategy::parse("bb_atr").unwrap(),
        &[range(10.0, 15.0, 3), vec![1.5, 2.5], vec![14.0], vec![1.0, 2.0]],
    );
    for s in [2, 6, 16, 64] {
        check(&format!("bb_atr, {s} blocks"), &bb, s);
    }
    let ma = cpu_book(&data, Strategy::parse("ma_cross").unwrap(), &[vec![0.0, 1.0], vec![5.0, 20.0], vec![50.0]]);
    check("ma_cross", &ma, 16);
}

#[test]
fn blocks_of_trades_held_across_blocks_open_at_the_end_and_after_a_long_warm_up() {
    // Column 0: in a trade from bar 0 to the end; 1: an entry and an exit on every bar;
    // 2: random signals with stops; 3: no entry until bar 900 (past many block starts).
    let n = 1_000;
    let data = Ohlcv::load(&format!("synthetic:bars={n},seed=4")).unwrap();
    let mut rng = SeededRng::new(9);
    let (mut entries, mut exits) = (Array2::from_elem((n, 4), false), Array2::from_elem((n, 4), false));
    let mut stop = Array2::from_elem((n, 4), f64::NAN);
    for t in 0..n {
        entries[[t, 0]] = t == 0;
        entries[[t, 1]] = true;
        exits[[t, 1]] = true;
        entries[[t, 2]] = rng.uniform() < 0.05;
        exits[[t, 2]] = rng.uniform() < 0.05;
        stop[[t, 2]] = data.close()[t] * 0.99;
        entries[[t, 3]] = t >= 900 && t % 7 == 0;
        exits[[t, 3]] = t % 11 == 0;
    }
    let book = SignalBook::from_signals(
        &data,
        UserSignals { stop: Some(stop.view()), ..UserSignals::long(entries.view(), exits.view()) },
    )
    .unwrap();
    for s in [2, 4, 16, 64] {
        check(&format!("signals, {s} blocks"), &book, s);
    }
}

#[test]
fn blocks_of_books_traded_as_a_market_are_their_returns_cut_by_the_rule() {
    let data = Ohlcv::load("synthetic:bars=3001,seed=12").unwrap();
    let example = |name: &str| format!("{}/../../examples/strategies/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    for name in ["bb_long_short", "trend_trail", "breakout_next_open"] {
        let strategy = Strategy::load(&example(name)).unwrap();
        let axes: Vec<Vec<f64>> = strategy.default_axes().into_iter().map(|a| a[..a.len().min(2)].to_vec()).collect();
        let book = cpu_book(&data, strategy, &axes);
        assert!(!book.is_plain());
        for s in [2, 16, 64] {
            check(&format!("{name}, {s} blocks"), &book, s);
        }
    }
}

#[test]
fn block_counts_are_checked() {
    assert!(BlockCuts::new(100, 16).is_ok());
    for (bars, s) in [(100, 15), (100, 0), (3, 2), (100, 66), (10, 16)] {
        let error = BlockCuts::new(bars, s).unwrap_err().to_string();
        assert!(error.contains("blocks"), "{bars} bars, {s} blocks: {error}");
    }
}
