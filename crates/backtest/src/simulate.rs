//! The CPU simulations of one combo over all bars, with the fill, fee, equity and metric
//! rules of docs/strategies.md:
//!
//! - [`simulate_detailed`]: f64 equity bar by bar, with the trades and the equity curve.
//!   It is the test oracle of the metrics, and what `threadx backtest` writes as trades
//!   and equity. Its loop is generic over an [`Observer`] that records them.
//! - [`simulate_totals`] (and the batch [`simulate_cpu`]): the same decisions, with the
//!   metrics accumulated as integers from the book's [`BarTables`], bit for bit what the
//!   GPU kernel computes. This is where reported metrics come from.
//!
//! Both skip flat stretches a 64-bar word of entry bits at a time.

use crate::bar_tables::BarTables;
use crate::blocks::{BlockCuts, Snapshots};
use crate::book::{ComboPlan, SignalBook};
use crate::costs::Costs;
use crate::fixed::{Totals, minus, plus, product_units};
use crate::market::simulate_market;
use crate::market_close::{runs_at_close, simulate_at_close};
use crate::metrics::{ExitReason, Metrics, RunSums, Side, Trade};
use crate::portfolio::Activity;
use crate::trade_parts::{Leg, Nothing, Observer, at_level, bit, last_bar, next_bit};
use rayon::prelude::*;

/// Running drawdown and return sums. Drawdown is tracked as the lowest equity since the
/// last peak, divided only when a new peak starts or at the end; since division by a
/// positive number is monotonic, this gives the same bits as min over t of E[t]/peak − 1.
/// The closed trades' returns are summed beside them.
struct Accumulator {
    sum: f64,
    sum_sq: f64,
    down_sq: f64,
    peak: f64,
    trough: f64,
    max_drawdown: f64,
    trade_sum: f64,
    trade_sq: f64,
    trade_gain: f64,
}

impl Accumulator {
    fn new() -> Self {
        Self {
            sum: 0.0,
            sum_sq: 0.0,
            down_sq: 0.0,
            peak: 1.0,
            trough: 1.0,
            max_drawdown: 0.0,
            trade_sum: 0.0,
            trade_sq: 0.0,
            trade_gain: 0.0,
        }
    }

    /// A closed trade's return.
    fn trade(&mut self, r: f64) {
        self.trade_sum += r;
        self.trade_sq += r * r;
        self.trade_gain += r.max(0.0);
    }

    /// The run's sums, its equity `end` and its counts as given.
    fn sums(
        &self,
        end: f64,
        (trades, closed, wins, held): (u32, u32, u32, usize),
        bars: usize,
        bars_per_year: f64,
    ) -> RunSums {
        RunSums {
            total_return: end - 1.0,
            max_drawdown: self.max_drawdown.min(self.trough / self.peak - 1.0),
            trades,
            closed,
            wins,
            held,
            bars,
            bars_per_year,
            sum: self.sum,
            sum_sq: self.sum_sq,
            down_sq: self.down_sq,
            trade_sum: self.trade_sum,
            trade_sq: self.trade_sq,
            trade_gain: self.trade_gain,
        }
    }

    #[inline(always)]
    fn step(&mut self, r: f64, equity: f64) {
        self.sum += r;
        self.sum_sq += r * r;
        self.down_sq += r.min(0.0) * r.min(0.0);
        if equity > self.peak {
            self.max_drawdown = self.max_drawdown.min(self.trough / self.peak - 1.0);
            self.peak = equity;
            self.trough = equity;
        } else if equity < self.trough {
            self.trough = equity;
        }
    }
}

/// One combo's simulation. Equity starts at 1 (E[−1]).
#[inline(always)]
pub(crate) fn simulate<O: Observer>(book: &SignalBook, plan: &ComboPlan, costs: Costs, obs: &mut O) -> Metrics {
    let n = book.bars();
    let close = &book.close()[..n];
    let ret = &book.ret()[..n];
    let entries = book.entry_row(plan.entry);
    let exits = book.exit_row(plan.exit);
    let stop = book.stop(plan.stop);
    let target = book.stop(plan.take_profit);
    let (buy, sell) = (1.0 + costs.buy(), 1.0 - costs.sell());
    let mut acc = Accumulator::new();
    let (mut trades, mut closed, mut wins, mut held) = (0u32, 0u32, 0u32, 0usize);
    let mut cash = 1.0;
    let mut flat_from = 0;
    let mut from = plan.warmup as usize;
    let equity = loop {
        let Some(e) = next_bit(entries, from).filter(|&e| e < n) else {
            obs.flat(flat_from, n, cash);
            break cash;
        };
        obs.flat(flat_from, e, cash);
        trades += 1;
        let entry_close = close[e];
        let shares = cash / (entry_close * buy);
        let mut value = shares * entry_close;
        acc.step(value / cash - 1.0, value);
        obs.held(e, value);
        let stop = stop.map_or(f64::NEG_INFINITY, |s| s.level(e, entry_close));
        // A target ≤ 0 or NaN is none (the GPU holds it as 0).
        let target = target.map_or(0.0, |s| s.level(e, entry_close));
        let last = last_bar(e, plan.max_bars);
        let mut exit = None;
        for t in e + 1..n {
            let c = close[t];
            let reason = if c <= stop {
                ExitReason::Stop
            } else if target > 0.0 && c >= target {
                ExitReason::TakeProfit
            } else if bit(exits, t) {
                ExitReason::Signal
            } else if t >= last {
                ExitReason::MaxBars
            } else {
                value = shares * c;
                acc.step(ret[t], value);
                obs.held(t, value);
                continue;
            };
            exit = Some((t, reason));
            break;
        }
        let Some((x, reason)) = exit else {
            held += n - e;
            let gain = value / cash - 1.0;
            let (entry_price, exit_price) = (entry_close, close[n - 1]);
            obs.trade(Leg {
                entry: e,
                exit: n - 1,
                side: Side::Long,
                entry_price,
                exit_price,
                reason: ExitReason::OpenAtEnd,
                gain,
            });
            break value;
        };
        // A stop or take-profit fills with the fee alone (no slippage).
        let proceeds = shares * close[x] * if at_level(reason) { 1.0 - costs.fee } else { sell };
        acc.step(proceeds / value - 1.0, proceeds);
        held += x - e;
        closed += 1;
        wins += u32::from(proceeds > cash);
        let gain = proceeds / cash - 1.0;
        acc.trade(gain);
        obs.trade(Leg {
            entry: e,
            exit: x,
            side: Side::Long,
            entry_price: entry_close,
            exit_price: close[x],
            reason,
            gain,
        });
        cash = proceeds;
        flat_from = x;
        // No new entry on the bar of an exit.
        from = x + 1;
    };
    acc.sums(equity, (trades, closed, wins, held), n, book.bars_per_year()).metrics()
}

/// One combo's integer totals on the CPU: the decisions of [`simulate_detailed`], with
/// log equity, drawdown and the return sums in fixed point (see [`BarTables`]); a book
/// that is not plain ([`SignalBook::is_plain`]) by the market simulation.
///
/// Drawdown within a trade is tracked in log-price space: with `base` = log equity before
/// the entry + log(1/(1 + fee)) − L[e], log E[t] = base + L[t] while held, so the running
/// peak is `base + hi` with `hi` the running max of L (started at the incoming peak
/// − base), and the drawdown at t is L[t] − hi. The return sums of a trade come from the
/// prefix tables in O(1).
pub fn simulate_totals(book: &SignalBook, tables: &BarTables, plan: &ComboPlan) -> Totals {
    totals(book, tables, plan, None)
}

/// [`simulate_totals`] that also records the block snapshots of `cuts` into `snapshots`
/// ([`BlockCuts::snapshot_len`] of them): what the GPU kernel records, bit for bit.
pub fn simulate_with_blocks(
    book: &SignalBook,
    tables: &BarTables,
    plan: &ComboPlan,
    cuts: &BlockCuts,
    snapshots: &mut [u128],
) -> Totals {
    totals(book, tables, plan, Some(Snapshots::new(cuts, snapshots)))
}

/// The one choice between the simulations: a plain book's integer run (the kernel's
/// twin), a combo filled at the close by the market rules' fast twin, any other
/// combo by the market simulation.
#[inline(always)]
fn totals(book: &SignalBook, tables: &BarTables, plan: &ComboPlan, mut blocks: Option<Snapshots<'_>>) -> Totals {
    if book.is_plain() {
        run_totals(book, tables, plan, blocks.as_mut())
    } else if runs_at_close(book) {
        simulate_at_close(book, tables, plan, blocks.as_mut())
    } else {
        simulate_market(book, tables, plan, blocks, &mut Nothing)
    }
}

#[inline(always)]
fn run_totals(book: &SignalBook, tables: &BarTables, plan: &ComboPlan, mut blocks: Option<&mut Snapshots>) -> Totals {
    let n = book.bars();
    let close = &book.close()[..n];
    let log = &tables.log[..n];
    let entries = book.entry_row(plan.entry);
    let exits = book.exit_row(plan.exit);
    let stop = book.stop(plan.stop);
    let target = book.stop(plan.take_profit);
    let mut totals = Totals::default();
    let (mut equity, mut peak) = (0i64, 0i64);
    let mut from = plan.warmup as usize;
    while let Some(e) = next_bit(entries, from).filter(|&e| e < n) {
        totals.trades += 1;
        let level = stop.map_or(f64::NEG_INFINITY, |s| s.level(e, close[e]));
        let target = target.map_or(0.0, |s| s.level(e, close[e]));
        // The entry bar's row, read once (its sums and gain factors share a cache line).
        let entry_row = tables.held[e];
        let last = last_bar(e, plan.max_bars);
        let base = equity.wrapping_add(tables.log_buy).wrapping_sub(log[e]);
        let mut hi = log[e].max(peak.wrapping_sub(base));
        let mut low = log[e].wrapping_sub(hi);
        // The exit bar, and whether it is at a level (a stop or take-profit, which pays no
        // slippage).
        let mut exit = None;
        for t in e + 1..n {
            let c = close[t];
            let at_level = c <= level || (target > 0.0 && c >= target);
            if at_level || bit(exits, t) || t >= last {
                exit = Some((t, at_level));
                break;
            }
            let l = log[t];
            hi = hi.max(l);
            low = low.min(l.wrapping_sub(hi));
        }
        totals.drawdown = totals.drawdown.min(low);
        // The entry bar's terms less the held sums through it: plus the held sums through
        // t, the terms of bars e..=t.
        let entry_sums = minus(tables.entry, entry_row.sums);
        if let Some(blocks) = blocks.as_deref_mut() {
            let held = |t: usize| {
                let [s1, s2, _] = plus(entry_sums, tables.held_sums(t));
                (s1, s2)
            };
            blocks.trade(e, exit.map(|(x, _)| x), (totals.sum, totals.sum_sq), held);
        }
        let Some((x, at_level)) = exit else {
            totals.held += (n - e) as u32;
            totals.add_terms(plus(entry_sums, tables.held_sums(n - 1)));
            equity = base.wrapping_add(log[n - 1]);
            break;
        };
        totals.held += (x - e) as u32;
        totals.add_terms(plus(entry_sums, tables.exit_sums(x, at_level)));
        let gain = if at_level { entry_row.gain_level } else { entry_row.gain };
        totals.close_trade_units(product_units(close[x], gain));
        let after = base.wrapping_add(tables.log_sell_at(at_level)).wrapping_add(log[x]);
        totals.wins += u32::from(after.wrapping_sub(equity) > 0);
        peak = base.wrapping_add(hi).max(after);
        totals.drawdown = totals.drawdown.min(after.wrapping_sub(peak));
        equity = after;
        // No new entry on the bar of an exit.
        from = x + 1;
    }
    if let Some(blocks) = blocks {
        blocks.finish((totals.sum, totals.sum_sq));
    }
    totals.log_equity = equity;
    totals
}

/// The totals of a batch of plans, in plan order, and their block statistics when the
/// tables ask for them ([`BarTables::with_blocks`]): [`BlockCuts::stats_len`] f64 per
/// plan, (Σr, Σr²) per block; empty otherwise. A portfolio's plans have their
/// account's [`Activity`] too (empty for single runs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchTotals {
    pub totals: Vec<Totals>,
    pub blocks: Vec<f64>,
    pub activity: Vec<Activity>,
}

impl BatchTotals {
    /// Each plan's metrics over `bars` bars, annualised by `bars_per_year` (a
    /// portfolio's with its turnover and mean positions), on the CPU's pool.
    pub fn metrics(&self, bars: usize, bars_per_year: f64) -> Vec<Metrics> {
        if self.activity.is_empty() {
            return self.totals.par_iter().map(|t| t.metrics(bars, bars_per_year)).collect();
        }
        let each = self.totals.par_iter().zip(&self.activity);
        each.map(|(t, a)| a.metrics(t, bars, bars_per_year)).collect()
    }
}

/// Totals of every plan, in order, on the CPU: combos in parallel (rayon), nothing
/// allocated per combo. Each combo is computed alone, so the result does not depend on the
/// thread count or on how plans are cut.
pub fn simulate_cpu(book: &SignalBook, tables: &BarTables, plans: &[ComboPlan]) -> BatchTotals {
    let grain = threadx_dispatch::cpu_grain(book.bars());
    let Some(cuts) = tables.blocks() else {
        let totals = plans.par_iter().with_min_len(grain).map(|plan| simulate_totals(book, tables, plan)).collect();
        return BatchTotals { totals, blocks: Vec::new(), activity: Vec::new() };
    };
    let (per_snap, per_stats) = (cuts.snapshot_len(), cuts.stats_len());
    let mut blocks = vec![0.0; plans.len() * per_stats];
    let totals = plans
        .par_iter()
        .zip(blocks.par_chunks_mut(per_stats))
        .with_min_len(grain)
        .map_init(
            || vec![0u128; per_snap],
            |snapshots, (plan, out)| {
                let totals = simulate_with_blocks(book, tables, plan, cuts, snapshots);
                cuts.stats(snapshots, &totals, out);
                totals
            },
        )
        .collect();
    BatchTotals { totals, blocks, activity: Vec::new() }
}

/// A single backtest in detail: metrics, trades and the equity curve.
#[derive(Debug, Clone, PartialEq)]
pub struct BacktestReport {
    pub metrics: Metrics,
    pub trades: Vec<Trade>,
    /// Equity marked to market at every close, starting from 1 before the first bar.
    pub equity: Vec<f64>,
    /// What annualises the Sharpe ratio (the book's).
    pub bars_per_year: f64,
}

struct Recorder<'a> {
    book: &'a SignalBook,
    trades: Vec<Trade>,
    equity: Vec<f64>,
}

impl Observer for Recorder<'_> {
    fn flat(&mut self, from: usize, to: usize, cash: f64) {
        self.equity[from..to].fill(cash);
    }

    fn held(&mut self, t: usize, value: f64) {
        self.equity[t] = value;
    }

    fn trade(&mut self, leg: Leg) {
        let time = self.book.timestamps();
        self.trades.push(Trade {
            side: leg.side,
            entry_bar: leg.entry,
            exit_bar: leg.exit,
            entry_time: time[leg.entry],
            exit_time: time[leg.exit],
            entry_price: leg.entry_price,
            exit_price: leg.exit_price,
            return_: leg.gain,
            reason: leg.reason,
        });
    }
}

/// One combo with its trade list and equity curve (CPU, f64 bar by bar: the oracle of a
/// plain book, whose metrics here are the f64 ones; reported metrics come from
/// [`simulate_totals`], which a book that is not plain shares this pass with).
pub fn simulate_detailed(book: &SignalBook, plan: &ComboPlan, costs: Costs) -> BacktestReport {
    let mut recorder = Recorder { book, trades: Vec::new(), equity: vec![f64::NAN; book.bars()] };
    let metrics = if book.is_plain() {
        simulate(book, plan, costs, &mut recorder)
    } else {
        let tables = BarTables::new(book, costs);
        simulate_market(book, &tables, plan, None, &mut recorder).metrics(book.bars(), book.bars_per_year())
    };
    BacktestReport { metrics, trades: recorder.trades, equity: recorder.equity, bars_per_year: book.bars_per_year() }
}

impl BacktestReport {
    /// The bar returns of the equity curve, r[t] = E[t]/E[t−1] − 1 with E[−1] = 1: the
    /// returns the Sharpe ratio measures.
    pub fn returns(&self) -> Vec<f64> {
        let mut prev = 1.0;
        self.equity
            .iter()
            .map(|&e| {
                let r = e / prev - 1.0;
                prev = e;
                r
            })
            .collect()
    }

    /// The report of bars `start..` alone, as if the run had begun there with equity 1:
    /// for a window evaluated with earlier bars as indicator warm-up. Trades entered
    /// before `start` are left out (with a warm-up of at least `start` there are none).
    pub fn since(&self, start: usize) -> BacktestReport {
        let base = if start == 0 { 1.0 } else { self.equity[start - 1] };
        let equity: Vec<f64> = self.equity[start..].iter().map(|e| e / base).collect();
        let trades: Vec<Trade> = self
            .trades
            .iter()
            .filter(|t| t.entry_bar >= start)
            .map(|t| Trade { entry_bar: t.entry_bar - start, exit_bar: t.exit_bar - start, ..*t })
            .collect();
        let metrics = curve_metrics(&equity, &trades, self.bars_per_year);
        BacktestReport { metrics, trades, equity, bars_per_year: self.bars_per_year }
    }

    /// Consecutive runs as one: each starts with the equity the previous one ended with,
    /// and bar numbers run on. How walk-forward joins its test windows.
    pub fn chain(parts: &[BacktestReport]) -> BacktestReport {
        let (mut equity, mut trades, mut scale) = (Vec::new(), Vec::new(), 1.0);
        for part in parts {
            let offset = equity.len();
            trades.extend(part.trades.iter().map(|t| Trade {
                entry_bar: t.entry_bar + offset,
                exit_bar: t.exit_bar + offset,
                ..*t
            }));
            equity.extend(part.equity.iter().map(|e| e * scale));
            scale = equity.last().copied().unwrap_or(scale);
        }
        let bars_per_year = parts.first().map_or(f64::NAN, |p| p.bars_per_year);
        let metrics = curve_metrics(&equity, &trades, bars_per_year);
        BacktestReport { metrics, trades, equity, bars_per_year }
    }
}

/// Metrics by docs/strategies.md's definitions from an equity curve (E[−1] = 1, one value per
/// bar) and its trades (bars relative to the curve). Agrees with the simulation's own
/// metrics to rounding (it divides equities where the simulation uses close ratios).
/// `bars_per_year` annualises the Sharpe ratio.
pub fn curve_metrics(equity: &[f64], trades: &[Trade], bars_per_year: f64) -> Metrics {
    let n = equity.len();
    let mut acc = Accumulator::new();
    let mut prev = 1.0;
    for &e in equity {
        acc.step(e / prev - 1.0, e);
        prev = e;
    }
    let closed: Vec<f64> = trades.iter().filter(|t| t.reason != ExitReason::OpenAtEnd).map(|t| t.return_).collect();
    for &r in &closed {
        acc.trade(r);
    }
    let wins = closed.iter().filter(|&&r| r > 0.0).count() as u32;
    acc.sums(prev, (trades.len() as u32, closed.len() as u32, wins, held_bars(trades, n)), n, bars_per_year).metrics()
}

/// The bars at whose close some trade of `trades` is open (of `n`): each trade holds bars
/// entry..exit (to the end while open), and overlapping trades (a portfolio's symbols)
/// count a bar once.
fn held_bars(trades: &[Trade], n: usize) -> usize {
    let mut spans: Vec<(usize, usize)> =
        trades.iter().map(|t| (t.entry_bar, if t.reason == ExitReason::OpenAtEnd { n } else { t.exit_bar })).collect();
    spans.sort_unstable();
    let (mut held, mut reach) = (0, 0);
    for (start, end) in spans {
        let start = start.max(reach);
        if end > start {
            held += end - start;
            reach = end;
        }
    }
    held
}
