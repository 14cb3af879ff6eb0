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

mod build;
mod layout;
mod signals;
mod stops;

pub use layout::BookLayout;
pub use signals::UserSignals;
use stops::Form;
pub(crate) use stops::{Stop, StopRule};

use crate::costs::{Fill, Fills};
use crate::grid::Grid;
use crate::param::ParamValues;
use crate::strategy::Strategy;
use layout::{ENTRY, EXIT, LEVELS, MAX_BARS, SHORT_ENTRY, SHORT_EXIT, role, row_number};
use stops::StopSeries;
use threadx_indicators::Ohlcv;

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
    /// Short entry and exit rows (rows of the same bit arrays as `entry` and `exit`).
    pub short_entry: u32,
    pub short_exit: u32,
    /// A short's stop and take-profit levels, and the trail's distance, of
    /// [`SignalBook::stops`], or [`ComboPlan::NO_STOP`].
    pub short_stop: u32,
    pub short_take_profit: u32,
    pub trail: u32,
    /// 0 (the kernel's struct has the same size as this one, a multiple of 16 bytes).
    pub pad: u32,
}

impl ComboPlan {
    pub const NO_STOP: u32 = u32::MAX;

    /// A long-only plan (no short rows, no trail).
    pub(crate) fn long(entry: u32, exit: u32, stop: u32, warmup: u32, take_profit: u32, max_bars: u32) -> Self {
        Self {
            entry,
            exit,
            stop,
            warmup,
            take_profit,
            max_bars,
            short_entry: Self::NO_STOP,
            short_exit: Self::NO_STOP,
            short_stop: Self::NO_STOP,
            short_take_profit: Self::NO_STOP,
            trail: Self::NO_STOP,
            pad: 0,
        }
    }
}

/// What a book's combos are: the combos of a strategy's grid (or a sample of them), or
/// the columns of a user's own signals.
#[derive(Debug)]
enum Combos {
    Grid(Box<BookLayout>),
    Signals { columns: usize },
}

/// Decision rows for every combo of a parameter space (or a sample of it) over one data
/// set, or for the columns of a user's own signals.
#[derive(Debug)]
pub struct SignalBook {
    combos: Combos,
    bars: usize,
    /// Bit rows of [`SignalBook::words`] u64 words each; bits past the last bar are 0.
    entry: Vec<u64>,
    /// A row of no decisions (a side a combo does not trade).
    zeros: Vec<u64>,
    exit: Vec<u64>,
    /// Series the stops read, each once.
    stop_series: Vec<StopSeries>,
    /// Stops and take-profits (or one stop per signal column).
    stops: Vec<Stop>,
    /// Per row of each level family of the layout (stop, take-profit, short stop, short
    /// take-profit, trail): its stop, or [`ComboPlan::NO_STOP`] when its level is none.
    levels: [Vec<u32>; 5],
    /// Per row of every family but max_bars: the bars before every series the row reads
    /// has a value.
    warmups: [Vec<u32>; 9],
    /// Short entry (and exit) rows start at this row of the entry (exit) bit arrays.
    short_rows: [u32; 2],
    /// How orders fill (the strategy's; a user's signals: at the close, intrabar when
    /// given highs and lows).
    fills: Fills,
    /// Whether any combo can hold a short position or trail a stop.
    shorts: bool,
    trails: bool,
    /// Open, high and low (filled only for books that fill at the open or check
    /// inside the bar).
    open: Vec<f64>,
    high: Vec<f64>,
    low: Vec<f64>,
    /// Per max_bars row: the limit (0: none).
    max_bars: Vec<u32>,
    timestamps: Vec<i64>,
    close: Vec<f64>,
    /// close[t] / close[t−1] − 1 (0 at t = 0): a held bar's return, computed once.
    ret: Vec<f64>,
    /// What annualises the Sharpe ratio: the data's, or the user's.
    bars_per_year: f64,
}

impl SignalBook {
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
            zeros: vec![0; data.len().div_ceil(64)],
            entry,
            exit,
            stop_series,
            stops,
            levels: Default::default(),
            warmups: Default::default(),
            short_rows: [0; 2],
            fills: Fills::default(),
            shorts: false,
            trails: false,
            open: Vec::new(),
            high: Vec::new(),
            low: Vec::new(),
            max_bars: Vec::new(),
            timestamps: data.timestamps().to_vec(),
            close,
            ret,
            bars_per_year: data.bars_per_year(),
        }
    }

    /// The book filling as `fills` says, with the open, high and low of `data` kept when
    /// the fills read them.
    pub(crate) fn with_fills(mut self, fills: Fills, data: &Ohlcv) -> Self {
        self.fills = fills;
        if fills.fill == Fill::NextOpen || fills.intrabar {
            self.open = data.open().to_vec();
            self.high = data.high().to_vec();
            self.low = data.low().to_vec();
        }
        self
    }

    /// How the book's orders fill.
    pub fn fills(&self) -> Fills {
        self.fills
    }

    /// Whether the book's combos trade only as the whole-backtest kernel does: long only,
    /// filled at the close, stops against closes, no trail. Other books run on the CPU
    /// (`market.rs`), whatever device is asked for.
    pub fn is_plain(&self) -> bool {
        self.fills == Fills::default() && !self.shorts && !self.trails
    }

    /// What the book's combos use beyond the kernel's rules, in words (empty if plain).
    pub fn market_features(&self) -> Vec<&'static str> {
        let mut features = Vec::new();
        if self.shorts {
            features.push("shorts");
        }
        if self.trails {
            features.push("trailing stops");
        }
        if self.fills.fill == Fill::NextOpen {
            features.push("next-open fills");
        }
        if self.fills.intrabar {
            features.push("intrabar stops");
        }
        features
    }

    pub(crate) fn open(&self) -> &[f64] {
        &self.open
    }

    pub(crate) fn high(&self) -> &[f64] {
        &self.high
    }

    pub(crate) fn low(&self) -> &[f64] {
        &self.low
    }

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

    /// Whether `plan`'s warm-up reaches past the last bar: the data is shorter than its
    /// indicators need, so it trades nothing and its metrics are empty.
    pub fn cannot_trade(&self, plan: &ComboPlan) -> bool {
        plan.warmup as usize >= self.bars
    }

    /// Whether some combo of the book may not trade ([`Self::cannot_trade`]): a row whose
    /// warm-up reaches past the last bar.
    pub fn some_cannot_trade(&self) -> bool {
        self.warmups.iter().flatten().any(|&w| w as usize >= self.bars)
    }

    /// The bars the book's slowest row needs for its combos to trade: its warm-up and one.
    pub fn bars_needed(&self) -> usize {
        self.warmups.iter().flatten().max().map_or(0, |&w| w as usize) + 1
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
                return self.signals_plan(index[0]);
            }
        };
        let axes = layout.grid.axes();
        assert_eq!(index.len(), axes.len(), "one index per parameter");
        let row = |f: usize| layout.rows[f].row(row_number(axes, &layout.families[f], index)) as usize;
        let rows: [usize; 9] = std::array::from_fn(row);
        let levels: [u32; 5] = std::array::from_fn(|i| self.levels[i][rows[LEVELS[i]]]);
        let mut warmup = [ENTRY, EXIT].iter().map(|&f| self.warmups[f][rows[f]]).max().unwrap_or(0);
        if self.shorts {
            warmup = warmup
                .max(self.warmups[SHORT_ENTRY][rows[SHORT_ENTRY]])
                .max(self.warmups[SHORT_EXIT][rows[SHORT_EXIT]]);
        }
        for (&f, &level) in LEVELS.iter().zip(&levels) {
            if level != ComboPlan::NO_STOP {
                warmup = warmup.max(self.warmups[f][rows[f]]);
            }
        }
        let mut plan = ComboPlan::long(
            rows[ENTRY] as u32,
            rows[EXIT] as u32,
            levels[role::STOP],
            warmup,
            levels[role::TAKE_PROFIT],
            self.max_bars[row(MAX_BARS)],
        );
        if self.shorts {
            plan.short_entry = self.short_rows[0] + rows[SHORT_ENTRY] as u32;
            plan.short_exit = self.short_rows[1] + rows[SHORT_EXIT] as u32;
            plan.short_stop = levels[role::SHORT_STOP];
            plan.short_take_profit = levels[role::SHORT_TAKE_PROFIT];
        }
        plan.trail = levels[role::TRAIL];
        plan
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

    /// A row with no bit set.
    pub(crate) fn no_row(&self) -> &[u64] {
        &self.zeros
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
            Stop::Distance { mult, .. } => StopRule { series, form: Form::Distance(mult) },
            Stop::Level { .. } => StopRule { series, form: Form::Level },
            Stop::Fraction { sign, .. } => StopRule { series, form: Form::Fraction(sign) },
            Stop::Scaled { mult, .. } => StopRule { series, form: Form::Scaled(mult) },
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
