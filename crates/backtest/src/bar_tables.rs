//! [`BarTables`]: the per-bar tables of one signal book and its costs in fixed point
//! (`fixed.rs`'s units), made once in f64 on the CPU and uploaded to each GPU as they are,
//! with the block cuts a sweep keeps statistics in.

use crate::blocks::BlockCuts;
use crate::book::SignalBook;
use crate::costs::Costs;
use crate::fixed::{down_part, log_units, product_units, ret_units};

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
    /// The same for the squared returns, and for the squares of the falling ones
    /// ([`down_part`]).
    pub(crate) ret_sq_sum: Vec<u128>,
    pub(crate) down_sq_sum: Vec<u128>,
    /// `ret_sum[t−1]` plus the return of an exit at bar t, `ret[t]·(1 − g) − g`: a
    /// trade entered at e and left at x adds `exit_sum[x] − ret_sum[e]` (held bars and
    /// the exit bar).
    pub(crate) exit_sum: Vec<u128>,
    pub(crate) exit_sq_sum: Vec<u128>,
    pub(crate) exit_down_sum: Vec<u128>,
    /// The same for an exit at a stop, take-profit or trail level, which pays the fee
    /// alone (g = fee, no slippage: vectorbt's `stoplimit`); kept only where that differs
    /// (slippage, and a book with stops), else empty and the exit tables hold it.
    pub(crate) stop_exit_sum: Vec<u128>,
    pub(crate) stop_exit_sq_sum: Vec<u128>,
    pub(crate) stop_exit_down_sum: Vec<u128>,
    /// Per entry bar e, (1 − g) / (close[e] · (1 + h)): a plain trade's return is
    /// close[x] times it, minus 1 ([`crate::fixed::product_units`]). And the same with
    /// 1 − fee for an exit at a level, where that differs (slippage, and stops), else
    /// empty.
    pub(crate) entry_gain: Vec<f64>,
    pub(crate) entry_gain_level: Vec<f64>,
    /// −ln(1 + h) and ln(1 − g), 2^-52 units: what buying and selling do to log equity.
    pub(crate) log_buy: i64,
    pub(crate) log_sell: i64,
    /// ln(1 − fee): what selling at a level does to log equity (`log_sell`'s bits without
    /// slippage).
    pub(crate) log_sell_stop: i64,
    /// The entry bar's return, 1/(1 + h) − 1, its square and its downside part, 2^-64 units.
    pub(crate) entry_ret: u128,
    pub(crate) entry_ret_sq: u128,
    pub(crate) entry_down: u128,
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
        let bars = close.len();
        let table = || Vec::with_capacity(bars);
        let (mut ret_sum, mut ret_sq_sum, mut down_sq_sum) = (table(), table(), table());
        let (mut exit_sum, mut exit_sq_sum, mut exit_down_sum) = (table(), table(), table());
        let stops_differ = costs.slippage > 0.0 && !book.stops().is_empty();
        let (mut stop_exit_sum, mut stop_exit_sq_sum, mut stop_exit_down_sum) = (Vec::new(), Vec::new(), Vec::new());
        // The running sums through the bar before, and one bar's (r, r², downside) terms.
        let (mut s1, mut s2, mut s3) = (0u128, 0u128, 0u128);
        let terms = |x: f64| {
            let (r1, r2) = (ret_units(x) as u128, ret_units(x * x) as u128);
            (r1, r2, down_part(r1, r2))
        };
        for (t, &r) in ret.iter().enumerate() {
            if t == 0 {
                // A trade never exits on bar 0 (it would have to be entered before it).
                exit_sum.push(0);
                exit_sq_sum.push(0);
                exit_down_sum.push(0);
                if stops_differ {
                    stop_exit_sum.push(0);
                    stop_exit_sq_sum.push(0);
                    stop_exit_down_sum.push(0);
                }
            } else {
                let (x1, x2, x3) = terms(r * (1.0 - sell) - sell);
                exit_sum.push(s1.wrapping_add(x1));
                exit_sq_sum.push(s2.wrapping_add(x2));
                exit_down_sum.push(s3.wrapping_add(x3));
                if stops_differ {
                    let (x1, x2, x3) = terms(r * (1.0 - costs.fee) - costs.fee);
                    stop_exit_sum.push(s1.wrapping_add(x1));
                    stop_exit_sq_sum.push(s2.wrapping_add(x2));
                    stop_exit_down_sum.push(s3.wrapping_add(x3));
                }
                let (r1, r2, r3) = terms(r);
                s1 = s1.wrapping_add(r1);
                s2 = s2.wrapping_add(r2);
                s3 = s3.wrapping_add(r3);
            }
            ret_sum.push(s1);
            ret_sq_sum.push(s2);
            down_sq_sum.push(s3);
        }
        let entry_terms = terms(-buy / (1.0 + buy));
        let gain = |sell: f64| close.iter().map(|&c| sell / (c * (1.0 + buy))).collect::<Vec<f64>>();
        let entry_gain = gain(1.0 - sell);
        let entry_gain_level = if stops_differ { gain(1.0 - costs.fee) } else { Vec::new() };
        Self {
            costs,
            fee: costs.fee,
            slippage: costs.slippage,
            buy,
            sell,
            log,
            ret_sum,
            ret_sq_sum,
            down_sq_sum,
            exit_sum,
            exit_sq_sum,
            exit_down_sum,
            stop_exit_sum,
            stop_exit_sq_sum,
            stop_exit_down_sum,
            entry_gain,
            entry_gain_level,
            log_buy: log_units(-libm::log1p(buy)),
            log_sell: log_units(libm::log1p(-sell)),
            log_sell_stop: log_units(libm::log1p(-costs.fee)),
            entry_ret: entry_terms.0,
            entry_ret_sq: entry_terms.1,
            entry_down: entry_terms.2,
            blocks: None,
        }
    }

    /// Σ of returns, squares and downside through an exit at bar `x` (see `exit_sum`), at
    /// a level or not.
    #[inline(always)]
    pub(crate) fn exit_sums(&self, x: usize, at_level: bool) -> [u128; 3] {
        match at_level && !self.stop_exit_sum.is_empty() {
            true => [self.stop_exit_sum[x], self.stop_exit_sq_sum[x], self.stop_exit_down_sum[x]],
            false => [self.exit_sum[x], self.exit_sq_sum[x], self.exit_down_sum[x]],
        }
    }

    /// A plain trade's return from entry bar `e` to an exit at `exit_close`, at a level
    /// or not, in 2^-64 units.
    #[inline(always)]
    pub(crate) fn trade_units(&self, e: usize, exit_close: f64, at_level: bool) -> i128 {
        let gain =
            if at_level && !self.entry_gain_level.is_empty() { &self.entry_gain_level } else { &self.entry_gain };
        product_units(exit_close, gain[e])
    }

    /// Σ of returns, squares and downside over the held bars 1..=t.
    #[inline(always)]
    pub(crate) fn held_sums(&self, t: usize) -> [u128; 3] {
        [self.ret_sum[t], self.ret_sq_sum[t], self.down_sq_sum[t]]
    }

    /// The entry bar's terms.
    #[inline(always)]
    pub(crate) fn entry_sums(&self) -> [u128; 3] {
        [self.entry_ret, self.entry_ret_sq, self.entry_down]
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
