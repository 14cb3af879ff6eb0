//! The tables each backtest kernel reads, formed on the host from a signal book and its
//! [`BarTables`] (once per book and device): per-bar prices and prefix sums, the decision
//! bits, the stop series and each stop's entry. backtest.wgsl reads the plain layout,
//! market.wgsl the market one; both read the same sums and bits.

use crate::bar_tables::BarTables;
use crate::book::{SignalBook, Stop};
use rayon::prelude::*;
use threadx_dispatch::GpuError;

/// What one kernel reads of a book, ready to upload.
pub(crate) struct KernelTables {
    /// Per bar: plain, (close bits, log close); market, (close, open) then (high, low).
    /// Plain, then the downside's prefix sums per bar. Then, where an exit at a level pays
    /// other costs, its (exit Σr, exit Σr²) per bar from index `stop_sums` (0: none).
    pub(crate) bars: Vec<[u32; 4]>,
    pub(crate) stop_sums: u32,
    /// Per bar: Σr, Σr², exit Σr, exit Σr² (backtest_common.wgsl's `Sums`).
    pub(crate) sums: Vec<[u32; 16]>,
    /// Entry rows, then exit rows from u32 word `exit_rows`.
    pub(crate) bits: Vec<u64>,
    pub(crate) exit_rows: u32,
    /// Stop series, `bars` f64 values each, and (series, parameter bits, kind) per stop.
    /// Plain, then each entry bar's gain factor from index `gain_at` (and for an exit at a
    /// level from `gain_at_level`, the same index where they do not differ).
    pub(crate) series: Vec<f64>,
    pub(crate) stops: Vec<[u32; 4]>,
    pub(crate) gain_at: u32,
    pub(crate) gain_at_level: u32,
}

impl KernelTables {
    /// The whole-backtest kernel's tables. A book whose prices or stop distances leave
    /// [`EXACT_RANGE`] is [`GpuError::Unsupported`]: the CPU runs it.
    pub(crate) fn plain(book: &SignalBook, tables: &BarTables) -> Result<Self, GpuError> {
        check_exact_range(book)?;
        let bars = book.close().par_iter().zip(&tables.log).map(|(&c, &l)| {
            let [c0, c1] = i64_words(c.to_bits() as i64);
            let [l0, l1] = i64_words(l);
            [c0, c1, l0, l1]
        });
        let mut bars: Vec<[u32; 4]> = bars.collect();
        bars.par_extend(tables.held.par_iter().map(|row| u128_words(row.sums[2])));
        let (mut series, stops) = stop_tables(book)?;
        let index = |len: usize| {
            u32::try_from(len).map_err(|_| GpuError::Unsupported("the stop series exceed the GPU's u32 indices".into()))
        };
        let gain_at = index(series.len())?;
        series.extend(tables.held.iter().map(|row| row.gain));
        let gain_at_level = if tables.stop_exit.is_empty() { gain_at } else { index(series.len())? };
        if !tables.stop_exit.is_empty() {
            series.extend(tables.held.iter().map(|row| row.gain_level));
        }
        let mut t = Self::with_bars(book, tables, bars, series, stops)?;
        (t.gain_at, t.gain_at_level) = (gain_at, gain_at_level);
        Ok(t)
    }

    /// The market kernel's tables: its stops' own series (a fraction stop's level is
    /// formed in the kernel, as the CPU forms it at the entry).
    pub(crate) fn market<'a>(book: &'a SignalBook, tables: &BarTables) -> Result<Self, GpuError> {
        let close = book.close();
        // Books that fill at the close against closes keep no open, high or low: never read.
        let or_close = |row: &'a [f64]| if row.len() == close.len() { row } else { close };
        let (open, high, low) = (or_close(book.open()), or_close(book.high()), or_close(book.low()));
        let bars = (0..close.len())
            .into_par_iter()
            .flat_map_iter(|t| {
                let words = |a: f64, b: f64| {
                    let [a0, a1] = i64_words(a.to_bits() as i64);
                    let [b0, b1] = i64_words(b.to_bits() as i64);
                    [a0, a1, b0, b1]
                };
                [words(close[t], open[t]), words(high[t], low[t])]
            })
            .collect();
        let mut series: Vec<f64> = book.stop_rows().flatten().copied().collect();
        if series.is_empty() {
            series.push(0.0);
        }
        let mut stops: Vec<[u32; 4]> = book
            .stops()
            .iter()
            .map(|&stop| {
                let (param, kind) = match stop {
                    Stop::Distance { mult, .. } => (mult, 0),
                    Stop::Level { .. } => (0.0, 1),
                    Stop::Fraction { sign, .. } => (sign, 2),
                    Stop::Scaled { mult, .. } => (mult, 3),
                };
                let [p0, p1] = i64_words(param.to_bits() as i64);
                [stop.series(), p0, p1, kind]
            })
            .collect();
        if stops.is_empty() {
            stops.push([0; 4]);
        }
        Self::with_bars(book, tables, bars, series, stops)
    }

    /// The tables both kernels share, around `bars`.
    fn with_bars(
        book: &SignalBook,
        tables: &BarTables,
        mut bars: Vec<[u32; 4]>,
        series: Vec<f64>,
        stops: Vec<[u32; 4]>,
    ) -> Result<Self, GpuError> {
        let sums: Vec<[u32; 16]> = (0..book.bars())
            .into_par_iter()
            .map(|t| {
                let mut s = [0u32; 16];
                let [held1, held2, _] = tables.held_sums(t);
                let [exit1, exit2, _] = tables.exit_sums(t, false);
                for (i, v) in [held1, held2, exit1, exit2].into_iter().enumerate() {
                    s[i * 4..][..4].copy_from_slice(&u128_words(v));
                }
                s
            })
            .collect();
        // Where an exit at a level pays other costs (slippage, and stops), its exit terms
        // per bar follow the bars' own entries (one more binding would pass the 8 storage
        // buffers every adapter allows).
        let stop_sums = if tables.stop_exit.is_empty() {
            0
        } else {
            u32::try_from(bars.len())
                .map_err(|_| GpuError::Unsupported("the bar tables exceed the GPU's u32 indices".into()))?
        };
        if stop_sums != 0 {
            bars.par_extend((0..book.bars()).into_par_iter().flat_map_iter(|t| {
                let [exit1, exit2, _] = tables.exit_sums(t, true);
                [u128_words(exit1), u128_words(exit2)]
            }));
        }
        let mut bits: Vec<u64> = book.entry_rows().to_vec();
        let exit_rows = u32::try_from(bits.len() * 2)
            .map_err(|_| GpuError::Unsupported("the decision rows exceed the GPU's u32 indices".into()))?;
        bits.extend_from_slice(book.exit_rows());
        Ok(Self { bars, stop_sums, sums, bits, exit_rows, series, stops, gain_at: 0, gain_at_level: 0 })
    }
}

/// A u128 from its four u32 words, least significant first.
pub(crate) fn u128_of(w: &[u32]) -> u128 {
    w.iter().rev().fold(0u128, |acc, &x| acc << 32 | u128::from(x))
}

pub(crate) fn i64_words(x: i64) -> [u32; 2] {
    [x as u32, (x as u64 >> 32) as u32]
}

pub(crate) fn u128_words(x: u128) -> [u32; 4] {
    [x as u32, (x >> 32) as u32, (x >> 64) as u32, (x >> 96) as u32]
}

/// The f64 range in which the kernel's integer stop arithmetic sees only normal numbers
/// (prices, ATR × multiplier); books outside it run on the CPU.
const EXACT_RANGE: std::ops::RangeInclusive<f64> = 1e-270..=1e270;

/// The greatest ratio of a plain book's closes: a trade's return stays under 2^31, its
/// units under 2^95, where the kernel's `square_units` is exact (fixed.rs::square_units).
const MAX_PRICE_RATIO: f64 = 2_147_483_648.0;

/// The stops' tables as the kernel reads them: every stop series (the book's, then the
/// levels of its fraction stops, formed once per series and sign on the host as the CPU
/// forms them) and each stop's entry. WGSL arrays cannot be empty: a book without stops
/// gets one unused series and stop.
fn stop_tables(book: &SignalBook) -> Result<(Vec<f64>, Vec<[u32; 4]>), GpuError> {
    let mut atr: Vec<f64> = book.stop_rows().flatten().copied().collect();
    let mut series_count = book.stop_rows().len() as u32;
    // Fraction stops' levels, formed once per (series, sign).
    let mut formed: std::collections::HashMap<(u32, u64), u32> = std::collections::HashMap::new();
    let mut stops: Vec<[u32; 4]> = Vec::with_capacity(book.stops().len());
    for (index, &stop) in book.stops().iter().enumerate() {
        stops.push(match stop {
            Stop::Distance { series, mult } => {
                let [m0, m1] = i64_words(mult.to_bits() as i64);
                [series, m0, m1, 0]
            }
            Stop::Level { series } => [series, 0, 0, 1],
            // Trails only: a plain book has none.
            Stop::Scaled { .. } => return Err(GpuError::Unsupported("the kernel does not trail stops".into())),
            Stop::Fraction { series, sign } => {
                // The CPU's levels, formed on the host: a level series of their own.
                let level_series = *formed.entry((series, sign.to_bits())).or_insert_with(|| {
                    let rule = book.stop(index as u32).expect("a stop of the book");
                    atr.extend(book.close().iter().enumerate().map(|(e, &c)| rule.level(e, c)));
                    series_count += 1;
                    series_count - 1
                });
                [level_series, 0, 0, 1]
            }
        });
    }
    if atr.is_empty() {
        atr.push(0.0);
    }
    if stops.is_empty() {
        stops.push([0; 4]);
    }
    Ok((atr, stops))
}

/// Refuses books whose stop arithmetic would meet subnormal or infinite values: closes
/// outside [`EXACT_RANGE`], or an ATR × multiplier product leaving it. (A level stop is
/// compared as it is, with no arithmetic.)
fn check_exact_range(book: &SignalBook) -> Result<(), GpuError> {
    let outside = |what: &str, v: f64| {
        GpuError::Unsupported(format!(
            "{what} {v:e} is outside the range of the GPU's exact stop arithmetic ({:e} to {:e})",
            EXACT_RANGE.start(),
            EXACT_RANGE.end()
        ))
    };
    let (lo, hi) = min_max(book.close().iter().copied());
    for v in [lo, hi] {
        if !EXACT_RANGE.contains(&v) {
            return Err(outside("the price", v));
        }
    }
    if hi / lo > MAX_PRICE_RATIO {
        return Err(GpuError::Unsupported(format!(
            "the prices span a ratio of {:e}, past the {MAX_PRICE_RATIO:e} within which the GPU forms a trade's return exactly",
            hi / lo
        )));
    }
    let distances: Vec<(u32, f64)> = book
        .stops()
        .iter()
        .filter_map(|&stop| match stop {
            Stop::Distance { series, mult } if mult > 0.0 => Some((series, mult)),
            _ => None,
        })
        .collect();
    if distances.is_empty() {
        return Ok(());
    }
    let (m_lo, m_hi) = min_max(distances.iter().map(|&(_, m)| m));
    if m_lo < f64::MIN_POSITIVE {
        return Err(outside("the multiplier", m_lo));
    }
    let mut series: Vec<u32> = distances.iter().map(|&(s, _)| s).collect();
    series.sort_unstable();
    series.dedup();
    let rows: Vec<&[f64]> = book.stop_rows().collect();
    for row in series.into_iter().map(|s| rows[s as usize]) {
        let (a_lo, a_hi) = min_max(row.iter().copied().filter(|&a| a > 0.0));
        for product in [a_lo * m_lo, a_hi * m_hi] {
            if product.is_finite() && !EXACT_RANGE.contains(&product) {
                return Err(outside("the stop distance (ATR × atr_mult)", product));
            }
        }
    }
    Ok(())
}

/// The least and greatest of `values` (NaN skipped); (∞, −∞) when there are none.
fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}
