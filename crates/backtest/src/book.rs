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

use crate::BacktestError;
use crate::strategy::{MAX_PARAMS, ParamValues, Strategy, ma};
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use threadx_dispatch::cpu_grain;
use threadx_indicators::{Indicator, IndicatorBank, IndicatorValues};

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

/// Decision rows for every combo of a parameter space (or a sample of it) over one data set.
#[derive(Debug)]
pub struct SignalBook {
    layout: BookLayout,
    bars: usize,
    /// Bit rows of [`SignalBook::words`] u64 words each; bits past the last bar are 0.
    entry: Vec<u64>,
    exit: Vec<u64>,
    /// ATR series the stops read, each once.
    atr: Vec<Arc<IndicatorValues>>,
    /// Stops as (index into `atr`, multiplier), one per stop row of the layout.
    stops: Vec<(u32, f64)>,
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

        let close = data.close().to_vec();
        let mut ret = vec![0.0; bars];
        for t in 1..bars {
            ret[t] = close[t] / close[t - 1] - 1.0;
        }
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
        let atr: Vec<Arc<IndicatorValues>> =
            atr_periods.iter().map(|&a| by_key[&Indicator::Atr { period: a }.key()].clone()).collect();
        let stops =
            stop_pairs.iter().map(|&(a, m)| (atr_periods.binary_search(&period(a)).unwrap_or(0) as u32, m)).collect();

        let entry = fill_rows(&entry_rules, bars, words);
        let exit = fill_rows(&exit_rules, bars, words);
        let timestamps = data.timestamps().to_vec();
        let bars_per_year = data.bars_per_year();
        Ok(Self { layout, bars, entry, exit, atr, stops, timestamps, close, ret, bars_per_year })
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

    pub fn strategy(&self) -> Strategy {
        self.layout.grid.strategy()
    }

    /// The parameter grid the book was built for.
    pub fn grid(&self) -> &ParamGrid {
        &self.layout.grid
    }

    /// The parameter lists the book was built for.
    pub fn axes(&self) -> &[Vec<f64>] {
        self.layout.grid.axes()
    }

    pub fn bars(&self) -> usize {
        self.bars
    }

    /// The number of combos of the full grid of the axes.
    pub fn grid_len(&self) -> u64 {
        self.layout.grid.len()
    }

    /// The plan of the combo taking value `index[i]` of axis `i`. Allocation-free.
    ///
    /// # Panics
    /// If `index` does not hold one in-range position per axis, or names a combo outside
    /// the sample the book was built for (a caller's bug).
    pub fn plan(&self, index: &[usize]) -> ComboPlan {
        let axes = self.axes();
        assert_eq!(index.len(), axes.len(), "one index per parameter");
        let values = self.layout.grid.values_at(index);
        let [entry, exit, stop] = families(self.strategy());
        let row = |family: usize, axes_of: &[usize]| self.layout.rows[family].row(row_number(axes, axes_of, index));
        let has_stop = match self.strategy() {
            Strategy::BbAtr => true,
            Strategy::MaCross => false,
            Strategy::RsiReversion => values[4] > 0.0,
        };
        ComboPlan {
            entry: row(0, entry),
            exit: row(1, exit),
            stop: if has_stop { row(2, stop) } else { ComboPlan::NO_STOP },
            warmup: self.strategy().warmup(&values) as u32,
        }
    }

    /// The plan of combo number `combo` of the grid of the axes, in docs/strategies.md's order (the
    /// Cartesian product in schema order, the last parameter varying fastest). A combo's
    /// number is stable: it is how results are merged and resumed. Allocation-free.
    ///
    /// # Panics
    /// If `combo` ≥ [`SignalBook::grid_len`], or is outside the book's sample.
    pub fn combo_plan(&self, combo: u64) -> ComboPlan {
        self.plan(&self.layout.grid.index(combo)[..self.axes().len()])
    }

    /// The parameter values of combo number `combo` (schema order). Allocation-free.
    ///
    /// # Panics
    /// If `combo` ≥ [`SignalBook::grid_len`].
    pub fn combo_values(&self, combo: u64) -> ParamValues {
        self.layout.grid.values(combo)
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

    /// The ATR series stops read, each once.
    pub(crate) fn atr_rows(&self) -> impl ExactSizeIterator<Item = &[f64]> {
        self.atr.iter().map(|values| values.output(0))
    }

    /// Every stop as (index into [`SignalBook::atr_rows`], multiplier).
    pub(crate) fn stops(&self) -> &[(u32, f64)] {
        &self.stops
    }

    /// The ATR series and multiplier of stop `stop`, if the plan has one.
    pub(crate) fn stop(&self, stop: u32) -> Option<(&[f64], f64)> {
        let &(atr, mult) = self.stops.get(stop as usize)?;
        Some((self.atr[atr as usize].output(0), mult))
    }
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
