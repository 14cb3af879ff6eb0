//! A bound rule's ([`Bound`]) evaluation over the bars, 64 at a time, in f64.
//!
//! Every series a book's rules read is computed once into a [`SeriesTable`]: prices from
//! the data, indicators from the [`IndicatorBank`], rolling extremes and indicators of
//! other series from their source.
//! A value before a series exists (or before the first bar, for a lookback) is NaN, so
//! a comparison with it is false.

use super::bound::{Bound, Op, SeriesKey};
use rayon::prelude::*;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use threadx_dispatch::cpu_grain;
use threadx_indicators::{Indicator, IndicatorBank, IndicatorError, IndicatorId, IndicatorValues, Ohlcv};

/// Every series `rules` read (sources before the series made from them), each as often
/// as read.
fn series_of<'b>(rules: impl IntoIterator<Item = &'b Bound>) -> Vec<&'b SeriesKey> {
    let mut keys = Vec::new();
    for rule in rules {
        rule.visit_series(&mut keys);
    }
    keys
}

/// The bank's indicators among `keys`, each once, in first-read order.
fn bank_indicators(keys: &[&SeriesKey]) -> Vec<Indicator> {
    let mut seen = std::collections::HashSet::new();
    keys.iter()
        .filter_map(|key| match key {
            SeriesKey::Indicator(indicator, _) => Some(*indicator),
            _ => None,
        })
        .filter(|i| seen.insert(i.id()))
        .collect()
}

/// Every indicator of the bank `rules` read, each once, in first-read order.
pub(crate) fn indicators_of<'b>(rules: impl IntoIterator<Item = &'b Bound>) -> Vec<Indicator> {
    bank_indicators(&series_of(rules))
}

/// Every series some rules read, computed once.
#[derive(Debug)]
pub(crate) struct SeriesTable<'a> {
    data: &'a Ohlcv,
    indicators: HashMap<IndicatorId, Arc<IndicatorValues>>,
    /// Series made from others (rolling extremes, indicators of a series), by key id.
    derived: HashMap<String, Vec<f64>>,
}

impl<'a> SeriesTable<'a> {
    /// Computes what `rules` read: the bank's indicators (`get_many_exact`: the same
    /// f64 values on every device), then rolling series, inner ones first.
    pub(crate) fn new<'b>(
        bank: &IndicatorBank<'a>,
        rules: impl IntoIterator<Item = &'b Bound>,
    ) -> Result<Self, IndicatorError> {
        let keys = series_of(rules);
        let bars = bank.data().len();
        // An indicator whose first value lies past the last bar is NaN throughout: the
        // combos that read it cannot trade (their rows are empty), the others run.
        let (computed, unavailable): (Vec<Indicator>, Vec<Indicator>) =
            bank_indicators(&keys).into_iter().partition(|i| i.lookback() < bars);
        let values = bank.get_many_exact(&computed)?;
        let mut indicators: HashMap<IndicatorId, Arc<IndicatorValues>> =
            computed.iter().zip(values).map(|(i, v)| (i.id(), v)).collect();
        for indicator in unavailable {
            indicator.check_params()?;
            indicators.insert(indicator.id(), Arc::new(IndicatorValues::unavailable(indicator, bars)));
        }
        let mut table = Self { data: bank.data(), indicators, derived: HashMap::new() };
        // A series made from another comes after the series its source reads.
        for key in keys {
            let source = match key {
                SeriesKey::Rolling { source, .. } | SeriesKey::Derived { source, .. } => source,
                SeriesKey::Price(_) | SeriesKey::Indicator(..) => continue,
            };
            if table.derived.contains_key(&key.id()) {
                continue;
            }
            let x = Eval::new(source, &table).values(table.data.len());
            let values = match key {
                SeriesKey::Derived { indicator, output, .. } => {
                    threadx_indicators::compute_on_series(*indicator, &x)?.swap_remove(*output)
                }
                SeriesKey::Rolling { max, period, .. } => rolling_extreme(&x, *period, *max),
                SeriesKey::Price(_) | SeriesKey::Indicator(..) => unreachable!("skipped above"),
            };
            table.derived.insert(key.id(), values);
        }
        Ok(table)
    }

    pub(crate) fn bars(&self) -> usize {
        self.data.len()
    }

    /// The bank's values of `indicator`, if a rule reads it.
    pub(crate) fn indicator(&self, indicator: &Indicator) -> Option<&Arc<IndicatorValues>> {
        self.indicators.get(&indicator.id())
    }

    fn values(&self, key: &SeriesKey) -> &[f64] {
        match key {
            SeriesKey::Price(price) => price.of(self.data),
            SeriesKey::Indicator(indicator, output) => self.indicators[&indicator.id()].output(*output),
            SeriesKey::Rolling { .. } | SeriesKey::Derived { .. } => &self.derived[&key.id()],
        }
    }
}

/// The rolling maximum (or minimum) of `x` over `period` bars: NaN for the first
/// `period − 1` bars and wherever the window holds a NaN (a source still in warm-up).
fn rolling_extreme(x: &[f64], period: usize, max: bool) -> Vec<f64> {
    let better = |a: f64, b: f64| if max { a >= b } else { a <= b };
    let mut out = vec![f64::NAN; x.len()];
    // Indices of the window's candidates, their values strictly worsening.
    let mut window: VecDeque<usize> = VecDeque::with_capacity(period.min(x.len()));
    let mut last_nan: Option<usize> = None;
    for (t, &v) in x.iter().enumerate() {
        if v.is_nan() {
            last_nan = Some(t);
            window.clear();
        } else {
            while window.back().is_some_and(|&j| better(v, x[j])) {
                window.pop_back();
            }
            window.push_back(t);
        }
        if t + 1 < period {
            continue;
        }
        let start = t + 1 - period;
        while window.front().is_some_and(|&j| j < start) {
            window.pop_front();
        }
        if last_nan.is_none_or(|n| n < start)
            && let Some(&j) = window.front()
        {
            out[t] = x[j];
        }
    }
    out
}

const BLOCK: usize = 64;
type Block = [f64; BLOCK];

/// A bound rule with its series resolved to slices, ready to evaluate.
#[derive(Debug)]
pub(crate) enum Eval<'a> {
    Const(f64),
    Series(&'a [f64], usize),
    Neg(Box<Eval<'a>>),
    Abs(Box<Eval<'a>>),
    Not(Box<Eval<'a>>),
    Binary(Op, Box<Eval<'a>>, Box<Eval<'a>>),
    If(Box<Eval<'a>>, Box<Eval<'a>>, Box<Eval<'a>>),
}

impl<'a> Eval<'a> {
    pub(crate) fn new(bound: &Bound, table: &'a SeriesTable<'_>) -> Self {
        let sub = |b: &Bound| Box::new(Eval::new(b, table));
        match bound {
            Bound::Const(c) => Eval::Const(*c),
            Bound::Series(key, shift) => Eval::Series(table.values(key), *shift),
            Bound::Neg(a) => Eval::Neg(sub(a)),
            Bound::Abs(a) => Eval::Abs(sub(a)),
            Bound::Not(a) => Eval::Not(sub(a)),
            Bound::Binary(op, a, b) => Eval::Binary(*op, sub(a), sub(b)),
            Bound::If(c, a, b) => Eval::If(sub(c), sub(a), sub(b)),
        }
    }

    /// Values at bars `t0..t0 + 64` of `n` (NaN past the last bar).
    fn number(&self, t0: usize, n: usize, out: &mut Block) {
        match self {
            Eval::Const(c) => out.fill(*c),
            Eval::Series(values, shift) => {
                if t0 >= *shift && t0 + BLOCK <= n {
                    out.copy_from_slice(&values[t0 - shift..][..BLOCK]);
                } else {
                    for (i, v) in out.iter_mut().enumerate() {
                        let t = t0 + i;
                        *v = if t >= *shift && t < n { values[t - shift] } else { f64::NAN };
                    }
                }
            }
            Eval::Neg(a) => {
                a.number(t0, n, out);
                out.iter_mut().for_each(|v| *v = -*v);
            }
            Eval::Abs(a) => {
                a.number(t0, n, out);
                out.iter_mut().for_each(|v| *v = v.abs());
            }
            Eval::Binary(op, a, b) if !op.is_comparison() && !matches!(op, Op::And | Op::Or) => {
                let (mut left, mut right) = ([0.0; BLOCK], [0.0; BLOCK]);
                let (left, right) = (a.block(t0, n, &mut left), b.block(t0, n, &mut right));
                match op {
                    Op::Add => out.iter_mut().zip(left).zip(right).for_each(|((v, l), r)| *v = l + r),
                    Op::Sub => out.iter_mut().zip(left).zip(right).for_each(|((v, l), r)| *v = l - r),
                    Op::Mul => out.iter_mut().zip(left).zip(right).for_each(|((v, l), r)| *v = l * r),
                    _ => out.iter_mut().zip(left).zip(right).for_each(|((v, l), r)| *v = op.number(*l, *r)),
                }
            }
            Eval::If(c, a, b) => {
                let mask = c.truth(t0, n);
                a.number(t0, n, out);
                let mut other = [0.0; BLOCK];
                b.number(t0, n, &mut other);
                for (i, (v, o)) in out.iter_mut().zip(other).enumerate() {
                    if mask >> i & 1 == 0 {
                        *v = o;
                    }
                }
            }
            Eval::Not(_) | Eval::Binary(..) => {
                let mask = self.truth(t0, n);
                for (i, v) in out.iter_mut().enumerate() {
                    *v = f64::from((mask >> i & 1) as u8);
                }
            }
        }
    }

    /// The values at bars `t0..t0 + 64`: read in place from a series when they all
    /// exist there, else computed into `buffer`.
    fn block<'s>(&'s self, t0: usize, n: usize, buffer: &'s mut Block) -> &'s [f64] {
        match self {
            Eval::Series(values, shift) if t0 >= *shift && t0 + BLOCK <= n => &values[t0 - shift..][..BLOCK],
            _ => {
                self.number(t0, n, buffer);
                buffer
            }
        }
    }

    /// Bit i: whether the condition holds at bar t0 + i.
    fn truth(&self, t0: usize, n: usize) -> u64 {
        match self {
            Eval::Not(a) => !a.truth(t0, n),
            // Both sides are free of effects: a decided block skips the other side.
            Eval::Binary(Op::And, a, b) => match a.truth(t0, n) {
                0 => 0,
                m => m & b.truth(t0, n),
            },
            Eval::Binary(Op::Or, a, b) => match a.truth(t0, n) {
                u64::MAX => u64::MAX,
                m => m | b.truth(t0, n),
            },
            Eval::Binary(op, a, b) if op.is_comparison() => {
                let (mut left, mut right) = ([0.0; BLOCK], [0.0; BLOCK]);
                let (left, right) = (a.block(t0, n, &mut left), b.block(t0, n, &mut right));
                compare(*op, left, right)
            }
            Eval::If(c, a, b) => {
                let mask = c.truth(t0, n);
                (mask & a.truth(t0, n)) | (!mask & b.truth(t0, n))
            }
            _ => {
                let mut values = [0.0; BLOCK];
                self.number(t0, n, &mut values);
                values.iter().enumerate().fold(0, |m, (i, &v)| m | u64::from(v != 0.0) << i)
            }
        }
    }

    /// The condition as a bit row over `n` bars (`n.div_ceil(64)` words; bits past the
    /// last bar are 0).
    pub(crate) fn fill_bits(&self, n: usize, row: &mut [u64]) {
        for (w, word) in row.iter_mut().enumerate() {
            let t0 = w * BLOCK;
            let valid = n - t0;
            let mask = if valid >= BLOCK { u64::MAX } else { (1u64 << valid) - 1 };
            *word = self.truth(t0, n) & mask;
        }
    }

    /// The value at every bar.
    pub(crate) fn values(&self, n: usize) -> Vec<f64> {
        let mut out = vec![0.0; n.div_ceil(BLOCK) * BLOCK];
        for (w, block) in out.chunks_exact_mut(BLOCK).enumerate() {
            let block: &mut Block = block.try_into().unwrap_or_else(|_| unreachable!("exact chunks"));
            self.number(w * BLOCK, n, block);
        }
        out.truncate(n);
        out
    }
}

/// Bit i: `op(left[i], right[i])`, for 64 values each.
#[inline(always)]
fn compare(op: Op, left: &[f64], right: &[f64]) -> u64 {
    #[inline(always)]
    fn bits(left: &[f64], right: &[f64], f: impl Fn(f64, f64) -> bool) -> u64 {
        let mut flags = [false; BLOCK];
        for ((flag, &l), &r) in flags.iter_mut().zip(left).zip(right) {
            *flag = f(l, r);
        }
        flags.iter().enumerate().fold(0, |mask, (i, &f)| mask | u64::from(f) << i)
    }
    match op {
        Op::Lt => bits(left, right, |l, r| l < r),
        Op::Le => bits(left, right, |l, r| l <= r),
        Op::Gt => bits(left, right, |l, r| l > r),
        Op::Ge => bits(left, right, |l, r| l >= r),
        Op::Eq => bits(left, right, |l, r| l == r),
        _ => bits(left, right, |l, r| l != r),
    }
}

/// The bit rows of `rules` (conditions) over the table's bars, one per rule, in parallel.
pub(crate) fn fill_rows(rules: &[Bound], table: &SeriesTable<'_>) -> Vec<u64> {
    let bars = table.bars();
    let words = bars.div_ceil(BLOCK);
    let mut rows = vec![0u64; rules.len() * words];
    rows.par_chunks_mut(words.max(1)).zip(rules).with_min_len(cpu_grain(bars)).for_each(|(row, rule)| {
        Eval::new(rule, table).fill_bits(bars, row);
    });
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::bound::Price;

    #[test]
    fn rolling_extremes_are_the_window_max_and_min_with_nan_in_warm_up() {
        let x = [3.0, f64::NAN, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0];
        let naive = |period: usize, max: bool| -> Vec<f64> {
            (0..x.len())
                .map(|t| {
                    if t + 1 < period {
                        return f64::NAN;
                    }
                    let w = &x[t + 1 - period..=t];
                    if w.iter().any(|v| v.is_nan()) {
                        f64::NAN
                    } else if max {
                        w.iter().copied().fold(f64::MIN, f64::max)
                    } else {
                        w.iter().copied().fold(f64::MAX, f64::min)
                    }
                })
                .collect()
        };
        for period in 1..=5 {
            for max in [true, false] {
                let got = rolling_extreme(&x, period, max);
                let want = naive(period, max);
                assert_eq!(
                    got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "period {period}, max {max}"
                );
            }
        }
    }

    #[test]
    fn constants_fold_and_lookbacks_reach_the_series() {
        let close = || Bound::series(SeriesKey::Price(Price::Close));
        assert_eq!(Bound::binary(Op::Mul, Bound::Const(2.0), Bound::Const(3.0)), Bound::Const(6.0));
        assert_eq!(Bound::choose(Bound::Const(0.0), Bound::Const(1.0), close()), close());
        let shifted = Bound::binary(Op::Sub, close(), Bound::Const(1.0)).ago(2);
        assert_eq!(
            shifted,
            Bound::binary(Op::Sub, Bound::Series(Box::new(SeriesKey::Price(Price::Close)), 2), Bound::Const(1.0))
        );
        assert_eq!(shifted.lookback(), 2);
        // A value in warm-up stays NaN through min and max (f64::min would drop it).
        for op in [Op::Min, Op::Max] {
            assert!(
                matches!(Bound::binary(op, Bound::Const(f64::NAN), Bound::Const(1.0)), Bound::Const(v) if v.is_nan())
            );
        }
    }
}
