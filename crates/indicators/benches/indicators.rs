//! Indicator speed on 1,000,000 synthetic bars.
//!
//! - `single_thread_1m_bars/*`: one indicator, computed on the calling thread, against
//!   TA-Lib's C code measured on the same machine through its Python wrapper
//!   (`benches/talib_bench.py`; the figures are in the README).
//! - `batch_*`: 20 Bollinger periods × 5 widths as one batched call against 100 separate
//!   calls: on the CPU (the batch on one thread and on every core; a single series is
//!   one thread's work) and on the best adapter (one dispatch vs 100).
#![allow(clippy::print_stderr)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use threadx_dispatch::select_gpu;
use threadx_indicators::{Indicator, Ohlcv, compute_cpu, compute_gpu};

fn one_thread() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a one-thread pool")
}

fn single_thread(c: &mut Criterion) {
    let data = Ohlcv::load("synthetic:bars=1000000,seed=7").expect("synthetic data");
    let mut g = c.benchmark_group("single_thread_1m_bars");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    for (name, indicator) in [
        ("bbands_20_2", Indicator::BollingerBands { period: 20, std: 2.0 }),
        ("atr_14", Indicator::Atr { period: 14 }),
        ("macd_12_26_9", Indicator::Macd { fast: 12, slow: 26, signal: 9 }),
        ("rsi_14", Indicator::Rsi { period: 14 }),
        ("ema_20", Indicator::Ema { period: 20 }),
        ("sma_20", Indicator::Sma { period: 20 }),
        ("stddev_20", Indicator::StdDev { period: 20 }),
        ("trange", Indicator::TrueRange),
    ] {
        // One series runs on the calling thread (no pool, no hop).
        g.bench_function(name, |b| b.iter(|| compute_cpu(&data, black_box(&[indicator]))));
    }
    g.finish();
}

fn bollinger_grid() -> Vec<Indicator> {
    (0..20)
        .flat_map(|p| [1.0, 1.5, 2.0, 2.5, 3.0].map(|std| Indicator::BollingerBands { period: 10 + 2 * p, std }))
        .collect()
}

fn batch(c: &mut Criterion) {
    let data = Ohlcv::load("synthetic:bars=1000000,seed=7").expect("synthetic data");
    let grid = bollinger_grid();
    let pool = one_thread();
    let mut g = c.benchmark_group("batch_100_bollinger_1m_bars");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    g.bench_function("cpu_one_call_one_thread", |b| b.iter(|| pool.install(|| compute_cpu(&data, black_box(&grid)))));
    g.bench_function("cpu_one_call_all_threads", |b| b.iter(|| compute_cpu(&data, black_box(&grid))));
    g.bench_function("cpu_100_calls", |b| {
        b.iter(|| grid.iter().map(|i| compute_cpu(&data, black_box(&[*i]))).collect::<Vec<_>>())
    });
    g.finish();

    let Ok(gpu) = select_gpu().open() else {
        eprintln!("no GPU adapter: skipping the GPU batch bench");
        return;
    };
    // lavapipe runs kernels on the CPU: keep the GPU case small enough to finish.
    let data = Ohlcv::load("synthetic:bars=100000,seed=7").expect("synthetic data");
    let mut g = c.benchmark_group("batch_100_bollinger_100k_bars_gpu");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("one_dispatch", |b| b.iter(|| compute_gpu(&gpu, &data, black_box(&grid))));
    g.bench_function("100_dispatches", |b| {
        b.iter(|| grid.iter().map(|i| compute_gpu(&gpu, &data, black_box(&[*i]))).collect::<Vec<_>>())
    });
    g.finish();
}

criterion_group!(benches, single_thread, batch);
criterion_main!(benches);
