//! The CPU reference kernels (f64), one series at a time, writing into caller-owned rows.
//!
//! Each follows TA-Lib's arithmetic (seeding, warm-up, order of operations where it
//! changes the last bits) so that values agree with TA-Lib to about 1e-14. Callers have
//! checked the parameters against the length: every kernel assumes its first value exists.
//! Outputs are pre-filled with NaN by the caller; kernels write from the first value on.

/// Bars between recentrings of a rolling window's sums (see [`rolling_mean_std`]).
const RECENTRE: usize = 128;

/// Rolling mean and population standard deviation over `period`, O(n).
///
/// The window's sums are kept on prices measured from a reference bar, re-chosen (and the
/// sums recomputed) every [`RECENTRE`] bars: the variance `(S2 − S1²/p)/p` then cancels
/// only the local drift, not the price level, so 60,000.00 with cent moves keeps about
/// 1e-12 relative precision (a plain sum of squares, as TA-Lib keeps, loses ~1e-11 on
/// our golden series and more on longer ones). Like TA-Lib, a variance below 1e-14
/// gives a deviation of 0.
pub(crate) fn rolling_mean_std(x: &[f64], period: usize, mean: &mut [f64], mut std: Option<&mut [f64]>) {
    let p = period as f64;
    let (mut reference, mut s1, mut s2) = (0.0, 0.0, 0.0);
    for t in period - 1..x.len() {
        if (t + 1 - period) % RECENTRE == 0 {
            reference = x[t + 1 - period];
            (s1, s2) = x[t + 1 - period..=t].iter().fold((0.0, 0.0), |(s1, s2), v| {
                let d = v - reference;
                (s1 + d, s2 + d * d)
            });
        } else {
            let (incoming, outgoing) = (x[t] - reference, x[t - period] - reference);
            s1 += incoming - outgoing;
            s2 += incoming * incoming - outgoing * outgoing;
        }
        mean[t] = reference + s1 / p;
        if let Some(std) = std.as_deref_mut() {
            let var = (s2 - s1 * s1 / p) / p;
            std[t] = if var < 1e-14 { 0.0 } else { var.sqrt() };
        }
    }
}

/// EMA seeded with the SMA of the first `period` values (first value at `period - 1`),
/// then `ema += (x - ema) * k` with `k = 2 / (period + 1)`, as TA-Lib.
pub(crate) fn ema(x: &[f64], period: usize, out: &mut [f64]) {
    ema_from(x, period, period - 1, out);
}

/// EMA whose SMA seed covers the `period` values ending at `seed_at` (TA-Lib's MACD seeds
/// its fast EMA this way, at the slow EMA's first bar).
fn ema_from(x: &[f64], period: usize, seed_at: usize, out: &mut [f64]) {
    let k = 2.0 / (period as f64 + 1.0);
    let mut prev = x[seed_at + 1 - period..=seed_at].iter().sum::<f64>() / period as f64;
    out[seed_at] = prev;
    for t in seed_at + 1..x.len() {
        prev += (x[t] - prev) * k;
        out[t] = prev;
    }
}

/// True range from bar 1: max(high − low, |high − previous close|, |low − previous close|).
pub(crate) fn true_range(high: &[f64], low: &[f64], close: &[f64], out: &mut [f64]) {
    for t in 1..close.len() {
        out[t] = tr_at(high, low, close, t);
    }
}

#[inline]
fn tr_at(high: &[f64], low: &[f64], close: &[f64], t: usize) -> f64 {
    let prev = close[t - 1];
    (high[t] - low[t]).max((high[t] - prev).abs()).max((low[t] - prev).abs())
}

/// Wilder's ATR: the mean of the first `period` true ranges (bars 1..=period) at bar
/// `period`, then `atr = (atr · (period − 1) + tr) / period`. ATR(1) is the true range.
pub(crate) fn atr(high: &[f64], low: &[f64], close: &[f64], period: usize, out: &mut [f64]) {
    let n = close.len();
    let mut prev = (1..=period).map(|t| tr_at(high, low, close, t)).sum::<f64>() / period as f64;
    out[period] = prev;
    let (p, keep) = (period as f64, (period - 1) as f64);
    for t in period + 1..n {
        prev = (prev * keep + tr_at(high, low, close, t)) / p;
        out[t] = prev;
    }
}

/// Wilder's RSI: average gain and loss over the first `period` changes seed it at bar
/// `period`, then each is smoothed as `(avg · (period − 1) + today) / period`;
/// RSI = 100 · gain / (gain + loss), 0 when both are (about) zero, as TA-Lib.
pub(crate) fn rsi(x: &[f64], period: usize, out: &mut [f64]) {
    let (p, keep) = (period as f64, (period - 1) as f64);
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
    for t in period + 1..x.len() {
        let change = x[t] - x[t - 1];
        gain *= keep;
        loss *= keep;
        if change < 0.0 {
            loss -= change;
        } else {
            gain += change;
        }
        gain /= p;
        loss /= p;
        out[t] = rsi_value(gain, loss);
    }
}

#[inline]
fn rsi_value(gain: f64, loss: f64) -> f64 {
    let total = gain + loss;
    if total.abs() < 1e-14 { 0.0 } else { 100.0 * (gain / total) }
}

/// MACD as TA-Lib aligns it: the slow EMA seeded on the first `slow` values, the fast EMA
/// seeded on the `fast` values ending at the same bar (`slow − 1`), line = fast − slow,
/// signal = EMA(`signal`) of the line seeded from there; all three outputs start at
/// bar `slow + signal − 2`.
pub(crate) fn macd(
    x: &[f64],
    (fast, slow, signal): (usize, usize, usize),
    line: &mut [f64],
    sig: &mut [f64],
    hist: &mut [f64],
) {
    let start = slow - 1;
    ema_from(x, slow, start, sig);
    ema_from(x, fast, start, line);
    for t in start..x.len() {
        line[t] -= sig[t];
    }
    let first = start + signal - 1;
    ema_from(line, signal, first, sig);
    for t in 0..first {
        line[t] = f64::NAN;
        sig[t] = f64::NAN;
    }
    for t in first..x.len() {
        hist[t] = line[t] - sig[t];
    }
}
