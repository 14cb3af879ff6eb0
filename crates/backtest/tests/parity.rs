//! One parity suite, run on every adapter: the whole-backtest kernel against the CPU
//! reference on sweeps of synthetic data, for every strategy; chunked GPU runs against
//! one-piece runs; the dispatcher's choice and fallback.

#![allow(clippy::print_stdout)] // The measured agreement is printed for the record (--nocapture).

mod common;

use common::{all_plans, cpu_book};
use threadx_backtest::{Backtester, GpuBacktester, KERNELS, Metrics, Strategy, simulate_cpu};
use threadx_dispatch::testing::{adapters, dispatcher_in};
use threadx_dispatch::{Device, DeviceMode};
use threadx_indicators::Ohlcv;

const FEE: f64 = 0.001;

fn range(start: f64, step: f64, count: usize) -> Vec<f64> {
    (0..count).map(|i| start + step * i as f64).collect()
}

/// Agreement of GPU metrics with the CPU's: share of combos with identical trade counts,
/// and the worst total_return error among those, relative to the final equity
/// (1 + total_return, which a total_return near 0 would otherwise blow up) and to
/// total_return itself where |total_return| ≥ 1%.
struct Agreement {
    same_trades: f64,
    worst_equity: f64,
    worst_return: f64,
}

fn agreement(cpu: &[Metrics], gpu: &[Metrics]) -> Agreement {
    assert_eq!(cpu.len(), gpu.len());
    let same: Vec<(&Metrics, &Metrics)> =
        cpu.iter().zip(gpu).filter(|(c, g)| (c.trades, c.closed_trades) == (g.trades, g.closed_trades)).collect();
    let rel = |c: &Metrics, g: &Metrics| (g.total_return - c.total_return).abs();
    Agreement {
        same_trades: same.len() as f64 / cpu.len() as f64,
        worst_equity: same.iter().map(|(c, g)| rel(c, g) / (1.0 + c.total_return)).fold(0.0, f64::max),
        worst_return: same
            .iter()
            .filter(|(c, _)| c.total_return.abs() >= 0.01)
            .map(|(c, g)| rel(c, g) / c.total_return.abs())
            .fold(0.0, f64::max),
    }
}

/// The 10,000-combo bb_atr sweep of the issue, on a year of synthetic 15-minute bars.
fn bb_atr_sweep() -> (Vec<Vec<f64>>, usize) {
    (vec![range(10.0, 2.0, 20), range(1.0, 0.5, 5), range(5.0, 3.0, 10), range(0.5, 0.5, 10)], 10_000)
}

#[test]
fn kernels_compile_on_every_adapter() {
    for ctx in adapters() {
        for kernel in KERNELS {
            ctx.pipeline(&kernel).unwrap_or_else(|e| panic!("{} on {}: {e}", kernel.name, ctx.report().label()));
        }
    }
}

#[test]
fn gpu_matches_cpu_on_a_10000_combo_bb_atr_sweep() {
    let data = Ohlcv::load("synthetic:bars=35040,seed=42").unwrap();
    let (axes, combos) = bb_atr_sweep();
    let book = cpu_book(&data, Strategy::BbAtr, &axes);
    let plans = all_plans(&book);
    assert_eq!(plans.len(), combos);
    let cpu = simulate_cpu(&book, &plans, FEE);
    let traded = cpu.iter().filter(|m| m.trades > 0).count();
    assert!(traded > combos * 9 / 10, "the sweep trades ({traded} of {combos} combos)");
    for ctx in adapters() {
        let gpu = GpuBacktester::new(ctx.clone(), &book).unwrap().run(&plans, FEE).unwrap();
        let a = agreement(&cpu, &gpu);
        println!(
            "bb_atr 10,000 combos × 35,040 bars on {}: identical trade counts {:.4}%, worst total_return error \
             {:.2e} of equity, {:.2e} relative (|total_return| ≥ 1%)",
            ctx.report().label(),
            a.same_trades * 100.0,
            a.worst_equity,
            a.worst_return
        );
        assert!(a.same_trades >= 0.999, "{}", a.same_trades);
        assert!(a.worst_return <= 1e-8 && a.worst_equity <= 1e-8, "{} {}", a.worst_return, a.worst_equity);
        for (c, g) in cpu.iter().zip(&gpu).filter(|(c, g)| c.trades == g.trades) {
            assert_eq!(c.exposure == g.exposure, c.closed_trades == g.closed_trades);
            assert!((c.max_drawdown - g.max_drawdown).abs() <= 1e-4, "{c:?} {g:?}");
        }
    }
}

#[test]
fn gpu_matches_cpu_for_every_strategy() {
    let data = Ohlcv::load("synthetic:bars=20000,seed=3").unwrap();
    let cases = [
        (Strategy::MaCross, vec![vec![0.0, 1.0], range(5.0, 5.0, 8), range(50.0, 25.0, 8)]),
        (
            Strategy::RsiReversion,
            vec![range(5.0, 3.0, 6), range(15.0, 5.0, 4), range(60.0, 5.0, 5), vec![7.0, 14.0], vec![0.0, 1.5, 3.0]],
        ),
        (Strategy::BbAtr, vec![vec![20.0], vec![2.0], vec![14.0], range(0.25, 0.25, 40)]),
    ];
    for (strategy, axes) in cases {
        let book = cpu_book(&data, strategy, &axes);
        let plans = all_plans(&book);
        let cpu = simulate_cpu(&book, &plans, FEE);
        for ctx in adapters() {
            let gpu = GpuBacktester::new(ctx.clone(), &book).unwrap().run(&plans, FEE).unwrap();
            let a = agreement(&cpu, &gpu);
            println!(
                "{strategy} {} combos on {}: identical trade counts {:.3}%, worst total_return error {:.2e} of equity",
                plans.len(),
                ctx.report().label(),
                a.same_trades * 100.0,
                a.worst_equity
            );
            assert!(a.same_trades >= 0.999 && a.worst_equity <= 1e-8, "{strategy}");
        }
    }
}

#[test]
fn gpu_results_do_not_depend_on_how_combos_are_cut() {
    let data = Ohlcv::load("synthetic:bars=3000,seed=11").unwrap();
    let book =
        cpu_book(&data, Strategy::BbAtr, &[range(10.0, 5.0, 6), vec![1.5, 2.5], vec![7.0, 14.0], range(1.0, 1.0, 4)]);
    let plans = all_plans(&book);
    for ctx in adapters() {
        let gpu = GpuBacktester::new(ctx.clone(), &book).unwrap();
        let whole = gpu.run(&plans, FEE).unwrap();
        let mut pieces = Vec::new();
        for chunk in plans.chunks(7) {
            pieces.extend(gpu.run(chunk, FEE).unwrap());
        }
        let bits = |m: &[Metrics]| m.iter().map(|m| m.values().map(f64::to_bits)).collect::<Vec<_>>();
        assert_eq!(bits(&whole), bits(&pieces), "{}", ctx.report().label());
    }
}

#[test]
fn backtester_runs_where_the_dispatcher_says() {
    let data = Ohlcv::load("synthetic:bars=5000,seed=5").unwrap();
    let book = cpu_book(&data, Strategy::BbAtr, &[range(10.0, 10.0, 3), vec![2.0], vec![14.0], vec![1.0, 2.0]]);
    let plans = all_plans(&book);
    let cpu = simulate_cpu(&book, &plans, FEE);
    let backtester = Backtester::new(&book, FEE).unwrap();
    assert_eq!(backtester.operation(6).key(), r#"backtest_bb_atr:{"bars":5000,"size":30000}"#);
    let dir = tempfile::tempdir().unwrap();
    let forced_cpu = dispatcher_in(dir.path(), DeviceMode::Cpu);
    let out = backtester.run(&forced_cpu, &plans);
    assert_eq!((out.device, out.value), (Device::Cpu, cpu.clone()));
    let forced_gpu = dispatcher_in(dir.path(), DeviceMode::Gpu);
    let out = backtester.run(&forced_gpu, &plans);
    if forced_gpu.gpu().is_some() {
        assert_eq!(out.device, Device::Gpu);
        assert_eq!(
            out.value.iter().map(|m| m.trades).collect::<Vec<_>>(),
            cpu.iter().map(|m| m.trades).collect::<Vec<_>>()
        );
    } else {
        assert_eq!(out.device, Device::Cpu, "no GPU: complete result from the CPU");
    }
}
