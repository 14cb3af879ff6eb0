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

/// Decision rows for every combo of a parameter space over one data set.
#[derive(Debug)]
pub struct SignalBook {
    strategy: Strategy,
    axes: Vec<Vec<f64>>,
    bars: usize,
    /// Bit rows of [`SignalBook::words`] u64 words each; bits past the last bar are 0.
    entry: Vec<u64>,
    exit: Vec<u64>,
    /// ATR series the stops read, each once.
    atr: Vec<Arc<IndicatorValues>>,
    /// Stops as (index into `atr`, multiplier), one per (atr_period, atr_mult) pair.
    stops: Vec<(u32, f64)>,
    timestamps: Vec<i64>,
    close: Vec<f64>,
    /// close[t] / close[t−1] − 1 (0 at t = 0): a held bar's return, computed once.
    ret: Vec<f64>,
}

impl SignalBook {
    /// Builds the rows for every combo of `axes` (one list of values per parameter of
    /// `strategy`, in schema order), computing the indicators they need through `bank`
    /// (each once). Every value is checked against the schema, and the data must be long
    /// enough for the slowest combo to trade at least one bar.
    pub fn build(bank: &IndicatorBank<'_>, strategy: Strategy, axes: &[Vec<f64>]) -> Result<Self, BacktestError> {
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

        let close = data.close().to_vec();
        let mut ret = vec![0.0; bars];
        for t in 1..bars {
            ret[t] = close[t] / close[t - 1] - 1.0;
        }
        let words = bars.div_ceil(64);
        let indicators = needed_indicators(strategy, axes);
        let values = bank.get_many_exact(&indicators)?;
        let by_key: HashMap<String, Arc<IndicatorValues>> =
            indicators.iter().zip(values).map(|(i, v)| (i.key(), v)).collect();
        let series = |indicator: Indicator, output: usize| -> &[f64] { by_key[&indicator.key()].output(output) };
        let period = |v: f64| v as usize;

        let (entry_rules, exit_rules): (Vec<Rule<'_>>, Vec<Rule<'_>>) = match strategy {
            Strategy::BbAtr => {
                let entry = pairs(&axes[0], &axes[1])
                    .map(|(p, k)| {
                        Rule::Below(&close, series(Indicator::BollingerBands { period: period(p), std: k }, 2))
                    })
                    .collect();
                let exit = axes[0]
                    .iter()
                    .map(|&p| {
                        Rule::Above(&close, series(Indicator::BollingerBands { period: period(p), std: axes[1][0] }, 0))
                    })
                    .collect();
                (entry, exit)
            }
            Strategy::MaCross => {
                let lines: Vec<(&[f64], &[f64])> = axes[0]
                    .iter()
                    .flat_map(|&kind| {
                        pairs(&axes[1], &axes[2]).map(move |(f, s)| (ma(kind, period(f)), ma(kind, period(s))))
                    })
                    .map(|(f, s)| (series(f, 0), series(s, 0)))
                    .collect();
                let entry = lines.iter().map(|&(f, s)| Rule::CrossAbove(f, s)).collect();
                let exit = lines.iter().map(|&(f, s)| Rule::CrossAbove(s, f)).collect();
                (entry, exit)
            }
            Strategy::RsiReversion => {
                let rsi = |p: f64| series(Indicator::Rsi { period: period(p) }, 0);
                let entry = pairs(&axes[0], &axes[1]).map(|(p, low)| Rule::BelowLevel(rsi(p), low)).collect();
                let exit = pairs(&axes[0], &axes[2]).map(|(p, high)| Rule::AboveLevel(rsi(p), high)).collect();
                (entry, exit)
            }
        };
        let stop_axes = match strategy {
            Strategy::BbAtr => Some((&axes[2], &axes[3])),
            Strategy::RsiReversion => Some((&axes[3], &axes[4])),
            Strategy::MaCross => None,
        };
        let stop_pairs: Vec<(f64, f64)> = stop_axes.map(|(a, m)| pairs(a, m).collect()).unwrap_or_default();
        // A multiplier of 0 (rsi_reversion) means no stop: its plans never read the pair.
        let mut atr_periods: Vec<usize> =
            stop_pairs.iter().filter(|(_, m)| *m > 0.0).map(|&(a, _)| period(a)).collect();
        atr_periods.sort_unstable();
        atr_periods.dedup();
        let atr: Vec<Arc<IndicatorValues>> =
            atr_periods.iter().map(|&a| by_key[&Indicator::Atr { period: a }.key()].clone()).collect();
        let stops = stop_pairs
            .iter()
            .map(|&(a, m)| (atr_periods.iter().position(|&p| p == period(a)).unwrap_or(0) as u32, m))
            .collect();

        let entry = fill_rows(&entry_rules, bars, words);
        let exit = fill_rows(&exit_rules, bars, words);
        Ok(Self {
            strategy,
            axes: axes.to_vec(),
            bars,
            entry,
            exit,
            atr,
            stops,
            timestamps: data.timestamps().to_vec(),
            close,
            ret,
        })
    }

    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The parameter lists the book was built for.
    pub fn axes(&self) -> &[Vec<f64>] {
        &self.axes
    }

    pub fn bars(&self) -> usize {
        self.bars
    }

    /// The number of combos of the full grid of the axes.
    pub fn grid_len(&self) -> u64 {
        self.axes.iter().map(|a| a.len() as u64).product()
    }

    /// The plan of the combo taking value `index[i]` of axis `i`. Allocation-free.
    ///
    /// # Panics
    /// If `index` does not hold one in-range position per axis (a caller's bug).
    pub fn plan(&self, index: &[usize]) -> ComboPlan {
        assert_eq!(index.len(), self.axes.len(), "one index per parameter");
        let values = self.values_at(index);
        let len = |i: usize| self.axes[i].len();
        let (entry, exit, stop) = match self.strategy {
            Strategy::BbAtr => (index[0] * len(1) + index[1], index[0], Some(index[2] * len(3) + index[3])),
            Strategy::MaCross => {
                let row = (index[0] * len(1) + index[1]) * len(2) + index[2];
                (row, row, None)
            }
            Strategy::RsiReversion => (
                index[0] * len(1) + index[1],
                index[0] * len(2) + index[2],
                (values[4] > 0.0).then(|| index[3] * len(4) + index[4]),
            ),
        };
        ComboPlan {
            entry: entry as u32,
            exit: exit as u32,
            stop: stop.map_or(ComboPlan::NO_STOP, |s| s as u32),
            warmup: self.strategy.warmup(&values) as u32,
        }
    }

    /// The plan of combo number `combo` of the grid of the axes, in DESIGN.md's order (the
    /// Cartesian product in schema order, the last parameter varying fastest). A combo's
    /// number is stable: it is how results are merged and resumed. Allocation-free.
    ///
    /// # Panics
    /// If `combo` ≥ [`SignalBook::grid_len`] (a caller's bug).
    pub fn combo_plan(&self, combo: u64) -> ComboPlan {
        self.plan(&self.combo_index(combo)[..self.axes.len()])
    }

    /// The parameter values of combo number `combo` (schema order). Allocation-free.
    ///
    /// # Panics
    /// If `combo` ≥ [`SignalBook::grid_len`].
    pub fn combo_values(&self, combo: u64) -> ParamValues {
        self.values_at(&self.combo_index(combo)[..self.axes.len()])
    }

    fn values_at(&self, index: &[usize]) -> ParamValues {
        let mut values = [0.0; MAX_PARAMS];
        for (i, (&k, axis)) in index.iter().zip(&self.axes).enumerate() {
            values[i] = axis[k];
        }
        ParamValues::new(&values[..index.len()])
    }

    /// Axis positions of combo number `combo` (the unused tail is 0).
    fn combo_index(&self, combo: u64) -> [usize; MAX_PARAMS] {
        assert!(combo < self.grid_len(), "combo {combo} of a {}-combo grid", self.grid_len());
        let mut index = [0usize; MAX_PARAMS];
        let mut rest = combo;
        for (i, axis) in self.axes.iter().enumerate().rev() {
            index[i] = (rest % axis.len() as u64) as usize;
            rest /= axis.len() as u64;
        }
        index
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

/// Every indicator any combo of the axes reads, each once.
fn needed_indicators(strategy: Strategy, axes: &[Vec<f64>]) -> Vec<Indicator> {
    let period = |v: f64| v as usize;
    let mut out: Vec<Indicator> = match strategy {
        Strategy::BbAtr => pairs(&axes[0], &axes[1])
            .map(|(p, k)| Indicator::BollingerBands { period: period(p), std: k })
            .chain(axes[2].iter().map(|&a| Indicator::Atr { period: period(a) }))
            .collect(),
        Strategy::MaCross => {
            axes[0].iter().flat_map(|&kind| axes[1].iter().chain(&axes[2]).map(move |&p| ma(kind, period(p)))).collect()
        }
        Strategy::RsiReversion => {
            let stops = axes[4].iter().any(|&m| m > 0.0);
            axes[0]
                .iter()
                .map(|&p| Indicator::Rsi { period: period(p) })
                .chain(axes[3].iter().filter(|_| stops).map(|&a| Indicator::Atr { period: period(a) }))
                .collect()
        }
    };
    let mut seen = std::collections::HashSet::new();
    out.retain(|i| seen.insert(i.key()));
    out
}

/// Every (a, b) of two axes, the second varying fastest.
fn pairs<'a>(a: &'a [f64], b: &'a [f64]) -> impl Iterator<Item = (f64, f64)> + 'a {
    a.iter().flat_map(move |&x| b.iter().map(move |&y| (x, y)))
}

/// A decision per bar, true only where every series it reads exists (NaN compares false).
#[derive(Debug, Clone, Copy)]
enum Rule<'a> {
    /// a[t] < b[t].
    Below(&'a [f64], &'a [f64]),
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
            Rule::Below(a, b) => a[t] < b[t],
            Rule::Above(a, b) => a[t] > b[t],
            Rule::CrossAbove(a, b) => t > 0 && a[t] > b[t] && a[t - 1] <= b[t - 1],
            Rule::BelowLevel(a, level) => a[t] < level,
            Rule::AboveLevel(a, level) => a[t] > level,
        }
    }
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
