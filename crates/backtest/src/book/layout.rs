//! The [`BookLayout`]: which rows, stops and indicator series a book over a grid (or a
//! sample of its combos) holds, and about how much memory that takes, known before
//! anything is computed.

use super::stops::scaled_series;
use crate::error::BacktestError;
use crate::grid::Grid;
use crate::param::{MAX_PARAMS, ParamValues};
use crate::rules::{Bound, RuleKind, indicators_of, is_none};
use threadx_indicators::Indicator;

/// The row families of a book, each from one rule: entries and exits of either side (bit
/// rows), stops, take-profits and the trail's distance (levels), max_bars (a number, last).
pub(super) const FAMILIES: [RuleKind; 10] = [
    RuleKind::Entry,
    RuleKind::Exit,
    RuleKind::Stop,
    RuleKind::TakeProfit,
    RuleKind::ShortEntry,
    RuleKind::ShortExit,
    RuleKind::ShortStop,
    RuleKind::ShortTakeProfit,
    RuleKind::Trail,
    RuleKind::MaxBars,
];
pub(super) const ENTRY: usize = 0;
pub(super) const EXIT: usize = 1;
pub(super) const STOP: usize = 2;
pub(super) const TAKE_PROFIT: usize = 3;
pub(super) const SHORT_ENTRY: usize = 4;
pub(super) const SHORT_EXIT: usize = 5;
pub(super) const SHORT_STOP: usize = 6;
pub(super) const SHORT_TAKE_PROFIT: usize = 7;
pub(super) const TRAIL: usize = 8;
pub(super) const MAX_BARS: usize = 9;
/// The families that are levels, in the order of the book's per-family stop lists.
pub(super) const LEVELS: [usize; 5] = [STOP, TAKE_PROFIT, SHORT_STOP, SHORT_TAKE_PROFIT, TRAIL];

/// Positions in [`LEVELS`] and in a book's per-role stop lists: which stop a level is.
pub(super) mod role {
    pub(in crate::book) const STOP: usize = 0;
    pub(in crate::book) const TAKE_PROFIT: usize = 1;
    pub(in crate::book) const SHORT_STOP: usize = 2;
    pub(in crate::book) const SHORT_TAKE_PROFIT: usize = 3;
    pub(in crate::book) const TRAIL: usize = 4;
}
/// The families that are bit rows.
pub(super) const CONDITIONS: [usize; 4] = [ENTRY, EXIT, SHORT_ENTRY, SHORT_EXIT];

/// The rows of one family a book holds: all of them (row = grid number), or only those a
/// sample of combos reads (sorted grid numbers; row = position in the list).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RowSet {
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
    pub(super) fn row(&self, number: u64) -> u32 {
        match self {
            RowSet::All(_) => number as u32,
            RowSet::Only(rows) => rows.binary_search(&number).expect("a combo the book was built for") as u32,
        }
    }
}

/// The grid number of a family's row at axis positions `index`.
pub(super) fn row_number(axes: &[Vec<f64>], family: &[usize], index: &[usize]) -> u64 {
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
    pub(super) grid: Grid,
    /// The axes each family's rule reads; a family's rows are numbered by the mixed
    /// radix of those axes' positions (the row's grid number).
    pub(super) families: [Vec<usize>; 10],
    pub(super) rows: [RowSet; 10],
    indicators: Vec<Indicator>,
    /// The series stops and take-profits read (an indicator per distance, a level
    /// series per row otherwise): what a GPU holds beside the bit rows.
    stop_series: u64,
}

/// Bytes per bar of the tables a GPU run forms for its upload (gpu_tables.rs): close and
/// log close, the downside sums, four prefix sums, a gain factor.
const UPLOAD_BYTES_PER_BAR: u64 = 16 + 16 + 4 * 16 + 8;

/// Bytes per bar a book holds whatever its rows: close, returns and timestamps, and its
/// fixed-point tables ([`BarTables`](crate::BarTables): log close, a held row and an exit
/// row).
const BYTES_PER_BAR: u64 = 3 * 8
    + 8
    + (std::mem::size_of::<crate::bar_tables::HeldRow>() + std::mem::size_of::<crate::bar_tables::ExitRow>()) as u64;

impl BookLayout {
    /// The layout of the whole `grid` (`combos: None`) or of the listed combos only
    /// (grid numbers, sorted). Refuses values a rule cannot be formed with (a period
    /// below 1, a lookback into the future).
    pub fn new(grid: Grid, combos: Option<&[u64]>) -> Result<Self, BacktestError> {
        let strategy = grid.strategy();
        let axes = grid.axes();
        let families = FAMILIES.map(|kind| strategy.compiled(kind).map_or_else(Vec::new, |r| r.deps.clone()));
        let rows: [RowSet; 10] = match combos {
            None => families.clone().map(|family| RowSet::All(family.iter().map(|&a| axes[a].len() as u64).product())),
            Some(combos) => {
                let mut numbers: [Vec<u64>; 10] = Default::default();
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
            let stops = LEVELS.contains(&f);
            let mut levels = false;
            for values in bindings {
                let level = self.bind(kind, &values)?;
                if stops {
                    // Whether the level is a distance needs the parameters that only scale
                    // it (NaN in a shape binding): their first values stand in.
                    let filled: Vec<f64> =
                        values.iter().zip(axes).map(|(&v, axis)| if v.is_nan() { axis[0] } else { v }).collect();
                    match self.bind(kind, &filled).ok().filter(|l| !is_none(l)).map(|l| scaled_series(&l, f == TRAIL)) {
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

    /// Rule `kind` with `values` in place; a family without a rule: never (entries and
    /// exits), none (levels), no limit (max_bars).
    fn bind(&self, kind: RuleKind, values: &[f64]) -> Result<Bound, BacktestError> {
        let strategy = self.grid.strategy();
        match strategy.compiled(kind) {
            None if matches!(kind, RuleKind::Entry | RuleKind::Exit | RuleKind::ShortEntry | RuleKind::ShortExit) => {
                Ok(Bound::Const(0.0))
            }
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
    pub(super) fn bind_rows(&self) -> Result<[Vec<Bound>; 10], BacktestError> {
        let axes = self.grid.axes();
        let mut out: [Vec<Bound>; 10] = Default::default();
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

    /// Whether the book holds family `f`'s rows: the long side's always (a rule left out
    /// is a row of never, or of no level); the short side's and the trail's only with
    /// their rules.
    fn holds(&self, f: usize) -> bool {
        let strategy = self.grid.strategy();
        match f {
            SHORT_ENTRY | SHORT_EXIT | SHORT_STOP | SHORT_TAKE_PROFIT => {
                strategy.compiled(RuleKind::ShortEntry).is_some()
            }
            TRAIL => strategy.compiled(RuleKind::Trail).is_some(),
            _ => true,
        }
    }

    /// Entry and exit bit rows, of both sides.
    pub fn decision_rows(&self) -> u64 {
        CONDITIONS.iter().filter(|&&f| self.holds(f)).map(|&f| self.rows[f].len()).sum()
    }

    /// Stops, take-profits and trails (a series and a multiplier, or a level series).
    pub fn stops(&self) -> u64 {
        LEVELS.iter().filter(|&&f| self.holds(f)).map(|&f| self.rows[f].len()).sum()
    }

    /// About how many bytes a GPU run adds on the host: the copies of the bit rows, the
    /// stop series and the per-bar tables made for the upload, twice (the upload's own
    /// vectors, then the driver's staging copy).
    pub fn gpu_upload_bytes(&self, bars: usize) -> u64 {
        let bars = bars as u64;
        let rows = self.decision_rows().saturating_mul(bars.div_ceil(64) * 8);
        let series = self.stop_series.saturating_mul(bars * 8);
        rows.saturating_add(series).saturating_add(bars * UPLOAD_BYTES_PER_BAR).saturating_mul(2)
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
