//! One fill of a portfolio's shared cash: vectorbt 1.2's `buy_nb` and `sell_nb`
//! (`vectorbt/portfolio/nb.py`) for a long position and a short one (its sale and its
//! cover, with vectorbt's free cash and debt), with their tolerances, so that an
//! account equals `Portfolio.from_signals(..., cash_sharing=True)` to its last rounding.
//! The operations are theirs in their order (IEEE f64, no fused multiply-add): a change of
//! order here is a change of the bits every portfolio row has.

use crate::costs::Costs;

/// vectorbt's relative and absolute tolerances (`vectorbt.utils.math_`).
const REL_TOL: f64 = 1e-9;
const ABS_TOL: f64 = 1e-12;

/// `a` and `b` equal within the tolerances (never for NaN or an infinity).
pub(crate) fn is_close(a: f64, b: f64) -> bool {
    if a.is_nan() || b.is_nan() || a.is_infinite() || b.is_infinite() {
        return false;
    }
    a == b || (a - b).abs() <= (REL_TOL * a.abs().max(b.abs())).max(ABS_TOL)
}

/// `a` < `b` and not close to it.
pub(crate) fn is_less(a: f64, b: f64) -> bool {
    !is_close(a, b) && a < b
}

/// numpy's sign: 0 for ±0.
fn sign(a: f64) -> f64 {
    if a > 0.0 {
        1.0
    } else if a < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// `a + b`, or exactly 0 where the sum is within the tolerances of it.
pub(crate) fn add(a: f64, b: f64) -> f64 {
    let zero = if sign(a) != sign(b) { is_close(a.abs(), b.abs()) } else { is_close(a + b, 0.0) };
    if zero { 0.0 } else { a + b }
}

/// Python's `a // b` on floats (CPython's `float_floor_div`, which numba follows): the
/// floor of the exact quotient, NaN for an infinite `a`.
pub(crate) fn floor_div(a: f64, b: f64) -> f64 {
    let rem = a % b;
    let mut div = (a - rem) / b;
    if rem != 0.0 && ((b < 0.0) != (rem < 0.0)) {
        div -= 1.0;
    }
    if div == 0.0 {
        return 0.0f64.copysign(a / b);
    }
    let floor = div.floor();
    if div - floor > 0.5 { floor + 1.0 } else { floor }
}

/// What an order may take beyond the cash: a lot step (vectorbt's `size_granularity`) and
/// a minimum size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Limits {
    /// NaN: any fraction of a unit.
    pub(crate) lot: f64,
    pub(crate) min_size: f64,
}

impl Limits {
    /// `size` rounded down to the lot step.
    fn in_lots(&self, size: f64) -> f64 {
        if self.lot.is_nan() { size } else { floor_div(size, self.lot) * self.lot }
    }
}

/// A filled order: units, the price paid or received (slippage in), the fee, and the cash
/// it moved (spent by a buy, received by a sale).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Filled {
    pub size: f64,
    pub price: f64,
    pub fee: f64,
    pub cash: f64,
}

/// A long buy of `size` units (infinite: as many as `percent` of the cash buys) at
/// `price` from `cash`: vectorbt's `buy_nb` for a flat position. None: rejected or
/// ignored (no cash, a size of zero, below the minimum).
pub(crate) fn buy(
    cash: f64,
    size: f64,
    price: f64,
    percent: Option<f64>,
    costs: Costs,
    limits: Limits,
) -> Option<Filled> {
    let adj_price = price * (1.0 + costs.slippage);
    let mut cash_limit = cash;
    if let Some(percent) = percent {
        cash_limit = cash_limit.min(percent * cash_limit);
    }
    if cash_limit == 0.0 || size == 0.0 {
        return None;
    }
    let adj_size = limits.in_lots(size);
    let req_cash = adj_size * adj_price;
    let req_fees = req_cash * costs.fee + 0.0;
    let total_req_cash = req_cash + req_fees;
    let (final_size, fee, spent) = if is_close(total_req_cash, cash_limit) || total_req_cash < cash_limit {
        (adj_size, req_fees, total_req_cash)
    } else {
        // Too little cash: the most its limit buys with the fee on top.
        let max_req_cash = add(cash_limit, -0.0) / (1.0 + costs.fee);
        if max_req_cash <= 0.0 {
            return None;
        }
        let max_acq_size = max_req_cash / adj_price;
        if limits.lot.is_nan() {
            (max_acq_size, cash_limit - max_req_cash, cash_limit)
        } else {
            let final_size = limits.in_lots(max_acq_size);
            let new_req_cash = final_size * adj_price;
            let fee = new_req_cash * costs.fee + 0.0;
            (final_size, fee, new_req_cash + fee)
        }
    };
    if is_close(adj_size, 0.0) || is_less(final_size, limits.min_size) {
        return None;
    }
    // A lot step that leaves less than one lot fills nothing (vectorbt records an order
    // of size 0 there; ThreadX counts no trade).
    let final_size = add(0.0, final_size);
    (final_size > 0.0).then_some(Filled { size: final_size, price: adj_price, fee, cash: spent })
}

/// The sale of a long position of `position` units at `price`: vectorbt's `sell_nb` for
/// an exit (an order of the whole position, long only). None: ignored or rejected (a
/// size of zero, below the minimum, a fee above the proceeds). The whole position is
/// sold: it is already in lots. vectorbt rounds an exit down to the lot step as well,
/// which in floating point can leave a sliver (5.1 units in lots of 0.1: 5.1 // 0.1 is
/// 50, so 5.0 are sold and 0.1 stays open); ThreadX does not.
pub(crate) fn sell(position: f64, price: f64, costs: Costs, limits: Limits) -> Option<Filled> {
    let adj_price = price * (1.0 - costs.slippage);
    let size_limit = position;
    if is_close(size_limit, 0.0) || is_less(size_limit, limits.min_size) {
        return None;
    }
    let acq_cash = size_limit * adj_price;
    let fee = acq_cash * costs.fee + 0.0;
    let received = add(acq_cash, -fee);
    (received >= 0.0).then_some(Filled { size: size_limit, price: adj_price, fee, cash: received })
}

/// A short sale from flat of `size` units (infinite: as many as `percent` of the free
/// cash sells) at `price`: vectorbt's `sell_nb` with `direction="both"` and
/// `lock_cash=False`, its sale sized from the free cash only for a percent. None:
/// rejected or ignored (no free cash, a size of zero, below the minimum, a fee above the
/// proceeds).
pub(crate) fn short_sale(
    free_cash: f64,
    size: f64,
    price: f64,
    percent: Option<f64>,
    costs: Costs,
    limits: Limits,
) -> Option<Filled> {
    let adj_price = price * (1.0 - costs.slippage);
    let mut size_limit = size;
    if let Some(percent) = percent {
        // The most the free cash sells short, then its `percent`.
        let total_free_cash = add(free_cash, 0.0);
        if total_free_cash <= 0.0 {
            return None;
        }
        let max_short_size = add(total_free_cash, -0.0) / (adj_price * (1.0 + costs.fee));
        let max_size_limit = add(0.0, max_short_size);
        if max_size_limit <= 0.0 {
            return None;
        }
        size_limit = percent * max_size_limit;
    }
    let size_limit = limits.in_lots(size_limit);
    if !size_limit.is_finite() || is_close(size_limit, 0.0) || is_less(size_limit, limits.min_size) {
        return None;
    }
    let acq_cash = size_limit * adj_price;
    let fee = acq_cash * costs.fee + 0.0;
    let received = add(acq_cash, -fee);
    (received >= 0.0 && size_limit > 0.0).then_some(Filled { size: size_limit, price: adj_price, fee, cash: received })
}

/// The cover of a short of `units` units (> 0) at `price`: vectorbt's `buy_nb` for a
/// short exit, bought back whole. vectorbt buys back no more than its cash pays and stays
/// short by the rest; ThreadX buys it all and the cash goes below zero by what it lacks
/// (what the account owes). None: ignored (below the minimum size).
pub(crate) fn cover(units: f64, price: f64, costs: Costs, limits: Limits) -> Option<Filled> {
    let adj_price = price * (1.0 + costs.slippage);
    if is_close(units, 0.0) || is_less(units, limits.min_size) {
        return None;
    }
    let req_cash = units * adj_price;
    let fee = req_cash * costs.fee + 0.0;
    Some(Filled { size: units, price: adj_price, fee, cash: req_cash + fee })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_div_is_pythons() {
        // Values printed by CPython 3.12 (`a // b`).
        for (a, b, expected) in [
            (7.0, 2.0, 3.0),
            (-7.0, 2.0, -4.0),
            (0.3, 0.1, 2.0),
            (0.30000000000000004, 0.1, 3.0),
            (1.0, 0.1, 9.0),
            (5.5, 0.5, 11.0),
            (0.05, 0.1, 0.0),
        ] {
            assert_eq!(floor_div(a, b), expected, "{a} // {b}");
        }
        assert!(floor_div(f64::INFINITY, 0.1).is_nan());
        assert!(floor_div(0.0, -1.0).is_sign_negative());
    }

    #[test]
    fn sums_within_the_tolerances_are_zero() {
        assert_eq!(add(1.0, -1.0 + 1e-10), 0.0);
        assert_eq!(add(1.0, -0.5), 0.5);
        assert_eq!(add(0.0, 5e-13), 0.0);
        assert_eq!(add(0.0, 2e-12), 2e-12);
        assert!(is_close(1e9, 1e9 + 0.5) && !is_close(1e9, 1e9 + 2.0));
        assert!(is_less(1.0, 2.0) && !is_less(1.0, 1.0 + 1e-10));
    }

    #[test]
    fn a_buy_takes_the_size_or_all_the_cash_and_a_sale_pays_its_fee() {
        let costs = Costs { fee: 0.01, slippage: 0.0 };
        let any = Limits { lot: f64::NAN, min_size: 0.0 };
        // 2 units at 10 with 1 % fee: 20.2 spent of 100.
        assert_eq!(
            buy(100.0, 2.0, 10.0, None, costs, any),
            Some(Filled { size: 2.0, price: 10.0, fee: 0.2, cash: 20.2 })
        );
        // 20 units cost 202 > 100: the cash buys 100 / 1.01 / 10.
        let all = buy(100.0, 20.0, 10.0, None, costs, any).expect("a partial fill");
        assert_eq!((all.size, all.cash), (100.0 / 1.01 / 10.0, 100.0));
        assert_eq!(all.fee, 100.0 - 100.0 / 1.01);
        // Half the cash, in lots of 1: 50 / 1.01 / 10 = 4.95 → 4 units.
        let half = buy(100.0, f64::INFINITY, 10.0, Some(0.5), costs, Limits { lot: 1.0, min_size: 0.0 });
        assert_eq!(half, Some(Filled { size: 4.0, price: 10.0, fee: 0.4, cash: 40.4 }));
        // Less than a lot, or below the minimum: nothing.
        assert_eq!(buy(5.0, f64::INFINITY, 10.0, Some(1.0), costs, Limits { lot: 1.0, min_size: 0.0 }), None);
        assert_eq!(buy(100.0, 2.0, 10.0, None, costs, Limits { lot: f64::NAN, min_size: 3.0 }), None);
        assert_eq!(buy(0.0, 2.0, 10.0, None, costs, any), None);
        let slipped = Costs { fee: 0.0, slippage: 0.5 };
        assert_eq!(sell(4.0, 10.0, slipped, any), Some(Filled { size: 4.0, price: 5.0, fee: 0.0, cash: 20.0 }));
        assert_eq!(sell(4.0, 10.0, costs, any), Some(Filled { size: 4.0, price: 10.0, fee: 0.4, cash: 39.6 }));
        // A position in lots of 0.1 is sold whole (vectorbt would sell 5.0 of 5.1).
        let tenths = Limits { lot: 0.1, min_size: 0.0 };
        assert_eq!(sell(51.0 * 0.1, 10.0, Costs { fee: 0.0, slippage: 0.0 }, tenths).map(|f| f.size), Some(51.0 * 0.1));
    }
}
