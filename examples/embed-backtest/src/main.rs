//! Embedding ThreadX in your own program with only two crates: load data, compute the
//! indicators a parameter grid needs once, run every combo, and look at the best one in
//! detail.
//!
//! ```text
//! cargo run --release -p embed-backtest [-- DATA]     # DATA: a CSV path or synthetic:bars=N,seed=S
//! ```
#![allow(clippy::print_stdout)] // An example prints.

use threadx_backtest::{Backtester, Costs, Metrics, SignalBook, Strategy, backtest};
use threadx_indicators::{DeviceMode, Dispatcher, IndicatorBank, Ohlcv, format_time};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let source = std::env::args().nth(1).unwrap_or_else(|| "synthetic".into());
    let data = Ohlcv::load(&source)?;
    // Auto: each operation runs on the CPU or the GPU, whichever the timing profile says
    // is faster (THREADX_DEVICE=cpu|gpu forces one).
    let dispatcher = Dispatcher::from_env(Some(DeviceMode::from_env()?))?;
    let bank = IndicatorBank::new(&data, &dispatcher);

    // A grid: one list of values per parameter, in the strategy's schema order.
    let strategy = Strategy::parse("bb_atr").unwrap();
    let axes = vec![vec![10.0, 20.0, 30.0, 40.0], vec![1.5, 2.0, 2.5], vec![14.0], vec![1.0, 2.0, 3.0]];
    let book = SignalBook::build(&bank, &strategy, &axes)?;
    // Combo n of the grid: the Cartesian product, the last parameter varying fastest.
    let plans: Vec<_> = (0..book.grid_len()).map(|combo| book.combo_plan(combo)).collect();
    let run = Backtester::new(&book, Costs::default()).run(&dispatcher, &plans);
    println!(
        "{} combos of {strategy} on {} ({} bars) in {:.1} ms on the {}; {} indicator series computed once",
        plans.len(),
        data.origin(),
        data.len(),
        run.elapsed_ms,
        run.device,
        bank.computations()
    );

    let mut ranked: Vec<(usize, &Metrics)> = run.value.iter().enumerate().collect();
    ranked.sort_by(|a, b| b.1.total_return.total_cmp(&a.1.total_return));
    println!("{:<58} {:>12} {:>7} {:>10}", "best 5 by total_return", "total_return", "trades", "max_dd");
    let values_of = |combo: usize| book.combo_values(combo as u64);
    for &(i, m) in ranked.iter().take(5) {
        let values = values_of(i);
        println!(
            "{:<58} {:>11.2}% {:>7} {:>9.2}%",
            strategy.describe(&values),
            m.total_return * 100.0,
            m.trades,
            m.max_drawdown * 100.0
        );
    }

    // The best combo again, with its trades.
    let best = values_of(ranked[0].0);
    let report = backtest(&bank, &strategy, &best, Costs::default(), None)?;
    println!("first trades of {}:", strategy.describe(&best));
    for t in report.trades.iter().take(5) {
        println!(
            "  {} @ {:.2} -> {} @ {:.2}  {:+.2}% ({})",
            format_time(t.entry_time),
            t.entry_price,
            format_time(t.exit_time),
            t.exit_price,
            t.return_ * 100.0,
            t.reason
        );
    }
    Ok(())
}
