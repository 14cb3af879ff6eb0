//! [`BarTables`]: the per-bar tables of one signal book and its costs in fixed point
//! (`fixed.rs`'s units), made once in f64 on the CPU and uploaded to each GPU as they are,
//! with the block cuts a sweep keeps statistics in.

use crate::blocks::BlockCuts;
use crate::book::SignalBook;
use crate::costs::Costs;
use crate::fixed::{log_units, ret_units};

/// The per-bar tables of one signal book and its costs, in fixed point (module docs).
/// Built once per book and costs on the CPU; the GPU uploads them as they are.
#[derive(Debug, Clone)]
pub struct BarTables {
    pub(crate) costs: Costs,
    pub(crate) fee: f64,
    pub(crate) slippage: f64,
    /// [`Costs::buy`] and [`Costs::sell`]: h and g.
    pub(crate) buy: f64,
    pub(crate) sell: f64,
    /// `ln(close[t] / close[0])`, 2^-52 units.
    pub(crate) log: Vec<i64>,
    /// Σ over bars 1..=t of the held bar's return `close[t]/close[t−1] − 1` (2^-64 units,
    /// mod 2^128); bar 0 has no return.
    pub(crate) ret_sum: Vec<u128>,
    /// The same for the squared returns.
    pub(crate) ret_sq_sum: Vec<u128>,
    /// `ret_sum[t−1]` plus the return of an exit at bar t, `ret[t]·(1 − g) − g`: a
    /// trade entered at e and left at x adds `exit_sum[x] − ret_sum[e]` (held bars and
    /// the exit bar).
    pub(crate) exit_sum: Vec<u128>,
    pub(crate) exit_sq_sum: Vec<u128>,
    /// The same for an exit at a stop, take-profit or trail level, which pays the fee
    /// alone (g = fee, no slippage: vectorbt's `stoplimit`); kept only where that differs
    /// (slippage, and a book with stops), else empty and the exit tables hold it.
    pub(crate) stop_exit_sum: Vec<u128>,
    pub(crate) stop_exit_sq_sum: Vec<u128>,
    /// −ln(1 + h) and ln(1 − g), 2^-52 units: what buying and selling do to log equity.
    pub(crate) log_buy: i64,
    pub(crate) log_sell: i64,
    /// ln(1 − fee): what selling at a level does to log equity (`log_sell`'s bits without
    /// slippage).
    pub(crate) log_sell_stop: i64,
    /// The entry bar's return, 1/(1 + h) − 1, and its square, 2^-64 units.
    pub(crate) entry_ret: u128,
    pub(crate) entry_ret_sq: u128,
    /// The blocks whose statistics a run records as well, if any.
    pub(crate) blocks: Option<BlockCuts>,
}

impl BarTables {
    pub fn new(book: &SignalBook, costs: Costs) -> Self {
        let (buy, sell) = (costs.buy(), costs.sell());
        let close = book.close();
        let ret = book.ret();
        let c0 = close[0];
        let log = close.iter().map(|&c| log_units(libm::log(c / c0))).collect();
        let (mut ret_sum, mut ret_sq_sum) = (Vec::with_capacity(close.len()), Vec::with_capacity(close.len()));
        let (mut exit_sum, mut exit_sq_sum) = (Vec::with_capacity(close.len()), Vec::with_capacity(close.len()));
        let stops_differ = costs.slippage > 0.0 && !book.stops().is_empty();
        let (mut stop_exit_sum, mut stop_exit_sq_sum) = (Vec::new(), Vec::new());
        let (mut s1, mut s2) = (0u128, 0u128);
        for (t, &r) in ret.iter().enumerate() {
            if t == 0 {
                // A trade never exits on bar 0 (it would have to be entered before it).
                exit_sum.push(0);
                exit_sq_sum.push(0);
                if stops_differ {
                    stop_exit_sum.push(0);
                    stop_exit_sq_sum.push(0);
                }
            } else {
                let x = r * (1.0 - sell) - sell;
                exit_sum.push(s1.wrapping_add(ret_units(x) as u128));
                exit_sq_sum.push(s2.wrapping_add(ret_units(x * x) as u128));
                if stops_differ {
                    let x = r * (1.0 - costs.fee) - costs.fee;
                    stop_exit_sum.push(s1.wrapping_add(ret_units(x) as u128));
                    stop_exit_sq_sum.push(s2.wrapping_add(ret_units(x * x) as u128));
                }
                s1 = s1.wrapping_add(ret_units(r) as u128);
                s2 = s2.wrapping_add(ret_units(r * r) as u128);
            }
            ret_sum.push(s1);
            ret_sq_sum.push(s2);
        }
        let entry = -buy / (1.0 + buy);
        Self {
            costs,
            fee: costs.fee,
            slippage: costs.slippage,
            buy,
            sell,
            log,
            ret_sum,
            ret_sq_sum,
            exit_sum,
            exit_sq_sum,
            stop_exit_sum,
            stop_exit_sq_sum,
            log_buy: log_units(-libm::log1p(buy)),
            log_sell: log_units(libm::log1p(-sell)),
            log_sell_stop: log_units(libm::log1p(-costs.fee)),
            entry_ret: ret_units(entry) as u128,
            entry_ret_sq: ret_units(entry * entry) as u128,
            blocks: None,
        }
    }

    /// Σ of returns through an exit at bar `x` (see `exit_sum`), at a level or not.
    #[inline(always)]
    pub(crate) fn exit_sums(&self, x: usize, at_level: bool) -> (u128, u128) {
        match at_level && !self.stop_exit_sum.is_empty() {
            true => (self.stop_exit_sum[x], self.stop_exit_sq_sum[x]),
            false => (self.exit_sum[x], self.exit_sq_sum[x]),
        }
    }

    /// What an exit at a level, or not, does to log equity.
    #[inline(always)]
    pub(crate) fn log_sell_at(&self, at_level: bool) -> i64 {
        if at_level { self.log_sell_stop } else { self.log_sell }
    }

    /// The same tables, with runs recording the statistics of `blocks` (cut for this
    /// book's bars) beside their totals.
    pub fn with_blocks(self, blocks: Option<BlockCuts>) -> Self {
        Self { blocks, ..self }
    }

    pub fn blocks(&self) -> Option<&BlockCuts> {
        self.blocks.as_ref()
    }

    pub fn costs(&self) -> Costs {
        self.costs
    }
}
