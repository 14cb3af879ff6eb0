//! Building a book from a strategy's rules: each row's rule bound once, its indicator
//! series computed once through the bank, its bit rows and stops filled.

use super::layout::{BookLayout, FAMILIES, LEVELS, SHORT_ENTRY, SHORT_EXIT, TRAIL, role};
use super::stops::{SeriesId, Stop, StopSeries, scaled_series};
use super::{ComboPlan, Combos, ENTRY, EXIT, MAX_BARS, SignalBook, close_and_returns};
use crate::error::BacktestError;
use crate::grid::Grid;
use crate::rules::RuleKind;
use crate::rules::{Eval, SeriesTable, fill_rows, is_none, max_bars_of, warmup_of};
use crate::strategy::Strategy;
use std::collections::HashMap;
use threadx_indicators::IndicatorBank;

impl SignalBook {
    /// Builds the rows for every combo of `axes` (one list of values per parameter of
    /// `strategy`, in schema order), computing the indicators they need through `bank`
    /// (each once). Every value is checked against the schema, and the data must be long
    /// enough for some combo to trade at least one bar (those that cannot are
    /// [`SignalBook::cannot_trade`]).
    pub fn build(bank: &IndicatorBank<'_>, strategy: &Strategy, axes: &[Vec<f64>]) -> Result<Self, BacktestError> {
        Self::from_layout(bank, BookLayout::new(Grid::new(strategy.clone(), axes)?, None)?)
    }

    /// Builds the rows, stops and series `layout` names; data too short for any of its
    /// combos to trade is refused.
    pub fn from_layout(bank: &IndicatorBank<'_>, layout: BookLayout) -> Result<Self, BacktestError> {
        Self::laid_out(bank, layout, true).map(|(book, _)| book)
    }

    /// Each symbol's book of `layout` (a bank each, in symbol order) for one account over
    /// them: a symbol whose history is too short for every combo is built too, and never
    /// trades (an account trades the symbols whose data is long enough for a combo), as a
    /// symbol too short for some of them does. When no symbol's is long enough, the
    /// longest one's refusal, named by its origin.
    pub fn for_each_symbol<'b>(
        banks: &'b [IndicatorBank<'_>],
        layout: &BookLayout,
    ) -> Result<Vec<(Self, &'b [i64])>, BacktestError> {
        let mut books = Vec::with_capacity(banks.len());
        // The refusals, with each symbol's bars.
        let mut refused = Vec::new();
        for bank in banks {
            let (book, too_short) = Self::from_layout_any_length(bank, layout.clone())?;
            let data = bank.data();
            refused.extend(too_short.map(|e| (data.len(), format!("{}: {e}", data.origin()))));
            books.push((book, data.timestamps()));
        }
        match refused.len() == books.len() {
            true => match refused.into_iter().max_by_key(|(bars, _)| *bars) {
                Some((_, why)) => {
                    Err(BacktestError::Portfolio(format!("no symbol has the bars to trade; the longest, {why}")))
                }
                None => Ok(books),
            },
            false => Ok(books),
        }
    }

    /// [`Self::from_layout`] on data of any length, with the refusal it would have made
    /// when none of the combos can trade there (every one [`SignalBook::cannot_trade`]):
    /// a portfolio's symbol with too short a history, which then never trades.
    pub fn from_layout_any_length(
        bank: &IndicatorBank<'_>,
        layout: BookLayout,
    ) -> Result<(Self, Option<BacktestError>), BacktestError> {
        Self::laid_out(bank, layout, false)
    }

    /// The book `layout` names and the refusal of data too short for any combo, returned
    /// at once, before any indicator is computed, when `refuse_short`.
    fn laid_out(
        bank: &IndicatorBank<'_>,
        layout: BookLayout,
        refuse_short: bool,
    ) -> Result<(Self, Option<BacktestError>), BacktestError> {
        let strategy = layout.grid.strategy().clone();
        let data = bank.data();
        let bars = data.len();
        if layout.decision_rows().max(layout.stops()) > u64::from(u32::MAX) {
            return Err(BacktestError::Combo {
                strategy: strategy.name().to_owned(),
                problem: format!(
                    "{} decision rows and {} stops: more than a book can number",
                    layout.decision_rows(),
                    layout.stops()
                ),
            });
        }
        let bound = layout.bind_rows()?;
        let warmups: [Vec<u32>; 9] = std::array::from_fn(|f| {
            bound[f].iter().map(|b| warmup_of(FAMILIES[f], b).min(u32::MAX as usize) as u32).collect()
        });
        // Every combo waits at least the longest of its families' shortest warm-ups: when
        // the data is shorter, none can trade and the grid is refused. Otherwise the combos
        // that need more bars than the data has are built too (their indicators NaN, their
        // warm-up past the last bar): they trade nothing and their rows are empty.
        let needed = warmups.iter().filter_map(|w| w.iter().min()).max().map_or(0, |&w| w as usize) + 1;
        let too_short = (bars < needed).then(|| {
            // The smallest value of every axis: the fastest combo for the usual rules.
            let fastest: Vec<f64> =
                layout.grid.axes().iter().map(|values| values.iter().copied().fold(f64::MAX, f64::min)).collect();
            BacktestError::TooShort {
                strategy: strategy.name().to_owned(),
                params: strategy.describe(&fastest),
                needed,
                len: bars,
            }
        });
        if refuse_short && let Some(e) = too_short {
            return Err(e);
        }
        let max_bars = bound[MAX_BARS]
            .iter()
            .map(max_bars_of)
            .collect::<Result<Vec<u32>, _>>()
            .map_err(|problem| BacktestError::Combo { strategy: strategy.name().to_owned(), problem })?;

        let table = SeriesTable::new(bank, bound[..MAX_BARS].iter().flatten())?;
        let shorts = strategy.compiled(RuleKind::ShortEntry).is_some();
        let mut entry = fill_rows(&bound[ENTRY], &table);
        let mut exit = fill_rows(&bound[EXIT], &table);
        let words = bars.div_ceil(64);
        let short_rows = [(entry.len() / words.max(1)) as u32, (exit.len() / words.max(1)) as u32];
        if shorts {
            entry.extend(fill_rows(&bound[SHORT_ENTRY], &table));
            exit.extend(fill_rows(&bound[SHORT_EXIT], &table));
        }

        let mut stop_series: Vec<StopSeries> = Vec::new();
        let mut series_of: HashMap<SeriesId, u32> = HashMap::new();
        let mut stops = Vec::new();
        let mut levels: [Vec<u32>; 5] = Default::default();
        for (f, levels) in LEVELS.into_iter().zip(&mut levels) {
            for level in &bound[f] {
                if is_none(level) {
                    levels.push(ComboPlan::NO_STOP);
                    continue;
                }
                let distance = scaled_series(level, f == TRAIL);
                let id = match distance {
                    Some((indicator, _)) => SeriesId::Indicator(indicator.id()),
                    None => SeriesId::Level(level.id()),
                };
                let series = *series_of.entry(id).or_insert_with(|| {
                    stop_series.push(match distance {
                        Some((indicator, _)) => StopSeries::Indicator(
                            table.indicator(&indicator).expect("the table holds what the rules read").clone(),
                        ),
                        None => StopSeries::levels(Eval::new(level, &table).values(bars)),
                    });
                    (stop_series.len() - 1) as u32
                });
                levels.push(stops.len() as u32);
                stops.push(match distance {
                    Some((_, mult)) if f == TRAIL => Stop::Scaled { series, mult },
                    Some((_, mult)) => Stop::Distance { series, mult },
                    None => Stop::Level { series },
                });
            }
        }
        let mut book = Self::assemble(
            Combos::Grid(Box::new(layout)),
            data,
            close_and_returns(data),
            [entry, exit],
            stop_series,
            stops,
        );
        book.trails = levels[role::TRAIL].iter().any(|&l| l != ComboPlan::NO_STOP);
        book.levels = levels;
        book.warmups = warmups;
        book.max_bars = max_bars;
        book.short_rows = short_rows;
        book.shorts = shorts;
        Ok((book.with_fills(strategy.fills(), data), too_short))
    }
}
