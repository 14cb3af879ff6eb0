//! The rule language of strategy files: parsing ([`parse`]), checking against the
//! parameters and finding what each rule depends on ([`program`]), the functions rules
//! call ([`functions`], the one place to add one), binding to parameter values and
//! evaluating over the bars ([`eval`]), and reading a strategy file ([`file`]).
//!
//! Invariant: a bound rule reads no bar after the one it decides (lookbacks are ≥ 0 and
//! every function is causal), so no row of a book sees the future.

mod eval;
mod file;
mod functions;
mod parse;
mod program;

pub(crate) use eval::{
    Bound, Eval, IndicatorId, Op, Price, SeriesKey, SeriesTable, fill_rows, indicator_id, indicators_of,
};
pub(crate) use file::StrategyFile;
use functions::FUNCTIONS;
pub use program::RuleKind;
pub(crate) use program::{Rule, nearest};

/// Whether a bound stop or take-profit is none for every bar: a constant NaN or ≤ 0.
pub(crate) fn is_none(level: &Bound) -> bool {
    matches!(level, Bound::Const(v) if v.is_nan() || *v <= 0.0)
}

/// Every function of the rule language: how it is written and what it gives.
pub fn rule_functions() -> impl Iterator<Item = (&'static str, &'static str)> {
    FUNCTIONS.iter().map(|f| (f.usage, f.help))
}
