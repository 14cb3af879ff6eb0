//! The [`SignalBook`]: every decision a sweep's combos can make, derived once from the
//! indicator bank and shared by all combos, on the CPU and the GPU alike.
//!
//! A strategy's entry and exit rules depend on a few parameters each (bb_atr's entry on
//! bb_period and bb_std, its exit on bb_period only, its stop on atr_period and
//! atr_mult), so the book holds one bit row per distinct value of those parameters:
//! bit t says whether the rule fires at bar t, decided in f64 from the CPU's f64
//! indicator values whatever device the bank's user picked. A stop is an ATR series and a
//! multiplier: its level `close[e] − m · ATR[e]` is formed in f64 at the entry bar e
//! (the GPU forms the same f64 bits in integer arithmetic), so memory grows with the
//! unique ATR series, never with the (atr_period, atr_mult) pairs. A combo is then four
//! numbers, a [`ComboPlan`], and a simulation reads only close, the rows it names and
//! nothing per combo: every device takes the same trades, bar for bar.
//!
//! A [`BookLayout`] says, before anything is computed, which rows, stops and indicator
//! series a book over a [`ParamGrid`] (or over a sample of its combos) holds and about
//! how much memory that takes; a sample's book holds only what its own combos read.
//!
//! A book can also hold a user's own decisions ([`SignalBook::from_signals`]): one entry
//! row, one exit row and optionally one stop-level series per column of the user's
//! arrays, a column being a combo. The simulation and the kernel are the same.

use crate::BacktestError;
use crate::strategy::{MAX_PARAMS, ParamValues, Strategy, ma};
use ndarray::ArrayView2;
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use threadx_dispatch::cpu_grain;
use threadx_indicators::{Indicator, IndicatorBank, IndicatorValues, Ohlcv};

/// Where one combo reads its decisions: rows of the book and its first tradable bar.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct ComboPlan {
    pub entry: u32,
    pub exit: u32,
    /// Stop (ATR series and multiplier) of [`SignalBook::stops`], or [`ComboPlan::NO_STOP`].
    pub stop: u32,
    /// No entry before this bar.
    pub warmup: u32,
}

impl ComboPlan {
    pub const NO_STOP: u32 = u32::MAX;
}

/// A strategy's parameter grid: one list of values per parameter (schema order), every
/// value checked against the schema. Combos are the Cartesian product in docs/strategies.md's
/// order (the last parameter varying fastest); a combo's number is its position.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamGrid {
    strategy: Strategy,
    axes: Vec<Vec<f64>>,
    len: u64,
}

impl ParamGrid {
    /// Checks one non-empty list per parameter, every value in the schema's range, and a
    /// combo count that fits in 64 bits.
    pub fn new(strategy: Strategy, axes: &[Vec<f64>]) -> Result<Self, BacktestError> {
        let schema = strategy.schema();
        if axes.len() != schema.len() {
            return Err(BacktestError::Combo {
                strategy: strategy.name(),
                problem: format!("{} parameter lists given for {} parameters", axes.len(), schema.len()),
            });
        }
        for (spec, values) in schema.iter().zip(axes) {
            if values.is_empty() {
                return Err(BacktestError::EmptyAxis { param: spec.name });
            }
            for &v in values {
                spec.check(v)?;
            }
        }
        let len = axes.iter().try_fold(1u64, |n, a| n.checked_mul(a.len() as u64)).ok_or_else(|| {
            BacktestError::Combo { strategy: strategy.name(), problem: "the grid has more than 2^64 combos".into() }
        })?;
        Ok(Self { strategy, axes: axes.to_vec(), len })
    }

    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The parameter lists, schema order.
    pub fn axes(&self) -> &[Vec<f64>] {
        &self.axes
    }

    /// Combos in the grid.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Always false: every axis holds a value.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Axis positions of combo number `combo` (the unused tail is 0). Allocation-free.
    ///
    /// # Panics
    /// If `combo` ≥ [`ParamGrid::len`] (a caller's bug).
    pub fn index(&self, combo: u64) -> [usize; MAX_PARAMS] {
        assert!(combo < self.len, "combo {combo} of a {}-combo grid", self.len);
        let mut index = [0usize; MAX_PARAMS];
        let mut rest = combo;
        for (i, axis) in self.axes.iter().enumerate().rev() {
            index[i] = (rest % axis.len() as u64) as usize;
            rest /= axis.len() as u64;
        }
        index
    }

    /// The parameter values of combo number `combo` (schema order). Allocation-free.
    pub fn values(&self, combo: u64) -> ParamValues {
        self.values_at(&self.index(combo)[..self.axes.len()])
    }

    /// The parameter values at axis positions `index`.
    pub fn values_at(&self, index: &[usize]) -> ParamValues {
        let mut values = [0.0; MAX_PARAMS];
        for (i, (&k, axis)) in index.iter().zip(&self.axes).enumerate() {
            values[i] = axis[k];
        }
        ParamValues::new(&values[..index.len()])
    }
}

/// The axes each family of rows (entry, exit, stop) depends on. A family's rows are
/// numbered by the mixed radix of those axes' positions (the row's grid number).
fn families(strategy: Strategy) -> [&'static [usize]; 3] {
    match strategy {
        Strategy::BbAtr => [&[0, 1], &[0], &[2, 3]],
        Strategy::MaCross => [&[0, 1, 2], &[0, 1, 2], &[]],
        Strategy::RsiReversion => [&[0, 1], &[0, 2], &[3, 4]],
    }
}

/// The rows of one family a book holds: all of them (row = grid number), or only those a
/// sample of combos reads (sorted grid numbers; row = position in the list).
#[derive(Debug, Clone, PartialEq)]
enum RowSet {
    All(u64),
    Only(Vec<u64>),
}

impl RowSet {
    fn len(&self) -> u64 {
        match self {
            RowSet::All(n) => *n,
            RowSet::Only(rows) => rows.len() as u64,
        }
    }

    /// The grid number of row `row`.
    fn number(&self, row: usize) -> u64 {
        match self {
            RowSet::All(_) => row as u64,
            RowSet::Only(rows) => rows[row],
        }
    }

    /// The row of grid number `number`.
    ///
    /// # Panics
    /// If the book holds no such row: the combo is not one the book was built for.
    fn row(&self, number: u64) -> u32 {
        match self {
            RowSet::All(_) => number as u32,
            RowSet::Only(rows) => rows.binary_search(&number).expect("a combo the book was built for") as u32,
        }
    }
}

/// The grid number of a family's row at axis positions `index`.
fn row_number(axes: &[Vec<f64>], family: &[usize], index: &[usize]) -> u64 {
    family.iter().fold(0, |n, &a| n * axes[a].len() as u64 + index[a] as u64)
}

/// The values of the axes of `family` at row grid number `number` (family order).
fn row_values(axes: &[Vec<f64>], family: &[usize], mut number: u64) -> [f64; 3] {
    let mut values = [0.0; 3];
    for (slot, &a) in family.iter().enumerate().rev() {
        let len = axes[a].len() as u64;
        values[slot] = axes[a][(number % len) as usize];
        number /= len;
    }
    values
}

/// What a signal book over a grid, or over a sample of its combos, holds: its decision
/// rows, its stops and the indicator series they read. Known before anything is
/// computed, so that a sweep can say what it will prepare and refuse what cannot fit
/// ([`BookLayout::bytes`]). A sample's book holds only the rows and series its own combos read.
#[derive(Debug, Clone)]
pub struct BookLayout {
    grid: ParamGrid,
    /// Entry, exit and stop rows.
    rows: [RowSet; 3],
    indicators: Vec<Indicator>,
}

/// Bytes per bar a book holds whatever its rows: close, returns and timestamps, and its
/// fixed-point tables ([`BarTables`](crate::BarTables)).
const BYTES_PER_BAR: u64 = 3 * 8 + 8 + 4 * 16;

impl BookLayout {
    /// The layout of the whole `grid` (`combos: None`) or of the listed combos only
    /// (grid numbers, sorted).
    pub fn new(grid: ParamGrid, combos: Option<&[u64]>) -> Self {
        let strategy = grid.strategy();
        let axes = grid.axes();
        let families = families(strategy);
        let (rows, used): ([RowSet; 3], Vec<Vec<f64>>) = match combos {
            None => (
                families.map(|family| RowSet::All(family.iter().map(|&a| axes[a].len() as u64).product())),
                axes.to_vec(),
            ),
            Some(combos) => {
                let mut numbers: [Vec<u64>; 3] = Default::default();
                let mut positions: Vec<Vec<usize>> = vec![Vec::new(); axes.len()];
                for &combo in combos {
                    let index = grid.index(combo);
                    for (numbers, family) in numbers.iter_mut().zip(families) {
                        numbers.push(row_number(axes, family, &index));
                    }
                    for (positions, &i) in positions.iter_mut().zip(&index) {
                        positions.push(i);
                    }
                }
                let rows = numbers.map(|mut n| {
                    n.sort_unstable();
                    n.dedup();
                    RowSet::Only(n)
                });
                let used = positions
                    .into_iter()
                    .zip(axes)
                    .map(|(mut p, axis)| {
                        p.sort_unstable();
                        p.dedup();
                        p.into_iter().map(|i| axis[i]).collect()
                    })
                    .collect();
                (rows, used)
            }
        };
        let indicators = needed_indicators(strategy, &used);
        Self { grid, rows, indicators }
    }

    pub fn grid(&self) -> &ParamGrid {
        &self.grid
    }

    /// Every indicator series the book reads, each once.
    pub fn indicators(&self) -> &[Indicator] {
        &self.indicators
    }

    /// Entry and exit bit rows.
    pub fn decision_rows(&self) -> u64 {
        self.rows[0].len() + self.rows[1].len()
    }

    /// Stops (ATR series and multiplier).
    pub fn stops(&self) -> u64 {
        self.rows[2].len()
    }

    /// About how many bytes building the book on `bars` bars takes at its peak: the
    /// indicator series (and the rolling windows they share while computed), the bit
    /// rows and the rules that fill them, the stops and the per-bar tables.
    pub fn bytes(&self, bars: usize) -> u64 {
        let bars = bars as u64;
        let series: u64 = self
            .indicators
            .iter()
            .map(|i| {
                let windows = if matches!(i, Indicator::StdDev { .. }) { 2 } else { 0 };
                i.output_names().len() as u64 + windows
            })
            .sum();
        let words = bars.div_ceil(64);
        let rows = self.decision_rows();
        series
            .saturating_mul(bars * 8)
            .saturating_add(rows.saturating_mul(words * 8 + 48))
            .saturating_add(self.stops().saturating_mul(16))
            .saturating_add(bars * BYTES_PER_BAR)
    }
}

/// What a book's combos are: the combos of a strategy's grid (or a sample of them), or
/// the columns of a user's own signals.
#[derive(Debug)]
enum Combos {
    Grid(BookLayout),
    Signals { columns: usize },
}

/// A series that stops read: an ATR series (a stop `close[e] − m · ATR[e]`) or a user's
/// stop levels (the level at the entry bar itself).
#[derive(Debug)]
enum StopSeries {
    Indicator(Arc<IndicatorValues>),
    /// Levels with every NaN or non-positive value made 0 (no stop at that bar): the GPU
    /// compares the bits of positive numbers only.
    Levels(Vec<f64>),
}

impl StopSeries {
    fn values(&self) -> &[f64] {
        match self {
            StopSeries::Indicator(values) => values.output(0),
            StopSeries::Levels(levels) => levels,
        }
    }
}

/// One stop of a book: which series it reads and how its level at the entry bar is formed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Stop {
    /// `close[e] − mult · series[e]` (an ATR series and a multiplier).
    Distance { series: u32, mult: f64 },
    /// `series[e]`, a user's level.
    Level { series: u32 },
}

impl Stop {
    pub(crate) fn series(self) -> u32 {
        match self {
            Stop::Distance { series, .. } | Stop::Level { series } => series,
        }
    }
}

/// A combo's stop, ready to give its level at an entry bar.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StopRule<'a> {
    series: &'a [f64],
    /// `None` for a level stop.
    mult: Option<f64>,
}

impl StopRule<'_> {
    /// The level frozen for a trade entered at bar `e` with close `close`.
    #[inline(always)]
    pub(crate) fn level(&self, e: usize, close: f64) -> f64 {
        match self.mult {
            Some(m) => close - m * self.series[e],
            None => self.series[e],
        }
    }
}

/// Decision rows for every combo of a parameter space (or a sample of it) over one data
/// set, or for the columns of a user's own signals.
#[derive(Debug)]
pub struct SignalBook {
    combos: Combos,
    bars: usize,
    /// Bit rows of [`SignalBook::words`] u64 words each; bits past the last bar are 0.
    entry: Vec<u64>,
    exit: Vec<u64>,
    /// Series the stops read, each once.
    stop_series: Vec<StopSeries>,
    /// One per stop row of the layout (or per signal column).
    stops: Vec<Stop>,
    timestamps: Vec<i64>,
    close: Vec<f64>,
    /// close[t] / close[t−1] − 1 (0 at t = 0): a held bar's return, computed once.
    ret: Vec<f64>,
    /// What annualises the Sharpe ratio: the data's, or the user's.
    bars_per_year: f64,
}

impl SignalBook {
    /// Builds the rows for every combo of `axes` (one list of values per parameter of
    /// `strategy`, in schema order), computing the indicators they need through `bank`
    /// (each once). Every value is checked against the schema, and the data must be long
    /// enough for the slowest combo to trade at least one bar.
    pub fn build(bank: &IndicatorBank<'_>, strategy: Strategy, axes: &[Vec<f64>]) -> Result<Self, BacktestError> {
        Self::from_layout(bank, BookLayout::new(ParamGrid::new(strategy, axes)?, None))
    }

    /// Builds the rows, stops and indicators `layout` names.
    pub fn from_layout(bank: &IndicatorBank<'_>, layout: BookLayout) -> Result<Self, BacktestError> {
        let strategy = layout.grid.strategy();
        let axes = layout.grid.axes();
        let data = bank.data();
        let bars = data.len();
        // Warm-up never shrinks as a value grows (atr_mult > 0 switches the stop on), so
        // the largest value of every axis gives the longest one.
        let slowest: Vec<f64> = axes.iter().map(|values| values.iter().copied().fold(f64::MIN, f64::max)).collect();
        let needed = strategy.warmup(&slowest) + 1;
        if bars < needed {
            return Err(BacktestError::TooShort {
                strategy: strategy.name(),
                params: strategy.describe(&slowest),
                needed,
                len: bars,
            });
        }
        if layout.decision_rows().max(layout.stops()) > u64::from(u32::MAX) {
            return Err(BacktestError::Combo {
                strategy: strategy.name(),
                problem: format!(
                    "{} decision rows and {} stops: more than a book can number",
                    layout.decision_rows(),
                    layout.stops()
                ),
            });
        }

        let (close, ret) = close_and_returns(data);
        let words = bars.div_ceil(64);
        let values = bank.get_many_exact(&layout.indicators)?;
        let by_key: HashMap<String, Arc<IndicatorValues>> =
            layout.indicators.iter().zip(values).map(|(i, v)| (i.key(), v)).collect();
        let series = |indicator: Indicator, output: usize| -> &[f64] { by_key[&indicator.key()].output(output) };
        let period = |v: f64| v as usize;
        let middle = |p: f64| series(middle_band(period(p)), 0);
        let deviation = |p: f64| series(Indicator::StdDev { period: period(p) }, 0);

        let families = families(strategy);
        let (entry_rules, exit_rules) = match strategy {
            Strategy::BbAtr => (
                family_rules(&layout.rows[0], axes, families[0], &|[p, k, _]| {
                    Rule::BelowBand(&close, middle(p), deviation(p), k)
                }),
                family_rules(&layout.rows[1], axes, families[1], &|[p, ..]| Rule::Above(&close, middle(p))),
            ),
            Strategy::MaCross => {
                let lines = |[kind, f, s]: [f64; 3]| (series(ma(kind, period(f)), 0), series(ma(kind, period(s)), 0));
                (
                    family_rules(&layout.rows[0], axes, families[0], &|v| {
                        let (f, s) = lines(v);
                        Rule::CrossAbove(f, s)
                    }),
                    family_rules(&layout.rows[1], axes, families[1], &|v| {
                        let (f, s) = lines(v);
                        Rule::CrossAbove(s, f)
                    }),
                )
            }
            Strategy::RsiReversion => {
                let rsi = |p: f64| series(Indicator::Rsi { period: period(p) }, 0);
                (
                    family_rules(&layout.rows[0], axes, families[0], &|[p, low, _]| Rule::BelowLevel(rsi(p), low)),
                    family_rules(&layout.rows[1], axes, families[1], &|[p, high, _]| Rule::AboveLevel(rsi(p), high)),
                )
            }
        };
        let stop_set = &layout.rows[2];
        let stop_pairs: Vec<(f64, f64)> = (0..stop_set.len() as usize)
            .map(|r| {
                let [a, m, _] = row_values(axes, families[2], stop_set.number(r));
                (a, m)
            })
            .collect();
        // A multiplier of 0 (rsi_reversion) means no stop: its plans never read the pair.
        let mut atr_periods: Vec<usize> =
            stop_pairs.iter().filter(|(_, m)| *m > 0.0).map(|&(a, _)| period(a)).collect();
        atr_periods.sort_unstable();
        atr_periods.dedup();
        let stop_series: Vec<StopSeries> = atr_periods
            .iter()
            .map(|&a| StopSeries::Indicator(by_key[&Indicator::Atr { period: a }.key()].clone()))
            .collect();
        let stops = stop_pairs
            .iter()
            .map(|&(a, mult)| Stop::Distance {
                series: atr_periods.binary_search(&period(a)).unwrap_or(0) as u32,
                mult,
            })
            .collect();

        let entry = fill_rows(&entry_rules, bars, words);
        let exit = fill_rows(&exit_rules, bars, words);
        Ok(Self::assemble(Combos::Grid(layout), data, (close, ret), [entry, exit], stop_series, stops))
    }

    /// A book of a user's own decisions over `data`'s closes: `entries` and `exits` of
    /// shape (bars, columns), and optionally `stop` levels of the same shape, each column
    /// a combo (combo `c` is column `c`). The rules are the built-in strategies': an entry
    /// from the first bar, exits checked from the bar after the entry, the stop level of
    /// the entry bar frozen for the trade (a NaN or non-positive level: no stop), no entry
    /// on the bar of an exit. A stop array whose columns are one series (a broadcast
    /// view, column stride 0) is held once.
    pub fn from_signals(
        data: &Ohlcv,
        entries: ArrayView2<'_, bool>,
        exits: ArrayView2<'_, bool>,
        stop: Option<ArrayView2<'_, f64>>,
    ) -> Result<Self, BacktestError> {
        let bars = data.len();
        let columns = entries.ncols();
        let shape = |what: &str, view: (usize, usize)| {
            if view == (bars, columns) {
                Ok(())
            } else {
                Err(BacktestError::Signals(format!(
                    "{what} has shape ({}, {}); expected ({bars}, {columns}): one row per bar of the prices and one column per entries column",
                    view.0, view.1
                )))
            }
        };
        shape("entries", entries.dim())?;
        shape("exits", exits.dim())?;
        if columns == 0 {
            return Err(BacktestError::Signals("the signals have no columns".into()));
        }
        if columns > u32::MAX as usize {
            return Err(BacktestError::Signals(format!("{columns} columns: more than a book can number")));
        }
        let (stop_series, stops) = match stop {
            None => (Vec::new(), Vec::new()),
            Some(levels) => {
                shape("stop", levels.dim())?;
                if let Some(((t, c), _)) = levels.indexed_iter().find(|(_, v)| **v == f64::INFINITY) {
                    return Err(BacktestError::Signals(format!(
                        "stop level +inf at bar {t}, column {c}: every close would be at or below it (NaN means no stop)"
                    )));
                }
                let shared = columns == 1 || levels.strides()[1] == 0;
                let kept = if shared { 1 } else { columns };
                let series = (0..kept)
                    .map(|c| {
                        StopSeries::Levels(levels.column(c).iter().map(|&l| if l > 0.0 { l } else { 0.0 }).collect())
                    })
                    .collect();
                let stops = (0..columns).map(|c| Stop::Level { series: if shared { 0 } else { c as u32 } }).collect();
                (series, stops)
            }
        };
        let words = bars.div_ceil(64);
        let rows = [pack_columns(entries, words), pack_columns(exits, words)];
        Ok(Self::assemble(Combos::Signals { columns }, data, close_and_returns(data), rows, stop_series, stops))
    }

    /// A book of `data`'s bars from its parts: the closes and returns, the entry and exit
    /// rows, the stops.
    fn assemble(
        combos: Combos,
        data: &Ohlcv,
        (close, ret): (Vec<f64>, Vec<f64>),
        [entry, exit]: [Vec<u64>; 2],
        stop_series: Vec<StopSeries>,
        stops: Vec<Stop>,
    ) -> Self {
        Self {
            combos,
            bars: data.len(),
            entry,
            exit,
            stop_series,
            stops,
            timestamps: data.timestamps().to_vec(),
            close,
            ret,
            bars_per_year: data.bars_per_year(),
        }
    }

    /// Bars per year, which annualise the Sharpe ratio: the data's
    /// ([`Ohlcv::bars_per_year`](threadx_indicators::Ohlcv::bars_per_year)) unless set.
    pub fn bars_per_year(&self) -> f64 {
        self.bars_per_year
    }

    /// The book with `bars_per_year` set (e.g. 252 for daily stock bars).
    pub fn with_bars_per_year(mut self, bars_per_year: f64) -> Self {
        self.bars_per_year = bars_per_year;
        self
    }

    /// The strategy of a grid's book; `None` for a user's signals.
    pub fn strategy(&self) -> Option<Strategy> {
        self.grid().map(ParamGrid::strategy)
    }

    /// What the book's combos run, for profile keys: the strategy's name, or `signals`.
    pub fn name(&self) -> &'static str {
        self.strategy().map_or("signals", Strategy::name)
    }

    /// The parameter grid the book was built for; `None` for a user's signals.
    pub fn grid(&self) -> Option<&ParamGrid> {
        match &self.combos {
            Combos::Grid(layout) => Some(&layout.grid),
            Combos::Signals { .. } => None,
        }
    }

    pub fn bars(&self) -> usize {
        self.bars
    }

    /// The number of combos of the full grid of the axes (a user's signals: the columns).
    pub fn grid_len(&self) -> u64 {
        match &self.combos {
            Combos::Grid(layout) => layout.grid.len(),
            Combos::Signals { columns } => *columns as u64,
        }
    }

    /// The plan of the combo taking value `index[i]` of axis `i` (a user's signals: the
    /// one index is the column). Allocation-free.
    ///
    /// # Panics
    /// If `index` does not hold one in-range position per axis, or names a combo outside
    /// the sample the book was built for (a caller's bug).
    pub fn plan(&self, index: &[usize]) -> ComboPlan {
        let layout = match &self.combos {
            Combos::Grid(layout) => layout,
            Combos::Signals { columns } => {
                assert!(index.len() == 1 && index[0] < *columns, "one column of {columns}");
                let column = index[0] as u32;
                let stop = self.stops.get(index[0]).map_or(ComboPlan::NO_STOP, |_| column);
                return ComboPlan { entry: column, exit: column, stop, warmup: 0 };
            }
        };
        let axes = layout.grid.axes();
        assert_eq!(index.len(), axes.len(), "one index per parameter");
        let values = layout.grid.values_at(index);
        let strategy = layout.grid.strategy();
        let [entry, exit, stop] = families(strategy);
        let row = |family: usize, axes_of: &[usize]| layout.rows[family].row(row_number(axes, axes_of, index));
        let has_stop = match strategy {
            Strategy::BbAtr => true,
            Strategy::MaCross => false,
            Strategy::RsiReversion => values[4] > 0.0,
        };
        ComboPlan {
            entry: row(0, entry),
            exit: row(1, exit),
            stop: if has_stop { row(2, stop) } else { ComboPlan::NO_STOP },
            warmup: strategy.warmup(&values) as u32,
        }
    }

    /// The plan of combo number `combo` of the grid of the axes, in docs/strategies.md's order (the
    /// Cartesian product in schema order, the last parameter varying fastest); of a user's
    /// signals, column `combo`. A combo's number is stable: it is how results are merged
    /// and resumed. Allocation-free.
    ///
    /// # Panics
    /// If `combo` ≥ [`SignalBook::grid_len`], or is outside the book's sample.
    pub fn combo_plan(&self, combo: u64) -> ComboPlan {
        match &self.combos {
            Combos::Grid(layout) => self.plan(&layout.grid.index(combo)[..layout.grid.axes().len()]),
            Combos::Signals { .. } => self.plan(&[combo as usize]),
        }
    }

    /// The parameter values of combo number `combo` (schema order; a user's signals: the
    /// column number). Allocation-free.
    ///
    /// # Panics
    /// If `combo` ≥ [`SignalBook::grid_len`].
    pub fn combo_values(&self, combo: u64) -> ParamValues {
        match &self.combos {
            Combos::Grid(layout) => layout.grid.values(combo),
            Combos::Signals { columns } => {
                assert!(combo < *columns as u64, "column {combo} of {columns}");
                ParamValues::new(&[combo as f64])
            }
        }
    }

    pub(crate) fn close(&self) -> &[f64] {
        &self.close
    }

    pub(crate) fn ret(&self) -> &[f64] {
        &self.ret
    }

    pub(crate) fn timestamps(&self) -> &[i64] {
        &self.timestamps
    }

    /// u64 words per bit row.
    pub(crate) fn words(&self) -> usize {
        self.bars.div_ceil(64)
    }

    pub(crate) fn entry_rows(&self) -> &[u64] {
        &self.entry
    }

    pub(crate) fn exit_rows(&self) -> &[u64] {
        &self.exit
    }

    pub(crate) fn entry_row(&self, row: u32) -> &[u64] {
        let words = self.words();
        &self.entry[row as usize * words..][..words]
    }

    pub(crate) fn exit_row(&self, row: u32) -> &[u64] {
        let words = self.words();
        &self.exit[row as usize * words..][..words]
    }

    /// The series stops read, each once.
    pub(crate) fn stop_rows(&self) -> impl ExactSizeIterator<Item = &[f64]> {
        self.stop_series.iter().map(StopSeries::values)
    }

    /// Every stop of the book.
    pub(crate) fn stops(&self) -> &[Stop] {
        &self.stops
    }

    /// The stop `stop`, if the plan has one.
    pub(crate) fn stop(&self, stop: u32) -> Option<StopRule<'_>> {
        let stop = *self.stops.get(stop as usize)?;
        let series = self.stop_series[stop.series() as usize].values();
        Some(match stop {
            Stop::Distance { mult, .. } => StopRule { series, mult: Some(mult) },
            Stop::Level { .. } => StopRule { series, mult: None },
        })
    }
}

/// The closes of `data` and each bar's return `close[t] / close[t−1] − 1` (0 at t = 0).
fn close_and_returns(data: &Ohlcv) -> (Vec<f64>, Vec<f64>) {
    let close = data.close().to_vec();
    let mut ret = vec![0.0; close.len()];
    for t in 1..close.len() {
        ret[t] = close[t] / close[t - 1] - 1.0;
    }
    (close, ret)
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

/// The middle band of a Bollinger period: the window mean, the same bits whatever the
/// width (the bank computes it with the deviation in one rolling pass).
fn middle_band(period: usize) -> Indicator {
    Indicator::BollingerBands { period, std: 1.0 }
}

/// Every indicator the rows read, each once, from the values each axis takes (`used`).
/// A Bollinger entry `close < middle − k · deviation` is formed from the period's middle
/// band and deviation, the same bits as the bank's lower band of width k, so memory grows
/// with the periods, never with the (period, width) pairs.
fn needed_indicators(strategy: Strategy, used: &[Vec<f64>]) -> Vec<Indicator> {
    let period = |v: f64| v as usize;
    let mut out: Vec<Indicator> = match strategy {
        Strategy::BbAtr => used[0]
            .iter()
            .flat_map(|&p| [middle_band(period(p)), Indicator::StdDev { period: period(p) }])
            .chain(used[2].iter().map(|&a| Indicator::Atr { period: period(a) }))
            .collect(),
        Strategy::MaCross => {
            used[0].iter().flat_map(|&kind| used[1].iter().chain(&used[2]).map(move |&p| ma(kind, period(p)))).collect()
        }
        Strategy::RsiReversion => {
            let stops = used[4].iter().any(|&m| m > 0.0);
            used[0]
                .iter()
                .map(|&p| Indicator::Rsi { period: period(p) })
                .chain(used[3].iter().filter(|_| stops).map(|&a| Indicator::Atr { period: period(a) }))
                .collect()
        }
    };
    let mut seen = std::collections::HashSet::new();
    out.retain(|i| seen.insert(i.key()));
    out
}

/// A decision per bar, true only where every series it reads exists (NaN compares false).
#[derive(Debug, Clone, Copy)]
enum Rule<'a> {
    /// a[t] < middle[t] − k · deviation[t]: below the lower Bollinger band of width k.
    BelowBand(&'a [f64], &'a [f64], &'a [f64], f64),
    /// a[t] > b[t].
    Above(&'a [f64], &'a [f64]),
    /// a crosses above b at t: a[t] > b[t] and a[t−1] ≤ b[t−1].
    CrossAbove(&'a [f64], &'a [f64]),
    BelowLevel(&'a [f64], f64),
    AboveLevel(&'a [f64], f64),
}

impl Rule<'_> {
    fn fires(&self, t: usize) -> bool {
        match *self {
            Rule::BelowBand(a, middle, deviation, k) => a[t] < middle[t] - k * deviation[t],
            Rule::Above(a, b) => a[t] > b[t],
            Rule::CrossAbove(a, b) => t > 0 && a[t] > b[t] && a[t - 1] <= b[t - 1],
            Rule::BelowLevel(a, level) => a[t] < level,
            Rule::AboveLevel(a, level) => a[t] > level,
        }
    }
}

/// The rule of every row of `set`, from the values of its family's axes.
fn family_rules<'a>(
    set: &RowSet,
    axes: &[Vec<f64>],
    family: &[usize],
    rule: &dyn Fn([f64; 3]) -> Rule<'a>,
) -> Vec<Rule<'a>> {
    (0..set.len() as usize).map(|r| rule(row_values(axes, family, set.number(r)))).collect()
}

fn fill_rows(rules: &[Rule<'_>], bars: usize, words: usize) -> Vec<u64> {
    let mut rows = vec![0u64; rules.len() * words];
    rows.par_chunks_mut(words.max(1)).zip(rules).with_min_len(cpu_grain(bars)).for_each(|(row, rule)| {
        for (w, word) in row.iter_mut().enumerate() {
            let base = w * 64;
            for bit in 0..(bars - base).min(64) {
                *word |= u64::from(rule.fires(base + bit)) << bit;
            }
        }
    });
    rows
}
