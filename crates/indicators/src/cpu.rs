//! The CPU reference kernels (f64), one series at a time, writing into caller-owned rows.
//!
//! Each follows TA-Lib's arithmetic (seeding, warm-up, order of operations where it
//! changes the last bits) so that values agree with TA-Lib to about 1e-14. Callers have
//! checked the parameters against the length: every kernel assumes its first value exists.
//! Callers fill the warm-up with NaN; kernels write from the first value on.

use std::cell::Cell;
use std::ops::Range;

/// Bars after which a rolling window's sums are recomputed anyway, so that rounding
/// cannot accumulate without bound along very long series.
const REFRESH: usize = 4096;
/// How far (in squared deviations) the window's mean may wander from the reference
/// before the sums are recentred: cancellation then costs at most this factor.
const WANDER: f64 = 16.0;

/// Rolling mean and population standard deviation over `period`, O(n).
///
/// The window's sums S1, S2 are kept on prices measured from a reference (the window's
/// mean when last recentred), so the variance `(S2 − S1²/p)/p` cancels only how far the
/// mean has wandered since, never the price level: 60,000.00 with cent moves keeps about
/// 1e-12 relative precision (a plain sum of squares, as TA-Lib keeps, loses ~1e-11 on our
/// golden series and more on longer ones). The sums are recentred when the mean wanders
/// more than four deviations (rare: a trend or a gap), and every [`REFRESH`] bars.
/// Like TA-Lib, a variance below 1e-14 gives a deviation of 0.
pub(crate) fn rolling_mean_std(x: &[f64], period: usize, mean: &mut [f64], mut std: Option<&mut [f64]>) {
    let p = period as f64;
    let inv = 1.0 / p;
    let (mut reference, mut s1, mut s2) = centred_sums(&x[..period]);
    let mut write = |t: usize, reference: f64, s1: f64, spread: f64| {
        mean[t] = reference + s1 * inv;
        if let Some(std) = std.as_deref_mut() {
            let var = spread * inv;
            std[t] = if var < 1e-14 { 0.0 } else { var.sqrt() };
        }
    };
    write(period - 1, reference, s1, s2 - s1 * s1 * inv);
    let mut refresh_at = period + REFRESH;
    for t in period..x.len() {
        let (incoming, outgoing) = (x[t] - reference, x[t - period] - reference);
        s1 += incoming - outgoing;
        s2 += incoming * incoming - outgoing * outgoing;
        let square = s1 * s1;
        // p · variance; the mean has wandered from the reference by square / p².
        let mut spread = s2 - square * inv;
        if (square > WANDER * p * spread && s1.abs() > p * 1e-12 * reference.abs()) || t == refresh_at {
            (reference, s1, s2) = centred_sums(&x[t + 1 - period..=t]);
            spread = s2 - s1 * s1 * inv;
            refresh_at = t + REFRESH;
        }
        write(t, reference, s1, spread);
    }
}

/// The mean of `window`, and the sums of the deviations from it and of their squares.
fn centred_sums(window: &[f64]) -> (f64, f64, f64) {
    let m = window.iter().sum::<f64>() / window.len() as f64;
    let (s1, s2) = window.iter().fold((0.0, 0.0), |(s1, s2), v| (s1 + (v - m), s2 + (v - m) * (v - m)));
    (m, s1, s2)
}

/// `y[t] = a · y[t−1] + b(t)` over `range`, from `y` (the value before it), handing each
/// `y[t]` to `emit`. Blocked by four bars so that the dependency chain
/// through `y` is one multiply-add per four bars instead of one per bar: the recursive
/// indicators then run at the speed of arithmetic, not of latency. Rounding differs from
/// the one-bar form by a few ulps, which the contraction (|a| < 1) keeps from growing.
#[inline(always)]
fn recurrence(mut y: f64, a: f64, range: Range<usize>, b: impl Fn(usize) -> f64, mut emit: impl FnMut(usize, f64)) {
    let (a2, a3) = (a * a, a * a * a);
    let a4 = a2 * a2;
    let mut t = range.start;
    while t + 4 <= range.end {
        let (b1, b2, b3, b4) = (b(t), b(t + 1), b(t + 2), b(t + 3));
        let c2 = a * b1 + b2;
        let c3 = a * c2 + b3;
        let c4 = a * c3 + b4;
        emit(t, a * y + b1);
        emit(t + 1, a2 * y + c2);
        emit(t + 2, a3 * y + c3);
        y = a4 * y + c4;
        emit(t + 3, y);
        t += 4;
    }
    while t < range.end {
        y = a * y + b(t);
        emit(t, y);
        t += 1;
    }
}

/// EMA seeded with the SMA of the first `period` values (first value at `period − 1`),
/// then `ema = (1 − k) · ema + k · x` with `k = 2 / (period + 1)`, as TA-Lib.
pub(crate) fn ema(x: &[f64], period: usize, out: &mut [f64]) {
    let k = 2.0 / (period as f64 + 1.0);
    let seed = x[..period].iter().sum::<f64>() / period as f64;
    out[period - 1] = seed;
    recurrence(seed, 1.0 - k, period..x.len(), |t| k * x[t], |t, v| out[t] = v);
}

/// True range from bar 1: max(high − low, |high − previous close|, |low − previous close|).
pub(crate) fn true_range(high: &[f64], low: &[f64], close: &[f64], out: &mut [f64]) {
    let bars = high[1..].iter().zip(&low[1..]).zip(close);
    for (o, ((h, l), prev)) in out[1..].iter_mut().zip(bars) {
        *o = (h - l).max((h - prev).abs()).max((l - prev).abs());
    }
}

/// Wilder's ATR: the mean of the first `period` true ranges (bars 1..=period) at bar
/// `period`, then `atr = (atr · (period − 1) + tr) / period`. ATR(1) is the true range.
pub(crate) fn atr(high: &[f64], low: &[f64], close: &[f64], period: usize, out: &mut [f64]) {
    // True ranges first (a vectorised pass), then smoothed in place.
    true_range(high, low, close, out);
    let p = period as f64;
    let seed = out[1..=period].iter().sum::<f64>() / p;
    out[..period].fill(f64::NAN);
    out[period] = seed;
    let inv = 1.0 / p;
    let cells = Cell::from_mut(out).as_slice_of_cells();
    let b = |t: usize| cells[t].get() * inv;
    recurrence(seed, (p - 1.0) * inv, period + 1..cells.len(), b, |t, v| cells[t].set(v));
}

/// Wilder's RSI: average gain and loss over the first `period` changes seed it at bar
/// `period`, then each is smoothed as `(avg · (period − 1) + today) / period`;
/// RSI = 100 · gain / (gain + loss), 0 when both are (about) zero, as TA-Lib.
pub(crate) fn rsi(x: &[f64], period: usize, out: &mut [f64]) {
    let p = period as f64;
    let (mut gain, mut loss) = (0.0, 0.0);
    for t in 1..=period {
        let change = x[t] - x[t - 1];
        if change < 0.0 {
            loss -= change;
        } else {
            gain += change;
        }
    }
    gain /= p;
    loss /= p;
    out[period] = rsi_value(gain, loss);
    let inv = 1.0 / p;
    let a = (p - 1.0) * inv;
    let range = period + 1..x.len();
    // Gains first, parked in `out`; the losses' pass turns them into the RSI.
    recurrence(gain, a, range.clone(), |t| (x[t] - x[t - 1]).max(0.0) * inv, |t, g| out[t] = g);
    recurrence(loss, a, range, |t| (x[t - 1] - x[t]).max(0.0) * inv, |t, l| out[t] = rsi_value(out[t], l));
}

#[inline(always)]
fn rsi_value(gain: f64, loss: f64) -> f64 {
    let total = gain + loss;
    if total.abs() < 1e-14 { 0.0 } else { 100.0 * (gain / total) }
}

/// MACD as TA-Lib aligns it: the slow EMA seeded on the first `slow` values, the fast EMA
/// seeded on the `fast` values ending at the same bar (`slow − 1`), line = fast − slow,
/// signal = EMA(`signal`) of the line seeded from there; all three outputs start at
/// bar `slow + signal − 2`. TA-Lib's own update `(x − ema) · k + ema` is kept here, bit
/// for bit, because the signal crosses zero, where any other rounding shows as relative
/// error; the three recursions share one pass so that their latencies overlap.
pub(crate) fn macd(
    x: &[f64],
    (fast, slow, signal): (usize, usize, usize),
    line: &mut [f64],
    sig: &mut [f64],
    hist: &mut [f64],
) {
    let k = |period: usize| 2.0 / (period as f64 + 1.0);
    let (k_fast, k_slow, k_signal) = (k(fast), k(slow), k(signal));
    let start = slow - 1;
    let mut slow_ema = x[..slow].iter().sum::<f64>() / slow as f64;
    let mut fast_ema = x[slow - fast..slow].iter().sum::<f64>() / fast as f64;
    let first = start + signal - 1;
    let mut sum = fast_ema - slow_ema;
    for &v in &x[start + 1..=first] {
        fast_ema += (v - fast_ema) * k_fast;
        slow_ema += (v - slow_ema) * k_slow;
        sum += fast_ema - slow_ema;
    }
    line[first] = fast_ema - slow_ema;
    let mut s = sum / signal as f64;
    sig[first] = s;
    hist[first] = line[first] - s;
    for t in first + 1..x.len() {
        fast_ema += (x[t] - fast_ema) * k_fast;
        slow_ema += (x[t] - slow_ema) * k_slow;
        let l = fast_ema - slow_ema;
        s += (l - s) * k_signal;
        line[t] = l;
        sig[t] = s;
        hist[t] = l - s;
    }
}
