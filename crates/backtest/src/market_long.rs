//! The market simulation's fast twin for the combos most market sweeps run: long only,
//! filled at the close, with stops and take-profits against closes or inside the bar, a
//! trailing stop and max_bars. It is [`crate::market`]'s rules with its f64 equity, laid
//! out as the plain integer run is (one loop per trade, its return sums from the book's
//! tables, its block snapshots once per trade), so its [`Totals`] and snapshots are the
//! market simulation's bits: the tests below hold it to them. A detailed report (trades,
//! equity) of such a combo still comes from the market simulation.

use crate::bar_tables::BarTables;
use crate::blocks::Snapshots;
use crate::book::{ComboPlan, SignalBook, StopRule};
use crate::costs::Fill;
use crate::fixed::{Totals, ret_units};
use crate::trade_parts::{last_bar, log_of, next_bit, trail_level};

/// Whether [`simulate_long`] runs `plan` of `book` (a book that is not plain): a long-only
/// combo filled at the close.
#[inline(always)]
pub(crate) fn runs_long(book: &SignalBook, plan: &ComboPlan) -> bool {
    plan.short_entry == ComboPlan::NO_STOP && book.fills().fill == Fill::Close
}

/// One long-only combo filled at the close ([`runs_long`]): the totals of
/// [`crate::market`]'s simulation, and its block snapshots into `blocks`.
#[inline(always)]
pub(crate) fn simulate_long(
    book: &SignalBook,
    tables: &BarTables,
    plan: &ComboPlan,
    blocks: Option<&mut Snapshots<'_>>,
) -> Totals {
    // Two copies of the loop: a trail's level moves every bar; a fixed stop's does not.
    if plan.trail == ComboPlan::NO_STOP {
        run::<false>(book, tables, plan, blocks)
    } else {
        run::<true>(book, tables, plan, blocks)
    }
}

/// Where a trade ended: the bar, whether at a stop or take-profit level (which pays no
/// slippage), and the fill price of one inside the bar (`None`: at the close, whose return
/// the tables hold).
type Exit = (usize, bool, Option<f64>);

// The long-only fast path's bar loop in one inlined function, so that its state stays in
// registers (`cargo bench -p threadx-backtest --bench backtest -- market_cpu`); issue #51
// replaces it with the shared state machine.
#[allow(clippy::too_many_lines)]
#[inline(always)]
fn run<const TRAILS: bool>(
    book: &SignalBook,
    tables: &BarTables,
    plan: &ComboPlan,
    mut blocks: Option<&mut Snapshots<'_>>,
) -> Totals {
    let n = book.bars();
    let close = &book.close()[..n];
    let intrabar = book.fills().intrabar;
    // Against closes, a bar's low, high and open are its close.
    let (open, high, low) =
        if intrabar { (&book.open()[..n], &book.high()[..n], &book.low()[..n]) } else { (close, close, close) };
    let entries = book.entry_row(plan.entry);
    let exits = book.exit_row(plan.exit);
    let [stop_rule, target_rule, trail_rule] = [plan.stop, plan.take_profit, plan.trail].map(|s| book.stop(s));
    // A level frozen at the entry bar; NaN: none (no comparison with it holds, and the
    // binding stop is then the trail).
    let level =
        |rule: Option<StopRule<'_>>, e: usize| rule.and_then(|s| s.frozen_level(e, close[e])).unwrap_or(f64::NAN);
    let mut totals = Totals::default();
    // Equity at the last marked close, its running peak, and the lowest ratio of an
    // equity to the peak before it: the market simulation's drawdown (division by one
    // positive peak is monotonic, so this is the min of its troughs' ratios, bit for bit).
    let (mut equity, mut peak, mut worst) = (1.0f64, 1.0f64, 1.0f64);
    let mut mark = |value: f64| {
        peak = if value > peak { value } else { peak };
        let ratio = value / peak;
        worst = if ratio < worst { ratio } else { worst };
    };
    let mut from = plan.warmup as usize;
    let mut next_exit = 0;
    while let Some(e) = next_bit(entries, from).filter(|&e| e < n) {
        totals.trades += 1;
        let before = equity;
        let shares = before / (close[e] * (1.0 + tables.buy));
        equity = shares * close[e];
        mark(equity);
        let fixed = level(stop_rule, e);
        let take_profit = level(target_rule, e);
        // No trail at this entry: a level of −∞, never reached.
        let (fraction, distance) = trail_rule.and_then(|s| s.trail(e)).unwrap_or((0.0, f64::INFINITY));
        let mut best = close[e];
        // The binding stop: the tighter of the stop and the trail (a NaN stop: the trail).
        let stop_at = |best: f64| {
            let trail = trail_level(false, best, fraction, distance);
            if !TRAILS || fixed > trail { fixed } else { trail }
        };
        let mut stop = stop_at(best);
        // The first bar the exit rule or max_bars closes the trade at. The next exit bit
        // is looked for again only once passed: its row is scanned once per run.
        if next_exit <= e {
            next_exit = next_bit(exits, e + 1).unwrap_or(n);
        }
        let due = last_bar(e, plan.max_bars).min(next_exit);
        // A stop or take-profit reached at bar t: inside the bar, the fill price (the stop
        // first; the open when the bar opens beyond a level); against closes, the close's
        // own (`None`).
        let reached = |t: usize, stop: f64| {
            if !intrabar {
                None
            } else if open[t] <= stop {
                Some(open[t])
            } else if low[t] <= stop {
                Some(stop)
            } else if open[t] >= take_profit {
                Some(open[t])
            } else {
                Some(take_profit)
            }
        };
        let mut t = e + 1;
        let exit: Option<Exit> = loop {
            if t == n {
                break None;
            }
            let hit = low[t] <= stop || high[t] >= take_profit;
            if hit || t >= due {
                // A level reached inside the bar comes before the exit rule and max_bars.
                break Some((t, hit, if hit { reached(t, stop) } else { None }));
            }
            equity = shares * close[t];
            mark(equity);
            best = if high[t] > best { high[t] } else { best };
            if TRAILS {
                stop = stop_at(best);
            }
            t += 1;
        };
        // Σ of the trade's returns over bars e..=t while held (t < its exit).
        let entry_sums =
            (tables.entry_ret.wrapping_sub(tables.ret_sum[e]), tables.entry_ret_sq.wrapping_sub(tables.ret_sq_sum[e]));
        let held =
            |t: usize| (entry_sums.0.wrapping_add(tables.ret_sum[t]), entry_sums.1.wrapping_add(tables.ret_sq_sum[t]));
        if let Some(blocks) = blocks.as_deref_mut() {
            blocks.trade(e, exit.map(|(x, ..)| x), (totals.sum, totals.sum_sq), held);
        }
        let Some((x, at_level, inside)) = exit else {
            totals.held += (n - e) as u32;
            let (s1, s2) = held(n - 1);
            totals.sum = totals.sum.wrapping_add(s1);
            totals.sum_sq = totals.sum_sq.wrapping_add(s2);
            break;
        };
        let price = inside.unwrap_or(close[x]);
        // A stop or take-profit fills with the fee alone (see `trade_parts::at_level`).
        let after = shares * price * (1.0 - if at_level { tables.fee } else { tables.sell });
        let (r1, r2) = match inside {
            // The exit bar's return E[x]/E[x−1] − 1, in f64 as the market simulation has it.
            Some(_) => {
                let (s1, s2) = held(x - 1);
                let r = after / equity - 1.0;
                (s1.wrapping_add(ret_units(r) as u128), s2.wrapping_add(ret_units(r * r) as u128))
            }
            None => {
                let (exit1, exit2) = tables.exit_sums(x, at_level);
                (entry_sums.0.wrapping_add(exit1), entry_sums.1.wrapping_add(exit2))
            }
        };
        totals.sum = totals.sum.wrapping_add(r1);
        totals.sum_sq = totals.sum_sq.wrapping_add(r2);
        totals.held += (x - e) as u32;
        totals.closed += 1;
        totals.wins += u32::from(after > before);
        equity = after;
        mark(equity);
        // No new entry on the bar of an exit.
        from = x + 1;
    }
    if let Some(blocks) = blocks {
        blocks.finish((totals.sum, totals.sum_sq));
    }
    totals.log_equity = log_of(equity);
    totals.drawdown = log_of(worst);
    totals
}

#[cfg(test)]
mod tests {
    //! The twin against the market simulation: every total and block snapshot the same
    //! bits, on user signals (fraction stops, take-profits, fraction trails, price-level
    //! stops) and on rule files (ATR stops and take-profits, ATR trails, max_bars), with
    //! stops against closes and inside bars with gaps, fees and slippage.

    use super::*;
    use crate::blocks::BlockCuts;
    use crate::costs::{Costs, Fills};
    use crate::trade_parts::Nothing;
    use crate::{Strategy, UserSignals};
    use ndarray::Array2;
    use proptest::prelude::*;
    use threadx_dispatch::DeviceMode;
    use threadx_dispatch::testing::dispatcher_in;
    use threadx_indicators::{IndicatorBank, Ohlcv};
    use threadx_stats::SeededRng;

    /// Random bars with gaps (opens away from the last close), moves of a few percent.
    fn random_bars(n: usize, rng: &mut SeededRng) -> Ohlcv {
        let (mut open, mut high, mut low, mut close) = (vec![], vec![], vec![], vec![]);
        let mut c = 100.0_f64;
        for _ in 0..n {
            let o = c * (1.0 + 0.02 * (rng.uniform() - 0.5));
            c = o * (1.0 + 0.04 * (rng.uniform() - 0.5));
            open.push(o);
            close.push(c);
            high.push(o.max(c) * (1.0 + 0.01 * rng.uniform()));
            low.push(o.min(c) * (1.0 - 0.01 * rng.uniform()));
        }
        let ts = (0..n as i64).map(|i| 1_700_000_000_000 + i * 900_000).collect();
        Ohlcv::new("random", ts, open, high, low, close, vec![1.0; n]).unwrap()
    }

    /// Every long-only plan of `book`: the twin's totals and snapshots against the market
    /// simulation's, with and without blocks.
    fn assert_twins(book: &SignalBook, costs: Costs, blocks: u32) -> usize {
        let cuts = BlockCuts::new(book.bars(), blocks).unwrap();
        let tables = BarTables::new(book, costs);
        let mut compared = 0;
        for combo in 0..book.grid_len() {
            let plan = book.combo_plan(combo);
            assert!(runs_long(book, &plan));
            let (mut fast, mut market) = (vec![0u128; cuts.snapshot_len()], vec![0u128; cuts.snapshot_len()]);
            let a = simulate_long(book, &tables, &plan, Some(&mut Snapshots::new(&cuts, &mut fast)));
            let b = crate::market::simulate_market(
                book,
                &tables,
                &plan,
                Some(Snapshots::new(&cuts, &mut market)),
                &mut Nothing,
            );
            assert_eq!(a, b, "combo {combo}: {plan:?}");
            assert_eq!(fast, market, "combo {combo}: block snapshots");
            assert_eq!(simulate_long(book, &tables, &plan, None), a, "combo {combo} without blocks");
            compared += usize::from(a.trades > 0);
        }
        compared
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn the_twin_is_the_market_simulation_on_signals(
            seed in any::<u64>(),
            n in 64usize..1500,
            intrabar in any::<bool>(),
            stop_kind in 0u8..4,
            take_profit in any::<bool>(),
            fee in prop_oneof![Just(0.0), 0.0..0.01],
            slippage in prop_oneof![Just(0.0), 0.0..0.01],
            blocks in prop_oneof![Just(2u32), Just(4), Just(16)],
        ) {
            let mut rng = SeededRng::new(seed);
            let data = random_bars(n, &mut rng);
            let columns = 4;
            let mut draw = |p: f64| Array2::from_shape_fn((n, columns), |_| rng.uniform() < p);
            let (entries, exits) = (draw(0.15), draw(0.05));
            // Fractions of a few percent, with some NaN, 0 and +inf (none) among them.
            let fraction = |rng: &mut SeededRng| match (rng.uniform() * 20.0) as u32 {
                0 => f64::NAN,
                1 => 0.0,
                2 => f64::INFINITY,
                _ => 0.002 + 0.04 * rng.uniform(),
            };
            let sl = Array2::from_shape_fn((n, columns), |_| fraction(&mut rng));
            let tp = Array2::from_shape_fn((n, columns), |_| fraction(&mut rng));
            let closes = data.close().to_vec();
            let levels = Array2::from_shape_fn((n, columns), |(t, _)| closes[t] * (0.9 + 0.09 * rng.uniform()));
            let mut signals = UserSignals::long(entries.view(), exits.view());
            match stop_kind {
                1 => signals.sl_stop = Some(sl.view()),
                2 => (signals.sl_stop, signals.sl_trail) = (Some(sl.view()), &[true]),
                3 => signals.stop = Some(levels.view()),
                _ => {}
            }
            if take_profit {
                signals.tp_stop = Some(tp.view());
            }
            signals.fills = Fills { intrabar, ..Fills::default() };
            let book = SignalBook::from_signals(&data, signals).unwrap();
            prop_assume!(!book.is_plain());
            let traded = assert_twins(&book, Costs { fee, slippage }, blocks);
            prop_assert!(traded == columns, "{traded} of {columns} columns traded");
        }
    }

    #[test]
    fn the_twin_is_the_market_simulation_on_a_million_bars() {
        let bb_atr = Strategy::parse("bb_atr").unwrap().source().to_owned();
        let extra =
            "trail = \"atr_mult * atr(atr_period)\"\nintrabar = true\ntake_profit = \"close + 3 * atr(atr_period)\"\n";
        let strategy = Strategy::from_toml(&format!("{bb_atr}{extra}"), "bb_atr_trail.toml").unwrap();
        let data = Ohlcv::load("synthetic:bars=1000000,seed=5").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let dispatcher = dispatcher_in(dir.path(), DeviceMode::Cpu);
        let bank = IndicatorBank::new(&data, &dispatcher);
        let book =
            SignalBook::build(&bank, &strategy, &[vec![20.0, 50.0], vec![2.0], vec![14.0], vec![1.0, 2.5]]).unwrap();
        assert_eq!(assert_twins(&book, Costs { fee: 0.001, slippage: 0.0002 }, 16), 4);
    }

    #[test]
    fn the_twin_is_the_market_simulation_on_rule_files() {
        let bb_atr = Strategy::parse("bb_atr").unwrap().source().to_owned();
        let extras = [
            "trail = \"atr_mult * atr(atr_period)\"\nintrabar = true\n",
            "trail = \"atr_mult * atr(atr_period)\"\n",
            "trail = \"atr_mult * atr(atr_period)\"\nintrabar = true\ntake_profit = \"close + 2 * atr(atr_period)\"\nmax_bars = \"bb_period\"\n",
            "take_profit = \"close + 1.5 * atr(atr_period)\"\nintrabar = true\n",
            "trail = \"0.5 * atr(atr_period)\"\ntake_profit = \"close * 1.01\"\n",
        ];
        let axes = [vec![10.0, 20.0], vec![1.5, 2.0], vec![7.0, 14.0], vec![0.5, 1.0, 3.0]];
        let dir = tempfile::tempdir().unwrap();
        let dispatcher = dispatcher_in(dir.path(), DeviceMode::Cpu);
        let mut rng = SeededRng::new(7);
        for (k, extra) in extras.iter().enumerate() {
            let data = random_bars(5000 + 700 * k, &mut rng);
            let bank = IndicatorBank::new(&data, &dispatcher);
            let strategy = Strategy::from_toml(&format!("{bb_atr}{extra}"), "bb_atr_market.toml").unwrap();
            let book = SignalBook::build(&bank, &strategy, &axes).unwrap();
            assert!(!book.is_plain(), "{extra}");
            let traded = assert_twins(&book, Costs { fee: 0.001, slippage: 0.0005 }, 16);
            assert_eq!(traded as u64, book.grid_len(), "{extra}");
        }
    }
}
