//! A set's Sharpe ratio as CSCV compares it: [`Ratio`] keys that order sets without a
//! square root or a division, compared exactly where they are too close to call
//! ([`compare`]), one set at a time ([`ratio`]) or [`LANES`](crate::lanes::LANES) sets side
//! by side ([`may_beat`], [`lane_order`]: the same arithmetic lane by lane); and [`Bar`],
//! which places most sets against a ratio from their sums alone, by a wide margin.
//!
//! Invariant: every comparison gives the order of [`sharpe`](crate::sharpe)'s f64 values.

use crate::lanes::LANES;
use crate::sharpe_of;
use std::cmp::Ordering;

/// A set's bars as the arithmetic wants them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bars {
    pub n: f64,
    pub n1: f64,
    pub inv_n: f64,
    pub inv_n1: f64,
}

impl Bars {
    pub fn new(n: f64) -> Self {
        Self { n, n1: n - 1.0, inv_n: 1.0 / n, inv_n1: 1.0 / (n - 1.0) }
    }

    /// [`sharpe`](crate::sharpe) of a set's sums.
    #[inline(always)]
    pub fn sharpe(&self, a: f64, q: f64) -> f64 {
        sharpe_of(a, q, self.n, self.n1)
    }
}

/// A set's Sharpe ratio m/√var held as m·|m| and var (which order sets the same way,
/// with no square root or division), with the sums for the exact comparison of near ties.
/// `None`: [`sharpe`](crate::sharpe) would give NaN.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ratio {
    pub signed: f64,
    pub var: f64,
    pub a: f64,
    pub q: f64,
}

const EPS: f64 = f64::EPSILON;

/// The relative rounding a [`Ratio`]'s key may carry (its variance's, from q − a·m, is
/// held under [`ROUNDING`] / 2 by [`ratio`]); keys closer than this are compared exactly.
const ROUNDING: f64 = 1e-10;

/// Whether q − a·m (= `d`) is far enough from its cancellation for its sign to be certain
/// and its rounding under [`ROUNDING`] / 2.
#[inline(always)]
fn tight(q: f64, am: f64, d: f64) -> bool {
    16.0 * EPS * (q.abs() + am.abs()) < 0.5 * ROUNDING * d.abs()
}

/// A set's keys as [`ratio`] makes them: m·|m| and the variance d/(n − 1) from
/// d = q − a·m, with whether d is [`tight`] and positive.
#[derive(Debug, Clone, Copy)]
struct Keys {
    signed: f64,
    var: f64,
    tight: bool,
    positive: bool,
}

#[inline(always)]
fn keys(a: f64, q: f64, n: &Bars) -> Keys {
    let m = a * n.inv_n;
    let am = a * m;
    let d = q - am;
    Keys { signed: m * m.abs(), var: d * n.inv_n1, tight: tight(q, am, d), positive: d > 0.0 }
}

/// Whether the key `l` (the left set's m·|m| times the right's var) is below `r` (the
/// right's m·|m| times the left's var) by more than their rounding: the left set's ratio
/// is then surely the lower. (NaN keys, a variance near zero, are never surely apart.)
#[inline(always)]
fn surely_less(l: f64, r: f64) -> bool {
    r - l > 3.0 * ROUNDING * (l.abs() + r.abs())
}

#[inline(always)]
pub(crate) fn ratio(a: f64, q: f64, n: &Bars) -> Option<Ratio> {
    let k = keys(a, q, n);
    if k.tight {
        return k.positive.then_some(Ratio { signed: k.signed, var: k.var, a, q });
    }
    // Near a zero variance: decided as sharpe() decides, and compared exactly.
    let mean = a / n.n;
    let var = (q - a * mean) / n.n1;
    (var > 0.0).then_some(Ratio { signed: f64::NAN, var, a, q })
}

/// The order of two sets' Sharpe ratios as [`sharpe`](crate::sharpe)'s f64 values order
/// them: by cross-multiplied keys when they differ beyond their rounding, else by the
/// values themselves.
#[inline(always)]
pub(crate) fn compare(x: &Ratio, y: &Ratio, n: &Bars) -> Ordering {
    let (l, r) = (x.signed * y.var, y.signed * x.var);
    if surely_less(r, l) {
        return Ordering::Greater;
    }
    if surely_less(l, r) {
        return Ordering::Less;
    }
    n.sharpe(x.a, x.q).partial_cmp(&n.sharpe(y.a, y.q)).unwrap_or(Ordering::Equal)
}

/// How far from a ratio a set must be for a [`Bar`] to place it without its keys: its
/// m²/var off the ratio's by this share. Far beyond the keys' rounding ([`ROUNDING`]),
/// and it keeps a placed set's variance far from cancellation.
const MARGIN: f64 = 1e-3;

/// A ratio as a bar that sets can be placed against from their sums alone (Σr = a,
/// Σr² = q): with k = 1/n + var/(n²·(1/(n−1))·|signed|), a set's |Sharpe ratio| is
/// surely under the bar's when a²·k < q·(1 − [`MARGIN`]), and surely over it when
/// a²·k > q·(1 + MARGIN) with q − a²/n > MARGIN·q. (The first says m²·var_b <
/// |signed_b|·(q − a·m − MARGIN·q)/(n−1): the set's variance exceeds MARGIN·q/(n−1), so
/// its keys are tight, and its key is under the bar's by MARGIN of it; the second
/// likewise.) Its sign then places it: [`compare`] would give the same order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bar {
    k: f64,
    inv_n: f64,
    positive: bool,
}

impl Bar {
    /// `None` for a ratio of 0, or one compared exactly.
    pub fn new(r: &Ratio, n: &Bars) -> Option<Self> {
        (r.signed != 0.0 && r.signed.is_finite()).then(|| Self {
            k: n.inv_n + n.inv_n * n.inv_n * r.var / (r.signed.abs() * n.inv_n1),
            inv_n: n.inv_n,
            positive: r.signed > 0.0,
        })
    }

    /// Where sums `a`, `q` place a set against the bar's |ratio|: whether it is surely
    /// under it, surely over it, and whether its variance exceeds MARGIN·q/(n − 1).
    #[inline(always)]
    fn place(&self, a: f64, q: f64) -> (bool, bool, bool) {
        let a2 = a * a;
        let varies = q - a2 * self.inv_n > MARGIN * q;
        (a2 * self.k < q * (1.0 - MARGIN), (a2 * self.k > q * (1.0 + MARGIN)) & varies, varies)
    }

    /// Whether every lane of `sums` is surely below the bar's ratio.
    #[inline(always)]
    pub fn above_all(&self, sums: &[[f64; LANES]; 2]) -> bool {
        let mut below = 0u32;
        for (l, (&a, &q)) in sums[0].iter().zip(&sums[1]).enumerate() {
            let (under, _, _) = self.place(a, q);
            below |= u32::from((a <= 0.0) | under) << l;
        }
        self.positive && below == ALL_LANES
    }

    /// How many lanes in the mask `valid` are below the bar's ratio (NaN below every
    /// number), when the sums place every one of them.
    #[inline(always)]
    pub fn count_below(&self, sums: &[[f64; LANES]; 2], valid: u32) -> Option<u64> {
        let (mut below, mut above) = (0u32, 0u32);
        // The sign's test outside the loops: each is one vector loop.
        if self.positive {
            // Below: a ≤ 0 (a ratio ≤ 0, or NaN), or under; above: a > 0 and over.
            for (l, (&a, &q)) in sums[0].iter().zip(&sums[1]).enumerate() {
                let (under, over, _) = self.place(a, q);
                below |= u32::from((a <= 0.0) | under) << l;
                above |= u32::from((a > 0.0) & over) << l;
            }
        } else {
            // Below: a < 0 and over, or Σr² = 0 (NaN, below every number); above: a ≥ 0
            // with a variance, or a < 0 and under.
            for (l, (&a, &q)) in sums[0].iter().zip(&sums[1]).enumerate() {
                let (under, over, varies) = self.place(a, q);
                below |= u32::from(((a < 0.0) & over) | (q == 0.0)) << l;
                above |= u32::from(((a >= 0.0) & varies) | ((a < 0.0) & under)) << l;
            }
        }
        ((below | above | !valid) & ALL_LANES == ALL_LANES).then(|| u64::from((below & valid).count_ones()))
    }
}

/// Every lane, as a mask.
pub(crate) const ALL_LANES: u32 = (1 << LANES) - 1;

/// How [`LANES`] sets compare with one ratio, where their keys decide it: [`ratio`]'s
/// arithmetic lane by lane, each lane's order as [`compare`] gives it or undecided (near
/// keys, a variance near zero: left to [`compare`] one at a time).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaneOrder {
    /// Lanes surely below (`None` lanes included: NaN ranks below every number).
    pub below: u64,
    /// Lanes surely `None`.
    pub nan: u64,
    /// Lanes with the ratio's sums.
    pub equal: u64,
    /// Whether some lane is undecided.
    pub undecided: bool,
}

/// Whether some lane of `sums` may be above `best` (a lane surely below it, or surely
/// `None`, may not), or tie with it when `ties_lose` is false (a tie of sums with the same
/// bits, as sets that share their blocks have, is an equal ratio).
#[inline(always)]
pub(crate) fn may_beat(sums: &[[f64; LANES]; 2], best: &Ratio, ties_lose: bool, n: &Bars) -> bool {
    let mut may = 0u32;
    for (l, (&a, &q)) in sums[0].iter().zip(&sums[1]).enumerate() {
        let k = keys(a, q, n);
        let below = surely_less(k.signed * best.var, best.signed * k.var);
        let tie = (a == best.a) & (q == best.q);
        may |= u32::from(!(k.tight & (below | !k.positive)) & !(ties_lose & tie)) << l;
    }
    may != 0
}

/// How the lanes of `sums` in the mask `valid` compare with `value`.
#[inline(always)]
pub(crate) fn lane_order(sums: &[[f64; LANES]; 2], value: &Ratio, valid: u32, n: &Bars) -> LaneOrder {
    let (mut below, mut nan, mut equal, mut undecided) = (0u32, 0u32, 0u32, 0u32);
    for (l, (&a, &q)) in sums[0].iter().zip(&sums[1]).enumerate() {
        let Keys { signed, var, tight, positive } = keys(a, q, n);
        let (lk, rk) = (signed * value.var, value.signed * var);
        let (less, greater) = (surely_less(lk, rk), surely_less(rk, lk));
        // Σr² = 0: a variance of 0 or less, whatever Σr is.
        let is_nan = (tight & !positive) | (q == 0.0);
        let plain = tight & positive;
        // The same sums, bit for bit: the same ratio.
        let tie = (a == value.a) & (q == value.q) & !is_nan;
        below |= u32::from(is_nan | (plain & less & !tie)) << l;
        nan |= u32::from(is_nan) << l;
        equal |= u32::from(tie) << l;
        undecided |= u32::from(!is_nan & !tie & (!tight | (plain & !less & !greater))) << l;
    }
    let count = |mask: u32| u64::from((mask & valid).count_ones());
    LaneOrder { below: count(below), nan: count(nan), equal: count(equal), undecided: undecided & valid != 0 }
}
