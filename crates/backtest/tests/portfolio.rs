//! A rule file traded as one account over several symbols (`PortfolioBooks`): each
//! symbol's decisions are its own single run's, on its own bars, whatever the other
//! symbols' clocks; only the cash is shared. One symbol with all the cash in is the single
//! run within rounding; with cash to spare every symbol trades as it does alone.

use threadx_backtest::{
    Account, BlockCuts, ComboPlan, Costs, ExitReason, PortfolioBooks, PortfolioTrade, Side, SignalBook, SizeType,
    Sizing, Strategy, simulate_detailed,
};
use threadx_dispatch::{DeviceMode, Dispatcher};
use threadx_indicators::{IndicatorBank, Ohlcv};

const COSTS: Costs = Costs { fee: 0.001, slippage: 0.0 };

fn book(data: &Ohlcv, strategy: &Strategy, axes: &[Vec<f64>]) -> SignalBook {
    let dispatcher = Dispatcher::from_env(Some(DeviceMode::Cpu)).expect("a CPU dispatcher");
    SignalBook::build(&IndicatorBank::new(data, &dispatcher), strategy, axes).expect("a valid grid")
}

/// bb_atr with its ATR stop and max_bars, one parameter set.
fn bb_atr() -> (Strategy, Vec<Vec<f64>>) {
    (Strategy::parse("bb_atr").expect("the built-in"), vec![vec![20.0], vec![2.0], vec![14.0], vec![1.5]])
}

/// Three symbols on different clocks: the first 6,000 bars of one market, bars 1,000 to
/// 7,000 of another (later and longer), and a third with every seventh bar missing.
fn universe() -> Vec<Ohlcv> {
    let a = Ohlcv::load("synthetic:bars=6000,seed=1").expect("synthetic");
    let b = Ohlcv::load("synthetic:bars=8000,seed=2").expect("synthetic").slice(1000..8000);
    let full = Ohlcv::load("synthetic:bars=6000,seed=3").expect("synthetic");
    let keep: Vec<usize> = (0..full.len()).filter(|i| i % 7 != 3).collect();
    let pick = |v: &[f64]| keep.iter().map(|&i| v[i]).collect::<Vec<_>>();
    let c = Ohlcv::new(
        "gappy",
        keep.iter().map(|&i| full.timestamps()[i]).collect(),
        pick(full.open()),
        pick(full.high()),
        pick(full.low()),
        pick(full.close()),
        pick(full.volume()),
    )
    .expect("valid bars");
    vec![a, b, c]
}

fn trades_on_own_bars(
    books: &PortfolioBooks,
    trades: &[PortfolioTrade],
    symbol: usize,
    own: &[i64],
) -> Vec<(usize, Option<usize>, ExitReason)> {
    let at = |t: usize| own.binary_search(&books.times()[t]).expect("a bar of the symbol's own");
    trades.iter().filter(|t| t.symbol == symbol).map(|t| (at(t.entry_bar), t.exit_bar.map(at), t.reason)).collect()
}

/// bb_atr's rules with `extra` added to its `[rules]` (its last table).
fn bb_atr_with(extra: &str) -> Strategy {
    let source = format!("{}{extra}", Strategy::parse("bb_atr").expect("the built-in").source());
    Strategy::from_toml(&source, "bb_atr_with.toml").expect("a rule file")
}

/// The rule files and costs the portfolio's rules are held to the single run's with: the
/// plain book (its ATR stop and max_bars on closes), a trail on closes, a trail and the
/// stop inside the bar, a take-profit inside the bar; without and with slippage.
fn market_cases() -> Vec<(&'static str, Strategy, Costs)> {
    let trail = "trail = \"atr_mult * atr(atr_period)\"\n";
    let take_profit = "take_profit = \"close + 2 * atr(atr_period)\"\nintrabar = true\n";
    let slipped = Costs { fee: 0.001, slippage: 0.0005 };
    let shorts = "short_entry = \"close > bbands_upper(bb_period, bb_std)\"\n\
                  short_exit = \"close < bbands_middle(bb_period)\"\n\
                  short_stop = \"close + atr_mult * atr(atr_period)\"\n";
    vec![
        ("plain", bb_atr().0, COSTS),
        ("trail on closes", bb_atr_with(trail), COSTS),
        ("trail inside the bar", bb_atr_with(&format!("{trail}intrabar = true\n")), COSTS),
        ("take-profit inside the bar", bb_atr_with(take_profit), COSTS),
        ("trail inside the bar, slipped", bb_atr_with(&format!("{trail}intrabar = true\n")), slipped),
        (
            "take-profit and trail on closes, slipped",
            bb_atr_with(&format!("{trail}take_profit = \"close * 1.03\"\n")),
            slipped,
        ),
        ("shorts and reversals", bb_atr_with(shorts), COSTS),
        ("next-open fills", bb_atr_with("fill = \"next_open\"\n"), COSTS),
        (
            "next-open fills, a take-profit inside the bar",
            bb_atr_with(&format!("{take_profit}fill = \"next_open\"\n")),
            slipped,
        ),
        (
            "next-open fills, shorts and reversals, a trail on closes, slipped",
            bb_atr_with(&format!("{shorts}{trail}fill = \"next_open\"\n")),
            slipped,
        ),
        (
            "shorts and reversals, a trail inside the bar, slipped",
            bb_atr_with(&format!("{shorts}{trail}intrabar = true\n")),
            slipped,
        ),
    ]
}

/// A single run's trades as (entry bar, exit bar if closed, why).
fn single_trades(trades: &[threadx_backtest::Trade]) -> Vec<(usize, Option<usize>, ExitReason)> {
    trades.iter().map(|t| (t.entry_bar, (t.reason != ExitReason::OpenAtEnd).then_some(t.exit_bar), t.reason)).collect()
}

#[test]
fn one_symbol_with_all_the_cash_is_the_single_run() {
    let axes = bb_atr().1;
    let data = &universe()[0];
    for (case, strategy, costs) in market_cases() {
        let books = PortfolioBooks::new(vec![(book(data, &strategy, &axes), data.timestamps())]).expect("long only");
        let book = &books.books()[0];
        let plan = book.combo_plan(0);
        let account = Account::new(1.0, Sizing::default(), costs).expect("valid");
        let run = books.simulate(0, &account, (true, None));
        let single = simulate_detailed(book, &plan, costs);
        let record = run.record.as_ref().expect("a record");
        let ours = trades_on_own_bars(&books, &record.trades, 0, data.timestamps());
        let theirs = single_trades(&single.trades);
        assert!(theirs.len() > 20, "{case}: {} trades", theirs.len());
        assert_eq!(ours, theirs, "{case}");
        for (a, b) in record.equity.iter().zip(&single.equity) {
            assert!((a / b - 1.0).abs() < 1e-12, "{case}: {a} against {b}");
        }
        let (m, s) = (run.totals.metrics(data.len(), book.bars_per_year()), &single.metrics);
        for (name, a, b) in [
            ("total_return", m.total_return, s.total_return),
            ("sharpe", m.sharpe, s.sharpe),
            ("max_drawdown", m.max_drawdown, s.max_drawdown),
            ("sqn", m.sqn, s.sqn),
        ] {
            assert!((a - b).abs() <= 1e-11 * b.abs().max(1e-3), "{case}: {name}: {a} against {b}");
        }
        assert_eq!((m.trades, m.closed_trades, m.win_rate), (s.trades, s.closed_trades, s.win_rate), "{case}");
    }
}

/// With cash to spare, every symbol of `strategy`'s portfolio makes its single run's
/// trades on its own clock: the same bars and reasons, each closed trade's return (fees
/// and slippage on both sides) and a level's fill price.
fn assert_each_symbol_trades_as_alone(case: &str, strategy: &Strategy, costs: Costs) {
    let (_, axes) = bb_atr();
    let universe = universe();
    let books = PortfolioBooks::new(universe.iter().map(|d| (book(d, strategy, &axes), d.timestamps())).collect())
        .expect("long only");
    let books_of = books.books();
    // Union of the clocks: A's 6,000 bars, B's 7,000 from its bar 1,000 (5,000 shared
    // with A), C's are A's times less a seventh.
    assert_eq!(books.times().len(), 8000);
    let plans: Vec<ComboPlan> = books_of.iter().map(|b| b.combo_plan(0)).collect();
    // $1 positions from $1,000,000: the cash never binds.
    let sizing = Sizing::new(1.0, SizeType::Value, None, 0.0).expect("valid");
    let run = books.simulate(0, &Account::new(1e6, sizing, costs).expect("valid"), (true, None));
    let record = run.record.expect("a record");
    for (s, (book, data)) in books_of.iter().zip(&universe).enumerate() {
        let alone = simulate_detailed(book, &plans[s], costs);
        let theirs = single_trades(&alone.trades);
        assert!(theirs.len() > 20, "{case}");
        assert_eq!(trades_on_own_bars(&books, &record.trades, s, data.timestamps()), theirs, "{case}: symbol {s}");
        let ours = record.trades.iter().filter(|t| t.symbol == s).filter(|t| t.exit.is_some());
        for (a, t) in ours.zip(alone.trades.iter().filter(|t| t.reason != ExitReason::OpenAtEnd)) {
            let ret = a.ret().expect("closed");
            assert!((ret - t.return_).abs() < 1e-12, "{case}: symbol {s}: {ret} against {}", t.return_);
            // A level fills without slippage, at the price the single run reports (other
            // exits: the portfolio's fill is the slipped price, the single run's the bar's).
            if matches!(t.reason, ExitReason::Stop | ExitReason::Trail | ExitReason::TakeProfit) {
                assert_eq!(a.exit.expect("closed").price, t.exit_price, "{case}: symbol {s}");
            }
        }
    }
    // Each case's rules are in play: a stop or trail, a trail where there is one, and a
    // fill inside a bar (not at its close) where levels are checked there.
    let reasons: Vec<ExitReason> = record.trades.iter().map(|t| t.reason).collect();
    assert!(reasons.iter().any(|r| matches!(r, ExitReason::Stop | ExitReason::Trail)), "{case}");
    let shorts = record.trades.iter().filter(|t| t.side == Side::Short).count();
    assert_eq!(
        shorts > 20 && reasons.contains(&ExitReason::Reverse),
        case.contains("short"),
        "{case}: {shorts} shorts"
    );
    assert_eq!(reasons.contains(&ExitReason::Trail), case.contains("trail"), "{case}");
    let inside = record.trades.iter().filter_map(|t| Some((t.exit?.price, books.prices()[t.exit_bar? * 3 + t.symbol])));
    assert_eq!(
        inside.filter(|(fill, close)| fill != close).count() > 0,
        case.contains("inside") || case.contains("next-open") || costs.slippage > 0.0
    );
}

#[test]
fn with_cash_to_spare_every_symbol_trades_as_it_does_alone_on_its_own_clock() {
    for (case, strategy, costs) in market_cases() {
        assert_each_symbol_trades_as_alone(case, &strategy, costs);
    }
}

/// A sweep's totals (`PortfolioBooks::totals`: combos in parallel, each thread's schedule
/// reused from combo to combo) are each combo's own account, as `simulate` runs it alone.
#[test]
fn a_sweeps_totals_are_each_combos_own_account() {
    let strategy = Strategy::parse("bb_atr").expect("the built-in");
    let axes = vec![vec![10.0, 20.0, 40.0], vec![1.5, 2.5], vec![14.0], vec![1.0, 3.0]];
    let universe = universe();
    let books = PortfolioBooks::new(universe.iter().map(|d| (book(d, &strategy, &axes), d.timestamps())).collect())
        .expect("plain");
    let plans: Vec<ComboPlan> = (0..12).map(|c| books.books()[0].combo_plan(c)).collect();
    let sizing = Sizing::new(0.25, SizeType::Percent, None, 0.0).expect("valid");
    let account = Account::new(1000.0, sizing, COSTS).expect("valid");
    let combos: Vec<u64> = (0..12).collect();
    let totals = books.totals(&combos, (&account, None), None);
    assert!(totals.blocks.is_empty());
    let totals = totals.totals;
    for (c, plan) in plans.iter().enumerate() {
        let each: Vec<ComboPlan> = books.books().iter().map(|b| b.combo_plan(c as u64)).collect();
        assert!(each.iter().all(|p| p == plan), "combo {c}: one plan in every book");
        assert_eq!(totals[c], books.simulate(c as u64, &account, (false, None)).totals, "combo {c}");
    }
    assert!(totals.iter().all(|t| t.trades > 50));

    // Each account's blocks (for the overfitting statistics): its equity's returns bar by
    // bar, E[t]/E[t−1] − 1 from the starting cash, cut by the rule (T mod S bars dropped,
    // then S blocks of T div S), kept as Σr and Σr² in the same pass; the totals unchanged.
    let bars = books.times().len();
    let (s, first, len) = (16, bars % 16, bars / 16);
    let cuts = BlockCuts::new(bars, s as u32).expect("enough bars");
    let with_blocks = books.totals(&combos, (&account, None), Some(&cuts));
    assert_eq!(with_blocks.totals, totals);
    assert_eq!(with_blocks.blocks.len(), plans.len() * 2 * s);
    for (c, got) in with_blocks.blocks.chunks(2 * s).enumerate() {
        let record = books.simulate(c as u64, &account, (true, None)).record.expect("a record");
        let mut before = account.init_cash;
        let r: Vec<f64> = record.equity.iter().map(|&e| (e / std::mem::replace(&mut before, e)) - 1.0).collect();
        for k in 0..s {
            let block = &r[first + k * len..first + (k + 1) * len];
            let (sum, sq) = (block.iter().sum::<f64>(), block.iter().map(|x| x * x).sum::<f64>());
            assert!((got[2 * k] - sum).abs() < 1e-11 && (got[2 * k + 1] - sq).abs() < 1e-11, "combo {c} block {k}");
        }
        assert!(got.iter().any(|&x| x != 0.0), "combo {c}: it traded");
    }
}

/// Risk sizing: each entry buys the units that lose `size` of the account's value if the
/// stop (here 5 % under the entry's close) is hit at its level; a strategy without a stop
/// is refused.
#[test]
fn risk_sizing_buys_what_the_stop_would_lose_of_the_accounts_value() {
    let strategy = Strategy::from_toml(
        "name = \"risky\"\n[params]\nn = { kind = \"int\", default = 20, min = 2, max = 100 }\n[rules]\n\
         entry = \"close > highest(high, n)[1]\"\nexit = \"close < lowest(low, n)[1]\"\nstop = \"close * 0.95\"\n",
        "risky.toml",
    )
    .expect("a rule file");
    let data = &universe()[0];
    let books = PortfolioBooks::new(vec![(book(data, &strategy, &[vec![20.0]]), data.timestamps())]).expect("plain");
    let sizing = Sizing::new(0.02, SizeType::Risk, None, 0.0).expect("valid");
    let account = Account::new(1000.0, sizing, COSTS).expect("valid");
    strategy.check_sizing(&account.sizing).expect("it has a stop");
    let record = books.simulate(0, &account, (true, None)).record.expect("a record");
    assert!(record.trades.len() > 20, "{}", record.trades.len());
    for trade in &record.trades {
        // Flat before it (one symbol): the account's value before the bar's orders is the
        // cash after the bar before.
        let value = if trade.entry_bar == 0 { 1000.0 } else { record.cash[trade.entry_bar - 1] };
        let price = trade.entry.price;
        let want = 0.02 * value / (price - 0.95 * price);
        assert!(
            (trade.entry.size - want).abs() <= 1e-9 * want,
            "bar {}: {} units, not {want}",
            trade.entry_bar,
            trade.entry.size
        );
        // A stop exit loses about that share of the value (the close may pass the level).
        if trade.reason == ExitReason::Stop {
            let loss = -trade.pnl().expect("closed");
            assert!(loss >= 0.02 * value * 0.999, "bar {}: lost {loss} of {value}", trade.entry_bar);
        }
    }
    let bb = Strategy::parse("ma_cross").expect("the built-in");
    let refused = bb.check_sizing(&account.sizing).expect_err("no stop").to_string();
    assert!(refused.contains("risk sizing sizes each entry from its distance to its stop"), "{refused}");
}

/// A `rank` rule orders a bar's entries when the cash cannot pay for all: every symbol
/// wants in at its first bar, the first to enter takes all the cash, and the rank says
/// which that is (symbol order without it), each combo's own where it reads a parameter.
#[test]
fn a_rank_rule_decides_which_entry_the_cash_pays_for() {
    let data = [Ohlcv::load("synthetic:bars=500,seed=7").unwrap(), Ohlcv::load("synthetic:bars=500,seed=8").unwrap()];
    let dispatcher = Dispatcher::from_env(Some(DeviceMode::Cpu)).expect("a CPU dispatcher");
    let named: Vec<(&str, &Ohlcv)> = vec![("A", &data[0]), ("B", &data[1])];
    let first_symbol = |rank: &str| {
        let text = format!("name = \"always\"\n[rules]\nentry = \"close > 0\"\n{rank}");
        let strategy = Strategy::from_toml(&text, "always.toml").expect("a rule file");
        let books = PortfolioBooks::for_params(&strategy, &[], &named, &dispatcher).expect("books");
        let account = Account::new(1000.0, Sizing::default(), COSTS).expect("valid");
        let record = books.simulate(0, &account, (true, None)).record.expect("a record");
        assert_eq!(record.trades.len(), 1, "all the cash went into one");
        record.trades[0].symbol
    };
    let higher = usize::from(data[1].close()[0] > data[0].close()[0]);
    assert_eq!(first_symbol(""), 0, "symbol order");
    assert_eq!(first_symbol("rank = \"close\""), higher);
    assert_eq!(first_symbol("rank = \"-close\""), 1 - higher);
    // A rank that reads a parameter ranks by each parameter set's own values.
    let text = "name = \"p\"\n[params]\nk = { kind = \"float\", default = 1, min = -1, max = 1 }\n[rules]\n\
                entry = \"close > 0\"\nrank = \"close * k\"\n";
    let strategy = Strategy::from_toml(text, "p.toml").expect("a rank that reads k");
    let account = Account::new(1000.0, Sizing::default(), COSTS).expect("valid");
    let alone: Vec<_> = [-1.0, 1.0]
        .iter()
        .map(|&k| {
            let books = PortfolioBooks::for_params(&strategy, &[k], &named, &dispatcher).expect("books");
            books.simulate(0, &account, (true, None))
        })
        .collect();
    let firsts: Vec<usize> = alone.iter().map(|run| run.record.as_ref().expect("a record").trades[0].symbol).collect();
    assert_eq!(firsts, [1 - higher, higher], "k = -1 ranks the lower close first, k = 1 the higher");
    // Swept, each combo reads its own k's series: its totals are that parameter set's.
    let banks: Vec<IndicatorBank<'_>> = data.iter().map(|d| IndicatorBank::new(d, &dispatcher)).collect();
    let books = banks
        .iter()
        .map(|b| (SignalBook::build(b, &strategy, &[vec![-1.0, 1.0]]).expect("a grid"), b.data().timestamps()));
    let swept = PortfolioBooks::new(books.collect()).and_then(|b| b.ranked_by(&strategy, &banks)).expect("ranked");
    let totals = swept.totals(&[0, 1], (&account, None), None).totals;
    assert_eq!(totals, [alone[0].totals, alone[1].totals]);
}

/// A detailed account as one curve and its trades (`PortfolioBooks::report`, what a
/// walk-forward's test window reads): the metrics of the curve are the run's totals'
/// (exposure: the bars some symbol is held, overlapping trades counted once), and a
/// report cut at a bar starts its equity at 1 there.
#[test]
fn a_portfolios_report_has_its_runs_metrics() {
    let (strategy, axes) = bb_atr();
    let universe = universe();
    let books = PortfolioBooks::new(universe.iter().map(|d| (book(d, &strategy, &axes), d.timestamps())).collect())
        .expect("plain");
    let sizing = Sizing::new(0.3, SizeType::Percent, None, 0.0).expect("valid");
    let account = Account::new(500.0, sizing, COSTS).expect("valid");
    let run = books.simulate(0, &account, (true, None));
    let record = run.record.expect("a record");
    let bars = books.times().len();
    let report = books.report(&record, account.init_cash, 35_040.0);
    let (got, want) = (report.metrics, run.totals.metrics(bars, 35_040.0));
    assert_eq!((got.trades, got.closed_trades), (want.trades, want.closed_trades));
    assert_eq!(got.exposure, want.exposure, "held bars counted once however many symbols are held");
    for (name, a, b) in [
        ("total_return", got.total_return, want.total_return),
        ("sharpe", got.sharpe, want.sharpe),
        ("max_drawdown", got.max_drawdown, want.max_drawdown),
        ("win_rate", got.win_rate, want.win_rate),
        ("expectancy", got.expectancy, want.expectancy),
    ] {
        assert!((a - b).abs() <= 1e-9 * b.abs().max(1e-6), "{name}: {a} against {b}");
    }
    let overlapping = record.trades.windows(2).any(|p| p[1].entry_bar < p[0].exit_bar.unwrap_or(bars));
    assert!(overlapping && want.exposure < 1.0, "the symbols' trades overlap");
    assert!((report.equity[bars - 1] - record.equity[bars - 1] / 500.0).abs() < 1e-15);
    let since = report.since(3000);
    assert_eq!(since.equity.len(), bars - 3000);
    assert!((since.equity[0] - report.equity[3000] / report.equity[2999]).abs() < 1e-15);
}
