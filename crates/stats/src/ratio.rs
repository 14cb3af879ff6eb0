//! A set's Sharpe ratio as CSCV compares it exactly: [`Ratio`] keys that order sets
//! without a square root or a division, compared by their f64 values where they are too
//! close to call ([`compare`]). The sets that [`crate::screen`] cannot place come here.
//!
//! Invariant: every comparison gives the order of [`sharpe`](crate::sharpe)'s f64 values.

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
