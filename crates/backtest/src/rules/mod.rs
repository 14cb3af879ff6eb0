//! The rule language of strategy files: parsing ([`parse`]), checking against the
//! parameters and finding what each rule depends on ([`program`]), the functions rules
//! call ([`functions`], the one place to add one), binding to parameter values and
//! evaluating over the bars ([`eval`]), and reading a strategy file ([`file`]).
//!
//! Invariant: a bound rule reads no bar after the one it decides (lookbacks are ≥ 0 and
//! every function is causal), so no row of a book sees the future.

mod bind;
mod bound;
mod check;
mod eval;
mod file;
mod functions;
mod overlay;
mod parse;
mod program;
mod rank;
#[cfg(test)]
mod talib_tests;

pub(crate) use bound::{Bound, Op, Price, SeriesKey};
pub(crate) use check::nearest;
pub(crate) use eval::{Eval, SeriesTable, fill_rows, indicators_of};
pub(crate) use file::{StrategyFile, render};
use functions::FUNCTIONS;
pub use overlay::price_series;
pub(crate) use program::Rule;
pub use program::RuleKind;
pub use rank::{rank_params, rank_series};

/// Whether a bound stop or take-profit is none for every bar: a constant NaN or ≤ 0.
pub(crate) fn is_none(level: &Bound) -> bool {
    matches!(level, Bound::Const(v) if v.is_nan() || *v <= 0.0)
}

/// The bars before rule `kind`, bound, has every value it reads: a level that is none
/// and the parameters-only rules (max_bars, require) read nothing.
pub(crate) fn warmup_of(kind: RuleKind, bound: &Bound) -> usize {
    match kind {
        RuleKind::Entry | RuleKind::Exit | RuleKind::ShortEntry | RuleKind::ShortExit => bound.lookback(),
        RuleKind::Stop | RuleKind::TakeProfit | RuleKind::ShortStop | RuleKind::ShortTakeProfit | RuleKind::Trail
            if !is_none(bound) =>
        {
            bound.lookback()
        }
        _ => 0,
    }
}

/// The limit a bound `max_bars` rule gives: a whole number of bars ≥ 1 (NaN, the rule
/// a strategy without one binds to: 0, no limit).
pub(crate) fn max_bars_of(bound: &Bound) -> Result<u32, String> {
    match *bound {
        Bound::Const(v) if v.is_nan() => Ok(0),
        Bound::Const(v) if v >= 1.0 && v.fract() == 0.0 && v <= f64::from(u32::MAX) => Ok(v as u32),
        Bound::Const(v) => Err(format!("max_bars = {v}: must be a whole number of bars ≥ 1")),
        _ => Err("max_bars must come from parameters".into()),
    }
}

/// Every function of the rule language: how it is written and what it gives.
pub fn rule_functions() -> impl Iterator<Item = (&'static str, &'static str)> {
    FUNCTIONS.iter().map(|f| (f.usage, f.help))
}
