//! One parity suite, run on every adapter: the whole-backtest kernel gives the CPU's
//! integer totals bit for bit (so the same metric bytes) on sweeps of BTC-like and FX-like
//! synthetic data, for every strategy; the kernel's integer f64 arithmetic forms the very
//! stop levels the CPU's f64 arithmetic does; chunked GPU runs equal one-piece runs; the
//! dispatcher's choice and fallback.

#![allow(clippy::print_stdout)] // What was compared is printed for the record (--nocapture).

use crate::common;

use common::{all_plans, cpu_book, one_test_on_the_gpus, range};
use threadx_backtest::{Backtester, BarTables, Costs, GpuBacktester, KERNELS, Strategy, Totals, simulate_cpu};
use threadx_dispatch::testing::{adapters, dispatcher_in};
use threadx_dispatch::{Device, DeviceMode, Kernel};
use threadx_indicators::Ohlcv;
use threadx_stats::SeededRng;

const FEE: Costs = Costs { fee: 0.001, slippage: 0.0 };

#[test]
fn kernels_compile_on_every_adapter() {
    let _gpus = one_test_on_the_gpus();
    for ctx in adapters() {
        for kernel in KERNELS {
            ctx.pipeline(&kernel).unwrap_or_else(|e| panic!("{} on {}: {e}", kernel.name, ctx.report().label()));
        }
    }
}

/// A kernel that evaluates exact.wgsl's `stop_level` on (close, atr, mult) triples.
const STOP_LEVELS: Kernel = Kernel {
    name: "stop_levels_test",
    source: concat!(
        include_str!("../../../kernels-wgsl/exact.wgsl"),
        r#"
@group(0) @binding(0) var<storage, read> inputs: array<vec2<u32>>;
@group(0) @binding(1) var<storage, read_write> out_levels: array<vec2<u32>>;
@compute @workgroup_size(64)
fn levels(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= arrayLength(&out_levels)) {
        return;
    }
    out_levels[i] = stop_level(inputs[3u * i], inputs[3u * i + 1u], inputs[3u * i + 2u]);
}
"#
    ),
    entry: "levels",
};

/// The CPU's stop level as the kernel encodes it: the f64 bits, or 0 for a level ≤ 0.
fn cpu_level(close: f64, atr: f64, mult: f64) -> u64 {
    let level = close - mult * atr;
    if level > 0.0 { level.to_bits() } else { 0 }
}

#[test]
fn gpu_stop_levels_are_the_cpus_f64_bits() {
    let _gpus = one_test_on_the_gpus();
    let mut rng = SeededRng::new(9);
    let mut triples: Vec<(f64, f64, f64)> = Vec::new();
    // Prices and ATRs as markets make them (decimal ticks), multipliers on grids.
    for _ in 0..20_000 {
        let close = (1.0 + rng.uniform() * 100_000.0 * 100.0).round() / 100.0;
        let atr = close * rng.uniform() * 0.05;
        let mult = (rng.uniform() * 400.0).round() / 20.0 + 0.05;
        triples.push((close, atr, mult));
    }
    // Arbitrary bits over a wide range of magnitudes, and cancellation (mult · atr near close).
    for _ in 0..20_000 {
        let close =
            f64::from_bits((rng.next_u64() & 0x000f_ffff_ffff_ffff) | (1023 + 40 - (rng.next_u64() % 80)) << 52);
        let mult = f64::from_bits((rng.next_u64() & 0x000f_ffff_ffff_ffff) | (1023 - 4 + rng.next_u64() % 10) << 52);
        let spread = [1.0, 1.0 + 1e-15, 1.0 - 1e-15, 0.5, 2.0, 1e-9, 1e-17, 1e-30][(rng.next_u64() % 8) as usize];
        triples.push((close, close / mult * spread, mult));
    }
    // Ties of the product's rounding: significands with few bits set, and exact zeros.
    for i in 0..2_000u64 {
        let close = 1024.0 + (i % 97) as f64;
        let atr = f64::from_bits(0x3ff0_0000_0000_0000 | (i << 40) | 1);
        let mult = 1.0 + f64::from(2u32.pow((i % 12) as u32)) * f64::EPSILON;
        triples.push((close, atr, mult));
        triples.push((close, 0.0, mult));
        triples.push((close, close / 2.0, 2.0));
    }
    let inputs: Vec<u64> = triples.iter().flat_map(|&(c, a, m)| [c.to_bits(), a.to_bits(), m.to_bits()]).collect();
    for ctx in adapters() {
        let input = ctx.storage_buffer::<u32>("inputs", bytemuck::cast_slice(&inputs)).unwrap();
        let out = ctx.output_buffer::<u64>("levels", triples.len()).unwrap();
        let groups = (triples.len() as u32).div_ceil(64);
        ctx.dispatch(&STOP_LEVELS, &[&input, &out], [groups, 1, 1]).unwrap();
        let got: Vec<u64> = ctx.read_back(&out, triples.len()).unwrap();
        let wrong: Vec<_> = triples
            .iter()
            .zip(&got)
            .filter(|&(&(c, a, m), &g)| g != cpu_level(c, a, m))
            .map(|(&(c, a, m), &g)| format!("close {c:e} atr {a:e} mult {m:e}: {g:#x} != {:#x}", cpu_level(c, a, m)))
            .take(5)
            .collect();
        assert!(
            wrong.is_empty(),
            "{}: {} of {}:\n{}",
            ctx.report().label(),
            wrong.len(),
            triples.len(),
            wrong.join("\n")
        );
        println!("{}: {} stop levels, every one the CPU's f64 bits", ctx.report().label(), triples.len());
    }
}

/// Sweeps of every strategy on both synthetic markets.
fn cases() -> Vec<(&'static str, Strategy, Vec<Vec<f64>>)> {
    let bb_atr = vec![range(10.0, 5.0, 10), range(1.0, 0.5, 4), range(5.0, 5.0, 4), range(0.5, 0.5, 8)];
    let ma_cross = vec![vec![0.0, 1.0], range(5.0, 5.0, 6), range(50.0, 25.0, 6)];
    let rsi = vec![range(5.0, 3.0, 5), range(15.0, 5.0, 4), range(60.0, 5.0, 4), vec![7.0, 14.0], vec![0.0, 1.5, 3.0]];
    let mut out = Vec::new();
    for data in ["synthetic:bars=35040,seed=42", "synthetic:bars=20000,seed=7,market=fx"] {
        out.push((data, Strategy::parse("bb_atr").unwrap(), bb_atr.clone()));
        out.push((data, Strategy::parse("ma_cross").unwrap(), ma_cross.clone()));
        out.push((data, Strategy::parse("rsi_reversion").unwrap(), rsi.clone()));
    }
    out
}

#[test]
fn gpu_totals_are_the_cpus_bits_for_every_strategy_and_market() {
    let _gpus = one_test_on_the_gpus();
    for (source, strategy, axes) in cases() {
        let data = Ohlcv::load(source).unwrap();
        let book = cpu_book(&data, strategy.clone(), &axes);
        let tables = BarTables::new(&book, FEE);
        let plans = all_plans(&book);
        let cpu = simulate_cpu(&book, &tables, &plans).totals;
        let trades: u64 = cpu.iter().map(|t| u64::from(t.trades)).sum();
        assert!(trades > plans.len() as u64, "{source} {strategy}: the sweep trades ({trades} trades)");
        for ctx in adapters() {
            let gpu =
                GpuBacktester::new(ctx.clone(), &book, &tables).unwrap().run(&book, &tables, &plans).unwrap().totals;
            let differ = cpu.iter().zip(&gpu).filter(|(c, g)| c != g).count();
            println!(
                "{source} {strategy}: {} combos, {trades} trades on {}: {differ} differ",
                plans.len(),
                ctx.report().label()
            );
            let first = cpu.iter().zip(&gpu).position(|(c, g)| c != g);
            assert_eq!(differ, 0, "first at combo {first:?}: {:?}", first.map(|i| (cpu[i], gpu[i])));
        }
    }
}

#[test]
fn gpu_results_do_not_depend_on_how_combos_are_cut() {
    let _gpus = one_test_on_the_gpus();
    let data = Ohlcv::load("synthetic:bars=3000,seed=11").unwrap();
    let book = cpu_book(
        &data,
        Strategy::parse("bb_atr").unwrap(),
        &[range(10.0, 5.0, 6), vec![1.5, 2.5], vec![7.0, 14.0], range(1.0, 1.0, 4)],
    );
    let tables = BarTables::new(&book, FEE);
    let plans = all_plans(&book);
    for ctx in adapters() {
        let gpu = GpuBacktester::new(ctx.clone(), &book, &tables).unwrap();
        let whole = gpu.run(&book, &tables, &plans).unwrap().totals;
        let mut pieces: Vec<Totals> = Vec::new();
        for chunk in plans.chunks(7) {
            pieces.extend(gpu.run(&book, &tables, chunk).unwrap().totals);
        }
        assert_eq!(whole, pieces, "{}", ctx.report().label());
    }
}

#[test]
fn backtester_runs_where_the_dispatcher_says_with_the_same_bytes() {
    let _gpus = one_test_on_the_gpus();
    let data = Ohlcv::load("synthetic:bars=5000,seed=5").unwrap();
    let book = cpu_book(
        &data,
        Strategy::parse("bb_atr").unwrap(),
        &[range(10.0, 10.0, 3), vec![2.0], vec![14.0], vec![1.0, 2.0]],
    );
    let plans = all_plans(&book);
    let backtester = Backtester::new(&book, FEE);
    let cpu: Vec<u64> = plans.iter().flat_map(|p| backtester.metrics(p).values().map(f64::to_bits)).collect();
    assert_eq!(backtester.operation(6).key(), r#"backtest_bb_atr:{"bars":5000,"size":30000}"#);
    let bits =
        |m: Vec<threadx_backtest::Metrics>| m.iter().flat_map(|m| m.values().map(f64::to_bits)).collect::<Vec<_>>();
    let dir = tempfile::tempdir().unwrap();
    let forced_cpu = dispatcher_in(dir.path(), DeviceMode::Cpu);
    let out = backtester.run(&forced_cpu, &plans);
    assert_eq!(out.device, Device::Cpu);
    assert_eq!(bits(out.value), cpu);
    let forced_gpu = dispatcher_in(dir.path(), DeviceMode::Gpu);
    let out = backtester.run(&forced_gpu, &plans);
    let expected = if forced_gpu.gpu().is_some() { Device::Gpu } else { Device::Cpu };
    assert_eq!(out.device, expected, "no GPU: a complete result from the CPU");
    assert_eq!(bits(out.value), cpu, "the same bytes on {:?}", out.device);
}

/// Closes that grow or fall 2^30-fold: each trade's return, formed in f64 by the kernel,
/// and its square reach magnitudes near the top of float64.wgsl's exact units, and the
/// totals are still the CPU's bits. Past a ratio of 2^31 the kernel declines the book,
/// saying why, and the CPU runs it.
#[test]
fn trades_of_extreme_returns_are_the_cpus_bits_and_past_the_kernels_range_it_declines() {
    let _gpus = one_test_on_the_gpus();
    let mut rng = SeededRng::new(9);
    let book_of = |span: f64, rng: &mut SeededRng| {
        let n = 3000;
        // Up to `span`, back down to 1, twice, with noise: trades in both directions.
        let close: Vec<f64> = (0..n)
            .map(|t| {
                let phase = (t as f64 / n as f64 * 4.0 * std::f64::consts::PI).sin().abs();
                span.powf(phase) * (1.0 + 0.05 * (rng.uniform() - 0.5))
            })
            .collect();
        let ts: Vec<i64> = (0..n as i64).map(|t| t * 900_000).collect();
        let data = Ohlcv::new("extreme", ts, close.clone(), close.clone(), close.clone(), close, vec![1.0; n]).unwrap();
        cpu_book(
            &data,
            Strategy::parse("ma_cross").unwrap(),
            &[vec![0.0, 1.0], range(3.0, 4.0, 4), range(20.0, 40.0, 4)],
        )
    };
    let book = book_of(2f64.powi(30), &mut rng);
    let tables = BarTables::new(&book, FEE);
    let plans = all_plans(&book);
    let cpu = simulate_cpu(&book, &tables, &plans).totals;
    let biggest = cpu.iter().map(|t| t.metrics(book.bars(), book.bars_per_year()).expectancy).fold(0.0, f64::max);
    assert!(biggest > 1e3, "the trades' returns are extreme (mean {biggest})");
    for ctx in adapters() {
        let gpu = GpuBacktester::new(ctx.clone(), &book, &tables).unwrap().run(&book, &tables, &plans).unwrap();
        assert_eq!(gpu.totals, cpu, "{}", ctx.report().label());
    }
    let past = book_of(2f64.powi(32), &mut rng);
    let tables = BarTables::new(&past, FEE);
    for ctx in adapters() {
        let refused = GpuBacktester::new(ctx.clone(), &past, &tables).unwrap_err().to_string();
        assert!(refused.contains("the prices span a ratio of"), "{}: {refused}", ctx.report().label());
    }
}
