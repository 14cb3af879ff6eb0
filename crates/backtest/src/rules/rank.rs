//! A strategy's `rank` rule evaluated on one symbol's bars: the value by which a
//! portfolio orders a bar's entries when the cash cannot pay for them all.

use super::eval::{Eval, SeriesTable};
use crate::error::BacktestError;
use crate::rules::RuleKind;
use crate::strategy::Strategy;
use threadx_indicators::IndicatorBank;

/// The `rank` rule's values at each of the bank's bars (NaN where it has none, e.g. in
/// its warm-up), one series per parameter set of `values`, every indicator they read
/// computed once; None without the rule.
pub fn rank_series(
    bank: &IndicatorBank<'_>,
    strategy: &Strategy,
    values: &[Vec<f64>],
) -> Result<Option<Vec<Vec<f64>>>, BacktestError> {
    let Some(rule) = strategy.compiled(RuleKind::Rank) else { return Ok(None) };
    let bound = values
        .iter()
        .map(|v| rule.bind(v, strategy.schema()).map_err(|e| BacktestError::Definition(e.message)))
        .collect::<Result<Vec<_>, _>>()?;
    let table = SeriesTable::new(bank, bound.iter())?;
    Ok(Some(bound.iter().map(|b| Eval::new(b, &table).values(table.bars())).collect()))
}

/// The parameters the `rank` rule reads, by their place in the schema; None without the
/// rule. A portfolio keeps one series per set of their values.
pub fn rank_params(strategy: &Strategy) -> Option<Vec<usize>> {
    strategy.compiled(RuleKind::Rank).map(|rule| rule.deps.clone())
}
