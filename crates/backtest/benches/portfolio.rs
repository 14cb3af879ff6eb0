//! A portfolio's speed against the same universe run as independent accounts: 100
//! synthetic symbols of a year of 15-minute bars (35,040 each), bb_atr at its default
//! parameters, one combo an iteration. Throughput is in symbol·bar·combos per second
//! (issue #52's bar: a portfolio sweep at ≥ 25 % of independent accounts' throughput).
//!
//! - `portfolio/one_account`: the 100 symbols as one account (`PortfolioBooks::totals`, as
//!   a sweep runs a combo), 30 % of the cash left per entry.
//! - `portfolio/independent_accounts`: each symbol's own run (`simulate_totals`), one after
//!   another on the same core.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;
use threadx_backtest::{
    Account, BarTables, ComboPlan, Costs, PortfolioBooks, SignalBook, SizeType, Sizing, Strategy, simulate_totals,
};
use threadx_dispatch::{DeviceMode, Dispatcher};
use threadx_indicators::{IndicatorBank, Ohlcv};

const SYMBOLS: u64 = 100;
const COSTS: Costs = Costs { fee: 0.001, slippage: 0.0 };

fn portfolio(c: &mut Criterion) {
    let dispatcher = Dispatcher::from_env(Some(DeviceMode::Cpu)).expect("a CPU dispatcher");
    let strategy = Strategy::parse("bb_atr").expect("the built-in");
    let axes: Vec<Vec<f64>> = strategy.schema().iter().map(|p| vec![p.default]).collect();
    let data: Vec<Ohlcv> =
        (0..SYMBOLS).map(|s| Ohlcv::load(&format!("synthetic:bars=35040,seed={s}")).expect("synthetic")).collect();
    let books: Vec<(SignalBook, &[i64])> = data
        .iter()
        .map(|d| {
            let book = SignalBook::build(&IndicatorBank::new(d, &dispatcher), &strategy, &axes).expect("a book");
            (book, d.timestamps())
        })
        .collect();
    let portfolio = PortfolioBooks::new(books).expect("plain books");
    let plans: Vec<ComboPlan> = portfolio.books().iter().map(|b| b.combo_plan(0)).collect();
    let tables: Vec<BarTables> = portfolio.books().iter().map(|b| BarTables::new(b, COSTS)).collect();
    let sizing = Sizing::new(0.3, SizeType::Percent, None, 0.0).expect("valid");
    let account = Account::new(10_000.0, sizing, COSTS).expect("valid");
    let mut g = c.benchmark_group("portfolio");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    g.throughput(Throughput::Elements(SYMBOLS * 35_040));
    g.bench_function("one_account", |b| {
        b.iter(|| portfolio.totals(black_box(&[0]), (&account, None), None).totals[0].log_equity)
    });
    g.bench_function("independent_accounts", |b| {
        b.iter(|| {
            portfolio
                .books()
                .iter()
                .zip(&tables)
                .zip(&plans)
                .map(|((book, tables), plan)| simulate_totals(book, tables, black_box(plan)).log_equity)
                .sum::<i64>()
        })
    });
    g.finish();
}

criterion_group!(benches, portfolio);
criterion_main!(benches);
