//! Whole-sweep speed, everything in process and in memory (no files):
//!
//! - `reference/960x24`: the reference workload of the system ThreadX replaces (100.74
//!   tests/s): 960 bars, 4 bb_period × 2 bb_std × 3 atr_period = 24 combos, 12 unique
//!   indicators. Each iteration does the whole sweep: indicator bank, signal book, combos,
//!   backtests. Throughput is in tests (combos) per second; the bar is 100,000.
//! - `grid/960x2.9M`: 2,900,000 combos (100 bb_period × 29 bb_std × 25 atr_period ×
//!   40 atr_mult) on 960 bars in fixed chunks on the pool's CPU worker (every core); the
//!   bar is under 10 s.
//!
//! - `csv_rows/*`: formatting results rows as the CSV writes them (issue #31): 65,536 rows
//!   of the grid's own metrics through `write_row` (zmij and itoa, Rust's `{}` bytes) and,
//!   for the comparison, through `write!("{v}")` as the rows were written before.
//!
//! - `cscv/cpu` and `cscv/gpu`: the overfitting statistics of the default job (10,000
//!   combos, all 12,870 CSCV splits of 16 blocks) from its rows, CSCV's screen on the CPU
//!   or forced onto the best adapter (skipped without one; on lavapipe it runs on the CPU's
//!   cores, so only a real GPU's figure means anything). `cscv/plots`: its two SVG plots
//!   (the logit histogram, and the 12,870 splits' out-of-sample against in-sample dots).
//!
//! All but `cscv/gpu` run on the CPU (`DeviceMode::Cpu`) so the figures are comparable
//! across machines with and without a GPU.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;
use threadx_dispatch::{DeviceMode, Dispatcher};
use threadx_indicators::{IndicatorBank, Ohlcv};
use threadx_multi_gpu::{DevicePool, DistributeOptions, Worker};
use threadx_sweep::{OverfittingRequest, Session, Sweep, SweepRequest, SweepSpec, logit_histogram_svg, oos_vs_is_svg};

fn spec(grid: &[(&str, &str)]) -> SweepSpec {
    SweepRequest::new("bb_atr", grid).check().expect("a valid grid")
}

fn reference(c: &mut Criterion) {
    let data = Ohlcv::load("synthetic:bars=960,seed=1").expect("synthetic data");
    let dispatcher = Dispatcher::from_env(Some(DeviceMode::Cpu)).expect("a CPU dispatcher");
    let spec = spec(&[("bb_period", "10,20,30,40"), ("bb_std", "1.5,2"), ("atr_period", "7,14,21")]);
    let mut group = c.benchmark_group("reference");
    group.throughput(Throughput::Elements(24));
    group.bench_function("960x24", |b| {
        b.iter(|| {
            let bank = IndicatorBank::new(&data, &dispatcher);
            let sweep = Sweep::prepare(&bank, &spec).expect("a valid sweep");
            let result = sweep.run_all(&dispatcher).expect("a run");
            assert_eq!(bank.computations(), 11, "8 Bollinger (period × width) + 3 ATR, each once");
            black_box(result.metrics)
        })
    });
    group.finish();
}

fn big_grid(c: &mut Criterion) {
    let data = Ohlcv::load("synthetic:bars=960,seed=1").expect("synthetic data");
    let dispatcher = Dispatcher::from_env(Some(DeviceMode::Cpu)).expect("a CPU dispatcher");
    let spec = spec(&[
        ("bb_period", "5:104:1"),
        ("bb_std", "1:3.8:0.1"),
        ("atr_period", "5:29:1"),
        ("atr_mult", "0.5:10.25:0.25"),
    ]);
    let pool = DevicePool::new(vec![Worker::cpu()]).expect("a CPU pool");
    let mut group = c.benchmark_group("grid");
    group.sample_size(10).measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(2_900_000));
    group.bench_function("960x2.9M", |b| {
        b.iter(|| {
            let bank = IndicatorBank::new(&data, &dispatcher);
            let sweep = Sweep::prepare(&bank, &spec).expect("a valid sweep");
            let options = DistributeOptions::new(sweep.workload_tag());
            let chunks: Vec<u64> = (0..sweep.combos().chunks()).collect();
            let mut best = f64::MIN;
            sweep
                .run(&pool, &chunks, &options, &|_, _| Ok(()), &mut |_, r| {
                    best = r.metrics.iter().fold(best, |b, m| b.max(m.total_return));
                    Ok(())
                })
                .expect("a run");
            black_box(best)
        })
    });
    group.finish();
}

fn csv_rows(c: &mut Criterion) {
    use std::fmt::Write as _;
    let data = Ohlcv::load("synthetic:bars=960,seed=1").expect("synthetic data");
    let dispatcher = Dispatcher::from_env(Some(DeviceMode::Cpu)).expect("a CPU dispatcher");
    let spec =
        spec(&[("bb_period", "5:20:1"), ("bb_std", "1:3.8:0.1"), ("atr_period", "5:12:1"), ("atr_mult", "0.5:4:0.5")]);
    let bank = IndicatorBank::new(&data, &dispatcher);
    let sweep = Sweep::prepare(&bank, &spec).expect("a valid sweep");
    let result = sweep.run_all(&dispatcher).expect("a run");
    let rows: Vec<_> = result.combos.iter().zip(&result.metrics).take(1 << 16).collect();
    let strategy = spec.strategy();
    let mut group = c.benchmark_group("csv_rows");
    group.throughput(Throughput::Elements(rows.len() as u64));
    let mut text = String::with_capacity(rows.len() * 128);
    group.bench_function("write_row", |b| {
        b.iter(|| {
            text.clear();
            for &(&combo, m) in &rows {
                threadx_sweep::write_row(
                    &mut text,
                    (strategy, sweep.metric_set()),
                    combo,
                    &sweep.book().combo_values(combo),
                    m,
                );
            }
            black_box(text.len())
        })
    });
    group.bench_function("std_fmt", |b| {
        b.iter(|| {
            text.clear();
            for &(&combo, m) in &rows {
                let _ = write!(text, "{combo}");
                for v in sweep.book().combo_values(combo).iter() {
                    let _ = write!(text, ",{v}");
                }
                for v in m.values() {
                    text.push(',');
                    if !v.is_nan() {
                        let _ = write!(text, "{v}");
                    }
                }
                text.push('\n');
            }
            black_box(text.len())
        })
    });
    group.finish();
}

fn cscv(c: &mut Criterion) {
    let data = Arc::new(Ohlcv::load("synthetic").expect("the default data"));
    let mut group = c.benchmark_group("cscv");
    group.sample_size(10);
    let mut rows = None;
    for (name, mode) in [("cpu", DeviceMode::Cpu), ("gpu", DeviceMode::Gpu)] {
        let request = SweepRequest {
            device: Some(mode),
            overfitting: Some(OverfittingRequest::default()),
            ..SweepRequest::default()
        };
        let spec = request.check().expect("the default job");
        let Ok(dispatcher) = Dispatcher::from_env(Some(mode)) else { continue };
        if mode == DeviceMode::Gpu && dispatcher.gpu().is_none() {
            continue;
        }
        let session = Session::new(&spec, data.clone(), Arc::new(dispatcher), &mut |_| {}).expect("a session");
        // The rows are the same on every device: run them once, on the CPU.
        let rows = rows.get_or_insert_with(|| session.run_in_memory(&mut |_, _| Ok(())).expect("the default job"));
        group.bench_function(name, |b| {
            b.iter(|| black_box(session.overfitting(rows, "sharpe", false, &[]).expect("statistics")))
        });
        if mode == DeviceMode::Cpu {
            let report = session.overfitting(rows, "sharpe", false, &[]).expect("statistics").expect("asked for").pbo;
            group.bench_function("plots", |b| {
                b.iter(|| {
                    let histogram = logit_histogram_svg(&report, "logits").expect("a histogram");
                    black_box(histogram.len() + oos_vs_is_svg(&report, "oos").expect("a scatter").len())
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, reference, big_grid, csv_rows, cscv);
criterion_main!(benches);
