//! Helpers shared by the test files: a CPU-built signal book and its plans, and metrics
//! computed the plain way from an equity curve.
#![allow(dead_code)] // Each test file uses its part.

use threadx_backtest::{ComboPlan, ExitReason, Metrics, SignalBook, Strategy};
use threadx_dispatch::DeviceMode;
use threadx_dispatch::testing::dispatcher_in;
use threadx_indicators::{IndicatorBank, Ohlcv};

/// The fee of the tests that compare with a plain loop.
pub const FEE: f64 = 0.001;
/// [`FEE`] as the simulation takes it (no slippage).
pub const COSTS: threadx_backtest::Costs = threadx_backtest::Costs { fee: FEE, slippage: 0.0 };

/// A strategy's decisions for one parameter set, as a plain loop reads them.
pub struct Rules<'a> {
    pub warmup: usize,
    pub entry: Box<dyn Fn(usize) -> bool + 'a>,
    pub exit: Box<dyn Fn(usize) -> bool + 'a>,
    /// The level at the entry bar, if the strategy has one.
    pub stop: Option<Box<dyn Fn(usize) -> f64 + 'a>>,
    pub take_profit: Option<Box<dyn Fn(usize) -> f64 + 'a>>,
    pub max_bars: usize,
}

pub type Trades = Vec<(usize, usize, ExitReason)>;

/// Trades and equity by docs/strategies.md's rules, bar by bar in f64: long only, all
/// cash in at the close, a fee per side, exits checked from the bar after the entry
/// (stop, then take-profit, then the exit rule, then the time limit), no entry on the
/// bar of an exit.
pub fn plain_loop(close: &[f64], rules: &Rules<'_>) -> (Trades, Vec<f64>) {
    let n = close.len();
    let mut equity = vec![1.0; n];
    let mut trades = Vec::new();
    let mut cash = 1.0;
    let mut t = rules.warmup;
    equity[..t.min(n)].fill(cash);
    while t < n {
        if !(rules.entry)(t) {
            equity[t] = cash;
            t += 1;
            continue;
        }
        let e = t;
        let shares = cash / (close[e] * (1.0 + FEE));
        equity[e] = shares * close[e];
        let stop = rules.stop.as_ref().map_or(f64::NAN, |s| s(e));
        let target = rules.take_profit.as_ref().map_or(f64::NAN, |s| s(e));
        let mut exit = None;
        for (x, &c) in close.iter().enumerate().skip(e + 1) {
            let reason = if c <= stop {
                Some(ExitReason::Stop)
            } else if target > 0.0 && c >= target {
                Some(ExitReason::TakeProfit)
            } else if (rules.exit)(x) {
                Some(ExitReason::Signal)
            } else if rules.max_bars > 0 && x - e >= rules.max_bars {
                Some(ExitReason::MaxBars)
            } else {
                None
            };
            if let Some(reason) = reason {
                exit = Some((x, reason));
                break;
            }
            equity[x] = shares * c;
        }
        match exit {
            Some((x, reason)) => {
                cash = shares * close[x] * (1.0 - FEE);
                equity[x] = cash;
                trades.push((e, x, reason));
                t = x + 1;
            }
            None => {
                trades.push((e, n - 1, ExitReason::OpenAtEnd));
                t = n;
            }
        }
    }
    (trades, equity)
}

/// The signal book of `axes`, its indicators computed on the CPU.
pub fn cpu_book(data: &Ohlcv, strategy: Strategy, axes: &[Vec<f64>]) -> SignalBook {
    let dir = tempfile::tempdir().unwrap();
    let dispatcher = dispatcher_in(dir.path(), DeviceMode::Cpu);
    SignalBook::build(&IndicatorBank::new(data, &dispatcher), &strategy, axes).unwrap()
}

/// `count` values from `start` in steps of `step`.
pub fn range(start: f64, step: f64, count: usize) -> Vec<f64> {
    (0..count).map(|i| start + step * i as f64).collect()
}

/// Every plan of the full grid of a book's axes, in combo order.
pub fn all_plans(book: &SignalBook) -> Vec<ComboPlan> {
    (0..book.grid_len()).map(|combo| book.combo_plan(combo)).collect()
}

/// Bars per year of bars 15 minutes apart: 365 days of 96.
pub const QUARTER_HOURS_PER_YEAR: f64 = 365.0 * 96.0;

/// Metrics by docs/strategies.md's definitions from the equity at every close (E[−1] = 1)
/// and the closed trades' returns, with two-pass means and standard deviations and a
/// running peak; annualised with `per_year` bars a year.
pub fn metrics_of_equity(
    equity: &[f64],
    (trades, wins, held): (u32, u32, usize),
    closed_returns: &[f64],
    per_year: f64,
) -> Metrics {
    let n = equity.len();
    let mut prev = 1.0;
    let r: Vec<f64> = equity
        .iter()
        .map(|&e| {
            let r = e / prev - 1.0;
            prev = e;
            r
        })
        .collect();
    let (mean, std) = mean_std(&r);
    let (mut peak, mut mdd) = (f64::MIN, 0.0f64);
    for &e in equity {
        peak = peak.max(e);
        mdd = mdd.min(e / peak - 1.0);
    }
    let sharpe = if std > 0.0 { mean / std } else { f64::NAN };
    let cagr = equity[n - 1].powf(per_year / n as f64) - 1.0;
    let downside = (r.iter().map(|x| x.min(0.0).powi(2)).sum::<f64>() / n as f64).sqrt();
    let closed = closed_returns.len() as u32;
    let (trade_mean, trade_std) = mean_std(closed_returns);
    let gains: f64 = closed_returns.iter().filter(|&&x| x > 0.0).sum();
    let losses: f64 = -closed_returns.iter().filter(|&&x| x < 0.0).sum::<f64>();
    Metrics {
        total_return: equity[n - 1] - 1.0,
        trades,
        closed_trades: closed,
        win_rate: if closed > 0 { f64::from(wins) / f64::from(closed) } else { f64::NAN },
        max_drawdown: mdd,
        sharpe,
        sharpe_annual: sharpe * per_year.sqrt(),
        exposure: held as f64 / n as f64,
        cagr,
        volatility: std * per_year.sqrt(),
        sortino: if downside > 0.0 { mean / downside * per_year.sqrt() } else { f64::NAN },
        calmar: if mdd < 0.0 { cagr / -mdd } else { f64::NAN },
        profit_factor: if losses > 0.0 { gains / losses } else { f64::NAN },
        expectancy: if closed > 0 { trade_mean } else { f64::NAN },
        sqn: if trade_std > 0.0 { f64::from(closed).sqrt() * trade_mean / trade_std } else { f64::NAN },
        turnover: f64::NAN,
        mean_positions: f64::NAN,
    }
}

/// The returns of the closed trades of `trades` from the equity curve they made: the
/// equity at the exit over the equity before the entry, minus 1.
pub fn closed_returns(equity: &[f64], trades: &[(usize, usize, ExitReason)]) -> Vec<f64> {
    trades
        .iter()
        .filter(|t| t.2 != ExitReason::OpenAtEnd)
        .map(|&(e, x, _)| equity[x] / if e == 0 { 1.0 } else { equity[e - 1] } - 1.0)
        .collect()
}

/// Every metric of `got` within `tolerance` (relative, or absolute below 1) of `want`'s,
/// NaN where it is NaN.
pub fn assert_close_metrics(got: &Metrics, want: &Metrics, tolerance: f64, what: &str) {
    assert_eq!((got.trades, got.closed_trades), (want.trades, want.closed_trades), "{what}");
    for (name, (g, w)) in Metrics::NAMES.iter().zip(got.values().into_iter().zip(want.values())) {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= tolerance * w.abs().max(1.0);
        assert!(ok, "{what} {name}: got {g}, want {w}");
    }
}

/// The mean and the standard deviation (ddof 1, NaN under two values), in two passes.
fn mean_std(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, if x.len() < 2 { f64::NAN } else { var.sqrt() })
}

/// Held by a test while it runs long work on the adapters: one test at a time. wgpu's GL
/// backend panics when a thread waits more than six seconds for the adapter's context
/// (`Could not lock adapter context`), which another test's long submission on a busy
/// 2-core machine can hold that long.
pub fn one_test_on_the_gpus() -> std::sync::MutexGuard<'static, ()> {
    static GPUS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    GPUS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
