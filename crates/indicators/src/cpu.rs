//! The CPU reference kernels (f64), one series at a time, writing into caller-owned rows.
//!
//! Each follows TA-Lib's definitions (seeding, warm-up, and the order of operations where
//! it changes the last bits) so that values agree with TA-Lib to about 1e-14. Callers have
//! checked the parameters against the length: every kernel assumes its first value exists.
//! Rows come with the warm-up already NaN and the rest unwritten (not even zeroed, which
//! would cost as much as a cheap indicator): a kernel writes every bar from its first
//! value on (see [`IndicatorValues::build`](crate::indicator::IndicatorValues::build)).
//!
//! Speed comes from short dependency chains, not from threads: the recursive indicators
//! advance four bars per step of their chain ([`Recurrence`]), and the rolling windows add
//! four bars' changes at once ([`rolling`]). Every loop reads and writes each array once.

use std::mem::MaybeUninit;

/// An output row: bars before the kernel's first value are written (NaN), the rest not yet.
pub(crate) type Row<'a> = &'a mut [MaybeUninit<f64>];

/// Bars after which a rolling window's sums are recomputed anyway, so that rounding
/// cannot accumulate without bound along very long series.
const REFRESH: usize = 4096;
/// How far (in squared deviations) the window's mean may wander from the reference
/// before the sums are recentred: cancellation then costs at most this factor.
const WANDER: f64 = 64.0;

/// Writes `values` into `row` from bar `t` on.
#[inline(always)]
pub(crate) fn put(row: &mut [MaybeUninit<f64>], t: usize, values: &[f64]) {
    for (slot, &v) in row[t..t + values.len()].iter_mut().zip(values) {
        slot.write(v);
    }
}

/// `[f(0), f(1), …]`, as a loop the compiler unrolls: `array::map` and `from_fn` are not
/// always inlined, and a call per bar costs more than the bar.
#[inline(always)]
fn each<const N: usize>(f: impl Fn(usize) -> f64) -> [f64; N] {
    let mut values = [0.0; N];
    for (i, v) in values.iter_mut().enumerate() {
        *v = f(i);
    }
    values
}

/// The smaller of two numbers (neither is NaN here): one instruction, where `f64::min`
/// spends several on NaN rules.
#[inline(always)]
fn smaller(a: f64, b: f64) -> f64 {
    if b < a { b } else { a }
}

/// The larger of two numbers (neither is NaN here), in one instruction.
#[inline(always)]
fn larger(a: f64, b: f64) -> f64 {
    if b > a { b } else { a }
}

/// Rolling mean and (with `STD`) population standard deviation over `period`, O(n),
/// handed to `emit(t, means, deviations)` a few bars at a time from bar `period − 1`
/// (`deviations` is empty without `STD`).
///
/// The window's sums S1, S2 are kept on prices measured from a reference (the window's
/// mean when last recentred), so the variance `(S2 − S1²/p)/p` cancels only how far the
/// mean has wandered since, never the price level: 60,000.00 with cent moves keeps about
/// 1e-12 relative precision (a plain sum of squares, as TA-Lib keeps, loses ~1e-11 on our
/// golden series and more on longer ones). The sums are recentred when the mean wanders
/// more than eight deviations (rare: a trend or a gap), and every [`REFRESH`] bars.
/// Like TA-Lib, a variance below 1e-14 gives a deviation of 0.
///
/// Four bars' changes are summed among themselves before they meet the running sums, so
/// the loop-carried chain is one addition per four bars.
///
/// A price far above the one before it (a bad tick: 1e20 among prices of 40,000) leaves
/// rounding error of its own size in the running sums, and `inf − inf` if its square
/// overflows; so the first bar whose window no longer holds it takes its sums afresh from
/// the window, and its values, and all after, are the window's again.
pub(crate) fn rolling<const STD: bool>(x: &[f64], period: usize, mut emit: impl FnMut(usize, &[f64], &[f64])) {
    let mut window = Window::new(x, period);
    let first = window.finish::<1, STD>([window.s1], [window.s2]);
    emit(period - 1, &first.mean, if STD { &first.dev } else { &[] });
    let mut refresh_at = period + REFRESH;
    // The first bar whose window holds none of the spikes seen so far (0: none seen).
    let mut clean_at = (1..period).filter(|&j| spike(x, j)).map(|j| j + period).max().unwrap_or(0);
    let mut t = period;
    while t + 4 <= x.len() {
        if let Some(j) = (t..t + 4).rev().find(|&j| spike(x, j)) {
            clean_at = j + period;
        }
        if (t..t + 4).contains(&clean_at) {
            // Bar by bar, the one that loses the spike from fresh sums.
            for u in t..t + 4 {
                window.step::<STD>(u, u == clean_at, &mut emit);
            }
            refresh_at = t + REFRESH;
            t += 4;
            continue;
        }
        let mut block = window.block::<4, STD>(t);
        if block.wandered || t >= refresh_at {
            window.recentre(t);
            refresh_at = t + REFRESH;
            block = window.block::<4, STD>(t);
        }
        if block.wandered {
            // Rare (a window of near-equal prices): bar by bar, recentring each.
            for t in t..t + 4 {
                window.step::<STD>(t, false, &mut emit);
            }
        } else {
            (window.s1, window.s2) = (block.s1[3], block.s2[3]);
            emit(t, &block.mean, if STD { &block.dev } else { &[] });
        }
        t += 4;
    }
    for t in t..x.len() {
        if spike(x, t) {
            clean_at = t + period;
        }
        window.step::<STD>(t, t == clean_at, &mut emit);
    }
}

/// Whether bar `j` is more than 16 times the bar before it: a spike whose rounding would
/// outlast it in running sums.
#[inline(always)]
fn spike(x: &[f64], j: usize) -> bool {
    j > 0 && x[j].abs() > 16.0 * x[j - 1].abs()
}

/// The sum of `f` over `values` in four independent lanes (a fourth of the latency).
#[inline(always)]
fn lanes(values: &[f64], f: impl Fn(f64) -> f64) -> f64 {
    let (blocks, rest) = values.as_chunks::<4>();
    let mut sum = [0.0; 4];
    for block in blocks {
        for i in 0..4 {
            sum[i] += f(block[i]);
        }
    }
    (sum[0] + sum[1]) + (sum[2] + sum[3]) + rest.iter().map(|&v| f(v)).sum::<f64>()
}

/// A rolling window's state: sums of the deviations from `reference` and of their squares.
struct Window<'a> {
    x: &'a [f64],
    period: usize,
    inv: f64,
    /// `WANDER · period` and `1 + WANDER`, for the wander test.
    wander_p: f64,
    wander_1: f64,
    reference: f64,
    /// Below this square of S1 the mean has not wandered, whatever the variance: the
    /// window is flat to 1e-12 of the price level.
    floor: f64,
    s1: f64,
    s2: f64,
}

/// A few bars' sums and what they give.
struct Block<const M: usize> {
    s1: [f64; M],
    s2: [f64; M],
    mean: [f64; M],
    dev: [f64; M],
    /// Whether the mean wandered so far from the reference, somewhere in the block, that
    /// the variance would lose digits to cancellation.
    wandered: bool,
}

impl<'a> Window<'a> {
    fn new(x: &'a [f64], period: usize) -> Self {
        let inv = 1.0 / period as f64;
        let (wander_p, wander_1) = (WANDER * period as f64, 1.0 + WANDER);
        let mut window = Window { x, period, inv, wander_p, wander_1, reference: 0.0, floor: 0.0, s1: 0.0, s2: 0.0 };
        window.recentre(period);
        window
    }

    /// Recomputes the sums on the window that ends just before bar `t`, around its mean.
    /// (Inlined, like every method here, so that the state stays in registers.)
    #[inline(always)]
    fn recentre(&mut self, t: usize) {
        let window = &self.x[t - self.period..t];
        let m = lanes(window, |v| v) * self.inv;
        self.reference = m;
        // A plain product: powi may be a platform library call, and results must not be.
        let floor = self.period as f64 * 1e-12 * m;
        self.floor = floor * floor;
        self.s1 = lanes(window, |v| v - m);
        self.s2 = lanes(window, |v| (v - m) * (v - m));
    }

    /// Bars `t..t + M` (not taken: the caller may redo the block after recentring).
    /// The bars' changes are summed among themselves before they meet the running sums.
    #[inline(always)]
    fn block<const M: usize, const STD: bool>(&self, t: usize) -> Block<M> {
        let (incoming, outgoing) = (&self.x[t..t + M], &self.x[t - self.period..t - self.period + M]);
        let (mut s1, mut s2) = ([0.0; M], [0.0; M]);
        let (mut c1, mut c2) = (0.0, 0.0);
        for i in 0..M {
            let (a, b) = (incoming[i] - self.reference, outgoing[i] - self.reference);
            c1 += a - b;
            s1[i] = self.s1 + c1;
            if STD {
                c2 += (a - b) * (a + b);
                s2[i] = self.s2 + c2;
            }
        }
        self.finish::<M, STD>(s1, s2)
    }

    /// Means, deviations and the wander test from the sums.
    #[inline(always)]
    fn finish<const M: usize, const STD: bool>(&self, s1: [f64; M], s2: [f64; M]) -> Block<M> {
        let (mut mean, mut dev, mut wandered) = ([0.0; M], [0.0; M], false);
        for i in 0..M {
            mean[i] = self.reference + s1[i] * self.inv;
            if STD {
                let square = s1[i] * s1[i];
                // square / p > WANDER · (S2 − square / p), without the subtraction.
                wandered |= (square * self.wander_1 > self.wander_p * s2[i]) & (square > self.floor);
                let var = (s2[i] - square * self.inv) * self.inv;
                dev[i] = if var < 1e-14 { 0.0 } else { var.sqrt() };
            }
        }
        Block { s1, s2, mean, dev, wandered }
    }

    /// Takes bar `t` alone, recentring on its window if the mean wandered or `fresh` asks.
    #[inline(always)]
    fn step<const STD: bool>(&mut self, t: usize, fresh: bool, emit: &mut impl FnMut(usize, &[f64], &[f64])) {
        let mut bar = self.block::<1, STD>(t);
        if bar.wandered || fresh {
            self.recentre(t + 1);
            bar = self.finish::<1, STD>([self.s1], [self.s2]);
        }
        (self.s1, self.s2) = (bar.s1[0], bar.s2[0]);
        emit(t, &bar.mean, if STD { &bar.dev } else { &[] });
    }
}

/// Bars per step of a recurrence's dependency chain.
const STEP: usize = 4;

/// `y[t] = a · y[t−1] + b(t)`, [`STEP`] bars at a time: the dependency chain through `y`
/// is one multiply-add per step instead of one per bar, so the recursive indicators run
/// at the speed of arithmetic, not of latency. Rounding differs from the one-bar form by
/// a few ulps, which the contraction (|a| < 1) keeps from growing.
#[derive(Clone, Copy)]
struct Recurrence {
    /// a¹ … a^STEP.
    powers: [f64; STEP],
}

impl Recurrence {
    fn new(a: f64) -> Self {
        let mut powers = [a; STEP];
        for k in 1..STEP {
            powers[k] = powers[k - 1] * a;
        }
        Recurrence { powers }
    }

    /// The [`STEP`] values after `y`, given their inputs `b`: y_k = a^k · y + c_k, where
    /// c_k = a · c_{k−1} + b_k does not wait for `y`.
    #[inline(always)]
    fn step(self, y: f64, b: [f64; STEP]) -> [f64; STEP] {
        let a = self.powers[0];
        let mut c = b[0];
        let mut values = [a * y + c; STEP];
        for k in 1..STEP {
            c = a * c + b[k];
            values[k] = self.powers[k] * y + c;
        }
        values
    }

    #[inline(always)]
    fn one(self, y: f64, b: f64) -> f64 {
        self.powers[0] * y + b
    }
}

/// Runs `recurrence` from `y` (the value before `out`'s first bar) through `out`: whole
/// steps take their inputs from `steps`, the bars after the last whole step from `rest`.
#[inline(always)]
fn run(
    recurrence: Recurrence,
    mut y: f64,
    out: Row,
    steps: impl Iterator<Item = [f64; STEP]>,
    rest: impl Iterator<Item = f64>,
) {
    let (out_steps, out_rest) = out.as_chunks_mut::<STEP>();
    for (slots, b) in out_steps.iter_mut().zip(steps) {
        let values = recurrence.step(y, b);
        put(slots, 0, &values);
        y = values[STEP - 1];
    }
    for (slot, b) in out_rest.iter_mut().zip(rest) {
        y = recurrence.one(y, b);
        slot.write(y);
    }
}

/// EMA seeded with the SMA of the first `period` values (first value at `period − 1`),
/// then `ema = (1 − k) · ema + k · x` with `k = 2 / (period + 1)`, as TA-Lib.
pub(crate) fn ema(x: &[f64], period: usize, out: Row) {
    let k = 2.0 / (period as f64 + 1.0);
    let seed = x[..period].iter().sum::<f64>() / period as f64;
    out[period - 1].write(seed);
    let (steps, rest) = x[period..].as_chunks::<STEP>();
    let steps = steps.iter().map(|x| each(|i| k * x[i]));
    run(Recurrence::new(1.0 - k), seed, &mut out[period..], steps, rest.iter().map(|&x| k * x));
}

/// The true range of a bar: max(high − low, |high − previous close|, |low − previous
/// close|), computed as max(high, previous close) − min(low, previous close), which is
/// the same number (high ≥ low; rounding is monotonic) with half the operations.
#[inline(always)]
fn range(high: f64, low: f64, previous_close: f64) -> f64 {
    larger(high, previous_close) - smaller(low, previous_close)
}

/// True range from bar 1.
pub(crate) fn true_range(high: &[f64], low: &[f64], close: &[f64], out: Row) {
    let bars = high[1..].iter().zip(&low[1..]).zip(close);
    for (slot, ((&h, &l), &prev)) in out[1..].iter_mut().zip(bars) {
        slot.write(range(h, l, prev));
    }
}

/// Wilder's ATR: the mean of the first `period` true ranges (bars 1..=period) at bar
/// `period`, then `atr = (atr · (period − 1) + tr) / period`. ATR(1) is the true range.
/// The true ranges are made as the recurrence consumes them, in one pass.
pub(crate) fn atr(high: &[f64], low: &[f64], close: &[f64], period: usize, out: Row) {
    let p = period as f64;
    let seed = (1..=period).map(|t| range(high[t], low[t], close[t - 1])).sum::<f64>() / p;
    out[period].write(seed);
    let inv = 1.0 / p;
    let from = period + 1;
    let bars = (&high[from..], &low[from..], &close[from - 1..close.len() - 1]);
    let ((hs, h1), (ls, l1), (cs, c1)) =
        (bars.0.as_chunks::<STEP>(), bars.1.as_chunks::<STEP>(), bars.2.as_chunks::<STEP>());
    let steps = hs.iter().zip(ls).zip(cs).map(|((h, l), c)| each(|i| inv * range(h[i], l[i], c[i])));
    let rest = h1.iter().zip(l1).zip(c1).map(|((&h, &l), &c)| inv * range(h, l, c));
    run(Recurrence::new((p - 1.0) * inv), seed, &mut out[from..], steps, rest);
}

/// Wilder's RSI: average gain and loss over the first `period` changes seed it at bar
/// `period`, then each is smoothed as `(avg · (period − 1) + today) / period`;
/// RSI = 100 · gain / (gain + loss), 0 when both are (about) zero, as TA-Lib. Gains and
/// losses advance side by side, four bars at a time.
pub(crate) fn rsi(x: &[f64], period: usize, out: Row) {
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
    out[period].write(rsi_value(gain, loss));
    let inv = 1.0 / p;
    let recurrence = Recurrence::new((p - 1.0) * inv);
    let mut t = period + 1;
    while t + STEP <= x.len() {
        let (now, before) = (&x[t..t + STEP], &x[t - 1..t + STEP - 1]);
        let gains = recurrence.step(gain, each(|i| larger(now[i] - before[i], 0.0) * inv));
        let losses = recurrence.step(loss, each(|i| larger(before[i] - now[i], 0.0) * inv));
        put(out, t, &each::<STEP>(|i| rsi_value(gains[i], losses[i])));
        (gain, loss) = (gains[STEP - 1], losses[STEP - 1]);
        t += STEP;
    }
    for t in t..x.len() {
        gain = recurrence.one(gain, larger(x[t] - x[t - 1], 0.0) * inv);
        loss = recurrence.one(loss, larger(x[t - 1] - x[t], 0.0) * inv);
        out[t].write(rsi_value(gain, loss));
    }
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
pub(crate) fn macd(x: &[f64], (fast, slow, signal): (usize, usize, usize), line: Row, sig: Row, hist: Row) {
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
    let mut l = fast_ema - slow_ema;
    let mut s = sum / signal as f64;
    line[first].write(l);
    sig[first].write(s);
    hist[first].write(l - s);
    let outputs = line[first + 1..].iter_mut().zip(&mut sig[first + 1..]).zip(&mut hist[first + 1..]);
    for (((line, sig), hist), &v) in outputs.zip(&x[first + 1..]) {
        fast_ema += (v - fast_ema) * k_fast;
        slow_ema += (v - slow_ema) * k_slow;
        l = fast_ema - slow_ema;
        s += (l - s) * k_signal;
        line.write(l);
        sig.write(s);
        hist.write(l - s);
    }
}

/// TA-Lib's CCI over the typical price tp = (high + low + close) / 3: at each bar from
/// `period − 1`, the window's mean and mean absolute deviation, each summed in TA-Lib's
/// circular-buffer order (bar b in slot b mod period), and (tp − mean) / (0.015 · mean
/// deviation); 0 where either is 0. O(bars · period), as TA-Lib.
pub(crate) fn cci(high: &[f64], low: &[f64], close: &[f64], period: usize, out: Row) {
    let tp: Vec<f64> = high.iter().zip(low).zip(close).map(|((&h, &l), &c)| (h + l + c) / 3.0).collect();
    let p = period as f64;
    for t in period - 1..tp.len() {
        let start = t + 1 - period;
        // The window's bars in slot order: slot j holds the bar ≡ j (mod period).
        let first = (period - start % period) % period;
        let slots = tp[start + first..=t].iter().chain(&tp[start..start + first]);
        let mean = slots.clone().sum::<f64>() / p;
        let deviation = slots.map(|&v| (v - mean).abs()).sum::<f64>();
        let gap = tp[t] - mean;
        out[t].write(if gap != 0.0 && deviation != 0.0 { gap / (0.015 * (deviation / p)) } else { 0.0 });
    }
}

/// TA-Lib's OBV: the first bar's volume, then the volume added on a close above the one
/// before and taken on one below.
pub(crate) fn obv(close: &[f64], volume: &[f64], out: Row) {
    let mut total = volume[0];
    out[0].write(total);
    for t in 1..close.len() {
        if close[t] > close[t - 1] {
            total += volume[t];
        } else if close[t] < close[t - 1] {
            total -= volume[t];
        }
        out[t].write(total);
    }
}

/// TA-Lib's test of a smoothed sum against zero.
#[inline(always)]
fn is_zero(v: f64) -> bool {
    -0.000_000_01 < v && v < 0.000_000_01
}

/// Wilder's directional movement as TA-Lib forms it for PLUS_DI, MINUS_DI and ADX: the
/// raw +DM, −DM and true range summed over bars 1..period, then smoothed from bar
/// `period` on as `s − s / period + today`; `emit(t, +DM, −DM, TR)` gets each bar's
/// smoothed values from bar `period` on. A bar's move counts for one side at most: −DM
/// when the low fell more than the high rose, +DM when the high rose more.
fn directional(high: &[f64], low: &[f64], close: &[f64], period: usize, mut emit: impl FnMut(usize, f64, f64, f64)) {
    let p = period as f64;
    let (mut plus, mut minus, mut tr) = (0.0, 0.0, 0.0);
    for t in 1..high.len() {
        let (up, down) = (high[t] - high[t - 1], low[t - 1] - low[t]);
        let range = range(high[t], low[t], close[t - 1]);
        if t >= period {
            plus -= plus / p;
            minus -= minus / p;
            tr = tr - tr / p + range;
        } else {
            tr += range;
        }
        if down > 0.0 && up < down {
            minus += down;
        } else if up > 0.0 && up > down {
            plus += up;
        }
        if t >= period {
            emit(t, plus, minus, tr);
        }
    }
}

/// TA-Lib's PLUS_DI (`plus`) or MINUS_DI: 100 · DM / TR from bar `period`, 0 where TR
/// is (about) zero.
pub(crate) fn directional_index(high: &[f64], low: &[f64], close: &[f64], period: usize, plus: bool, out: Row) {
    directional(high, low, close, period, |t, p, m, tr| {
        out[t].write(if is_zero(tr) { 0.0 } else { 100.0 * ((if plus { p } else { m }) / tr) });
    });
}

/// TA-Lib's ADX: DX = 100 · |−DI − +DI| / (−DI + +DI) on each bar from `period`; the
/// first ADX, at bar 2·period − 1, the sum of the first `period` DX over `period`, then
/// `(adx · (period − 1) + dx) / period`. A bar whose TR or DI sum is (about) zero adds no
/// DX and leaves the ADX as it was.
pub(crate) fn adx(high: &[f64], low: &[f64], close: &[f64], period: usize, out: Row) {
    let p = period as f64;
    let (mut sum, mut adx) = (0.0, 0.0);
    directional(high, low, close, period, |t, plus, minus, tr| {
        let dx = (!is_zero(tr))
            .then(|| (100.0 * (minus / tr), 100.0 * (plus / tr)))
            .filter(|(m, p)| !is_zero(m + p))
            .map(|(m, p)| 100.0 * ((m - p).abs() / (m + p)));
        if t < 2 * period {
            sum += dx.unwrap_or(0.0);
            if t == 2 * period - 1 {
                adx = sum / p;
                out[t].write(adx);
            }
        } else {
            if let Some(dx) = dx {
                adx = (adx * (p - 1.0) + dx) / p;
            }
            out[t].write(adx);
        }
    });
}

/// The volume-weighted average price of each UTC day's session so far: Σ tp · volume over
/// Σ volume since the day's first bar, tp = (high + low + close) / 3. NaN while the
/// session has traded no volume.
pub(crate) fn vwap(timestamps: &[i64], (high, low, close, volume): (&[f64], &[f64], &[f64], &[f64]), out: Row) {
    const DAY_MS: i64 = 86_400_000;
    let (mut traded, mut shares) = (0.0, 0.0);
    for t in 0..close.len() {
        if t > 0 && timestamps[t].div_euclid(DAY_MS) != timestamps[t - 1].div_euclid(DAY_MS) {
            (traded, shares) = (0.0, 0.0);
        }
        traded += (high[t] + low[t] + close[t]) / 3.0 * volume[t];
        shares += volume[t];
        out[t].write(traded / shares);
    }
}
