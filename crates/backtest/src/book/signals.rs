//! A book of a user's own decisions ([`UserSignals`]): entry and exit rows of each side
//! and the level series of its stops per column of the user's arrays, a column being a
//! combo.

use super::layout::role;
use super::stops::{Stop, StopSeries};
use super::{ComboPlan, Combos, SignalBook, close_and_returns};
use crate::costs::Fills;
use crate::error::BacktestError;
use ndarray::ArrayView2;
use rayon::prelude::*;
use threadx_indicators::Ohlcv;

/// A user's own decisions over some bars: arrays of shape (bars, columns), a column being
/// a combo. vectorbt's `Portfolio.from_signals` names: `sl_stop` and `tp_stop` are
/// fractions of the entry close (a long's stop at close·(1 − sl_stop), a short's at
/// close·(1 + sl_stop)), `sl_trail` makes `sl_stop` trail the best price since the entry
/// (one flag for every column, or one per column).
#[derive(Debug, Clone, Copy)]
pub struct UserSignals<'a> {
    pub entries: ArrayView2<'a, bool>,
    pub exits: ArrayView2<'a, bool>,
    pub short_entries: Option<ArrayView2<'a, bool>>,
    pub short_exits: Option<ArrayView2<'a, bool>>,
    /// A long's stop as a price level per bar (the entry bar's is frozen; NaN or ≤ 0: none).
    pub stop: Option<ArrayView2<'a, f64>>,
    pub sl_stop: Option<ArrayView2<'a, f64>>,
    pub tp_stop: Option<ArrayView2<'a, f64>>,
    /// Which columns' `sl_stop` trails: empty (none), one flag (every column) or one flag
    /// per column.
    pub sl_trail: &'a [bool],
    /// When decisions fill, and whether stops are checked against each bar's low and high
    /// (the user gave them) or against closes.
    pub fills: Fills,
}

impl<'a> UserSignals<'a> {
    /// Long entries and exits alone.
    pub fn long(entries: ArrayView2<'a, bool>, exits: ArrayView2<'a, bool>) -> Self {
        Self {
            entries,
            exits,
            short_entries: None,
            short_exits: None,
            stop: None,
            sl_stop: None,
            tp_stop: None,
            sl_trail: &[],
            fills: Fills::default(),
        }
    }
}

/// Refuses an array whose shape is not the signals' (`expected`: bars, columns).
fn check_shape(what: &str, view: (usize, usize), (bars, columns): (usize, usize)) -> Result<(), BacktestError> {
    if view == (bars, columns) {
        return Ok(());
    }
    Err(BacktestError::Signals(format!(
        "{what} has shape ({}, {}); expected ({bars}, {columns}): one row per bar of the prices and one column per entries column",
        view.0, view.1
    )))
}

/// The signals' shapes and stop options checked (over `bars` bars); whether each
/// column's `sl_stop` trails.
fn checked_trails(signals: &UserSignals<'_>, bars: usize) -> Result<Vec<bool>, BacktestError> {
    let columns = signals.entries.ncols();
    let shape = |what: &str, view: (usize, usize)| check_shape(what, view, (bars, columns));
    shape("entries", signals.entries.dim())?;
    shape("exits", signals.exits.dim())?;
    for (what, view) in [("short_entries", signals.short_entries), ("short_exits", signals.short_exits)] {
        if let Some(view) = view {
            shape(what, view.dim())?;
        }
    }
    if columns == 0 {
        return Err(BacktestError::Signals("the signals have no columns".into()));
    }
    if columns > (u32::MAX / 2) as usize {
        return Err(BacktestError::Signals(format!("{columns} columns: more than a book can number")));
    }
    if signals.stop.is_some() && signals.sl_stop.is_some() {
        return Err(BacktestError::Signals(
            "give `stop` (price levels) or `sl_stop` (fractions of the entry price), not both".into(),
        ));
    }
    if !matches!(signals.sl_trail.len(), 0 | 1) && signals.sl_trail.len() != columns {
        return Err(BacktestError::Signals(format!(
            "sl_trail has {} flags: one for every column, or one per column ({columns})",
            signals.sl_trail.len()
        )));
    }
    let trails: Vec<bool> = (0..columns)
        .map(|c| signals.sl_trail.get(if signals.sl_trail.len() == 1 { 0 } else { c }) == Some(&true))
        .collect();
    if trails.iter().any(|&t| t) && signals.sl_stop.is_none() {
        return Err(BacktestError::Signals("`sl_trail` makes `sl_stop` trail: it needs `sl_stop`".into()));
    }
    Ok(trails)
}

impl SignalBook {
    /// A book of a user's own decisions over `data`'s prices (combo `c` is column `c`).
    /// The rules are the rule files': an entry from the first bar, exits and stops
    /// checked from the bar after the entry, levels of the entry (decision) bar frozen
    /// for the trade, an opposite entry reverses. A column-broadcast array (a numpy
    /// view, column stride 0) is held once.
    pub fn from_signals(data: &Ohlcv, signals: UserSignals<'_>) -> Result<Self, BacktestError> {
        let (bars, columns) = (data.len(), signals.entries.ncols());
        let trails = checked_trails(&signals, bars)?;
        let shape = |what: &str, view: (usize, usize)| check_shape(what, view, (bars, columns));
        let trail = |c: usize| trails[c];
        let (any_trail, all_trail) = (trails.iter().any(|&t| t), trails.iter().all(|&t| t));
        let mut stop_series = Vec::new();
        let mut stops = Vec::new();
        let mut levels: [Vec<u32>; 5] = Default::default();
        // Each array's series once (or once per column), then one stop per column and role.
        let mut add = |what: &str,
                       view: Option<ArrayView2<'_, f64>>,
                       roles: &[(usize, StopForm)],
                       levels: &mut [Vec<u32>; 5]|
         -> Result<(), BacktestError> {
            let Some(view) = view else { return Ok(()) };
            shape(what, view.dim())?;
            // A fraction of +inf never fills (vectorbt's way to say none); a level of +inf
            // would stop every long at once.
            let is_level = roles.iter().any(|(_, form)| matches!(form, StopForm::Level));
            if let Some(((t, c), _)) = view.indexed_iter().find(|(_, v)| is_level && **v == f64::INFINITY) {
                return Err(BacktestError::Signals(format!(
                    "stop level +inf at bar {t}, column {c}: every close would be at or below it (NaN means no stop)"
                )));
            }
            // A negative fraction puts a long's stop above its entry: refused, as vectorbt does.
            if let Some(((t, c), v)) = view.indexed_iter().find(|(_, v)| !is_level && **v < 0.0) {
                return Err(BacktestError::Signals(format!(
                    "{what} at bar {t}, column {c} is {v}: a fraction of the entry's close is 0 or more (NaN or +inf: none)"
                )));
            }
            let shared = columns == 1 || view.strides()[1] == 0;
            let first = stop_series.len() as u32;
            for c in 0..if shared { 1 } else { columns } {
                stop_series.push(StopSeries::levels(view.column(c).iter().copied()));
            }
            for &(role, form) in roles {
                for c in 0..columns {
                    let series = first + if shared { 0 } else { c as u32 };
                    levels[role].push(stops.len() as u32);
                    stops.push(form.stop(series));
                }
            }
            Ok(())
        };
        let shorts = signals.short_entries.is_some();
        add("stop", signals.stop, &[(role::STOP, StopForm::Level)], &mut levels)?;
        let (trailing, fixed, mixed) = (
            (role::TRAIL, StopForm::Fraction(-1.0)),
            [(role::STOP, StopForm::Fraction(-1.0)), (role::SHORT_STOP, StopForm::Fraction(1.0))],
            any_trail && !all_trail,
        );
        let fixed = if shorts { &fixed[..] } else { &fixed[..1] };
        let sl_roles: Vec<(usize, StopForm)> = match (all_trail, mixed) {
            (true, _) => vec![trailing],
            (false, false) => fixed.to_vec(),
            (false, true) => [&[trailing], fixed].concat(),
        };
        add("sl_stop", signals.sl_stop, &sl_roles, &mut levels)?;
        if mixed {
            // Each column keeps the roles of its own flag: a trail, or fixed stops.
            for c in 0..columns {
                let off: &[usize] = if trail(c) { &[role::STOP, role::SHORT_STOP] } else { &[role::TRAIL] };
                for &r in off {
                    if let Some(level) = levels[r].get_mut(c) {
                        *level = ComboPlan::NO_STOP;
                    }
                }
            }
        }
        let tp_roles: &[(usize, StopForm)] = if shorts {
            &[(role::TAKE_PROFIT, StopForm::Fraction(1.0)), (role::SHORT_TAKE_PROFIT, StopForm::Fraction(-1.0))]
        } else {
            &[(role::TAKE_PROFIT, StopForm::Fraction(1.0))]
        };
        add("tp_stop", signals.tp_stop, tp_roles, &mut levels)?;
        let words = bars.div_ceil(64);
        let mut entry = pack_columns(signals.entries, words);
        let mut exit = pack_columns(signals.exits, words);
        if let Some(short_entries) = signals.short_entries {
            entry.extend(pack_columns(short_entries, words));
            exit.extend(match signals.short_exits {
                Some(short_exits) => pack_columns(short_exits, words),
                None => vec![0; columns * words],
            });
        } else if signals.short_exits.is_some() {
            return Err(BacktestError::Signals(
                "`short_exits` without `short_entries`: no short is ever opened".into(),
            ));
        }
        let mut book = Self::assemble(
            Combos::Signals { columns },
            data,
            close_and_returns(data),
            [entry, exit],
            stop_series,
            stops,
        );
        book.trails = levels[role::TRAIL].iter().any(|&l| l != ComboPlan::NO_STOP);
        book.levels = levels;
        book.shorts = shorts;
        book.short_rows = [columns as u32; 2];
        Ok(book.with_fills(signals.fills, data))
    }

    /// The plan of column `column` of a user's signals.
    pub(super) fn signals_plan(&self, column: usize) -> ComboPlan {
        let level = |role: usize| self.levels[role].get(column).copied().unwrap_or(ComboPlan::NO_STOP);
        let c = column as u32;
        let mut plan = ComboPlan::long(c, c, level(role::STOP), 0, level(role::TAKE_PROFIT), 0);
        if self.shorts {
            plan.short_entry = self.short_rows[0] + c;
            plan.short_exit = self.short_rows[1] + c;
            plan.short_stop = level(role::SHORT_STOP);
            plan.short_take_profit = level(role::SHORT_TAKE_PROFIT);
        }
        plan.trail = level(role::TRAIL);
        plan
    }
}

/// How a user's array forms a level (see [`Stop`]).
#[derive(Debug, Clone, Copy)]
enum StopForm {
    Level,
    /// The entry close times (1 + sign · the array's fraction).
    Fraction(f64),
}

impl StopForm {
    fn stop(self, series: u32) -> Stop {
        match self {
            StopForm::Level => Stop::Level { series },
            StopForm::Fraction(sign) => Stop::Fraction { series, sign },
        }
    }
}

/// Each column of `signals` (bars × columns) as a bit row of `words` u64 words.
fn pack_columns(signals: ArrayView2<'_, bool>, words: usize) -> Vec<u64> {
    let mut rows = vec![0u64; signals.ncols() * words];
    rows.par_chunks_mut(words.max(1)).enumerate().for_each(|(c, row)| {
        for (t, &on) in signals.column(c).iter().enumerate() {
            row[t / 64] |= u64::from(on) << (t % 64);
        }
    });
    rows
}
