//! The [`SignalBook`]: every decision a sweep's combos can make, derived once from the
//! indicator bank and shared by all combos, on the CPU and the GPU alike.
//!
//! A strategy's rules depend on a few parameters each (bb_atr's entry on bb_period and
//! bb_std, its exit on bb_period only, its stop on atr_period and atr_mult), so the book
//! holds one row per distinct value of those parameters: for a condition (entry, exit)
//! a bit row, bit t saying whether it holds at bar t, decided in f64 from the CPU's f64
//! series whatever device the bank's user picked; for a level (stop, take-profit) a
//! stop the simulation reads at the entry bar. A level `close − m · ATR` is held as its
//! ATR series and multiplier and formed in f64 at the entry bar e (the GPU forms the
//! same f64 bits in integer arithmetic), so memory grows with the unique ATR series,
//! never with the (atr_period, atr_mult) pairs; any other level is held as its series.
//! A combo is then a few numbers, a [`ComboPlan`], and a simulation reads only close,
//! the rows it names and nothing per combo: every device takes the same trades, bar
//! for bar.
//!
//! A [`BookLayout`] says, before anything is computed, which rows, stops and indicator
//! series a book over a [`Grid`] (or over a sample of its combos) holds and about
//! how much memory that takes; a sample's book holds only what its own combos read.
//!
//! A book can also hold a user's own decisions ([`SignalBook::from_signals`]): one entry
//! row, one exit row and optionally one stop-level series per column of the user's
//! arrays, a column being a combo. The simulation and the kernel are the same.

use crate::BacktestError;
use crate::grid::Grid;
use crate::param::{MAX_PARAMS, ParamValues};
use crate::rules::{
    Bound, Eval, Op, Price, RuleKind, SeriesKey, SeriesTable, fill_rows, indicators_of, is_none, max_bars_of, warmup_of,
};
use crate::strategy::Strategy;
use ndarray::ArrayView2;
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use threadx_indicators::{Indicator, IndicatorBank, IndicatorId, IndicatorValues, Ohlcv};

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
    /// Take-profit level of [`SignalBook::stops`] (same forms as a stop), or
    /// [`ComboPlan::NO_STOP`].
    pub take_profit: u32,
    /// Exit after this many bars in a trade; 0: no limit.
    pub max_bars: u32,
}

impl ComboPlan {
    pub const NO_STOP: u32 = u32::MAX;
}

/// The row families of a book, each from one rule: entry and exit (bit rows), stop and
/// take-profit (levels), max_bars (a number).
const FAMILIES: [RuleKind; 5] =
    [RuleKind::Entry, RuleKind::Exit, RuleKind::Stop, RuleKind::TakeProfit, RuleKind::MaxBars];
const ENTRY: usize = 0;
const EXIT: usize = 1;
const STOP: usize = 2;
const TAKE_PROFIT: usize = 3;
const MAX_BARS: usize = 4;

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

/// The parameter values of a family's row at grid number `number`: the family's axes
/// set, the others NaN (its rule does not read them).
fn row_values(axes: &[Vec<f64>], family: &[usize], mut number: u64) -> ParamValues {
    let mut values = [f64::NAN; MAX_PARAMS];
    for &a in family.iter().rev() {
        let len = axes[a].len() as u64;
        values[a] = axes[a][(number % len) as usize];
        number /= len;
    }
    ParamValues::new(&values[..axes.len()])
}

/// What a signal book over a grid, or over a sample of its combos, holds: its decision
/// rows, its stops and the indicator series they read. Known before anything is
/// computed, so that a sweep can say what it will prepare and refuse what cannot fit
/// ([`BookLayout::bytes`]). A sample's book holds only the rows and series its own combos read.
#[derive(Debug, Clone)]
pub struct BookLayout {
    grid: Grid,
    /// The axes each family's rule reads; a family's rows are numbered by the mixed
    /// radix of those axes' positions (the row's grid number).
    families: [Vec<usize>; 5],
    rows: [RowSet; 5],
    indicators: Vec<Indicator>,
    /// The series stops and take-profits read (an indicator per distance, a level
    /// series per row otherwise): what a GPU holds beside the bit rows.
    stop_series: u64,
}

/// Bytes per bar a book holds whatever its rows: close, returns and timestamps, and its
/// fixed-point tables ([`BarTables`](crate::BarTables)).
const BYTES_PER_BAR: u64 = 3 * 8 + 8 + 4 * 16;

impl BookLayout {
    /// The layout of the whole `grid` (`combos: None`) or of the listed combos only
    /// (grid numbers, sorted). Refuses values a rule cannot be formed with (a period
    /// below 1, a lookback into the future).
    pub fn new(grid: Grid, combos: Option<&[u64]>) -> Result<Self, BacktestError> {
        let strategy = grid.strategy();
        let axes = grid.axes();
        let families = FAMILIES.map(|kind| strategy.compiled(kind).map_or_else(Vec::new, |r| r.deps.clone()));
        let rows: [RowSet; 5] = match combos {
            None => families.clone().map(|family| RowSet::All(family.iter().map(|&a| axes[a].len() as u64).product())),
            Some(combos) => {
                let mut numbers: [Vec<u64>; 5] = Default::default();
                for &combo in combos {
                    let index = grid.index(combo);
                    for (numbers, family) in numbers.iter_mut().zip(&families) {
                        numbers.push(row_number(axes, family, &index));
                    }
                }
                numbers.map(|mut n| {
                    n.sort_unstable();
                    n.dedup();
                    RowSet::Only(n)
                })
            }
        };
        let mut layout = Self { grid, families, rows, indicators: Vec::new(), stop_series: 0 };
        (layout.indicators, layout.stop_series) = layout.list_indicators()?;
        Ok(layout)
    }

    /// Every indicator the rows read, each once, found by binding each family's rule
    /// once per distinct value of the parameters that decide its series (bb_atr's entry:
    /// per bb_period, whatever bb_std), not once per row: a trillion-combo grid is laid
    /// out at once. Refuses values a rule cannot be formed with.
    /// Also counts the stop series (see [`BookLayout::stop_series`]).
    fn list_indicators(&self) -> Result<(Vec<Indicator>, u64), BacktestError> {
        let strategy = self.grid.strategy();
        let axes = self.grid.axes();
        let mut bound = Vec::new();
        let mut distances = std::collections::HashSet::new();
        let mut stop_series = 0;
        for (f, kind) in FAMILIES.into_iter().enumerate().take(MAX_BARS) {
            let Some(rule) = strategy.compiled(kind) else { continue };
            // A sample's rows, or every binding of the deciding parameters' values.
            let bindings: Vec<ParamValues> = match &self.rows[f] {
                RowSet::Only(numbers) => numbers.iter().map(|&n| row_values(axes, &self.families[f], n)).collect(),
                RowSet::All(_) => {
                    let count: u64 = rule.shape.iter().map(|&a| axes[a].len() as u64).product();
                    (0..count).map(|n| row_values(axes, &rule.shape, n)).collect()
                }
            };
            let stops = f == STOP || f == TAKE_PROFIT;
            let mut levels = false;
            for values in bindings {
                let level = self.bind(kind, &values)?;
                if stops {
                    // Whether the level is a distance needs the parameters that only scale
                    // it (NaN in a shape binding): their first values stand in.
                    let filled: Vec<f64> =
                        values.iter().zip(axes).map(|(&v, axis)| if v.is_nan() { axis[0] } else { v }).collect();
                    match self.bind(kind, &filled).ok().filter(|l| !is_none(l)).map(|l| distance(&l)) {
                        Some(Some((indicator, _))) => {
                            distances.insert(indicator.id());
                        }
                        Some(None) => levels = true,
                        None => {}
                    }
                }
                bound.push(level);
            }
            if levels {
                stop_series += self.rows[f].len();
            }
        }
        Ok((indicators_of(&bound), stop_series + distances.len() as u64))
    }

    /// Rule `kind` with `values` in place; a family without a rule: never (exit), none
    /// (stop, take-profit), no limit (max_bars).
    fn bind(&self, kind: RuleKind, values: &[f64]) -> Result<Bound, BacktestError> {
        let strategy = self.grid.strategy();
        match strategy.compiled(kind) {
            None if kind == RuleKind::Exit => Ok(Bound::Const(0.0)),
            None => Ok(Bound::Const(f64::NAN)),
            Some(rule) => rule.bind(values, strategy.schema()).map_err(|e| BacktestError::Combo {
                strategy: strategy.name().to_owned(),
                problem: format!("rule `{}`: {}", kind.name(), e.message),
            }),
        }
    }

    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    /// The rule of every row of every family with its values in place.
    fn bind_rows(&self) -> Result<[Vec<Bound>; 5], BacktestError> {
        let axes = self.grid.axes();
        let mut out: [Vec<Bound>; 5] = Default::default();
        for (f, kind) in FAMILIES.into_iter().enumerate() {
            let set = &self.rows[f];
            out[f] = (0..set.len() as usize)
                .map(|r| self.bind(kind, &row_values(axes, &self.families[f], set.number(r))))
                .collect::<Result<_, _>>()?;
        }
        Ok(out)
    }

    /// Every indicator series the book reads, each once.
    pub fn indicators(&self) -> &[Indicator] {
        &self.indicators
    }

    /// Rows of the family of rule `kind` (1 for a rule that reads no parameter, or a
    /// family without a rule; 0 for `require`, which has no rows).
    pub fn rows_of(&self, kind: RuleKind) -> u64 {
        FAMILIES.iter().position(|&k| k == kind).map_or(0, |f| self.rows[f].len())
    }

    /// Entry and exit bit rows.
    pub fn decision_rows(&self) -> u64 {
        self.rows[ENTRY].len() + self.rows[EXIT].len()
    }

    /// Stops and take-profits (a series and a multiplier, or a level series).
    pub fn stops(&self) -> u64 {
        self.rows[STOP].len() + self.rows[TAKE_PROFIT].len()
    }

    /// About how many bytes a GPU run adds on the host: the copies of the bit rows, the
    /// stop series and the per-bar tables made for the upload, twice (the upload's own
    /// vectors, then the driver's staging copy).
    pub fn gpu_upload_bytes(&self, bars: usize) -> u64 {
        let bars = bars as u64;
        let rows = self.decision_rows().saturating_mul(bars.div_ceil(64) * 8);
        let series = self.stop_series.saturating_mul(bars * 8);
        rows.saturating_add(series).saturating_add(bars * 80).saturating_mul(2)
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
    Grid(Box<BookLayout>),
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
    /// A level series with every NaN or non-positive level made 0.
    fn levels(levels: impl IntoIterator<Item = f64>) -> Self {
        StopSeries::Levels(levels.into_iter().map(|l| if l > 0.0 { l } else { 0.0 }).collect())
    }

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
    /// Stops and take-profits (or one stop per signal column).
    stops: Vec<Stop>,
    /// Per stop row and per take-profit row of the layout: its stop, or
    /// [`ComboPlan::NO_STOP`] when its level is none.
    levels: [Vec<u32>; 2],
    /// Per row of the entry, exit, stop and take-profit families: the bars before every
    /// series the row reads has a value.
    warmups: [Vec<u32>; 4],
    /// Per max_bars row: the limit (0: none).
    max_bars: Vec<u32>,
    timestamps: Vec<i64>,
    close: Vec<f64>,
    /// close[t] / close[t−1] − 1 (0 at t = 0): a held bar's return, computed once.
    ret: Vec<f64>,
    /// What annualises the Sharpe ratio: the data's, or the user's.
    bars_per_year: f64,
}

/// What a stop series is, to hold each once.
#[derive(PartialEq, Eq, Hash)]
enum SeriesId {
    Indicator(IndicatorId),
    Level(String),
}

/// `close − m · series` with m > 0 and a bank indicator's first output: a stop held as
/// the series and the multiplier.
fn distance(level: &Bound) -> Option<(Indicator, f64)> {
    let Bound::Binary(Op::Sub, close, product) = level else { return None };
    let Bound::Binary(Op::Mul, m, series) = product.as_ref() else { return None };
    match (close.as_ref(), m.as_ref(), series.as_ref()) {
        (Bound::Series(c, 0), Bound::Const(m), Bound::Series(s, 0)) if m.is_finite() && *m > 0.0 => {
            match (c.as_ref(), s.as_ref()) {
                (SeriesKey::Price(Price::Close), SeriesKey::Indicator(indicator, 0)) => Some((*indicator, *m)),
                _ => None,
            }
        }
        _ => None,
    }
}

impl SignalBook {
    /// Builds the rows for every combo of `axes` (one list of values per parameter of
    /// `strategy`, in schema order), computing the indicators they need through `bank`
    /// (each once). Every value is checked against the schema, and the data must be long
    /// enough for the slowest combo to trade at least one bar.
    pub fn build(bank: &IndicatorBank<'_>, strategy: &Strategy, axes: &[Vec<f64>]) -> Result<Self, BacktestError> {
        Self::from_layout(bank, BookLayout::new(Grid::new(strategy.clone(), axes)?, None)?)
    }

    /// Builds the rows, stops and series `layout` names.
    pub fn from_layout(bank: &IndicatorBank<'_>, layout: BookLayout) -> Result<Self, BacktestError> {
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
        let warmups: [Vec<u32>; 4] = std::array::from_fn(|f| {
            bound[f].iter().map(|b| warmup_of(FAMILIES[f], b).min(u32::MAX as usize) as u32).collect()
        });
        let needed = warmups.iter().filter_map(|w| w.iter().max()).max().map_or(0, |&w| w as usize) + 1;
        if bars < needed {
            // The largest value of every axis: the slowest combo for the usual rules.
            let slowest: Vec<f64> =
                layout.grid.axes().iter().map(|values| values.iter().copied().fold(f64::MIN, f64::max)).collect();
            return Err(BacktestError::TooShort {
                strategy: strategy.name().to_owned(),
                params: strategy.describe(&slowest),
                needed,
                len: bars,
            });
        }
        let max_bars = bound[MAX_BARS]
            .iter()
            .map(max_bars_of)
            .collect::<Result<Vec<u32>, _>>()
            .map_err(|problem| BacktestError::Combo { strategy: strategy.name().to_owned(), problem })?;

        let table = SeriesTable::new(bank, bound[..MAX_BARS].iter().flatten())?;
        let entry = fill_rows(&bound[ENTRY], &table);
        let exit = fill_rows(&bound[EXIT], &table);

        let mut stop_series: Vec<StopSeries> = Vec::new();
        let mut series_of: HashMap<SeriesId, u32> = HashMap::new();
        let mut stops = Vec::new();
        let mut levels: [Vec<u32>; 2] = Default::default();
        for (f, levels) in [STOP, TAKE_PROFIT].into_iter().zip(&mut levels) {
            for level in &bound[f] {
                if is_none(level) {
                    levels.push(ComboPlan::NO_STOP);
                    continue;
                }
                let distance = distance(level);
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
        book.levels = levels;
        book.warmups = warmups;
        book.max_bars = max_bars;
        Ok(book)
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
                let series = (0..kept).map(|c| StopSeries::levels(levels.column(c).iter().copied())).collect();
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
            levels: Default::default(),
            warmups: Default::default(),
            max_bars: Vec::new(),
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
    pub fn strategy(&self) -> Option<&Strategy> {
        self.grid().map(Grid::strategy)
    }

    /// What the book's combos run, for profile keys: the strategy's name, or `signals`.
    pub fn name(&self) -> &str {
        self.strategy().map_or("signals", Strategy::name)
    }

    /// The parameter grid the book was built for; `None` for a user's signals.
    pub fn grid(&self) -> Option<&Grid> {
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
                return ComboPlan {
                    entry: column,
                    exit: column,
                    stop,
                    warmup: 0,
                    take_profit: ComboPlan::NO_STOP,
                    max_bars: 0,
                };
            }
        };
        let axes = layout.grid.axes();
        assert_eq!(index.len(), axes.len(), "one index per parameter");
        let row = |f: usize| layout.rows[f].row(row_number(axes, &layout.families[f], index)) as usize;
        let rows = [row(ENTRY), row(EXIT), row(STOP), row(TAKE_PROFIT)];
        let stop = self.levels[0][rows[STOP]];
        let take_profit = self.levels[1][rows[TAKE_PROFIT]];
        let mut warmup = self.warmups[ENTRY][rows[ENTRY]].max(self.warmups[EXIT][rows[EXIT]]);
        for (f, level) in [(STOP, stop), (TAKE_PROFIT, take_profit)] {
            if level != ComboPlan::NO_STOP {
                warmup = warmup.max(self.warmups[f][rows[f]]);
            }
        }
        ComboPlan {
            entry: rows[ENTRY] as u32,
            exit: rows[EXIT] as u32,
            stop,
            warmup,
            take_profit,
            max_bars: self.max_bars[row(MAX_BARS)],
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
