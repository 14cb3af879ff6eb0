//! Backtest speed with the signal book built (indicators precomputed), on a year of
//! synthetic 15-minute bars (35,040). Throughput is in bar·combos per second.
//!
//! - `bb_atr_cpu/one_thread`: the inner loop on one core, integer totals as every device
//!   reports them (the bar: ≥ 250 million bar·combos/s/core; a plain numba loop of
//!   the same strategy does about 170 million).
//! - `bb_atr_cpu/all_threads`: the rayon batch on every core.
//! - `bb_atr_cpu/one_thread_with_blocks`: `one_thread` recording the 16 blocks of
//!   `--overfitting` (issue #29's bar: the statistics add at most 10 % to the default job).
//! - `market_cpu/*`: the same grid and data on one core, traded as a market (issue #30's
//!   bar: a sweep with stops inside the bar and a trailing stop keeps ≥ 70 % of the
//!   close-only sweep's bar·combos/s): `close_only` is `bb_atr` itself; `intrabar_trail`
//!   adds `trail = "atr_mult * atr(atr_period)"` and `intrabar = true` (the market rules'
//!   fast twin, `market_close.rs`); `long_short` adds the short side (upper band, its
//!   own ATR stop) and reversals, on closes (the same twin's short loop).
//! - `bb_atr_gpu/*`: the whole-backtest kernel on the best adapter, plans uploaded and
//!   metrics read back in the timing.
//! - `book/*`: building the book (indicators and decision rows) for the same grid, and for
//!   the default sweep grids of ma_cross (380 combos) and rsi_reversion (400 combos).
#![allow(clippy::print_stderr)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use threadx_backtest::{
    BarTables, BlockCuts, ComboPlan, Costs, DEFAULT_BLOCKS, GpuBacktester, SignalBook, Strategy, simulate_cpu,
    simulate_totals, simulate_with_blocks,
};
use threadx_dispatch::{DeviceMode, Dispatcher, select_gpu};
use threadx_indicators::{IndicatorBank, Ohlcv};

const FEE: Costs = Costs { fee: 0.001, slippage: 0.0 };

/// 5 bb_period × 2 bb_std × 2 atr_period × 5 atr_mult = 100 combos.
fn grid() -> Vec<Vec<f64>> {
    vec![vec![10.0, 20.0, 30.0, 40.0, 50.0], vec![1.5, 2.0], vec![7.0, 14.0], vec![1.0, 1.5, 2.0, 2.5, 3.0]]
}

fn book(data: &Ohlcv) -> SignalBook {
    book_of(data, "bb_atr", &grid())
}

fn book_of(data: &Ohlcv, strategy: &str, axes: &[Vec<f64>]) -> SignalBook {
    let dispatcher = Dispatcher::from_env(Some(DeviceMode::Cpu)).expect("a CPU dispatcher");
    let strategy = Strategy::parse(strategy).expect("a built-in strategy");
    SignalBook::build(&IndicatorBank::new(data, &dispatcher), &strategy, axes).expect("a valid grid")
}

/// `start`, `start + step`, … up to `stop` inclusive.
fn range(start: f64, stop: f64, step: f64) -> Vec<f64> {
    (0..).map(|i| start + step * f64::from(i)).take_while(|&v| v <= stop).collect()
}

fn plans(book: &SignalBook) -> Vec<ComboPlan> {
    (0..book.grid_len()).map(|combo| book.combo_plan(combo)).collect()
}

fn cpu(c: &mut Criterion) {
    let data = Ohlcv::load("synthetic").expect("synthetic data");
    let book = book(&data);
    let plans = plans(&book);
    let tables = BarTables::new(&book, FEE);
    let mut g = c.benchmark_group("bb_atr_cpu");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements((book.bars() * plans.len()) as u64));
    g.bench_function("one_thread", |b| {
        b.iter(|| plans.iter().map(|p| simulate_totals(&book, &tables, black_box(p)).log_equity).sum::<i64>())
    });
    g.bench_function("all_threads", |b| b.iter(|| simulate_cpu(&book, &tables, black_box(&plans))));
    // One thread, recording the 16 blocks that `--overfitting` needs (what they cost).
    let cuts = BlockCuts::new(book.bars(), DEFAULT_BLOCKS).expect("16 blocks");
    let mut snapshots = vec![0u128; cuts.snapshot_len()];
    g.bench_function("one_thread_with_blocks", |b| {
        b.iter(|| {
            plans
                .iter()
                .map(|p| simulate_with_blocks(&book, &tables, black_box(p), &cuts, &mut snapshots).log_equity)
                .sum::<i64>()
        })
    });
    g.finish();

    let bb_atr = Strategy::parse("bb_atr").expect("the built-in").source().to_owned();
    let trail = format!("{bb_atr}trail = \"atr_mult * atr(atr_period)\"\nintrabar = true\n");
    let long_short = format!(
        "{bb_atr}short_entry = \"close > bbands_upper(bb_period, bb_std)\"\nshort_exit = \"close < bbands_middle(bb_period)\"\nshort_stop = \"close + atr_mult * atr(atr_period)\"\n"
    );
    let mut g = c.benchmark_group("market_cpu");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements((book.bars() * plans.len()) as u64));
    for (name, source) in [("close_only", bb_atr.clone()), ("intrabar_trail", trail), ("long_short", long_short)] {
        let strategy = Strategy::from_toml(&source.replace("name = \"bb_atr\"", &format!("name = \"{name}\"")), name)
            .expect("a rule file");
        let dispatcher = Dispatcher::from_env(Some(DeviceMode::Cpu)).expect("a CPU dispatcher");
        let market =
            SignalBook::build(&IndicatorBank::new(&data, &dispatcher), &strategy, &grid()).expect("a valid grid");
        let tables = BarTables::new(&market, FEE);
        let plans = self::plans(&market);
        g.bench_function(name, |b| {
            b.iter(|| plans.iter().map(|p| simulate_totals(&market, &tables, black_box(p)).log_equity).sum::<i64>())
        });
    }
    g.finish();

    let mut g = c.benchmark_group("book");
    g.sample_size(10);
    g.bench_function("bb_atr_100_combos_35040_bars", |b| b.iter(|| SignalBook::bars(&self::book(black_box(&data)))));
    let ma_cross = [vec![0.0, 1.0], range(5.0, 50.0, 5.0), range(20.0, 200.0, 10.0)];
    g.bench_function("ma_cross_380_combos_35040_bars", |b| {
        b.iter(|| book_of(black_box(&data), "ma_cross", &ma_cross).bars())
    });
    let rsi =
        [range(7.0, 28.0, 7.0), range(20.0, 40.0, 5.0), range(60.0, 80.0, 5.0), vec![14.0], vec![0.0, 1.0, 2.0, 3.0]];
    g.bench_function("rsi_reversion_400_combos_35040_bars", |b| {
        b.iter(|| book_of(black_box(&data), "rsi_reversion", &rsi).bars())
    });
    g.finish();
}

fn gpu(c: &mut Criterion) {
    let Ok(ctx) = select_gpu().open() else {
        eprintln!("no GPU adapter: skipping the GPU benches");
        return;
    };
    let data = Ohlcv::load("synthetic").expect("synthetic data");
    let book = book(&data);
    let plans = plans(&book);
    let tables = BarTables::new(&book, FEE);
    let gpu = GpuBacktester::new(ctx.clone(), &book, &tables).expect("the book fits the adapter");
    let mut g = c.benchmark_group("bb_atr_gpu");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for copies in [1usize, 10] {
        let many: Vec<ComboPlan> = plans.iter().copied().cycle().take(plans.len() * copies).collect();
        g.throughput(Throughput::Elements((book.bars() * many.len()) as u64));
        g.bench_function(format!("{}_combos", many.len()), |b| {
            b.iter(|| gpu.run(&book, &tables, black_box(&many)).expect("GPU run"))
        });
    }
    g.finish();
}

criterion_group!(benches, cpu, gpu);
criterion_main!(benches);
