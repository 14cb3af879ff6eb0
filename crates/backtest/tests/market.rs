//! Trading like a market (docs/strategies.md): shorts and reversals, the conflict rules,
//! stops and take-profits inside the bar with gaps through them, trailing stops,
//! next-open fills without look-ahead, slippage; worked by hand on tiny series. The
//! comparison with vectorbt itself is python/tests/test_market.py.

use crate::common;

use common::cpu_book;
use ndarray::Array2;
use proptest::prelude::*;
use threadx_backtest::{
    BacktestReport, BarTables, Costs, ExitReason, Fill, Fills, Side, SignalBook, Strategy, UserSignals,
    simulate_detailed, simulate_totals,
};
use threadx_indicators::Ohlcv;

const FREE: Costs = Costs { fee: 0.0, slippage: 0.0 };

/// Bars from open, high, low and close (15-minute spacing).
fn bars(open: &[f64], high: &[f64], low: &[f64], close: &[f64]) -> Ohlcv {
    let n = close.len();
    let ts = (0..n as i64).map(|i| 1_700_000_000_000 + i * 900_000).collect();
    Ohlcv::new("hand", ts, open.to_vec(), high.to_vec(), low.to_vec(), close.to_vec(), vec![1.0; n]).unwrap()
}

/// Bars whose open, high and low are the close.
fn closes(close: &[f64]) -> Ohlcv {
    bars(close, close, close, close)
}

/// A one-column bool array with `true` at `bars`.
fn at(n: usize, bars: &[usize]) -> Array2<bool> {
    Array2::from_shape_fn((n, 1), |(t, _)| bars.contains(&t))
}

/// (side, entry bar, exit bar, entry price, exit price, reason) of every trade.
type Row = (Side, usize, usize, f64, f64, ExitReason);

fn rows(report: &BacktestReport) -> Vec<Row> {
    report.trades.iter().map(|t| (t.side, t.entry_bar, t.exit_bar, t.entry_price, t.exit_price, t.reason)).collect()
}

/// The detailed report of column 0, checked against the totals every device reports.
fn run(data: &Ohlcv, signals: UserSignals<'_>, costs: Costs) -> BacktestReport {
    let book = SignalBook::from_signals(data, signals).unwrap();
    let plan = book.combo_plan(0);
    let report = simulate_detailed(&book, &plan, costs);
    if !book.is_plain() {
        let totals = simulate_totals(&book, &BarTables::new(&book, costs), &plan);
        let bits = |m: threadx_backtest::Metrics| m.values().map(f64::to_bits);
        let reported = totals.metrics(book.bars(), book.bars_per_year());
        assert_eq!(bits(report.metrics), bits(reported), "one pass gives both");
    }
    report
}

use ExitReason::{OpenAtEnd, Reverse, Signal, Stop, TakeProfit, Trail};
use Side::{Long, Short};

#[test]
fn an_opposite_entry_reverses_and_a_short_gains_when_the_price_falls() {
    let close = [10.0, 11.0, 12.0, 11.0, 10.0, 9.0, 10.0, 11.0];
    let data = closes(&close);
    let n = close.len();
    let (long_in, short_in, short_out, none) = (at(n, &[1, 5, 6]), at(n, &[3, 6]), at(n, &[5]), at(n, &[]));
    let signals = UserSignals {
        short_entries: Some(short_in.view()),
        short_exits: Some(short_out.view()),
        ..UserSignals::long(long_in.view(), none.view())
    };
    let report = run(&data, signals, FREE);
    // Bar 5: a long entry with the short's own exit reverses (the opposite entry first);
    // bar 6: both entries while long cancel (vectorbt's upon_dir_conflict = "ignore").
    assert_eq!(
        rows(&report),
        [(Long, 1, 3, 11.0, 11.0, Reverse), (Short, 3, 5, 11.0, 9.0, Reverse), (Long, 5, 7, 9.0, 11.0, OpenAtEnd)]
    );
    // Without costs: long from 11 to 11 (1), a short of 1/11 shares with cash 2 covered at
    // 9 (2 − 9/11 = 13/11), then long 13/99 shares from 9 to 11: 13/9.
    let want = [1.0, 1.0, 12.0 / 11.0, 1.0, 12.0 / 11.0, 13.0 / 11.0, 13.0 / 11.0 * 10.0 / 9.0, 13.0 / 9.0];
    for (t, (got, want)) in report.equity.iter().zip(want).enumerate() {
        assert!((got - want).abs() < 1e-14, "bar {t}: {got} vs {want}");
    }
    assert!((report.metrics.total_return - 4.0 / 9.0).abs() < 1e-14);
    assert_eq!((report.metrics.trades, report.metrics.closed_trades), (3, 2));
}

#[test]
fn conflicts_on_one_bar_follow_the_documented_rules() {
    let data = closes(&[10.0, 11.0, 12.0, 13.0, 12.0, 11.0]);
    let n = 6;
    let none = at(n, &[]);
    // Flat, a long and a short entry on one bar: neither; later a long entry alone.
    let (long_in, short_in) = (at(n, &[1, 3]), at(n, &[1]));
    let signals =
        UserSignals { short_entries: Some(short_in.view()), ..UserSignals::long(long_in.view(), none.view()) };
    assert_eq!(rows(&run(&data, signals, FREE)), [(Long, 3, 5, 13.0, 11.0, OpenAtEnd)]);
    // Flat, an entry and an exit on one bar: the entry (exits are checked from the bar
    // after it); in a position, the exit, and no new entry on the bar of an exit.
    let (long_in, long_out) = (at(n, &[1, 3]), at(n, &[1, 3]));
    let report = run(&data, UserSignals::long(long_in.view(), long_out.view()), FREE);
    assert_eq!(rows(&report), [(Long, 1, 3, 11.0, 13.0, Signal)]);
    // A stop and the exit rule on one bar: the stop.
    let stop = Array2::from_elem((n, 1), 0.05);
    let (long_in, long_out) = (at(n, &[3]), at(n, &[4]));
    let signals = UserSignals { sl_stop: Some(stop.view()), ..UserSignals::long(long_in.view(), long_out.view()) };
    assert_eq!(rows(&run(&data, signals, FREE)), [(Long, 3, 4, 13.0, 12.0, Stop)]);
    // The same with a short in the book (the market simulation): the same trade.
    let short_in = at(n, &[]);
    let signals = UserSignals { short_entries: Some(short_in.view()), ..signals };
    assert_eq!(rows(&run(&data, signals, FREE)), [(Long, 3, 4, 13.0, 12.0, Stop)]);
}

#[test]
fn stops_inside_the_bar_fill_at_the_level_or_at_the_open_beyond_it() {
    // A long from 100 with a 5 % stop (95) and a 10 % take-profit (110).
    let open = [100.0, 100.0, 99.0, 90.0, 100.0, 100.0, 100.0];
    let high = [101.0, 100.0, 100.0, 92.0, 101.0, 112.0, 111.0];
    let low = [99.0, 100.0, 96.0, 89.0, 99.0, 94.0, 99.0];
    let close = [100.0, 100.0, 97.0, 91.0, 100.0, 100.0, 105.0];
    let data = bars(&open, &high, &low, &close);
    let n = close.len();
    let intrabar = Fills { fill: Fill::Close, intrabar: true };
    let (sl, tp) = (Array2::from_elem((n, 1), 0.05), Array2::from_elem((n, 1), 0.10));
    let long_in = at(n, &[1, 4]);
    let none = at(n, &[]);
    let signals = UserSignals {
        sl_stop: Some(sl.view()),
        tp_stop: Some(tp.view()),
        fills: intrabar,
        ..UserSignals::long(long_in.view(), none.view())
    };
    let report = run(&data, signals, FREE);
    // Bar 2 reaches 96, above the stop; bar 3 opens at 90, below it: filled at the open
    // (a gap through a stop). Bar 5 reaches both 94 and 112: the stop comes first.
    assert_eq!(rows(&report), [(Long, 1, 3, 100.0, 90.0, Stop), (Long, 4, 5, 100.0, 95.0, Stop)]);
    // Closes alone: the same stop is checked against closes and filled at the close.
    let signals = UserSignals { fills: Fills::default(), ..signals };
    assert_eq!(
        rows(&run(&data, signals, FREE)),
        [(Long, 1, 3, 100.0, 91.0, Stop), (Long, 4, 6, 100.0, 105.0, OpenAtEnd)]
    );
    // A short from 100: its stop is above (105), its take-profit below (90); a bar that
    // opens above the stop fills at that open.
    let open = [100.0, 100.0, 101.0, 108.0, 100.0, 91.0];
    let high = [101.0, 100.0, 104.0, 109.0, 100.0, 92.0];
    let low = [99.0, 100.0, 100.0, 106.0, 100.0, 88.0];
    let close = [100.0, 100.0, 102.0, 107.0, 100.0, 89.0];
    let data = bars(&open, &high, &low, &close);
    let n = close.len();
    let (sl, tp) = (Array2::from_elem((n, 1), 0.05), Array2::from_elem((n, 1), 0.10));
    let short_in = at(n, &[1, 4]);
    let none = at(n, &[]);
    let signals = UserSignals {
        short_entries: Some(short_in.view()),
        sl_stop: Some(sl.view()),
        tp_stop: Some(tp.view()),
        fills: intrabar,
        ..UserSignals::long(none.view(), none.view())
    };
    let report = run(&data, signals, FREE);
    assert_eq!(rows(&report), [(Short, 1, 3, 100.0, 108.0, Stop), (Short, 4, 5, 100.0, 90.0, TakeProfit)]);
}

#[test]
fn a_trailing_stop_follows_the_best_price_and_only_tightens() {
    // A long from 100 trailing 10 %: bar 2's high of 120 lifts the level to 108 after the
    // bar (not within it: its low of 99 does not stop it); bar 3 falls to 107: filled at 108.
    let open = [100.0, 100.0, 101.0, 115.0];
    let high = [100.0, 100.0, 120.0, 116.0];
    let low = [100.0, 100.0, 99.0, 107.0];
    let close = [100.0, 100.0, 115.0, 110.0];
    let data = bars(&open, &high, &low, &close);
    let n = 4;
    let sl = Array2::from_elem((n, 1), 0.10);
    let (long_in, none) = (at(n, &[1]), at(n, &[]));
    let signals = UserSignals {
        sl_stop: Some(sl.view()),
        sl_trail: &[true],
        fills: Fills { fill: Fill::Close, intrabar: true },
        ..UserSignals::long(long_in.view(), none.view())
    };
    let report = run(&data, signals, FREE);
    assert_eq!(rows(&report), [(Long, 1, 3, 100.0, 108.0, Trail)]);
    assert!((report.metrics.total_return - 0.08).abs() < 1e-15);
}

#[test]
fn a_rule_files_trail_is_a_price_distance_frozen_at_the_entry() {
    // Enter at bar 3 (close 12); trail 1.5 below the best close: 10.5, then 13 − 1.5 =
    // 11.5 after bar 4; bar 5's close of 11.4 is below it; a fixed stop at 9 never binds.
    let close = [10.0, 10.0, 10.0, 12.0, 13.0, 11.4, 11.0, 10.0];
    let data = closes(&close);
    let source = r#"
name = "trail_test"
[params]
d = { kind = "float", default = 1.5, min = 0.1, max = 10 }
[rules]
entry = "close > 11 and close < 12.5"
trail = "d"
stop = "close - 3"
"#;
    let strategy = Strategy::from_toml(source, "trail_test.toml").unwrap();
    let book = cpu_book(&data, strategy, &[vec![1.5]]);
    assert_eq!(book.market_features(), ["trailing stops"]);
    let report = simulate_detailed(&book, &book.combo_plan(0), FREE);
    assert_eq!(rows(&report)[0], (Long, 3, 5, 12.0, 11.4, Trail));
}

#[test]
fn next_open_fills_the_decision_of_the_bar_before_at_the_open() {
    let open = [10.0, 10.5, 11.5, 12.5, 12.0, 11.0, 10.5];
    let close = [10.0, 11.0, 12.0, 13.0, 11.5, 10.0, 10.0];
    let high: Vec<f64> = open.iter().zip(&close).map(|(o, c): (&f64, &f64)| o.max(*c)).collect();
    let low: Vec<f64> = open.iter().zip(&close).map(|(o, c): (&f64, &f64)| o.min(*c)).collect();
    let data = bars(&open, &high, &low, &close);
    let n = close.len();
    let (long_in, long_out, short_in) = (at(n, &[1]), at(n, &[3]), at(n, &[4, 6]));
    let signals = UserSignals {
        short_entries: Some(short_in.view()),
        fills: Fills { fill: Fill::NextOpen, intrabar: false },
        ..UserSignals::long(long_in.view(), long_out.view())
    };
    let report = run(&data, signals, FREE);
    // Decided at 1, filled at open[2]; exit decided at 3, filled at open[4]; a short
    // decided at 4 fills at open[5]; the short entry of the last bar never fills.
    assert_eq!(rows(&report), [(Long, 2, 4, 11.5, 12.0, Signal), (Short, 5, 6, 11.0, 10.0, OpenAtEnd)]);
    // Equity: 1 before the fill; at close[2] 12/11.5; after the exit at open[4] 12/11.5.
    let e = &report.equity;
    assert_eq!(e[1], 1.0);
    assert!((e[2] - 12.0 / 11.5).abs() < 1e-15 && (e[4] - 12.0 / 11.5).abs() < 1e-15);
    assert_eq!(report.metrics.exposure, 4.0 / 7.0, "bars 2, 3, 5 and 6 end in a position");
}

#[test]
fn slippage_moves_every_fill_against_the_trader() {
    let data = closes(&[10.0, 10.0, 11.0, 12.0, 11.0]);
    let n = 5;
    let (long_in, short_in, none) = (at(n, &[1]), at(n, &[3]), at(n, &[]));
    let signals =
        UserSignals { short_entries: Some(short_in.view()), ..UserSignals::long(long_in.view(), none.view()) };
    let (fee, slippage) = (0.001, 0.002);
    let report = run(&data, signals, Costs { fee, slippage });
    // Long: bought at 10·1.002 plus the fee, sold at 12·0.998 less the fee; then short:
    // sold at 12·0.998 less the fee, marked at 11.
    let long = 12.0 * (1.0 - slippage) * (1.0 - fee) / (10.0 * (1.0 + slippage) * (1.0 + fee));
    let shares = long / (12.0 * (1.0 - slippage) * (1.0 + fee));
    let cash = long + shares * 12.0 * (1.0 - slippage) * (1.0 - fee);
    let end = cash - shares * 11.0;
    assert!((report.trades[0].return_ - (long - 1.0)).abs() < 1e-14);
    assert!((report.equity[3] - (cash - shares * 12.0)).abs() < 1e-14);
    assert!(
        (report.metrics.total_return - (end - 1.0)).abs() < 1e-14,
        "{} vs {}",
        report.metrics.total_return,
        end - 1.0
    );
}

#[test]
fn stops_fill_at_their_level_without_slippage_and_the_rest_pay_it() {
    // vectorbt's default stop_exit_price="stoplimit": a stop, take-profit or trail fills at
    // its level (or the open beyond it) with the fee alone; entries and signal exits pay
    // slippage and the fee. Long at 100 (bar 1), stop 5 % below: bar 3 trades down to 94
    // (open 97): filled at 95. Then a short at bar 4's close of 96, take-profit 5 % below
    // at 91.2: bar 5 opens at 90, beyond it: filled at the open. Same with closes only.
    let open = [100.0, 100.0, 99.0, 97.0, 95.0, 90.0, 90.0];
    let high = [100.0, 100.0, 100.0, 98.0, 96.5, 91.0, 91.0];
    let low = [100.0, 100.0, 98.0, 94.0, 95.0, 89.0, 89.0];
    let close = [100.0, 100.0, 99.0, 96.0, 96.0, 90.0, 90.0];
    let data = bars(&open, &high, &low, &close);
    let n = open.len();
    let (long_in, short_in, none) = (at(n, &[1]), at(n, &[4]), at(n, &[]));
    let (sl, tp) = (Array2::from_elem((n, 1), 0.05), Array2::from_elem((n, 1), 0.05));
    let (fee, slippage) = (0.001, 0.002);
    let signals = |intrabar: bool| UserSignals {
        short_entries: Some(short_in.view()),
        sl_stop: Some(sl.view()),
        tp_stop: Some(tp.view()),
        fills: Fills { fill: Fill::Close, intrabar },
        ..UserSignals::long(long_in.view(), none.view())
    };
    let report = run(&data, signals(true), Costs { fee, slippage });
    assert_eq!(rows(&report), [(Long, 1, 3, 100.0, 95.0, Stop), (Short, 4, 5, 96.0, 90.0, TakeProfit)]);
    let long = 95.0 * (1.0 - fee) / (100.0 * (1.0 + slippage) * (1.0 + fee));
    let shares = long / (96.0 * (1.0 - slippage) * (1.0 + fee));
    let cash = long + shares * 96.0 * (1.0 - slippage) * (1.0 - fee);
    let end = cash - shares * 90.0 * (1.0 + fee);
    assert!((report.trades[0].return_ - (long - 1.0)).abs() < 1e-14, "{:?}", report.trades[0]);
    assert!((report.metrics.total_return - (end - 1.0)).abs() < 1e-14, "{}", report.metrics.total_return);
    // Against closes a 3 % stop (97) fills at the close that reached it (96), again
    // without slippage.
    let sl3 = Array2::from_elem((n, 1), 0.03);
    let report = run(&data, UserSignals { sl_stop: Some(sl3.view()), ..signals(false) }, Costs { fee, slippage });
    assert_eq!(rows(&report)[0], (Long, 1, 3, 100.0, 96.0, Stop));
    let long = 96.0 * (1.0 - fee) / (100.0 * (1.0 + slippage) * (1.0 + fee));
    assert!((report.trades[0].return_ - (long - 1.0)).abs() < 1e-14, "{:?}", report.trades[0]);
}

/// Random bars with gaps (opens away from the previous close).
fn random_bars(n: usize, seed: u64) -> Ohlcv {
    let mut rng = threadx_stats::SeededRng::new(seed);
    let (mut open, mut high, mut low, mut close) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut c = 100.0_f64;
    for _ in 0..n {
        let o = c * (1.0 + 0.01 * (rng.uniform() - 0.5));
        c = o * (1.0 + 0.03 * (rng.uniform() - 0.5));
        open.push(o);
        close.push(c);
        high.push(o.max(c) * (1.0 + 0.01 * rng.uniform()));
        low.push(o.min(c) * (1.0 - 0.01 * rng.uniform()));
    }
    bars(&open, &high, &low, &close)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// No look-ahead: the trades that ended before the last bar of a run on the first k
    /// bars are the full run's, whatever the later bars hold (next-open fills, trails,
    /// stops inside the bar, shorts, all at once).
    #[test]
    fn a_run_never_reads_bars_after_its_decisions(seed in 0u64..10_000, k in 30usize..300) {
        let strategy = Strategy::load(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/strategies/breakout_next_open.toml")).unwrap();
        let source = strategy.source().replace("max_bars = \"max_hold\"", "max_bars = \"max_hold\"\ntrail = \"2 * atr(5)\"\nintrabar = true");
        let strategy = Strategy::from_toml(&source, "breakout_trail.toml").unwrap();
        let full = random_bars(300, seed);
        let cut = full.slice(0..k);
        let axes = vec![vec![10.0], vec![24.0]];
        let book = |data: &Ohlcv| cpu_book(data, strategy.clone(), &axes);
        let (whole, part) = (book(&full), book(&cut));
        let trades = |b: &SignalBook| simulate_detailed(b, &b.combo_plan(0), Costs { fee: 0.001, slippage: 0.0005 }).trades;
        let (whole, part) = (trades(&whole), trades(&part));
        let done: Vec<_> = part.iter().filter(|t| t.reason != OpenAtEnd).collect();
        prop_assert!(whole.len() >= 5, "{} trades", whole.len());
        prop_assert!(done.len() <= whole.len());
        for (a, b) in done.iter().zip(&whole) {
            prop_assert_eq!(*a, b);
        }
    }
}

#[test]
fn one_backtest_of_a_market_book_reports_its_sweep_rows_metrics() {
    // backtest() takes a market book's metrics from its one detailed run: they must be the
    // totals' metrics that a sweep writes for the same combo.
    let data = random_bars(3000, 11);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/strategies/bb_long_short.toml");
    let strategy = Strategy::from_toml(&std::fs::read_to_string(path).unwrap(), path).unwrap();
    let values: Vec<f64> = strategy.schema().iter().map(|p| p.default).collect();
    let dispatcher = threadx_dispatch::Dispatcher::from_env(Some(threadx_dispatch::DeviceMode::Cpu)).unwrap();
    let bank = threadx_indicators::IndicatorBank::new(&data, &dispatcher);
    let costs = Costs { fee: 0.001, slippage: 0.0005 };
    let report = threadx_backtest::backtest(&bank, &strategy, &values, costs, None).unwrap();
    let axes: Vec<Vec<f64>> = values.iter().map(|&v| vec![v]).collect();
    let book = cpu_book(&data, strategy, &axes);
    assert!(!book.is_plain());
    let row = simulate_totals(&book, &BarTables::new(&book, costs), &book.combo_plan(0));
    assert!(report.metrics.trades > 3, "{:?}", report.metrics);
    assert_eq!(format!("{:?}", report.metrics), format!("{:?}", row.metrics(book.bars(), book.bars_per_year())));
}

#[test]
fn a_trail_flag_per_column_gives_each_column_its_own_flags_bytes() {
    let data = random_bars(2000, 21);
    let n = data.len();
    let pick = |t: usize, c: usize, k: usize| (t * 7 + c * 13).is_multiple_of(k);
    let entries = Array2::from_shape_fn((n, 4), |(t, c)| pick(t, c, 37));
    let exits = Array2::from_shape_fn((n, 4), |(t, c)| pick(t + 11, c, 53));
    let shorts = Array2::from_shape_fn((n, 4), |(t, c)| pick(t + 5, c, 41) && !pick(t, c, 37));
    let sl = Array2::from_shape_fn((n, 4), |(_, c)| 0.01 + 0.005 * c as f64);
    let costs = Costs { fee: 0.001, slippage: 0.0005 };
    let fills = Fills { fill: Fill::Close, intrabar: true };
    for with_shorts in [false, true] {
        let one = |flags: &'static [bool]| {
            let signals = UserSignals {
                sl_stop: Some(sl.view()),
                sl_trail: flags,
                short_entries: with_shorts.then(|| shorts.view()),
                fills,
                ..UserSignals::long(entries.view(), exits.view())
            };
            let book = SignalBook::from_signals(&data, signals).unwrap();
            let tables = BarTables::new(&book, costs);
            (0..4).map(|c| format!("{:?}", simulate_totals(&book, &tables, &book.combo_plan(c)))).collect::<Vec<_>>()
        };
        let (mixed, all, none) = (one(&[true, false, false, true]), one(&[true]), one(&[]));
        assert_eq!([&mixed[0], &mixed[3]], [&all[0], &all[3]], "trailing columns, shorts {with_shorts}");
        assert_eq!([&mixed[1], &mixed[2]], [&none[1], &none[2]], "fixed columns, shorts {with_shorts}");
        assert_ne!(all[0], none[0], "the trail changes the column");
    }
    let wrong = UserSignals {
        sl_stop: Some(sl.view()),
        sl_trail: &[true, false],
        ..UserSignals::long(entries.view(), exits.view())
    };
    let e = SignalBook::from_signals(&data, wrong).unwrap_err().to_string();
    assert!(e.contains("sl_trail has 2 flags: one for every column, or one per column (4)"), "{e}");
}
