//! A strategy's `rank` rule evaluated on one symbol's bars: the value by which a
//! portfolio orders a bar's entries when the cash cannot pay for them all.

use super::eval::{Eval, SeriesTable};
use crate::error::BacktestError;
use crate::rules::RuleKind;
use crate::strategy::Strategy;
use threadx_indicators::IndicatorBank;

/// The `rank` rule's value at each of the bank's bars (NaN where it has none, e.g. in
/// its warm-up); None without the rule. It reads no parameter, so one series serves
/// every combo.
pub fn rank_series(bank: &IndicatorBank<'_>, strategy: &Strategy) -> Result<Option<Vec<f64>>, BacktestError> {
    let Some(rule) = strategy.compiled(RuleKind::Rank) else { return Ok(None) };
    let defaults: Vec<f64> = strategy.schema().iter().map(|p| p.default).collect();
    let bound = rule.bind(&defaults, strategy.schema()).map_err(|e| BacktestError::Definition(e.message))?;
    let table = SeriesTable::new(bank, std::iter::once(&bound))?;
    Ok(Some(Eval::new(&bound, &table).values(table.bars())))
}
