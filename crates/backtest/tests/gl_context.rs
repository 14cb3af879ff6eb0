//! A long market run on an OpenGL adapter (llvmpipe's GL, where wgpu holds one lock on the
//! adapter's context while it submits or waits, and panics in a thread that waits more
//! than 6 s for it): another thread that uses the same context while the run goes on gets
//! it between the run's submissions, and the run gives the CPU's totals.

#![allow(clippy::print_stdout, clippy::print_stderr)] // The wait measured, or why nothing was, for the record.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use threadx_backtest::{BarTables, Costs, GpuBacktester, SignalBook, Strategy, simulate_cpu};
use threadx_dispatch::DeviceMode;
use threadx_dispatch::testing::{adapters, dispatcher_in};
use threadx_indicators::{IndicatorBank, Ohlcv};

#[test]
fn another_thread_gets_a_gl_context_while_a_long_market_run_holds_it() {
    let _gpus = common::one_test_on_the_gpus();
    let Some(ctx) = adapters().iter().find(|c| c.report().backend == "gl") else {
        eprintln!("no OpenGL adapter: nothing to check");
        return;
    };
    let source =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/strategies/bb_long_short.toml"))
            .unwrap();
    let strategy = Strategy::from_toml(&source, "bb_long_short.toml").unwrap();
    let data = Ohlcv::load("synthetic:bars=1000000,seed=9").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dispatcher = dispatcher_in(dir.path(), DeviceMode::Cpu);
    let bank = IndicatorBank::new(&data, &dispatcher);
    let book = SignalBook::build(&bank, &strategy, &[vec![20.0, 40.0], vec![2.0], vec![2.0, 3.0]]).unwrap();
    let tables = BarTables::new(&book, Costs { fee: 0.001, slippage: 0.0 });
    let plans: Vec<_> = (0..book.grid_len()).map(|c| book.combo_plan(c)).collect();
    let done = AtomicBool::new(false);
    let longest = std::thread::scope(|s| {
        let other = s.spawn(|| {
            let mut longest = Duration::ZERO;
            while !done.load(Ordering::Relaxed) {
                let start = Instant::now();
                ctx.storage_buffer("probe", &[0u32; 4]).unwrap();
                longest = longest.max(start.elapsed());
                std::thread::sleep(Duration::from_millis(50));
            }
            longest
        });
        let gpu = GpuBacktester::new(ctx.clone(), &book, &tables).unwrap().run(&book, &tables, &plans);
        done.store(true, Ordering::Relaxed);
        assert_eq!(gpu.unwrap().totals, simulate_cpu(&book, &tables, &plans).totals);
        other.join().expect("the other thread got the context")
    });
    println!("the other thread waited at most {longest:?} for the context");
    assert!(longest < Duration::from_secs(3), "{longest:?}");
}
