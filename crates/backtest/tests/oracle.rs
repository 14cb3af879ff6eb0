//! The reported metrics (integer totals, the same bytes on every device) against the f64
//! per-bar simulation, the oracle, within the precision budget; and the decisions against
//! exact rational arithmetic on FX-like prices, where many windows' means equal the close:
//! the middle band is the correctly rounded mean of the window, and a close equal to it
//! is not above it.

use crate::common;

use common::{all_plans, cpu_book};
use proptest::prelude::*;
use threadx_backtest::{BarTables, Costs, ExitReason, Metrics, Strategy, simulate_detailed, simulate_totals};
use threadx_indicators::{Indicator, Ohlcv, compute_cpu};

/// The budget: total_return and max_drawdown are ratios minus 1, so their error is
/// measured on the ratio (1e-12 of 1 + value); Sharpe within 1e-10 relative, or 1e-13
/// absolute where the mean return nearly cancels (a Sharpe of 1e-6 carries the rounding
/// of returns a million times its size), and its annualised form alike; counts and
/// exposure exact. Where the oracle rounds a tie (fee 0, a trade leaving at exactly its
/// entry price: proceeds equal the cash in exact arithmetic, not a win, but the f64 chain
/// of products can land an ulp above), exact arithmetic decides: such trades are not wins.
fn check(got: &Metrics, oracle: &Metrics, exact_wins: u32) -> Result<(), String> {
    let ratio = |a: f64, b: f64| (a - b).abs() <= 1e-12 * (1.0 + b);
    let same_counts = (got.trades, got.closed_trades, got.exposure.to_bits())
        == (oracle.trades, oracle.closed_trades, oracle.exposure.to_bits());
    let wins = (got.win_rate.is_nan() && oracle.win_rate.is_nan())
        || got.win_rate == f64::from(exact_wins) / f64::from(got.closed_trades);
    let close =
        |a: f64, b: f64, scale: f64| (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-10 * b.abs() + 1e-13 * scale;
    let root_per_year = oracle.sharpe_annual / oracle.sharpe;
    let sharpe =
        close(got.sharpe, oracle.sharpe, 1.0) && close(got.sharpe_annual, oracle.sharpe_annual, root_per_year.abs());
    if same_counts
        && wins
        && sharpe
        && ratio(got.total_return, oracle.total_return)
        && ratio(got.max_drawdown, oracle.max_drawdown)
    {
        Ok(())
    } else {
        Err(format!("fixed point {got:?}\n    f64 oracle {oracle:?} (exact wins {exact_wins})"))
    }
}

fn axes(which: usize) -> (Strategy, Vec<Vec<f64>>) {
    match which {
        0 => (
            Strategy::parse("bb_atr").unwrap(),
            vec![vec![10.0, 55.0], vec![1.0, 2.0], vec![5.0, 14.0], vec![0.5, 3.0]],
        ),
        1 => (Strategy::parse("ma_cross").unwrap(), vec![vec![0.0, 1.0], vec![3.0, 10.0], vec![20.0, 55.0]]),
        _ => (
            Strategy::parse("rsi_reversion").unwrap(),
            vec![vec![5.0, 14.0], vec![20.0, 35.0], vec![60.0, 80.0], vec![7.0], vec![0.0, 2.0]],
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn fixed_point_metrics_are_within_budget_of_the_f64_oracle(
        seed in 0u64..1000, which in 0usize..3, fx in any::<bool>(), fee in prop_oneof![Just(0.0), 0.0f64..0.01],
    ) {
        let market = if fx { ",market=fx" } else { "" };
        let data = Ohlcv::load(&format!("synthetic:bars=4000,seed={seed}{market}")).unwrap();
        let (strategy, axes) = axes(which);
        let book = cpu_book(&data, strategy.clone(), &axes);
        let tables = BarTables::new(&book, Costs { fee, slippage: 0.0 });
        for plan in all_plans(&book) {
            let oracle = simulate_detailed(&book, &plan, Costs { fee, slippage: 0.0 });
            let exact_wins = oracle
                .trades
                .iter()
                .filter(|t| t.reason != ExitReason::OpenAtEnd)
                .filter(|t| !(fee == 0.0 && t.exit_price == t.entry_price) && t.return_ > 0.0)
                .count() as u32;
            let got = simulate_totals(&book, &tables, &plan).metrics(book.bars(), book.bars_per_year());
            prop_assert!(check(&got, &oracle.metrics, exact_wins).is_ok(), "{} {plan:?}: {}", strategy, check(&got, &oracle.metrics, exact_wins).unwrap_err());
        }
    }
}

/// FX-like prices lie in [1, 2), where every f64 is an integer number of 2^-52: window
/// sums, squares and the band tests are then exact in i128.
fn units(x: f64) -> i128 {
    assert!((1.0..2.0).contains(&x), "{x} outside [1, 2)");
    (x * (1u64 << 52) as f64) as i128
}

/// The mean of the window ending at t, correctly rounded (half to even) to an f64 in
/// [1, 2): the nearest integer number of 2^-52 to Σx / p, in exact arithmetic.
fn rounded_mean(x: &[i128], t: usize, p: usize) -> i128 {
    let (sum, p) = (x[t + 1 - p..=t].iter().sum::<i128>(), p as i128);
    let (q, r) = (sum / p, sum % p);
    match (2 * r).cmp(&p) {
        std::cmp::Ordering::Less => q,
        std::cmp::Ordering::Greater => q + 1,
        std::cmp::Ordering::Equal => q + (q & 1),
    }
}

/// close[t] < mean − k · population sd, k = num/den, in exact arithmetic:
/// S − p·x > 0 and den² (S − p·x)² > num² (p·Q − S²).
fn exactly_below_lower(x: &[i128], t: usize, p: usize, (num, den): (i128, i128)) -> bool {
    // Relative to the window's first value, so that squares stay well inside i128.
    let origin = x[t + 1 - p];
    let window: Vec<i128> = x[t + 1 - p..=t].iter().map(|v| v - origin).collect();
    let (s, q): (i128, i128) = window.iter().fold((0, 0), |(s, q), v| (s + v, q + v * v));
    let gap = s - p as i128 * window[p - 1];
    gap > 0 && den * den * gap * gap > num * num * (p as i128 * q - s * s)
}

#[test]
fn decisions_agree_with_exact_arithmetic_on_fx_quotes() {
    let data = Ohlcv::load("synthetic:bars=3000,seed=11,market=fx").unwrap();
    let x: Vec<i128> = data.close().iter().map(|&c| units(c)).collect();
    // The quotes as integers of 1e-5, as the data gives them.
    let ticks: Vec<i64> = data.close().iter().map(|&c| (c * 1e5).round() as i64).collect();
    let mut decimal_ties = 0;
    for (p, k) in [(20usize, (2i128, 1i128)), (55, (3, 2))] {
        let bb_std = num_over_den(k);
        let book =
            cpu_book(&data, Strategy::parse("bb_atr").unwrap(), &[vec![p as f64], vec![bb_std], vec![14.0], vec![2.0]]);
        let plan = book.plan(&[0, 0, 0, 0]);
        let report = simulate_detailed(&book, &plan, Costs { fee: 0.001, slippage: 0.0 });
        // The same rules in exact arithmetic, bar by bar. The stop level is defined in f64
        // (close − 2 · ATR at entry), and comparing a close with it is exact.
        let close = data.close();
        let atr = compute_cpu(&data, &[Indicator::Atr { period: 14 }]).unwrap();
        let level = |e: usize| close[e] - 2.0 * atr[0].output(0)[e];
        let middle = compute_cpu(&data, &[Indicator::Sma { period: p }]).unwrap();
        let mut trades = Vec::new();
        let mut entry = None;
        for t in plan.warmup as usize..x.len() {
            assert_eq!(
                units(middle[0].output(0)[t]),
                rounded_mean(&x, t, p),
                "the mean at bar {t} is correctly rounded"
            );
            decimal_ties += usize::from(p as i64 * ticks[t] == ticks[t + 1 - p..=t].iter().sum::<i64>());
            match entry {
                Some(e) if x[t] > rounded_mean(&x, t, p) || close[t] <= level(e) => {
                    trades.push((e, t));
                    entry = None;
                }
                None if exactly_below_lower(&x, t, p, k) => {
                    entry = Some(t);
                }
                _ => {}
            }
        }
        if let Some(e) = entry {
            trades.push((e, x.len() - 1));
        }
        let engine: Vec<(usize, usize)> = report.trades.iter().map(|t| (t.entry_bar, t.exit_bar)).collect();
        assert_eq!(engine, trades, "bb_period {p}, bb_std {bb_std}");
        assert!(trades.len() > 20, "the rules trade ({} trades)", trades.len());
    }
    assert!(decimal_ties > 50, "the quotes have windows whose mean is exactly the close ({decimal_ties})");
}

fn num_over_den((num, den): (i128, i128)) -> f64 {
    num as f64 / den as f64
}
