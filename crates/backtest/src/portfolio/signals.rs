//! A portfolio of a user's own signals (`threadx.simulate(..., cash_sharing=True)`):
//! [`PortfolioSignals`], arrays of bars × symbols, read as a single run reads a column
//! (docs/strategies.md): a flat symbol enters on its entry, a held one exits on its exit,
//! so an entry and an exit on one bar enter when flat and exit when held (vectorbt
//! ignores both; the comparison with it uses signals without such bars). vectorbt's stop
//! arguments ([`SignalLevels`]) close a position at its levels first, as a rule file's
//! stops do ([`crate::portfolio::levels`]).

use crate::book::StopRule;
use crate::error::BacktestError;
use crate::metrics::{ExitReason, Side};
use crate::portfolio::levels::{BarPrices, Levels};
use crate::portfolio::schedule::{Exit, Schedule};
use crate::portfolio::sides::Sides;
use crate::portfolio::{Account, Mark, PortfolioRun, SizeType, Source, run};
use crate::trade_parts::next_bit;
use ndarray::ArrayView2;

/// A portfolio's bars and signals, each bars × symbols: closes (NaN where a symbol has no
/// bar), long entries and exits, short entries and exits (vectorbt's `short_entries` and
/// `short_exits`; None: long only), and the positions' levels.
#[derive(Debug, Clone, Copy)]
pub struct PortfolioSignals<'a> {
    pub close: ArrayView2<'a, f64>,
    pub entries: ArrayView2<'a, bool>,
    pub exits: ArrayView2<'a, bool>,
    pub shorts: Option<[ArrayView2<'a, bool>; 2]>,
    pub levels: SignalLevels<'a>,
}

/// vectorbt's stop arguments, each bars × symbols: `sl_stop` and `tp_stop`, fractions of
/// the entry's close read at its bar (a stop that far below it, a take-profit that far
/// above; 0 or NaN: none), `sl_trail` (the stop trails the best price since the entry),
/// and each bar's open, high and low (`range`), which check the levels inside the bar.
#[derive(Debug, Clone, Copy, Default)]
pub struct SignalLevels<'a> {
    pub sl_stop: Option<ArrayView2<'a, f64>>,
    pub tp_stop: Option<ArrayView2<'a, f64>>,
    pub sl_trail: bool,
    pub range: Option<[ArrayView2<'a, f64>; 3]>,
}

impl SignalLevels<'_> {
    fn any(&self) -> bool {
        self.sl_stop.is_some() || self.tp_stop.is_some()
    }
}

/// One symbol's columns for its levels: its closes (NaN: no bar), its open, high and low
/// when the levels are checked inside the bar (else empty), its stop and take-profit
/// fractions (empty: none).
struct LevelColumns {
    close: Vec<f64>,
    range: [Vec<f64>; 3],
    sl_stop: Vec<f64>,
    tp_stop: Vec<f64>,
}

/// The signals as the account reads them: each symbol's entries and exits on the bars it
/// has, as bit rows, and the prices filled forward.
struct ArraySource {
    bars: usize,
    symbols: usize,
    prices: Vec<f64>,
    /// Per symbol: bits of the bars with a long entry (an exit), a short entry (a short
    /// exit; both empty: long only) and a price.
    entries: Vec<Vec<u64>>,
    exits: Vec<Vec<u64>>,
    short_entries: Vec<Vec<u64>>,
    short_exits: Vec<Vec<u64>>,
    /// Per symbol, with levels; empty without.
    levels: Vec<LevelColumns>,
    sl_trail: bool,
}

impl ArraySource {
    fn new(signals: &PortfolioSignals<'_>) -> Self {
        let (bars, symbols) = signals.close.dim();
        let words = bars.div_ceil(64);
        let rows = |n: usize| vec![vec![0u64; words]; n];
        let (mut entries, mut exits) = (rows(symbols), rows(symbols));
        let shorts = if signals.shorts.is_some() { symbols } else { 0 };
        let (mut short_entries, mut short_exits) = (rows(shorts), rows(shorts));
        let mut prices = vec![0.0; bars * symbols];
        let mut last = vec![0.0; symbols];
        for t in 0..bars {
            for s in 0..symbols {
                let close = signals.close[(t, s)];
                if close.is_nan() {
                    prices[t * symbols + s] = last[s];
                    continue;
                }
                (prices[t * symbols + s], last[s]) = (close, close);
                entries[s][t / 64] |= u64::from(signals.entries[(t, s)]) << (t % 64);
                exits[s][t / 64] |= u64::from(signals.exits[(t, s)]) << (t % 64);
                if let Some([short_in, short_out]) = signals.shorts {
                    short_entries[s][t / 64] |= u64::from(short_in[(t, s)]) << (t % 64);
                    short_exits[s][t / 64] |= u64::from(short_out[(t, s)]) << (t % 64);
                }
            }
        }
        let column = |a: Option<ArrayView2<'_, f64>>, s: usize| a.map_or_else(Vec::new, |a| a.column(s).to_vec());
        let l = &signals.levels;
        let levels = match l.any() {
            true => (0..symbols)
                .map(|s| LevelColumns {
                    close: column(Some(signals.close), s),
                    // A bar without a close has no range either.
                    range: l.range.map_or_else(Default::default, |r| {
                        r.map(|a| {
                            a.column(s)
                                .iter()
                                .zip(signals.close.column(s))
                                .map(|(&p, c)| if c.is_nan() { f64::NAN } else { p })
                                .collect()
                        })
                    }),
                    sl_stop: column(l.sl_stop, s),
                    tp_stop: column(l.tp_stop, s),
                })
                .collect(),
            false => Vec::new(),
        };
        Self { bars, symbols, prices, entries, exits, short_entries, short_exits, levels, sl_trail: l.sl_trail }
    }

    /// A symbol's levels (`columns`) for a `side` position entered at bar `e` with close
    /// `close`: its fractions there as a rule file's fraction stops give them (a long's
    /// stop below, a short's above), the stop's as the trail with `sl_trail`.
    fn levels_at(&self, columns: &LevelColumns, e: usize, close: f64, side: Side) -> Levels {
        let below = if side == Side::Long { -1.0 } else { 1.0 };
        let stop = (!columns.sl_stop.is_empty()).then(|| StopRule::fraction(&columns.sl_stop, below));
        let take_profit = (!columns.tp_stop.is_empty()).then(|| StopRule::fraction(&columns.tp_stop, -below));
        let (stop, trail) = if self.sl_trail { (None, stop) } else { (stop, None) };
        Levels::frozen([stop, take_profit, trail], e, close)
    }
}

impl ArraySource {
    fn sides(&self, s: usize) -> Sides<'_> {
        Sides { long: &self.entries[s], short: self.short_entries.get(s).map_or(&[], Vec::as_slice) }
    }
}

impl Source for ArraySource {
    fn bars(&self) -> usize {
        self.bars
    }

    fn symbols(&self) -> usize {
        self.symbols
    }

    fn prices(&self) -> &[f64] {
        &self.prices
    }

    // A symbol's own bars are the rows: those without a price hold no bit.
    fn next_entry(&self, s: usize, own: usize) -> Option<(Mark, Side)> {
        self.sides(s).next_entry(own).map(|(bar, side)| (Mark { bar, own: bar }, side))
    }

    fn exit_after(&self, s: usize, own: usize, close: f64, side: Side) -> Option<(Mark, Exit)> {
        let exits = if side == Side::Long { &self.exits[s] } else { &self.short_exits[s] };
        let exit = next_bit(exits, own + 1);
        // A reversal before the exit rule, on its bar too.
        let closed = match (self.sides(s).reversal_after(own, side), exit) {
            (Some(r), x) if x.is_none_or(|x| r <= x) => Some((r, ExitReason::Reverse)),
            (_, x) => x.map(|x| (x, ExitReason::Signal)),
        };
        let at_level = self.levels.get(s).and_then(|columns| {
            let prices = BarPrices { close: &columns.close, range: columns.range.each_ref().map(Vec::as_slice) };
            let end = closed.map_or(self.bars, |(x, _)| x + 1);
            let levels = self.levels_at(columns, own, close, side);
            prices.exit_at_level(levels, close, own + 1..end, side == Side::Short)
        });
        at_level
            .or_else(|| closed.map(|(bar, reason)| (bar, Exit::at_close(reason))))
            .map(|(bar, exit)| (Mark { bar, own: bar }, exit))
    }

    // A user's signals carry no stop, and their entries go in column order.
    fn stop_level(&self, _s: usize, _own: usize, _side: Side) -> Option<f64> {
        None
    }

    // A user's signals fill at the close.
    fn fill_price(&self, _s: usize, _own: usize) -> Option<f64> {
        None
    }

    fn ranked(&self) -> bool {
        false
    }

    fn rank(&self, _s: usize, _own: usize) -> f64 {
        f64::NAN
    }
}

impl PortfolioSignals<'_> {
    /// Checks the shapes and prices: the same bars × symbols each, at least one symbol,
    /// every close positive and finite or NaN (no bar).
    fn check(&self) -> Result<(), BacktestError> {
        let shape = self.close.dim();
        let shorts = self.shorts.map(|[a, b]| [("short_entries", a.dim()), ("short_exits", b.dim())]);
        let signals = [("entries", self.entries.dim()), ("exits", self.exits.dim())];
        for (name, dim) in signals.into_iter().chain(shorts.into_iter().flatten()) {
            if dim != shape {
                return Err(BacktestError::Signals(format!(
                    "{name} has shape {dim:?}; the closes have {shape:?} (bars × symbols)"
                )));
            }
        }
        if shape.1 == 0 {
            return Err(BacktestError::Signals("a portfolio needs at least one symbol".into()));
        }
        let bad = self.close.indexed_iter().find(|(_, p)| !(p.is_nan() || (p.is_finite() && **p > 0.0)));
        if let Some(((t, s), p)) = bad {
            return Err(BacktestError::Signals(format!(
                "close at bar {t}, symbol {s} is {p}: a price is positive and finite (NaN: no bar)"
            )));
        }
        self.check_levels()
    }

    /// The levels' arrays: the closes' shape; fractions of 0 or more (NaN: none); an open,
    /// high and low positive and finite wherever there is a close.
    fn check_levels(&self) -> Result<(), BacktestError> {
        let l = &self.levels;
        let range = l.range.map(|[o, h, w]| [("open", o), ("high", h), ("low", w)]);
        let fractions = [("sl_stop", l.sl_stop), ("tp_stop", l.tp_stop)];
        let arrays = fractions.into_iter().chain(range.into_iter().flatten().map(|(n, a)| (n, Some(a))));
        for (name, array) in arrays {
            let Some(array) = array else { continue };
            let shape = self.close.dim();
            if array.dim() != shape {
                return Err(BacktestError::Signals(format!(
                    "{name} has shape {:?}; the closes have {shape:?} (bars × symbols)",
                    array.dim()
                )));
            }
            let price = !name.ends_with("_stop");
            let bad = array.indexed_iter().find(|&(at, &v)| match price {
                true => !(self.close[at].is_nan() || v.is_finite() && v > 0.0),
                false => !(v.is_nan() || v >= 0.0 && v.is_finite()),
            });
            if let Some(((t, s), v)) = bad {
                let what = if price {
                    "a price is positive and finite"
                } else {
                    "a fraction of the entry's close is 0 or more (NaN: none)"
                };
                return Err(BacktestError::Signals(format!("{name} at bar {t}, symbol {s} is {v}: {what}")));
            }
        }
        Ok(())
    }
}

/// Runs the account over the signals ([`crate::portfolio`]'s rules): its totals, and its
/// record when `detailed`.
pub fn simulate_portfolio(
    signals: &PortfolioSignals<'_>,
    account: &Account,
    detailed: bool,
) -> Result<PortfolioRun, BacktestError> {
    signals.check()?;
    if account.sizing.kind == SizeType::Risk {
        return Err(BacktestError::Portfolio(
            "risk sizing sizes each entry from its distance to its stop, and signals carry no stop: run a \
             strategy with a `stop` rule"
                .into(),
        ));
    }
    let source = ArraySource::new(signals);
    let mut schedule = Schedule::new(source.bars, source.symbols);
    Ok(run(&source, account, (detailed, None), &mut schedule))
}
