//! [`BarTables`]: the per-bar tables of one signal book and its costs in fixed point
//! (`fixed.rs`'s units), made once in f64 on the CPU and uploaded to each GPU as they are,
//! with the block cuts a sweep keeps statistics in.

use crate::blocks::BlockCuts;
use crate::book::SignalBook;
use crate::costs::Costs;
use crate::fixed::{Terms, down_part, log_units, plus, ret_units};

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
    /// Per bar t, where a trade starts or is held through: the prefix sums over bars 1..=t
    /// and the entry gain factors ([`HeldRow`]), one cache line a bar.
    pub(crate) held: Vec<HeldRow>,
    /// Per bar t, the held sums through t − 1 plus the terms of an exit at bar t,
    /// `ret[t]·(1 − g) − g`: a trade entered at e and left at x adds `exit[x] − held[e]`
    /// (held bars and the exit bar).
    pub(crate) exit: Vec<ExitRow>,
    /// The same for an exit at a stop, take-profit or trail level, which pays the fee
    /// alone (g = fee, no slippage: vectorbt's `stoplimit`); kept only where that differs
    /// (slippage, and a book with stops), else empty and `exit` holds it.
    pub(crate) stop_exit: Vec<ExitRow>,
    /// −ln(1 + h) and ln(1 − g), 2^-52 units: what buying and selling do to log equity.
    pub(crate) log_buy: i64,
    pub(crate) log_sell: i64,
    /// ln(1 − fee): what selling at a level does to log equity (`log_sell`'s bits without
    /// slippage).
    pub(crate) log_sell_stop: i64,
    /// The entry bar's terms: its return, 1/(1 + h) − 1, its square and its downside part,
    /// 2^-64 units.
    pub(crate) entry: Terms,
    /// The blocks whose statistics a run records as well, if any.
    pub(crate) blocks: Option<BlockCuts>,
}

/// Bar t's held sums, Σ over bars 1..=t of the held bar's return `close[t]/close[t−1] − 1`,
/// of its square and of its downside part ([`down_part`]) (2^-64 units, mod 2^128; bar 0
/// has no return), and its gain factors as an entry bar: (1 − g) / (close[t] · (1 + h)),
/// and with 1 − fee for an exit at a level (the same where that does not differ). A
/// plain trade's return is close[x] times one of them, minus 1
/// ([`crate::fixed::product_units`]). What a trade reads at its entry, in one cache line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
pub(crate) struct HeldRow {
    pub(crate) sums: Terms,
    pub(crate) gain: f64,
    pub(crate) gain_level: f64,
}

/// An exit bar's sums (see [`BarTables::exit`]), in one cache line.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
pub(crate) struct ExitRow {
    pub(crate) sums: Terms,
}

impl BarTables {
    pub fn new(book: &SignalBook, costs: Costs) -> Self {
        let (buy, sell) = (costs.buy(), costs.sell());
        let close = book.close();
        let ret = book.ret();
        let c0 = close[0];
        let log = close.iter().map(|&c| log_units(libm::log(c / c0))).collect();
        let bars = close.len();
        let stops_differ = costs.slippage > 0.0 && !book.stops().is_empty();
        let (mut held, mut exit) = (Vec::with_capacity(bars), Vec::with_capacity(bars));
        let mut stop_exit = Vec::with_capacity(if stops_differ { bars } else { 0 });
        // The running sums through the bar before, and one bar's (r, r², downside) terms.
        let mut sums: Terms = [0; 3];
        let terms = |x: f64| {
            let (r1, r2) = (ret_units(x) as u128, ret_units(x * x) as u128);
            [r1, r2, down_part(r1, r2)]
        };
        let gain = |sell: f64, c: f64| sell / (c * (1.0 + buy));
        for (t, (&r, &c)) in ret.iter().zip(close).enumerate() {
            if t == 0 {
                // A trade never exits on bar 0 (it would have to be entered before it).
                exit.push(ExitRow::default());
                if stops_differ {
                    stop_exit.push(ExitRow::default());
                }
            } else {
                exit.push(ExitRow { sums: plus(sums, terms(r * (1.0 - sell) - sell)) });
                if stops_differ {
                    stop_exit.push(ExitRow { sums: plus(sums, terms(r * (1.0 - costs.fee) - costs.fee)) });
                }
                sums = plus(sums, terms(r));
            }
            let signal = gain(1.0 - sell, c);
            let level = if stops_differ { gain(1.0 - costs.fee, c) } else { signal };
            held.push(HeldRow { sums, gain: signal, gain_level: level });
        }
        Self {
            costs,
            fee: costs.fee,
            slippage: costs.slippage,
            buy,
            sell,
            log,
            held,
            exit,
            stop_exit,
            log_buy: log_units(-libm::log1p(buy)),
            log_sell: log_units(libm::log1p(-sell)),
            log_sell_stop: log_units(libm::log1p(-costs.fee)),
            entry: terms(-buy / (1.0 + buy)),
            blocks: None,
        }
    }

    /// Σ of returns, squares and downside through an exit at bar `x` (see `exit`), at a
    /// level or not.
    #[inline(always)]
    pub(crate) fn exit_sums(&self, x: usize, at_level: bool) -> Terms {
        match at_level && !self.stop_exit.is_empty() {
            true => self.stop_exit[x].sums,
            false => self.exit[x].sums,
        }
    }

    /// Σ of returns, squares and downside over the held bars 1..=t.
    #[inline(always)]
    pub(crate) fn held_sums(&self, t: usize) -> Terms {
        self.held[t].sums
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
