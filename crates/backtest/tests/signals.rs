//! A user's own signals ([`SignalBook::from_signals`]): the book's simulation against a
//! plain per-bar loop written here from docs/strategies.md's rules, the GPU kernel's
//! totals against the CPU's bits on every adapter (level stops included), a broadcast
//! stop against the same levels given per column, and the refusals of bad shapes.

#![allow(clippy::print_stdout)] // What was compared is printed for the record (--nocapture).

use crate::common;

use common::{
    COSTS, Rules, Trades, assert_close_metrics, closed_returns, metrics_of_equity, one_test_on_the_gpus, plain_loop,
};
use ndarray::{Array2, ArrayView2, Axis};
use threadx_backtest::{
    BacktestError, BarTables, ExitReason, GpuBacktester, SignalBook, UserSignals, simulate_cpu, simulate_detailed,
};
use threadx_dispatch::testing::adapters;
use threadx_indicators::Ohlcv;
use threadx_stats::SeededRng;

/// Random entries and exits (about one bar in `every` each) and stop levels a few percent
/// under the close, some NaN and some non-positive (no stop), for `columns` columns.
fn random_signals(data: &Ohlcv, columns: usize, seed: u64) -> (Array2<bool>, Array2<bool>, Array2<f64>) {
    let mut rng = SeededRng::new(seed);
    let n = data.len();
    let close = data.close();
    let mut entries = Array2::from_elem((n, columns), false);
    let mut exits = Array2::from_elem((n, columns), false);
    let mut stop = Array2::from_elem((n, columns), f64::NAN);
    for c in 0..columns {
        let every = 5.0 + 40.0 * (c % 4) as f64;
        for t in 0..n {
            entries[[t, c]] = rng.uniform() * every < 1.0;
            exits[[t, c]] = rng.uniform() * every < 1.0;
            let u = rng.uniform();
            stop[[t, c]] = match u {
                u if u < 0.05 => f64::NAN,
                u if u < 0.08 => -1.0,
                u if u < 0.10 => 0.0,
                u => close[t] * (1.0 - 0.03 * u),
            };
        }
    }
    (entries, exits, stop)
}

/// The trades and equity of one column by the rules, bar by bar in f64: the shared
/// plain loop with the column's entries, exits and stop levels (NaN or ≤ 0: no stop).
fn plain_column(close: &[f64], entries: &[bool], exits: &[bool], stop: Option<&[f64]>) -> (Trades, Vec<f64>) {
    let rules = Rules {
        warmup: 0,
        entry: Box::new(|t| entries[t]),
        exit: Box::new(|t| exits[t]),
        stop: stop.map(|s| Box::new(move |e: usize| s[e]) as Box<dyn Fn(usize) -> f64>),
        take_profit: None,
        max_bars: 0,
    };
    plain_loop(close, &rules)
}

fn column(view: ArrayView2<'_, bool>, c: usize) -> Vec<bool> {
    view.column(c).to_vec()
}

#[test]
fn user_signals_run_by_the_rules_of_a_plain_loop() {
    let data = Ohlcv::load("synthetic:bars=3000,seed=21").unwrap();
    let (entries, exits, stop) = random_signals(&data, 8, 3);
    for with_stop in [false, true] {
        let levels = with_stop.then(|| stop.view());
        let book = SignalBook::from_signals(
            &data,
            UserSignals { stop: levels, ..UserSignals::long(entries.view(), exits.view()) },
        )
        .unwrap();
        assert_eq!(book.grid_len(), 8);
        assert_eq!(book.name(), "signals");
        let tables = BarTables::new(&book, COSTS);
        let plans: Vec<_> = (0..8).map(|c| book.combo_plan(c)).collect();
        let totals = simulate_cpu(&book, &tables, &plans).totals;
        for c in 0..8 {
            let stop_column = stop.column(c).to_vec();
            let (trades, equity) = plain_column(
                data.close(),
                &column(entries.view(), c),
                &column(exits.view(), c),
                with_stop.then_some(&stop_column[..]),
            );
            let report = simulate_detailed(&book, &plans[c], COSTS);
            let got: Vec<_> = report.trades.iter().map(|t| (t.entry_bar, t.exit_bar, t.reason)).collect();
            assert_eq!(got, trades, "column {c}, stop {with_stop}");
            assert!(trades.len() > 3, "column {c} trades ({} trades)", trades.len());
            if with_stop {
                assert!(trades.iter().any(|t| t.2 == ExitReason::Stop), "column {c}: some stop fires");
            }
            let wins = report.trades.iter().filter(|t| t.reason != ExitReason::OpenAtEnd && t.return_ > 0.0).count();
            let held: usize =
                trades.iter().map(|&(e, x, r)| if r == ExitReason::OpenAtEnd { data.len() - e } else { x - e }).sum();
            let closed = closed_returns(&equity, &trades);
            let want =
                metrics_of_equity(&equity, (trades.len() as u32, wins as u32, held), &closed, book.bars_per_year());
            let m = totals[c].metrics(book.bars(), book.bars_per_year());
            assert_close_metrics(&m, &want, 1e-9, &format!("column {c}"));
        }
    }
}

#[test]
fn gpu_totals_of_user_signals_are_the_cpus_bits() {
    let _gpus = one_test_on_the_gpus();
    for source in ["synthetic:bars=20000,seed=8", "synthetic:bars=9000,seed=2,market=fx"] {
        let data = Ohlcv::load(source).unwrap();
        let (entries, exits, stop) = random_signals(&data, 24, 17);
        for levels in [None, Some(stop.view())] {
            let book = SignalBook::from_signals(
                &data,
                UserSignals { stop: levels, ..UserSignals::long(entries.view(), exits.view()) },
            )
            .unwrap();
            let tables = BarTables::new(&book, COSTS);
            let plans: Vec<_> = (0..book.grid_len()).map(|c| book.combo_plan(c)).collect();
            let cpu = simulate_cpu(&book, &tables, &plans).totals;
            let trades: u32 = cpu.iter().map(|t| t.trades).sum();
            for ctx in adapters() {
                let gpu = GpuBacktester::new(ctx.clone(), &book, &tables)
                    .unwrap()
                    .run(&book, &tables, &plans)
                    .unwrap()
                    .totals;
                println!(
                    "{source}, stops {}: {} columns, {trades} trades on {}",
                    levels.is_some(),
                    plans.len(),
                    ctx.report().label()
                );
                assert_eq!(cpu, gpu, "{source} on {}", ctx.report().label());
            }
        }
    }
}

#[test]
fn a_broadcast_stop_is_the_same_levels_in_every_column() {
    let _gpus = one_test_on_the_gpus();
    let data = Ohlcv::load("synthetic:bars=4000,seed=5").unwrap();
    let (entries, exits, stop) = random_signals(&data, 6, 9);
    let one = stop.column(0).insert_axis(Axis(1));
    let shared = one.broadcast((data.len(), 6)).unwrap();
    assert_eq!(shared.strides()[1], 0);
    let repeated = shared.to_owned();
    let run = |levels: ArrayView2<'_, f64>| {
        let book = SignalBook::from_signals(
            &data,
            UserSignals { stop: Some(levels), ..UserSignals::long(entries.view(), exits.view()) },
        )
        .unwrap();
        let tables = BarTables::new(&book, COSTS);
        let plans: Vec<_> = (0..6).map(|c| book.combo_plan(c)).collect();
        let mut totals = simulate_cpu(&book, &tables, &plans).totals;
        for ctx in adapters() {
            assert_eq!(
                GpuBacktester::new(ctx.clone(), &book, &tables).unwrap().run(&book, &tables, &plans).unwrap().totals,
                totals
            );
        }
        totals.dedup();
        totals
    };
    assert_eq!(run(shared), run(repeated.view()));
}

#[test]
fn bad_signals_are_refused_with_what_is_wrong() {
    let data = Ohlcv::load("synthetic:bars=100,seed=1").unwrap();
    let on = Array2::from_elem((100, 3), true);
    let short = Array2::from_elem((99, 3), true);
    let err = |e: Result<SignalBook, BacktestError>| e.unwrap_err().to_string();
    let msg = err(SignalBook::from_signals(&data, UserSignals::long(on.view(), short.view())));
    assert!(msg.contains("exits has shape (99, 3); expected (100, 3)"), "{msg}");
    let none = Array2::from_elem((100, 0), true);
    assert!(err(SignalBook::from_signals(&data, UserSignals::long(none.view(), none.view()))).contains("no columns"));
    let mut stop = Array2::from_elem((100, 3), 1.0);
    stop[[7, 2]] = f64::INFINITY;
    let msg = err(SignalBook::from_signals(
        &data,
        UserSignals { stop: Some(stop.view()), ..UserSignals::long(on.view(), on.view()) },
    ));
    assert!(msg.contains("stop level +inf at bar 7, column 2"), "{msg}");
    let wide = Array2::from_elem((100, 4), 1.0);
    let msg = err(SignalBook::from_signals(
        &data,
        UserSignals { stop: Some(wide.view()), ..UserSignals::long(on.view(), on.view()) },
    ));
    assert!(msg.contains("stop has shape (100, 4)"), "{msg}");
}
