//! Properties of the CPU simulation (proptest): it agrees with a plain per-bar reference
//! written straight from docs/strategies.md over the indicator values; metrics keep their bounds;
//! results are bit-identical however combos are cut and however many threads run them.

use crate::common;

use common::{QUARTER_HOURS_PER_YEAR, all_plans, cpu_book, metrics_of_equity};
use proptest::prelude::*;
use threadx_backtest::{
    BacktestReport, BarTables, Costs, Metrics, Strategy, curve_metrics, simulate_cpu, simulate_detailed,
};
use threadx_indicators::{Indicator, Ohlcv, compute_cpu};

fn data(bars: usize, seed: u64) -> Ohlcv {
    Ohlcv::load(&format!("synthetic:bars={bars},seed={seed}")).unwrap()
}

/// bb_atr as docs/strategies.md words it, bar by bar, from the indicator series: no bits, no
/// skipping, equity recomputed from shares and cash at every close.
fn reference_bb_atr(data: &Ohlcv, p: usize, k: f64, a: usize, m: f64, fee: f64) -> Metrics {
    let values =
        compute_cpu(data, &[Indicator::BollingerBands { period: p, std: k }, Indicator::Atr { period: a }]).unwrap();
    let (middle, lower, atr) = (values[0].output(0), values[0].output(2), values[1].output(0));
    let close = data.close();
    let n = close.len();
    let w = (p - 1).max(a);
    let (mut cash, mut shares, mut entry_cash, mut stop) = (1.0, 0.0, 0.0, 0.0);
    let (mut trades, mut wins, mut held) = (0u32, 0u32, 0usize);
    let mut closed = Vec::new();
    let mut equity = Vec::with_capacity(n);
    for t in 0..n {
        let c = close[t];
        if shares > 0.0 {
            if c > middle[t] || c <= stop {
                let proceeds = shares * c * (1.0 - fee);
                closed.push(proceeds / entry_cash - 1.0);
                wins += u32::from(proceeds > entry_cash);
                cash = proceeds;
                shares = 0.0;
            } else {
                held += 1;
            }
        } else if t >= w && c < lower[t] {
            entry_cash = cash;
            shares = cash / (c * (1.0 + fee));
            cash = 0.0;
            stop = c - m * atr[t];
            trades += 1;
            held += 1;
        }
        equity.push(if shares > 0.0 { shares * c } else { cash });
    }
    metrics_of_equity(&equity, (trades, wins, held), &closed, QUARTER_HOURS_PER_YEAR)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_the_plain_reference(
        seed in 0u64..1000, bars in 60usize..1500, p in 2usize..40, k in 0.5f64..3.0,
        a in 1usize..30, m in 0.5f64..4.0, fee in 0.0f64..0.01,
    ) {
        let d = data(bars, seed);
        prop_assume!(bars > p.max(a + 1));
        let b = cpu_book(&d, Strategy::parse("bb_atr").unwrap(), &[vec![p as f64], vec![k], vec![a as f64], vec![m]]);
        let report = simulate_detailed(&b, &b.plan(&[0, 0, 0, 0]), Costs { fee, slippage: 0.0 });
        let want = reference_bb_atr(&d, p, k, a, m, fee);
        let got = report.metrics;
        prop_assert_eq!((got.trades, got.closed_trades), (want.trades, want.closed_trades));
        for (name, (g, w)) in Metrics::NAMES.iter().zip(got.values().into_iter().zip(want.values())) {
            // Relative, plus an absolute floor for values near 0 (a Sharpe ratio of 6e-6
            // is a mean return of ~1e-8 that the f64 reference sums with ~1e-16 rounding;
            // the annualised ratios scale that by the square root of the bars per year).
            let annual = ["sharpe_annual", "sortino", "volatility"].contains(name);
            let scale = if annual { report.bars_per_year.sqrt() } else { 1.0 };
            let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-10 * w.abs() + 1e-14 * scale;
            prop_assert!(ok, "{}: engine {} vs reference {}", name, g, w);
        }
        // Bounds: drawdown ≤ 0, equity positive, exposure a fraction.
        prop_assert!(got.max_drawdown <= 0.0);
        prop_assert!(report.equity.iter().all(|&e| e > 0.0 && e.is_finite()));
        prop_assert!((0.0..=1.0).contains(&got.exposure));
        prop_assert_eq!(report.trades.len() as u32, got.trades);
        if got.trades == 0 {
            prop_assert_eq!((got.total_return, got.max_drawdown), (0.0, 0.0));
        }
    }

    #[test]
    fn every_strategy_keeps_its_bounds(seed in 0u64..1000, which in 0usize..3, fee in 0.0f64..0.02) {
        let d = data(800, seed);
        let (strategy, axes) = match which {
            0 => (Strategy::parse("bb_atr").unwrap(), vec![vec![10.0, 30.0], vec![1.0, 2.5], vec![5.0, 14.0], vec![0.5, 3.0]]),
            1 => (Strategy::parse("ma_cross").unwrap(), vec![vec![0.0, 1.0], vec![3.0, 10.0], vec![20.0, 40.0]]),
            _ => (Strategy::parse("rsi_reversion").unwrap(), vec![vec![5.0, 14.0], vec![20.0, 35.0], vec![60.0, 80.0], vec![7.0], vec![0.0, 2.0]]),
        };
        let b = cpu_book(&d, strategy.clone(), &axes);
        for plan in all_plans(&b) {
            let r = simulate_detailed(&b, &plan, Costs { fee, slippage: 0.0 });
            let m = r.metrics;
            prop_assert!(m.max_drawdown <= 0.0 && m.max_drawdown > -1.0);
            prop_assert!(m.total_return > -1.0);
            prop_assert!(r.equity.iter().all(|&e| e > 0.0));
            prop_assert!(m.closed_trades <= m.trades && m.trades <= m.closed_trades + 1);
            if m.trades == 0 {
                prop_assert_eq!((m.total_return, m.max_drawdown, m.exposure), (0.0, 0.0, 0.0));
                prop_assert!(m.sharpe.is_nan());
            }
            let first = r.trades.first().map_or(usize::MAX, |t| t.entry_bar);
            prop_assert!(first >= plan.warmup as usize);
            for pair in r.trades.windows(2) {
                prop_assert!(pair[1].entry_bar > pair[0].exit_bar, "no re-entry on an exit bar");
            }
        }
    }

    #[test]
    fn chunking_and_threads_do_not_change_a_bit(seed in 0u64..1000, cuts in prop::collection::vec(1usize..40, 1..6)) {
        let d = data(1200, seed);
        let axes = vec![vec![10.0, 20.0, 30.0], vec![1.5, 2.0], vec![7.0, 14.0], vec![1.0, 2.0, 3.0]];
        let b = cpu_book(&d, Strategy::parse("bb_atr").unwrap(), &axes);
        let plans = all_plans(&b);
        let tables = BarTables::new(&b, Costs { fee: 0.001, slippage: 0.0 });
        let whole = simulate_cpu(&b, &tables, &plans).totals;
        let mut pieces = Vec::new();
        let mut rest = plans.as_slice();
        for &cut in cuts.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (head, tail) = rest.split_at(cut.min(rest.len()));
            pieces.extend(simulate_cpu(&b, &tables, head).totals);
            rest = tail;
        }
        let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let single = one_thread.install(|| simulate_cpu(&b, &tables, &plans)).totals;
        prop_assert_eq!(&whole, &pieces);
        prop_assert_eq!(&whole, &single);
    }

    #[test]
    fn curve_metrics_windows_and_chains_agree_with_the_engine(
        seed in 0u64..1000, p in 5usize..30, m in 0.5f64..4.0, cut in 0.2f64..0.8,
    ) {
        let d = data(1200, seed);
        // Relative 1e-9, with an absolute floor of 1e-12: the curve's returns (e/prev − 1 in
        // f64) carry about ε each, so a near-zero Sharpe ratio (mean ≈ 0, σ ≈ 0.003) differs
        // from the engine's exact sums by about ε/σ ≈ 4e-14 (seed 950: −9.06e-7, 1.1e-15 apart).
        let close = |a: f64, b: f64| (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-9 * b.abs().max(1e-3);
        let same = |a: &Metrics, b: &Metrics| a.trades == b.trades && a.closed_trades == b.closed_trades
            && a.values().into_iter().zip(b.values()).all(|(x, y)| close(x, y));
        let whole = cpu_book(&d, Strategy::parse("bb_atr").unwrap(), &[vec![p as f64], vec![2.0], vec![14.0], vec![m]]);
        let report = simulate_detailed(&whole, &whole.plan(&[0, 0, 0, 0]), Costs { fee: 0.001, slippage: 0.0 });
        prop_assert!(same(&curve_metrics(&report.equity, &report.trades, report.bars_per_year), &report.metrics));
        prop_assert!(same(&report.since(0).metrics, &report.metrics));

        // A window whose first `w` bars are warm-up (no entry there) reads like a run on
        // the window alone; two windows chained read like one run of both.
        let w = (p - 1).max(14);
        let split = (1200.0 * cut) as usize;
        let (first, second) = (d.slice(0..split), d.slice(split - w..1200));
        let [b1, b2] = [&first, &second].map(|part| cpu_book(part, Strategy::parse("bb_atr").unwrap(), &[vec![p as f64], vec![2.0], vec![14.0], vec![m]]));
        let r1 = simulate_detailed(&b1, &b1.plan(&[0, 0, 0, 0]), Costs { fee: 0.001, slippage: 0.0 });
        let r2 = simulate_detailed(&b2, &b2.plan(&[0, 0, 0, 0]), Costs { fee: 0.001, slippage: 0.0 }).since(w);
        prop_assert_eq!(r2.equity.len(), 1200 - split);
        prop_assert!(r2.trades.iter().all(|t| t.entry_bar < 1200 - split));
        let chained = BacktestReport::chain(&[r1.clone(), r2.clone()]);
        prop_assert_eq!(chained.trades.len(), r1.trades.len() + r2.trades.len());
        let end = r1.equity.last().unwrap() * r2.equity.last().unwrap() - 1.0;
        prop_assert!(close(chained.metrics.total_return, end));
        prop_assert!(same(&chained.metrics, &curve_metrics(&chained.equity, &chained.trades, chained.bars_per_year)));
        prop_assert!(chained.metrics.max_drawdown <= r1.metrics.max_drawdown.min(r2.metrics.max_drawdown) + 1e-12);
    }
}
