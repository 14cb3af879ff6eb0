//! Device-independent metrics: every quantity a combo's metrics need is accumulated as
//! integers (fixed point) from per-bar tables made once in f64 on the CPU, so the totals
//! are the same bits on the CPU and on every GPU, and one host function
//! ([`Totals::metrics`]) turns them into the reported f64 values.
//!
//! Scales and error bounds (N ≤ 2^24 bars, per-bar moves within ±100%, costs < 1):
//!
//! - Log prices `L[t] = ln(close[t] / close[0])` and log equity in units of 2^-52
//!   ([`LOG_BITS`]), i64. |L| ≤ 1,418 for any positive f64 prices, within the ±2,048 that
//!   i64 holds at this scale. Quantising adds ≤ 2^-53 to libm's ≤ 1 ulp of `ln` (with the
//!   rounding of the ratio, ≤ 4.5e-16 per value), so a trade's log growth is within
//!   1.2e-15 of exact and the log equity within 1.2e-15 per trade (2^23 trades: 1e-8;
//!   realistic runs: errors of random sign, far less). Log equity must stay within
//!   ±1,024 (equity between e^-1024 and e^1024, beyond f64's own range); past that the
//!   arithmetic wraps, identically on every device.
//! - Per-bar returns and squared returns in units of 2^-64 ([`RET_BITS`]), summed in
//!   prefix tables modulo 2^128: a stretch of bars costs one subtraction, and any true sum
//!   (≤ 2^24 bars × |r| ≤ 2^38) fits. Each term is within 2^-65 of its f64 value, so Σr
//!   and Σr² are within 2^24 · 2^-65 = 4.5e-13 absolute of the f64 terms' exact sum
//!   (better than a naive f64 sum of the same terms).
//! - The f64 conversions (i64/i128 → f64, exp, division, square root) run once per combo
//!   on the host, with `libm`'s pure-Rust exp, so every machine gives the same bits.

use crate::metrics::{Metrics, RunSums};

/// Fraction bits of log prices and log equity.
pub const LOG_BITS: u32 = 52;
/// Fraction bits of per-bar returns and their squares.
pub const RET_BITS: u32 = 64;

pub(crate) const LOG_SCALE: f64 = (1u64 << LOG_BITS) as f64;
pub(crate) const RET_SCALE: f64 = 18_446_744_073_709_551_616.0; // 2^64

/// `x` in units of 2^-52, rounded to nearest.
pub(crate) fn log_units(x: f64) -> i64 {
    (x * LOG_SCALE).round() as i64
}

/// `x` in units of 2^-64, rounded to nearest (ties away from zero): `(x · 2^64).round() as
/// i128`, bit for bit, without the software f64 → i128 conversion and `round` call on the
/// simulation's hot path where v = x · 2^64 is below 2^63 in magnitude (every return but
/// one of ±50 % or more): there v is rounded by hardware truncation plus its exact
/// fraction. Beyond (and for NaN) the plain conversion runs, saturating as before.
#[inline(always)]
pub(crate) fn ret_units(x: f64) -> i128 {
    let v = x * RET_SCALE;
    if v.abs() < I64_RANGE {
        return i128::from(round_inside(v));
    }
    v.round() as i128
}

/// A bar's return E[t]/E[t−1] − 1 from equities `e` and `before`, and its square, in 2^-64
/// units as [`ret_units`] gives them (mod 2^128): the market simulations' f64 return.
#[inline(always)]
pub(crate) fn return_units(e: f64, before: f64) -> (u128, u128) {
    let x = e / before - 1.0;
    (ret_units(x) as u128, ret_units(x * x) as u128)
}

/// `sums` plus a bar's terms ([`return_units`] of equities `e` over `before`, and the
/// downside), the same bits mod 2^128 in fewer instructions on a short's held bars: one
/// range check serves the return and its square (|x| < ½ puts x²·2^64 at most 2^62), the
/// square is rounded as the non-negative number it is, and the terms add as the i64s
/// they are. A return of ±50 % or more takes [`return_units`] itself.
#[inline(always)]
pub(crate) fn add_return(sums: Terms, e: f64, before: f64) -> Terms {
    let x = e / before - 1.0;
    let v = x * RET_SCALE;
    // NaN is outside too.
    let inside = v.abs() < I64_RANGE;
    if !inside {
        return add_return_outside(sums, e, before);
    }
    let r1 = round_inside(v);
    // x² ≥ +0 (never −0): `round_inside` with the nudge's sign already +; 0 ≤ x²·2^64 ≤
    // 2^62 (|x| < ½), within `truncate_nudged`'s range.
    let r2 = truncate_nudged((x * x) * RET_SCALE + BELOW_HALF) as u64;
    let below = (r1 >> 63) as u64;
    [
        sums[0].wrapping_add(r1 as i128 as u128),
        sums[1].wrapping_add(u128::from(r2)),
        sums[2].wrapping_add(u128::from(r2 & below)),
    ]
}

/// [`add_return`] for a return of ±50 % or more (or NaN): the plain conversions.
#[cold]
#[inline(never)]
fn add_return_outside(sums: Terms, e: f64, before: f64) -> Terms {
    let (r1, r2) = return_units(e, before);
    plus(sums, [r1, r2, down_part(r1, r2)])
}

/// 2^63: values of smaller magnitude convert to i64.
const I64_RANGE: f64 = 9_223_372_036_854_775_808.0;

/// P, the largest f64 below ½: [`round_inside`]'s nudge.
const BELOW_HALF: f64 = 0.499_999_999_999_999_94;

/// `v` (|v| < 2^63, checked by the caller) rounded to the nearest integer, ties away from
/// zero: the truncation of `v ± P`, P the largest f64 below ½, added with `v`'s sign. The
/// addition rounds to nearest: a fraction below ½ stays below the next integer (at most
/// ½ − ulp + P < 1 − ulp/2 past the whole part), one of ½ or more reaches it (within
/// 2^-54 of it, nearer than half its spacing, or a tie won by the even 1.0), and from
/// 2^52 on (integers) P is under half a spacing. Four instructions, against seven for a
/// truncation plus the exact fraction left (proptested against `round` below).
#[inline(always)]
fn round_inside(v: f64) -> i64 {
    debug_assert!(v.abs() < I64_RANGE);
    truncate_nudged(v + BELOW_HALF.copysign(v))
}

/// The truncation of `nudged`, a value `v ± P` formed from a `v` with |v| < 2^63 (every
/// caller's check): one instruction instead of a saturating sequence, on the market
/// simulations' hottest path.
#[inline(always)]
fn truncate_nudged(nudged: f64) -> i64 {
    debug_assert!(nudged.abs() < I64_RANGE);
    // SAFETY: |v| < 2^63 (so v is finite, not NaN), and |v ± P| rounds to at most
    // |v| + 1 ≤ 2^63 − 1024 + 1, within i64 (f64s below 2^63 are at most 2^63 − 1024).
    #[allow(unsafe_code)]
    unsafe {
        nudged.to_int_unchecked()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn plain(x: f64) -> i128 {
        (x * RET_SCALE).round() as i128
    }

    #[test]
    fn ret_units_is_the_plain_conversion_at_its_edges() {
        let ulp = |x: f64, k: i64| f64::from_bits((x.to_bits() as i64 + k) as u64);
        let mut cases = vec![0.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, f64::MIN_POSITIVE, 1e-300];
        for base in [
            0.5,
            1.5,
            2.5,
            3.5,
            4_294_967_295.5,
            4_294_967_296.5,
            1.0,
            2.0,
            2f64.powi(32),
            2f64.powi(51) + 0.5,
            2f64.powi(52) - 0.5,
            2f64.powi(52),
            2f64.powi(53),
            2f64.powi(62),
            2f64.powi(63),
            2f64.powi(94),
        ] {
            for k in -2..=2 {
                for sign in [1.0, -1.0] {
                    cases.push(sign * ulp(base, k) / RET_SCALE);
                }
            }
        }
        for x in [1e-3, -0.999, 0.25, 7.0, -7.0, 1e10, -1e10, 1e20, 3e38] {
            cases.push(x);
        }
        for x in cases {
            assert_eq!(ret_units(x), plain(x), "{x:e}");
        }
    }

    #[test]
    fn product_units_is_the_exact_product_rounded_half_up() {
        // 1.5 · 1.25 = 1.875 exactly: 0.875 · 2^64.
        assert_eq!(product_units(1.5, 1.25), 7 << 61);
        // (1 + 2^-52)² = 1 + 2^-51 + 2^-104: the 2^-104 is below half a unit (2^-65).
        let next = f64::from_bits(1f64.to_bits() + 1);
        assert_eq!(product_units(next, next), 1 << 13);
        // (1 + 2^-32)(1 + 2^-33) = 1 + 2^-32 + 2^-33 + 2^-65: half a unit, rounded up.
        let (a, b) = (1.0 + 2f64.powi(-32), 1.0 + 2f64.powi(-33));
        assert_eq!(product_units(a, b), (1 << 32) + (1 << 31) + 1);
        // A loss: 0.5 · 0.5 − 1 = −0.75.
        assert_eq!(product_units(0.5, 0.5), -(3 << 62));
        // Not normal: the f64 product's units.
        assert_eq!(product_units(0.0, 2.0), ret_units(-1.0));
    }

    #[test]
    fn square_units_are_the_squares_of_the_truncated_returns() {
        for x in [0i128, 1, -1, 1 << 64, -(1 << 64), (1 << 79) - 1, 1 << 79, -(3 << 90), (1 << 95) - 1] {
            let a = x.unsigned_abs();
            let want = if a < 1 << 79 { ((a >> 16) * (a >> 16)) >> 32 } else { (a >> 32) * (a >> 32) };
            assert_eq!(square_units(x), want, "{x}");
        }
        // Within 2^-47 · |x| of x² for returns under 2^15 (x = 0.3: 0.09).
        let x = ret_units(0.3);
        let got = square_units(x) as f64 / RET_SCALE;
        assert!((got - 0.09).abs() < 1e-14, "{got}");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

        #[test]
        fn product_units_is_within_rounding_of_the_f64_product(a in 1e-3f64..1e3, b in 1e-3f64..1e3) {
            // The exact product, rounded once, against the f64 product rounded twice: the
            // second rounding, of a·b − 1, is to the spacing of the larger of a·b and 1
            // (a product below ½ was allowed only a·b's, and failed at a = b = 0.001).
            let exact = product_units(a, b);
            let f64_units = ret_units(a * b - 1.0);
            let ulp = (a * b).abs().max(1.0) * f64::EPSILON * RET_SCALE;
            prop_assert!(((exact - f64_units) as f64).abs() <= ulp + 1.0, "{} vs {}", exact, f64_units);
        }

        #[test]
        fn ret_units_is_the_plain_conversion(bits in any::<u64>(), scale in -120i32..40) {
            // Any f64, and values spread over the magnitudes returns take.
            let any = f64::from_bits(bits);
            let spread = (f64::from_bits(bits >> 12 | 0x3ff0_0000_0000_0000) - 1.5) * 2f64.powi(scale);
            for x in [any, spread, spread * spread] {
                prop_assert_eq!(ret_units(x), plain(x), "{:e}", x);
            }
        }

        #[test]
        fn add_return_adds_the_terms_of_return_units(
            e in any::<f64>(),
            before in any::<f64>(),
            near in -0.7f64..0.7,
            sums in any::<[u128; 3]>(),
        ) {
            // Equities of any bits, pairs within ±70 % (both sides of the range check),
            // and returns a few units from zero (rounding of both signs).
            let tiny = before.abs() * (1.0 + near * 1e-18);
            for (e, before) in [(e, before), (before.abs() * (1.0 + near), before.abs()), (tiny, before.abs())] {
                let (r1, r2) = return_units(e, before);
                prop_assert_eq!(add_return(sums, e, before), plus(sums, [r1, r2, down_part(r1, r2)]), "{:e} / {:e}", e, before);
            }
        }

        #[test]
        fn return_units_is_the_plain_conversion_of_the_return(e in any::<f64>(), before in any::<f64>(), near in -0.7f64..0.7) {
            // Equities of any bits, and pairs whose return is within ±70 % (both sides of
            // the one range check).
            for (e, before) in [(e, before), (before.abs() * (1.0 + near), before.abs())] {
                let x = e / before - 1.0;
                prop_assert_eq!(return_units(e, before), (plain(x) as u128, plain(x * x) as u128), "{:e} / {:e}", e, before);
            }
        }
    }
}

/// One combo's integer totals: what the CPU simulation and the GPU kernel produce, bit
/// for bit the same, before [`Totals::metrics`] turns them into f64 metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    /// Final log equity, 2^-52 units.
    pub log_equity: i64,
    /// min over t of log E[t] − log max(E[..=t]), 2^-52 units (≤ 0).
    pub drawdown: i64,
    /// Σ r and Σ r² over all bars, 2^-64 units (mod 2^128).
    pub sum: u128,
    pub sum_sq: u128,
    /// Σ r² over the bars whose r (in units) is below 0: the Sortino ratio's downside.
    pub down_sq: u128,
    /// Over the closed trades: Σ of their returns, of their squares, and of the returns
    /// above 0, 2^-64 units ([`Totals::close_trade`]).
    pub trade_sum: u128,
    pub trade_sq: u128,
    pub trade_gain: u128,
    pub trades: u32,
    pub closed: u32,
    pub wins: u32,
    /// Bars that end in a position.
    pub held: u32,
}

impl Totals {
    /// The metrics of a run measured over `bars` bars, annualised with `bars_per_year`:
    /// the one conversion from integer totals to reported values, on every device.
    pub fn metrics(&self, bars: usize, bars_per_year: f64) -> Metrics {
        let log = |units: i64| units as f64 / LOG_SCALE;
        let ret = |units: u128| units as i128 as f64 / RET_SCALE;
        RunSums {
            total_return: libm::expm1(log(self.log_equity)),
            max_drawdown: libm::expm1(log(self.drawdown)),
            trades: self.trades,
            closed: self.closed,
            wins: self.wins,
            held: self.held as usize,
            bars,
            bars_per_year,
            sum: ret(self.sum),
            sum_sq: ret(self.sum_sq),
            down_sq: ret(self.down_sq),
            trade_sum: ret(self.trade_sum),
            trade_sq: ret(self.trade_sq),
            trade_gain: ret(self.trade_gain),
        }
        .metrics()
    }

    /// Adds one bar's return terms `(r, r²)` in units ([`return_units`]'s), its square to
    /// the downside when r is below 0.
    #[inline(always)]
    pub(crate) fn add_bar(&mut self, (r1, r2): (u128, u128)) {
        self.sum = self.sum.wrapping_add(r1);
        self.sum_sq = self.sum_sq.wrapping_add(r2);
        self.down_sq = self.down_sq.wrapping_add(down_part(r1, r2));
    }

    /// Adds a stretch's terms, formed from the tables.
    #[inline(always)]
    pub(crate) fn add_terms(&mut self, terms: Terms) {
        [self.sum, self.sum_sq, self.down_sq] = plus([self.sum, self.sum_sq, self.down_sq], terms);
    }

    /// The run's (Σr, Σr², downside) so far.
    #[inline(always)]
    pub(crate) fn terms(&self) -> Terms {
        [self.sum, self.sum_sq, self.down_sq]
    }

    /// Counts a closed trade whose return is `r` (f64, a market simulation's exit cash
    /// over entry cash, minus 1), in [`ret_units`].
    #[inline(always)]
    pub(crate) fn close_trade(&mut self, r: f64) {
        self.close_trade_units(ret_units(r));
    }

    /// Counts a closed trade whose return is `x` in 2^-64 units: Σx, the square term
    /// ([`square_units`]) and the gains.
    #[inline(always)]
    pub(crate) fn close_trade_units(&mut self, x: i128) {
        self.closed += 1;
        self.trade_sum = self.trade_sum.wrapping_add(x as u128);
        self.trade_sq = self.trade_sq.wrapping_add(square_units(x));
        self.trade_gain = self.trade_gain.wrapping_add(x.max(0) as u128);
    }
}

/// A trade return's square in 2^-64 units from its units `x`: (|x| >> 16)² >> 32 below
/// 2^79 (a return under 2^15, where this is within 2^-47·|x| of x²), else (|x| >> 32)²
/// (mod 2^128). Integers only, so that the kernels form the same bits cheaply (the GPU
/// computes them for |x| < 2^95; a market combo past that runs on the CPU).
#[inline(always)]
pub(crate) fn square_units(x: i128) -> u128 {
    let a = x.unsigned_abs();
    if a < 1 << 79 {
        let q = a >> 16;
        (q * q) >> 32
    } else {
        let q = a >> 32;
        q.wrapping_mul(q)
    }
}

/// A plain trade's return in 2^-64 units: `close · gain − 1`, with `gain` the entry bar's
/// (1 − g) / (close[e] · (1 + h)) ([`crate::bar_tables::HeldRow`]) and
/// the product exact: both significands multiplied as integers, times 2^64 rounded half
/// up, less 2^64. The whole-backtest kernel forms the same integers (a division and f64
/// rounding per trade would cost it more than the rest of a bar). Values that are not
/// positive normal numbers (CPU-only books) take [`ret_units`] of the f64 product.
#[inline(always)]
pub(crate) fn product_units(close: f64, gain: f64) -> i128 {
    if !(close.is_normal() && gain.is_normal() && close > 0.0 && gain > 0.0) {
        return ret_units(close * gain - 1.0);
    }
    let parts = |v: f64| {
        let bits = v.to_bits();
        ((bits & ((1 << 52) - 1)) | 1 << 52, ((bits >> 52) & 0x7ff) as i32)
    };
    let ((ma, ea), (mb, eb)) = (parts(close), parts(gain));
    let m = u128::from(ma) * u128::from(mb);
    // close · gain · 2^64 = m · 2^shift.
    let shift = ea + eb - 2086;
    let units = match shift {
        0.. => m.checked_shl(shift as u32).filter(|&u| u >> shift == m).unwrap_or(u128::MAX),
        -107..0 => {
            let k = (-shift) as u32;
            (m >> k) + ((m >> (k - 1)) & 1)
        }
        _ => 0,
    };
    (units as i128).wrapping_sub(1 << 64)
}

/// A stretch's (Σr, Σr², downside) terms, 2^-64 units (mod 2^128): what the prefix
/// tables of [`crate::bar_tables::BarTables`] hold per bar.
pub(crate) type Terms = [u128; 3];

/// `a + b`, term by term (mod 2^128).
#[inline(always)]
pub(crate) fn plus(a: Terms, b: Terms) -> Terms {
    [a[0].wrapping_add(b[0]), a[1].wrapping_add(b[1]), a[2].wrapping_add(b[2])]
}

/// `a − b`, term by term (mod 2^128).
#[inline(always)]
pub(crate) fn minus(a: Terms, b: Terms) -> Terms {
    [a[0].wrapping_sub(b[0]), a[1].wrapping_sub(b[1]), a[2].wrapping_sub(b[2])]
}

/// A bar's part of the downside: r² (units) when r's units are below 0, else 0.
#[inline(always)]
pub(crate) fn down_part(r1: u128, r2: u128) -> u128 {
    if (r1 as i128) < 0 { r2 } else { 0 }
}
