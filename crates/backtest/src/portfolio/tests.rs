//! The portfolio's rules on hand-worked bars: sizes, the shared cash running out, the order
//! of a bar's orders, bars a symbol lacks, and the totals from the equity curve.

use super::*;
use crate::metrics::Metrics;
use ndarray::{Array2, array};

const NAN: f64 = f64::NAN;

fn run(close: &Array2<f64>, entries: &Array2<bool>, exits: &Array2<bool>, account: Account) -> PortfolioRun {
    let signals = PortfolioSignals {
        close: close.view(),
        entries: entries.view(),
        exits: exits.view(),
        shorts: None,
        levels: SignalLevels::default(),
    };
    simulate_portfolio(&signals, &account, true).expect("valid signals")
}

fn account(sizing: Sizing, fee: f64) -> Account {
    Account::new(100.0, sizing, Costs { fee, slippage: 0.0 }).expect("a valid account")
}

fn value(size: f64) -> Sizing {
    Sizing::new(size, SizeType::Value, None, 0.0).expect("valid sizing")
}

fn close_to(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
}

/// Three symbols, $40 an entry, 1 % fees, $100: the third entry of bar 0 gets what is left.
#[test]
fn the_third_entry_gets_the_cash_left_and_an_exit_frees_cash_for_a_later_entry() {
    let close = array![[10.0, 20.0, 5.0], [11.0, 18.0, 6.0], [12.0, NAN, 6.5], [12.0, 19.0, 7.0]];
    let entries = array![[true, true, true], [false, false, false], [false, true, false], [false, true, false]];
    let exits = array![[false, false, false], [false, true, false], [true, false, false], [false, false, true]];
    let run = run(&close, &entries, &exits, account(value(40.0), 0.01));
    let record = run.record.expect("a record");
    // Bar 0: A 4 units (40 + 0.40 fee), B 2 units (40.40), C what 19.20 buys after its fee.
    let c_units = 19.2 / 1.01 / 5.0;
    let [a, b, c] = [&record.trades[0], &record.trades[1], &record.trades[2]];
    assert_eq!((a.entry.size, a.entry.cash, b.entry.size), (4.0, 40.4, 2.0));
    assert!(close_to(c.entry.size, c_units) && close_to(c.entry.cash, 19.2), "{c:?}");
    assert!(close_to(record.cash[0], 0.0), "{}", record.cash[0]);
    assert!(close_to(record.equity[0], 40.0 + 40.0 + 5.0 * c_units));
    // Bar 1: B sold at 18 less 1 %: 35.64.
    assert_eq!((b.exit_bar, b.exit.map(|x| x.cash)), (Some(1), Some(35.64)));
    assert!(close_to(record.cash[1], 35.64));
    assert!(close_to(record.equity[1], 35.64 + 44.0 + 6.0 * c_units));
    // Bar 2: A sold at 12 (47.52); B has no bar, so its entry waits; C held at 6.5.
    assert_eq!(a.exit.map(|x| x.cash), Some(47.52));
    assert!(close_to(record.cash[2], 35.64 + 47.52));
    assert_eq!(record.positions[2 * 3..3 * 3 - 1], [0.0, 0.0]);
    assert!(close_to(record.positions[3 * 3 - 1], c_units));
    // Bar 3: C sold first, then B buys $40 at 19 from the cash it freed.
    let d = &record.trades[3];
    assert_eq!((d.symbol, d.entry_bar), (1, 3));
    assert!(close_to(d.entry.size, 40.0 / 19.0) && close_to(d.entry.cash, 40.4));
    let c_sold = c_units * 7.0 * 0.99;
    assert!(close_to(c.exit.expect("closed").cash, c_sold));
    assert!(close_to(record.cash[3], 35.64 + 47.52 + c_sold - 40.4));
    assert!(close_to(record.equity[3], record.cash[3] + 40.0 / 19.0 * 19.0));
    // Totals: 4 entries, 3 closed (A and C won, B lost), a bar in a position each.
    let totals = run.totals;
    assert_eq!((totals.trades, totals.closed, totals.wins, totals.held), (4, 3, 2, 4));
    let metrics: Metrics = totals.metrics(4, f64::NAN);
    assert!((metrics.total_return - (record.equity[3] / 100.0 - 1.0)).abs() < 1e-15);
}

/// Percent sizes take a fraction of the cash at each order, so a bar's later entries get
/// less; a target percent takes a fraction of the account's value before the bar's orders.
#[test]
fn percent_takes_a_share_of_the_cash_left_and_target_percent_a_share_of_the_value() {
    let close = array![[10.0, 10.0, 10.0], [20.0, 10.0, 10.0]];
    let entries = array![[true, true, false], [false, false, true]];
    let exits = array![[false, false, false], [false, false, false]];
    let half = Sizing::new(0.5, SizeType::Percent, None, 0.0).expect("valid");
    let record = run(&close, &entries, &exits, account(half, 0.0)).record.expect("a record");
    assert_eq!(record.trades.iter().map(|t| t.entry.cash).collect::<Vec<_>>(), [50.0, 25.0, 12.5]);
    let target = Sizing::new(0.5, SizeType::TargetPercent, None, 0.0).expect("valid");
    let record = run(&close, &entries, &exits, account(target, 0.0)).record.expect("a record");
    // Bar 0: 50 of 100, then the 50 left (less than the 50 asked: all of it).
    // Bar 1: the value is 5·20 + 5·10 = 150; half of it is more than the cash (0): none.
    assert_eq!(record.trades.iter().map(|t| t.entry.cash).collect::<Vec<_>>(), [50.0, 50.0]);
    assert_eq!(record.equity, [100.0, 150.0]);
}

/// Lots: whole units only, and an entry that cannot pay for one lot buys nothing.
#[test]
fn lots_round_down_and_an_entry_short_of_one_lot_buys_nothing() {
    let close = array![[30.0, 70.0, 10.0]];
    let entries = array![[true, true, true]];
    let exits = array![[false, false, false]];
    let lots = Sizing::new(1.0, SizeType::Percent, Some(1.0), 0.0).expect("valid");
    let record = run(&close, &entries, &exits, account(lots, 0.0)).record.expect("a record");
    // 100 buys 3 of A (90); 10 left cannot buy one B at 70; C takes the last 10.
    let bought: Vec<_> = record.trades.iter().map(|t| (t.symbol, t.entry.size)).collect();
    assert_eq!(bought, [(0, 3.0), (2, 1.0)]);
    assert_eq!(record.cash, [0.0]);
}

#[test]
fn bad_shapes_prices_and_sizes_are_named() {
    let close = array![[10.0, -1.0]];
    let flags = array![[false, false]];
    let signals = PortfolioSignals {
        close: close.view(),
        entries: flags.view(),
        exits: flags.view(),
        shorts: None,
        levels: SignalLevels::default(),
    };
    let err = simulate_portfolio(&signals, &account(Sizing::default(), 0.0), false).expect_err("a bad price");
    assert_eq!(
        err.to_string(),
        "signals: close at bar 0, symbol 1 is -1: a price is positive and finite (NaN: no bar)"
    );
    let narrow = array![[false]];
    let signals = PortfolioSignals {
        close: close.view(),
        entries: narrow.view(),
        exits: flags.view(),
        shorts: None,
        levels: SignalLevels::default(),
    };
    let err = simulate_portfolio(&signals, &account(Sizing::default(), 0.0), false).expect_err("a bad shape");
    assert!(err.to_string().contains("entries has shape (1, 1)"), "{err}");
    let err = Sizing::new(1.5, SizeType::Percent, None, 0.0).expect_err("over 1");
    assert!(err.to_string().starts_with("size=1.5: a percent size is a fraction"), "{err}");
    assert!(Sizing::new(100.0, SizeType::Value, Some(0.0), 0.0).is_err());
    assert!(SizeType::parse("shares").is_err() && SizeType::parse("TargetPercent").is_ok());
    assert!(Account::new(0.0, Sizing::default(), Costs::default()).is_err());
}

/// An entry and an exit on one bar: a flat symbol enters, a held one exits (a single
/// run's rule), and it does not enter again on the bar it exited.
#[test]
fn an_entry_and_an_exit_on_one_bar_enter_when_flat_and_exit_when_held() {
    let close = array![[10.0], [11.0], [12.0], [13.0]];
    let entries = array![[true], [true], [true], [false]];
    let exits = array![[true], [true], [false], [false]];
    let record = run(&close, &entries, &exits, account(Sizing::default(), 0.0)).record.expect("a record");
    let trades: Vec<_> = record.trades.iter().map(|t| (t.entry_bar, t.exit_bar)).collect();
    assert_eq!(trades, [(0, Some(1)), (2, None)]);
}

/// With room for two positions, a bar's third entry is skipped (its cash stays) and the
/// symbol enters on its next entry once a position has closed.
#[test]
fn max_positions_skips_the_entries_past_it_until_a_position_closes() {
    let close = array![[10.0, 10.0, 10.0], [10.0, 10.0, 10.0], [10.0, 10.0, 10.0]];
    let entries = array![[true, true, true], [false, false, false], [false, false, true]];
    let exits = array![[false, false, false], [true, false, false], [false, false, false]];
    let two = account(value(10.0), 0.0).with_max_positions(Some(2)).expect("valid");
    let record = run(&close, &entries, &exits, two).record.expect("a record");
    let trades: Vec<_> = record.trades.iter().map(|t| (t.symbol, t.entry_bar)).collect();
    assert_eq!(trades, [(0, 0), (1, 0), (2, 2)]);
    assert_eq!(record.cash[0], 80.0);
    assert!(account(value(10.0), 0.0).with_max_positions(Some(0)).is_err());
}

/// A leverage cap of 0.5: an entry buys at most what takes the positions to half the
/// account's value at the bar's prices, so a later entry waits until a position closes.
#[test]
fn a_leverage_cap_below_one_holds_at_most_that_share_of_the_value() {
    let close = array![[10.0, 20.0, NAN], [12.0, 20.0, 6.0], [11.0, 20.0, 6.0]];
    let entries = array![[true, true, false], [false, false, true], [false, false, true]];
    let exits = array![[false, false, false], [false, false, false], [true, false, false]];
    let half = account(Sizing::default(), 0.0).with_leverage(Some(0.5)).expect("valid");
    let record = run(&close, &entries, &exits, half).record.expect("a record");
    let trades: Vec<_> = record.trades.iter().map(|t| (t.symbol, t.entry_bar, t.entry.size)).collect();
    // Bar 0: A buys 50 of 100 (5 units); B would take the positions past 50: none.
    // Bar 1: the value is 50 + 5·12 = 110, half is 55, A holds 60: C waits.
    // Bar 2: A sold at 11 (cash 105), C buys half of it: 52.5 at 6.
    assert_eq!(trades, [(0, 0, 5.0), (2, 2, 8.75)]);
    assert_eq!(record.cash, [50.0, 50.0, 52.5]);
    assert!(account(Sizing::default(), 0.0).with_leverage(Some(0.0)).is_err());
    assert_eq!(account(Sizing::default(), 0.0).with_leverage(Some(1.0)).expect("valid").leverage, None);
}

/// A leverage cap of 2 borrows: entries of 150 on 100 of cash fill until the positions
/// are worth twice the account, the cash going below zero; the equity is the cash plus
/// the positions.
#[test]
fn a_leverage_cap_above_one_borrows_up_to_it() {
    let close = array![[10.0, 20.0, 5.0], [11.0, 22.0, 5.0]];
    let entries = array![[true, true, true], [false, false, false]];
    let exits = array![[false, false, false], [false, false, false]];
    let double = account(value(150.0), 0.0).with_leverage(Some(2.0)).expect("valid");
    let record = run(&close, &entries, &exits, double).record.expect("a record");
    let trades: Vec<_> = record.trades.iter().map(|t| (t.symbol, t.entry.size)).collect();
    // A: 15 units for 150 (cash −50); B: 200 − 150 = 50 of room, 2.5 units; C: none.
    assert_eq!(trades, [(0, 15.0), (1, 2.5)]);
    assert_eq!(record.cash, [-100.0, -100.0]);
    assert_eq!(record.equity, [100.0, -100.0 + 15.0 * 11.0 + 2.5 * 22.0]);
}

/// An account that a leverage cap lets fall below zero: its equity and cash are what it
/// owes; its metrics take an equity of zero or less as a total loss (total return and
/// drawdown −100 %), and its turnover over a mean equity below zero is NaN, not negative.
#[test]
fn an_account_below_zero_is_a_total_loss_with_no_turnover() {
    let close = array![[10.0], [4.0], [3.0]];
    let entries = array![[true], [false], [false]];
    let exits = array![[false], [false], [true]];
    let tenfold = account(Sizing::default(), 0.0).with_leverage(Some(10.0)).expect("valid");
    let run = run(&close, &entries, &exits, tenfold);
    let record = run.record.as_ref().expect("a record");
    // 100 buys 1,000 of units at 10 (cash −900): worth 400 at 4, 300 at 3.
    assert_eq!(record.cash, [-900.0, -900.0, -600.0]);
    assert_eq!(record.equity, [100.0, -500.0, -600.0]);
    let metrics = run.metrics(3, f64::NAN);
    assert_eq!((metrics.total_return, metrics.max_drawdown), (-1.0, -1.0));
    assert!(metrics.turnover.is_nan(), "{}", metrics.turnover);
    assert_eq!(metrics.mean_positions, 2.0 / 3.0);
    // Above zero, the turnover is the value traded over the mean equity.
    let once = run_once_at_par();
    assert_eq!(once.metrics(2, f64::NAN).turnover, 200.0 / 100.0);
}

/// 100 of cash buys 10 units at 10 and sells them at 10: 200 traded, equity 100 throughout.
fn run_once_at_par() -> PortfolioRun {
    let (close, entries, exits) = (array![[10.0], [10.0]], array![[true], [false]], array![[false], [true]]);
    run(&close, &entries, &exits, account(Sizing::default(), 0.0))
}
