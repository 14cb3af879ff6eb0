//! The account's state between bars, a [`Ledger`]: its cash, vectorbt's free cash, each
//! symbol's units (a short's below zero) and each short's debt, and the fills that move
//! them (`orders.rs`'s arithmetic), each closed trade's return and win counted into the
//! run's [`Totals`].

use crate::costs::Costs;
use crate::fixed::Totals;
use crate::metrics::{ExitReason, Side};
use crate::portfolio::orders::{Filled, add, buy, cover, is_close, sell, short_sale};
use crate::portfolio::record::{Activity, PortfolioTrade, trade_return};
use crate::portfolio::{Account, SizeType};
use crate::trade_parts::at_level;

/// The account's state between bars.
pub(super) struct Ledger {
    pub(super) cash: f64,
    /// vectorbt's free cash: the cash less twice every short's debt, what a percent
    /// short sells from (a long fill moves it as it moves the cash).
    pub(super) free_cash: f64,
    /// Units each symbol holds (0: flat; below 0: short), and the held symbols as bits
    /// (symbol s: bit s mod 64 of word s / 64) and their count: the sum that values the
    /// account runs over them alone, in symbol order.
    pub(super) position: Vec<f64>,
    pub(super) held: Vec<u64>,
    pub(super) holding: usize,
    /// Each short's debt: its units at their sale price (vectorbt's).
    pub(super) debt: Vec<f64>,
    /// Each held symbol's entry fill, and its trade (an index into `trades`, which only a
    /// detailed run keeps).
    pub(super) entered: Vec<Filled>,
    pub(super) open: Vec<usize>,
    pub(super) trades: Option<Vec<PortfolioTrade>>,
    pub(super) totals: Totals,
    pub(super) activity: Activity,
}

impl Ledger {
    /// The ledger of an account starting with `cash` over `symbols` symbols, flat, its
    /// trades kept when `detailed`.
    pub(super) fn new(cash: f64, symbols: usize, detailed: bool) -> Self {
        Self {
            cash,
            free_cash: cash,
            position: vec![0.0; symbols],
            held: vec![0; symbols.div_ceil(64)],
            holding: 0,
            debt: vec![0.0; symbols],
            entered: vec![Filled { size: 0.0, price: 0.0, fee: 0.0, cash: 0.0 }; symbols],
            open: vec![0; symbols],
            trades: detailed.then(Vec::new),
            totals: Totals::default(),
            activity: Activity::default(),
        }
    }

    /// Cash plus every held position at its price in `row` (the bar's prices): the held
    /// positions in symbol order summed in four lanes (the i-th into lane i mod 4), the
    /// lanes added pairwise, then the cash. A fixed order, so the same bits everywhere;
    /// four lanes, so a bar's sum waits on a quarter of the additions in turn. Out of
    /// line: inlined into the bar loop, its sums were kept in memory.
    #[inline(never)]
    pub(super) fn value(&self, row: &[f64]) -> f64 {
        self.cash + self.held_value(row)
    }

    /// Every held position at its price in `row` (a short's below zero), summed as
    /// [`Ledger::value`] says.
    #[inline(always)]
    pub(super) fn held_value(&self, row: &[f64]) -> f64 {
        // The lanes rotate after each addition, so the i-th held symbol adds to lane i mod
        // 4 and the four stay in registers; rotated back at the end.
        let (mut a, mut b, mut c, mut d) = (0.0, 0.0, 0.0, 0.0);
        for (w, &word) in self.held.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let s = w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                (a, b, c, d) = (b, c, d, a + self.position[s] * row[s]);
            }
        }
        let [l0, l1, l2, l3] = match self.holding % 4 {
            0 => [a, b, c, d],
            1 => [d, a, b, c],
            2 => [c, d, a, b],
            _ => [b, c, d, a],
        };
        (l0 + l1) + (l2 + l3)
    }

    /// Marks symbol `s` held or flat.
    #[inline(always)]
    fn set_held(&mut self, s: usize, held: bool) {
        let bit = 1 << (s % 64);
        if held {
            self.held[s / 64] |= bit;
            self.holding += 1;
        } else {
            self.held[s / 64] &= !bit;
            self.holding -= 1;
        }
    }

    /// vectorbt reads a cash within its tolerance of zero as zero before an order.
    pub(super) fn cash_now(&self) -> f64 {
        if is_close(self.cash, 0.0) { 0.0 } else { self.cash }
    }

    /// The free cash, read as the cash is ([`Ledger::cash_now`]).
    pub(super) fn free_cash_now(&self) -> f64 {
        if is_close(self.free_cash, 0.0) { 0.0 } else { self.free_cash }
    }

    /// Closes symbol `s`'s whole position at `price` on bar `t` for `reason` (a long
    /// sold, a short covered): at a level (a stop or take-profit) with the fee alone, as
    /// every ThreadX exit at a level. The side it closed, if it filled.
    pub(super) fn exit(
        &mut self,
        t: usize,
        s: usize,
        price: f64,
        reason: ExitReason,
        account: &Account,
    ) -> Option<Side> {
        let costs = if at_level(reason) { Costs { slippage: 0.0, ..account.costs } } else { account.costs };
        let units = self.position[s];
        let side = if units > 0.0 { Side::Long } else { Side::Short };
        let filled = match side {
            Side::Long => {
                let filled = sell(units, price, costs, account.sizing.limits())?;
                self.cash = self.cash_now() + filled.cash;
                self.free_cash = self.free_cash_now() + filled.cash;
                filled
            }
            Side::Short => {
                let filled = cover(-units, price, costs, account.sizing.limits())?;
                // vectorbt's: the debt released at the short's average sale price.
                let debt = if is_close(self.debt[s], 0.0) { 0.0 } else { self.debt[s] };
                let released = -units * (debt / -units);
                self.cash = add(self.cash_now(), -filled.cash);
                self.free_cash = add(self.free_cash_now() + 2.0 * released, -filled.cash);
                self.debt[s] = 0.0;
                filled
            }
        };
        self.activity.traded += filled.size * filled.price;
        self.position[s] = 0.0;
        self.set_held(s, false);
        if let Some(trades) = self.trades.as_mut() {
            let trade = &mut trades[self.open[s]];
            (trade.exit_bar, trade.exit, trade.reason) = (Some(t), Some(filled), reason);
        }
        let entry = self.entered[s];
        self.totals.close_trade(trade_return(side, &entry, filled.cash));
        let won = match side {
            Side::Long => filled.cash > entry.cash,
            Side::Short => entry.cash > filled.cash,
        };
        self.totals.wins += u32::from(won);
        Some(side)
    }

    /// Opens a `side` position in symbol `s` at `price` (its close in `row`, the bar's
    /// prices, or its open) on bar `t` as the sizing says (`value`: the account's value
    /// before the bar's orders; `stop`: the entry's stop level, for risk sizing): a long
    /// paid from the cash, or from what the leverage cap leaves; a short sold
    /// ([`Ledger::short_order`]). Whether it filled.
    pub(super) fn enter(
        &mut self,
        (t, s, row): (usize, usize, &[f64]),
        (side, price): (Side, f64),
        account: &Account,
        (value, stop): (f64, Option<f64>),
    ) -> bool {
        let order = match side {
            Side::Long => self.long_order(row, price, account, (value, stop)),
            Side::Short => self.short_order(price, account, (value, stop)),
        };
        let Some(filled) = order else { return false };
        match side {
            Side::Long => {
                self.cash = add(self.cash_now(), -filled.cash);
                self.free_cash = add(self.free_cash_now(), -filled.cash);
                self.position[s] = filled.size;
            }
            Side::Short => {
                let debt = filled.size * filled.price;
                self.cash = self.cash_now() + filled.cash;
                self.free_cash = add(self.free_cash_now(), add(filled.cash, -2.0 * debt));
                self.debt[s] = debt;
                self.position[s] = -filled.size;
            }
        }
        self.activity.traded += filled.size * filled.price;
        self.set_held(s, true);
        self.entered[s] = filled;
        if let Some(trades) = self.trades.as_mut() {
            self.open[s] = trades.len();
            trades.push(PortfolioTrade {
                symbol: s,
                side,
                entry_bar: t,
                entry: filled,
                exit_bar: None,
                exit: None,
                reason: ExitReason::OpenAtEnd,
            });
        }
        self.totals.trades += 1;
        true
    }

    /// A long entry's fill at `price`, if any (`row`: the bar's prices, which value the
    /// positions a leverage cap counts).
    fn long_order(
        &self,
        row: &[f64],
        price: f64,
        account: &Account,
        (value, stop): (f64, Option<f64>),
    ) -> Option<Filled> {
        let sizing = &account.sizing;
        let cash = self.cash_now();
        let power = account.leverage.map_or(cash, |leverage| {
            let held = self.held_value(row);
            leverage * (self.cash + held) - held
        });
        let units = |units: f64| buy(power, units, price, None, account.costs, sizing.limits());
        match sizing.kind {
            SizeType::Percent => buy(power, f64::INFINITY, price, Some(sizing.size), account.costs, sizing.limits()),
            SizeType::Value => units(sizing.size / price),
            SizeType::TargetPercent if value > 0.0 => units(sizing.size * value / price),
            // The stop must lie below the price: a loss at the stop of `size` of the value.
            SizeType::Risk => match stop.map(|level| price - level) {
                Some(distance) if value > 0.0 && distance > 0.0 && distance < price => {
                    units(sizing.size * value / distance)
                }
                _ => None,
            },
            SizeType::TargetPercent => None,
        }
    }

    /// A short entry's fill at `price`, if any: a percent of the free cash sold short
    /// (vectorbt's), or the units a value, a target percent or a risk size asks for,
    /// which the cash does not limit (vectorbt's short sales of a size).
    fn short_order(&self, price: f64, account: &Account, (value, stop): (f64, Option<f64>)) -> Option<Filled> {
        let sizing = &account.sizing;
        let units = |units: f64| short_sale(self.free_cash_now(), units, price, None, account.costs, sizing.limits());
        match sizing.kind {
            SizeType::Percent => short_sale(
                self.free_cash_now(),
                f64::INFINITY,
                price,
                Some(sizing.size),
                account.costs,
                sizing.limits(),
            ),
            SizeType::Value => units(sizing.size / price),
            SizeType::TargetPercent if value > 0.0 => units(sizing.size * value / price),
            // A short's stop lies above the price.
            SizeType::Risk => match stop.map(|level| level - price) {
                Some(distance) if value > 0.0 && distance > 0.0 => units(sizing.size * value / distance),
                _ => None,
            },
            SizeType::TargetPercent => None,
        }
    }
}
