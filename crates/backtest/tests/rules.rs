//! Hand-worked tiny series, one rule at a time, with expectations written from docs/strategies.md's
//! rules and the prices (bands and ATR worked out by hand in the comments), and the
//! schema's refusals of bad input.

use crate::common;

use common::{QUARTER_HOURS_PER_YEAR, closed_returns, metrics_of_equity};
use threadx_backtest::{BacktestError, BacktestReport, Costs, ExitReason, Metrics, SignalBook, Strategy, backtest};
use threadx_dispatch::DeviceMode;
use threadx_dispatch::testing::dispatcher_in;
use threadx_indicators::{IndicatorBank, Ohlcv};

const FEE: f64 = 0.01;
const BUY: f64 = 1.0 + FEE;
const SELL: f64 = 1.0 - FEE;

/// Bars 15 minutes apart with high = close + spread and low = close − spread.
fn bars(close: &[f64], spread: f64) -> Ohlcv {
    let n = close.len();
    let ts = (0..n as i64).map(|i| 1_700_000_000_000 + i * 900_000).collect();
    let high = close.iter().map(|c| c + spread).collect();
    let low = close.iter().map(|c| c - spread).collect();
    Ohlcv::new("hand", ts, close.to_vec(), high, low, close.to_vec(), vec![1.0; n]).unwrap()
}

fn run(data: &Ohlcv, strategy: Strategy, params: &[(&str, &str)], fee: f64) -> BacktestReport {
    let dir = tempfile::tempdir().unwrap();
    let dispatcher = dispatcher_in(dir.path(), DeviceMode::Cpu);
    let bank = IndicatorBank::new(data, &dispatcher);
    let values = strategy.params(params).unwrap();
    backtest(&bank, &strategy, &values, Costs { fee, slippage: 0.0 }, None).unwrap()
}

/// (entry bar, exit bar, reason) of every trade.
fn trades(report: &BacktestReport) -> Vec<(usize, usize, ExitReason)> {
    report.trades.iter().map(|t| (t.entry_bar, t.exit_bar, t.reason)).collect()
}

fn close_to(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-14 * want.abs().max(1.0)
}

fn assert_metrics(got: &Metrics, want: &Metrics) {
    assert_eq!((got.trades, got.closed_trades), (want.trades, want.closed_trades), "{got:?}");
    for (name, (g, w)) in Metrics::NAMES.iter().zip(got.values().into_iter().zip(want.values())) {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= 1e-12 * w.abs().max(1e-3);
        assert!(ok, "{name}: got {g}, want {w}");
    }
}

// bb_atr, bb_period 3, bb_std 1, atr_period 1 (ATR = true range), atr_mult 1, spread 1:
//   bar  close  lower    middle   ATR
//    2    90    91.953   96.667   11    close < lower: enter at 90, stop = 90 − 11 = 79
//    3    79    81.090   89.667   12    79 ≤ 79: stopped at exactly the level; also
//                                       below lower, but no re-entry on an exit bar
//    4    74    74.317   81.000    6    below lower: enter at 74
//    5    80    75.042   77.667    7    80 > middle: exit (signal)
//    8    90    91.953   96.667   11    enter at 90
//    9    95    90.918   95.000         not above the middle (95 = 95.000…): hold
//   10    96    91.042   93.667         exit (signal)
//   11    90    91.042   93.667         enter on the last bar: open at the end
const BB_CLOSE: [f64; 12] = [100.0, 100.0, 90.0, 79.0, 74.0, 80.0, 100.0, 100.0, 90.0, 95.0, 96.0, 90.0];

fn bb_params(atr_period: &'static str) -> [(&'static str, &'static str); 4] {
    [("bb_period", "3"), ("bb_std", "1"), ("atr_period", atr_period), ("atr_mult", "1")]
}

#[test]
fn bb_atr_entry_middle_exit_exact_stop_no_reentry_open_end_fees() {
    let report = run(&bars(&BB_CLOSE, 1.0), Strategy::parse("bb_atr").unwrap(), &bb_params("1"), FEE);
    assert_eq!(
        trades(&report),
        [
            (2, 3, ExitReason::Stop),
            (4, 5, ExitReason::Signal),
            (8, 10, ExitReason::Signal),
            (11, 11, ExitReason::OpenAtEnd)
        ]
    );
    let t = &report.trades;
    assert_eq!((t[0].entry_price, t[0].exit_price), (90.0, 79.0));
    assert_eq!(t[0].exit_time - t[0].entry_time, 900_000);
    // Fees on both sides: cash × close_out / close_in × (1 − fee) / (1 + fee).
    let cash1 = 79.0 / 90.0 * SELL / BUY;
    let cash2 = cash1 * 80.0 / 74.0 * SELL / BUY;
    let cash3 = cash2 * 96.0 / 90.0 * SELL / BUY;
    let equity = [
        1.0,
        1.0,
        1.0 / BUY,
        cash1,
        cash1 / BUY,
        cash2,
        cash2,
        cash2,
        cash2 / BUY,
        cash2 / BUY * 95.0 / 90.0,
        cash3,
        cash3 / BUY,
    ];
    for (t, (&got, &want)) in report.equity.iter().zip(&equity).enumerate() {
        assert!(close_to(got, want), "equity[{t}] = {got}, want {want}");
    }
    assert!(close_to(t[1].return_, 80.0 / 74.0 * SELL / BUY - 1.0));
    assert!(close_to(t[3].return_, 1.0 / BUY - 1.0), "an open trade is marked without the exit fee");
    // Held bars: 2, 4, 8–9, 11 → 5 of 12; wins: trades 2 and 3 of the 3 closed.
    let want =
        metrics_of_equity(&equity, (4, 2, 5), &closed_returns(&equity, &trades(&report)), QUARTER_HOURS_PER_YEAR);
    assert_metrics(&report.metrics, &want);
    assert!(close_to(report.metrics.total_return, cash3 / BUY - 1.0));
}

#[test]
fn bb_atr_stop_is_not_hit_above_the_level() {
    // 79.5 > 79: the first trade survives bar 3 and is stopped at bar 4 (74 ≤ 79); bar 5
    // (80) is not below its lower band (75.115), so the next entry is bar 8.
    let mut close = BB_CLOSE;
    close[3] = 79.5;
    let report = run(&bars(&close, 1.0), Strategy::parse("bb_atr").unwrap(), &bb_params("1"), FEE);
    assert_eq!(
        trades(&report),
        [(2, 4, ExitReason::Stop), (8, 10, ExitReason::Signal), (11, 11, ExitReason::OpenAtEnd)]
    );
    assert!(close_to(report.trades[0].return_, 74.0 / 90.0 * SELL / BUY - 1.0));
}

#[test]
fn bb_atr_warmup_waits_for_the_atr() {
    // atr_period 4: w = max(3 − 1, 4) = 4, so the signals of bars 2 and 3 are ignored.
    let report = run(&bars(&BB_CLOSE, 1.0), Strategy::parse("bb_atr").unwrap(), &bb_params("4"), FEE);
    assert_eq!(
        trades(&report),
        [(4, 5, ExitReason::Signal), (8, 10, ExitReason::Signal), (11, 11, ExitReason::OpenAtEnd)]
    );
    assert_eq!(report.equity[..4], [1.0; 4]);
}

#[test]
fn zero_fee_round_trip_keeps_the_price_ratio() {
    let report = run(&bars(&BB_CLOSE, 1.0), Strategy::parse("bb_atr").unwrap(), &bb_params("1"), 0.0);
    let want = 79.0 / 90.0 * 80.0 / 74.0 * 96.0 / 90.0;
    assert!(close_to(report.metrics.total_return, want - 1.0));
    assert_eq!(report.equity[2], 1.0, "no fee: entering costs nothing");
}

#[test]
fn ma_cross_enters_on_cross_above_exits_on_cross_below() {
    // SMA(1) is the close, SMA(2) the mean of two closes: the fast line crosses above
    // when the close rises after not rising, below when it falls after not falling.
    //   bar: 0  1  2  3  4  5  6
    //   c:  10  9 10 11 10  9 12   → enter 2 (10 > 9.5, 9 ≤ 9.5), exit 4 (10 < 10.5,
    //   11 ≥ 10.5), bar 5 falls again (no cross while flat), enter 6 and stay open.
    let data = bars(&[10.0, 9.0, 10.0, 11.0, 10.0, 9.0, 12.0], 0.0);
    let params = [("ma_type", "sma"), ("fast", "1"), ("slow", "2")];
    let report = run(&data, Strategy::parse("ma_cross").unwrap(), &params, FEE);
    assert_eq!(trades(&report), [(2, 4, ExitReason::Signal), (6, 6, ExitReason::OpenAtEnd)]);
    let cash = SELL / BUY; // 10 → 10
    let equity = [1.0, 1.0, 1.0 / BUY, 11.0 / 10.0 / BUY, cash, cash, cash / BUY];
    assert_metrics(
        &report.metrics,
        &metrics_of_equity(&equity, (2, 0, 3), &closed_returns(&equity, &trades(&report)), QUARTER_HOURS_PER_YEAR),
    );
}

#[test]
fn ma_cross_ema_reads_exponential_averages() {
    // EMA(1) is the close and EMA(2) starts as SMA(2) at bar 1, then 2/3 · c + 1/3 · prev:
    // bar 1: 9.5, bar 2: 9.833 (10 > 9.833, 9 ≤ 9.5: enter), bar 3: 10.611, bar 4:
    // 10.204 (10 < 10.204, 11 ≥ 10.611: exit), bar 5: 9.401, bar 6: 11.800 (enter).
    let data = bars(&[10.0, 9.0, 10.0, 11.0, 10.0, 9.0, 12.0], 0.0);
    let params = [("ma_type", "ema"), ("fast", "1"), ("slow", "2")];
    let report = run(&data, Strategy::parse("ma_cross").unwrap(), &params, FEE);
    assert_eq!(trades(&report), [(2, 4, ExitReason::Signal), (6, 6, ExitReason::OpenAtEnd)]);
}

#[test]
fn rsi_reversion_thresholds_and_optional_stop() {
    // RSI(2), Wilder: changes −1 −1 +1 +1 +1 −1 −1 −1 give RSI 0 (bar 2), 50, 75, 87.5,
    // 43.75, 21.875 (bar 7), 10.94. Low 30, high 70: enter 2 at 8, exit 4 at 10, enter 7
    // at 9 and, without a stop, stay open.
    let close = [10.0, 9.0, 8.0, 9.0, 10.0, 11.0, 10.0, 9.0, 8.0];
    let data = bars(&close, 0.0);
    let base = [("rsi_period", "2"), ("rsi_low", "30"), ("rsi_high", "70"), ("atr_period", "1")];
    let no_stop =
        run(&data, Strategy::parse("rsi_reversion").unwrap(), &[base.as_slice(), &[("atr_mult", "0")]].concat(), FEE);
    assert_eq!(trades(&no_stop), [(2, 4, ExitReason::Signal), (7, 8, ExitReason::OpenAtEnd)]);
    let cash = 10.0 / 8.0 * SELL / BUY;
    let equity = [1.0, 1.0, 1.0 / BUY, 9.0 / 8.0 / BUY, cash, cash, cash, cash / BUY, cash / BUY * 8.0 / 9.0];
    assert_metrics(
        &no_stop.metrics,
        &metrics_of_equity(&equity, (2, 1, 4), &closed_returns(&equity, &trades(&no_stop)), QUARTER_HOURS_PER_YEAR),
    );
    // With atr_mult 1 (ATR(1) at bar 7 = |9 − 10| = 1): stop 8, hit exactly at bar 8.
    let stopped =
        run(&data, Strategy::parse("rsi_reversion").unwrap(), &[base.as_slice(), &[("atr_mult", "1")]].concat(), FEE);
    assert_eq!(trades(&stopped), [(2, 4, ExitReason::Signal), (7, 8, ExitReason::Stop)]);
    assert!(close_to(stopped.metrics.total_return, cash * 8.0 / 9.0 * SELL / BUY - 1.0));
}

#[test]
fn no_trade_means_flat_metrics() {
    // A steady rise never closes below its lower band.
    let close: Vec<f64> = (0..50).map(|i| 100.0 + f64::from(i)).collect();
    let report = run(&bars(&close, 1.0), Strategy::parse("bb_atr").unwrap(), &[], FEE);
    let m = report.metrics;
    assert_eq!((m.total_return, m.trades, m.closed_trades, m.max_drawdown, m.exposure), (0.0, 0, 0, 0.0, 0.0));
    assert!(m.win_rate.is_nan() && m.sharpe.is_nan());
    assert!(report.trades.is_empty() && report.equity.iter().all(|&e| e == 1.0));
}

#[test]
fn schema_defaults_ranges_and_refusals() {
    let s = Strategy::parse("bb_atr").unwrap();
    assert_eq!(s.params::<&str>(&[]).unwrap(), [20.0, 2.0, 14.0, 2.0]);
    assert_eq!(Strategy::parse("BB_ATR").unwrap(), s);
    let err = |strategy: Strategy, pairs: &[(&str, &str)]| strategy.params(pairs).unwrap_err().to_string();
    assert_eq!(
        Strategy::parse("bollinger").unwrap_err().to_string(),
        "unknown strategy `bollinger` (known: bb_atr, ma_cross, rsi_reversion, or a rule file such as my_strategy.toml)"
    );
    assert_eq!(
        Strategy::parse("ma_crosss").unwrap_err().to_string(),
        "unknown strategy `ma_crosss` (known: bb_atr, ma_cross, rsi_reversion, or a rule file such as my_strategy.toml; did you mean 'ma_cross'?)"
    );
    assert_eq!(
        err(s.clone(), &[("bb_len", "20")]),
        "bb_atr: unknown parameter `bb_len` (known: bb_period, bb_std, atr_period, atr_mult)"
    );
    assert_eq!(err(s.clone(), &[("atr_mult", "0")]), "atr_mult=0: out of range: must be > 0 and ≤ 100");
    assert_eq!(err(s.clone(), &[("atr_mult", "-1")]), "atr_mult=-1: out of range: must be > 0 and ≤ 100");
    assert_eq!(err(s.clone(), &[("bb_period", "20.5")]), "bb_period=20.5: must be a whole number");
    assert_eq!(err(s.clone(), &[("bb_period", "1")]), "bb_period=1: out of range: must be ≥ 2 and ≤ 100000");
    assert_eq!(err(s.clone(), &[("bb_std", "two")]), "bb_std=two: not a number (expected > 0 and ≤ 10)");
    assert_eq!(err(s.clone(), &[("bb_std", "NaN")]), "bb_std=NaN: not a finite number");
    assert_eq!(err(s.clone(), &[("bb_std", "2"), ("bb_std", "3")]), "parameter bb_std is given twice");
    assert_eq!(
        err(Strategy::parse("ma_cross").unwrap(), &[("fast", "50"), ("slow", "20")]),
        "ma_cross: fast=50, slow=20 breaks the rule `require = \"fast < slow\"`"
    );
    assert_eq!(
        err(Strategy::parse("ma_cross").unwrap(), &[("ma_type", "wma")]),
        "ma_type=wma: expected one of sma, ema"
    );
    assert_eq!(
        err(Strategy::parse("rsi_reversion").unwrap(), &[("rsi_low", "70"), ("rsi_high", "30")]),
        "rsi_reversion: rsi_low=70, rsi_high=30 breaks the rule `require = \"rsi_low < rsi_high\"`"
    );
    assert_eq!(Strategy::parse("ma_cross").unwrap().params(&[("ma_type", "EMA")]).unwrap(), [1.0, 10.0, 50.0]);
    assert_eq!(
        Strategy::parse("rsi_reversion").unwrap().describe(&[14.0, 30.0, 70.0, 14.0, 0.0]),
        "rsi_period=14,rsi_low=30,rsi_high=70,atr_period=14,atr_mult=0"
    );
    for fee in [-0.001, 1.0, f64::NAN] {
        assert!(matches!(Costs::new(fee, 0.0), Err(BacktestError::Fee(_))), "{fee}");
        assert!(matches!(Costs::new(0.001, fee), Err(BacktestError::Slippage(_))), "{fee}");
    }
    assert!(Costs::new(0.0, 0.0).is_ok() && Costs::new(0.999, 0.999).is_ok());
}

#[test]
fn data_shorter_than_the_warmup_is_refused_before_work() {
    let data = bars(&BB_CLOSE, 1.0);
    let dir = tempfile::tempdir().unwrap();
    let dispatcher = dispatcher_in(dir.path(), DeviceMode::Cpu);
    let bank = IndicatorBank::new(&data, &dispatcher);
    // No combo can trade: refused, naming the fastest, before any indicator is computed.
    let axes = vec![vec![13.0, 20.0], vec![2.0], vec![3.0], vec![2.0]];
    let e = SignalBook::build(&bank, &Strategy::parse("bb_atr").unwrap(), &axes).unwrap_err();
    assert_eq!(
        e.to_string(),
        "bb_atr with bb_period=13,bb_std=2,atr_period=3,atr_mult=2 needs at least 13 bars to trade; the data has 12"
    );
    assert_eq!(bank.computations(), 0, "nothing computed");
    // Some can: the book is built, and the combo that needs 13 bars cannot trade.
    let axes = vec![vec![5.0, 13.0], vec![2.0], vec![3.0], vec![2.0]];
    let book = SignalBook::build(&bank, &Strategy::parse("bb_atr").unwrap(), &axes).unwrap();
    assert!(book.some_cannot_trade() && book.bars_needed() == 13);
    let can: Vec<bool> = (0..2).map(|c| !book.cannot_trade(&book.combo_plan(c))).collect();
    assert_eq!(can, [true, false]);
    let empty =
        SignalBook::build(&bank, &Strategy::parse("bb_atr").unwrap(), &[vec![5.0], vec![], vec![3.0], vec![2.0]])
            .unwrap_err();
    assert_eq!(empty.to_string(), "parameter bb_std has no values");
    let bad =
        SignalBook::build(&bank, &Strategy::parse("bb_atr").unwrap(), &[vec![5.0], vec![2.0], vec![3.0], vec![0.0]])
            .unwrap_err();
    assert_eq!(bad.to_string(), "atr_mult=0: out of range: must be > 0 and ≤ 100");
    let fee = Costs::new(1.5, 0.0).unwrap_err();
    assert_eq!(fee.to_string(), "fee 1.5 is outside [0, 1) (a fraction of traded value per side, e.g. 0.001)");
}

#[test]
fn combos_are_numbered_with_the_last_parameter_fastest() {
    let data = Ohlcv::load("synthetic:bars=300,seed=1").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dispatcher = dispatcher_in(dir.path(), DeviceMode::Cpu);
    let bank = IndicatorBank::new(&data, &dispatcher);
    let book = SignalBook::build(
        &bank,
        &Strategy::parse("bb_atr").unwrap(),
        &[vec![10.0, 20.0], vec![1.5, 2.0], vec![7.0], vec![1.0, 2.0, 3.0]],
    )
    .unwrap();
    assert_eq!(book.grid_len(), 12);
    assert_eq!(book.combo_values(0)[..], [10.0, 1.5, 7.0, 1.0]);
    assert_eq!(book.combo_values(1)[..], [10.0, 1.5, 7.0, 2.0]);
    assert_eq!(book.combo_values(3)[..], [10.0, 2.0, 7.0, 1.0]);
    assert_eq!(book.combo_values(11)[..], [20.0, 2.0, 7.0, 3.0]);
    assert_eq!(book.combo_plan(5), book.plan(&[0, 1, 0, 2]));
    // 4 Bollinger series and 1 ATR, each computed once for the 12 combos.
    assert_eq!(bank.computations(), 5);
}
