//! A universe traded as one account: every symbol's signals against one cash balance
//! (vectorbt's `from_signals(..., group_by=True, cash_sharing=True, call_seq="auto")`),
//! long and short positions sized by [`Sizing`]. docs/portfolios.md states the rules; this
//! is their CPU reference.
//!
//! On each bar, in this order: each symbol with a bar there takes its close as its price
//! (a symbol without one keeps its position, valued at its last close, and trades
//! nothing); the bar's orders run as vectorbt's call sequence sorts them by approximate
//! value ([`trade_bar`]): sales (a long's exit, the largest first; a short's entry), then
//! purchases (a short's cover; a long's entry), each from the cash left, until it runs
//! out or `max_positions` are held. An entry while holding is ignored; no symbol enters
//! on the bar it exited, but by a reversal (one order: the exit, then the other side's
//! entry). The equity at the close is the cash plus every position at its last close (a
//! short's below zero). A fill's arithmetic is vectorbt's (`orders.rs`), so the account
//! equals vectorbt's to its tolerances, and its [`Totals`] come from the equity curve as
//! the market simulation's do.

mod books;
mod ledger;
mod levels;
mod orders;
mod record;
mod schedule;
mod sides;
mod signals;
mod sizing;

pub use books::PortfolioBooks;
pub use orders::Filled;
pub use record::{Activity, PortfolioRecord, PortfolioRun, PortfolioTrade};
pub use signals::{PortfolioSignals, SignalLevels, simulate_portfolio};
pub use sizing::{SizeType, Sizing, SizingRequest};

use crate::blocks::Snapshots;
use crate::costs::Costs;
use crate::error::BacktestError;
use crate::fixed::{Totals, return_units};
use crate::metrics::{ExitReason, Side};
use crate::param::ParamSpec;
use crate::trade_parts::{Drawdown, log_of};
use ledger::Ledger;
use schedule::{Act, Exit, Schedule};

/// What the account trades: each symbol's price at each bar of the clock and its own
/// decisions. A symbol's decisions do not depend on the cash, so they are asked as events:
/// the next bar a flat symbol may enter, and, once it holds, the bar its position exits.
/// An event is a [`Mark`]: the bar of the clock, and the symbol's own bar there.
pub(crate) trait Source {
    fn bars(&self) -> usize;
    fn symbols(&self) -> usize;
    /// Every symbol's last close at each bar, row-major (bars × symbols): its close where
    /// it has a bar, else its last one, and 0 before its first.
    fn prices(&self) -> &[f64];
    /// The first of symbol `s`'s own bars from `own` on at which it may enter when flat
    /// (the bar whose close decides it, or the bar after, filled at the next open), and
    /// the side; what its exit will read there is fetched into the caches ahead (a hint).
    fn next_entry(&self, s: usize, own: usize) -> Option<(Mark, Side)>;
    /// Where symbol `s`'s `side` position, filled at its own bar `own` at `price`, exits,
    /// why, and at what price (a reversal: where the other side enters); None: held to
    /// the end.
    fn exit_after(&self, s: usize, own: usize, price: f64, side: Side) -> Option<(Mark, Exit)>;
    /// The stop level symbol `s`'s `side` position filled at own bar `own` would get;
    /// None without a stop (0 or NaN: none either).
    fn stop_level(&self, s: usize, own: usize, side: Side) -> Option<f64>;
    /// The price an order of symbol `s` fills at on its own bar `own`: None at the close
    /// (the bar's price), else the bar's open (decisions filled at the next open).
    fn fill_price(&self, s: usize, own: usize) -> Option<f64>;
    /// Whether a bar's entries go by rank ([`Source::rank`]) rather than symbol order.
    fn ranked(&self) -> bool;
    /// Symbol `s`'s rank at its own bar `own`: the highest enters first (NaN: last).
    fn rank(&self, s: usize, own: usize) -> f64;
}

/// A bar of the clock and a symbol's own bar there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) bar: usize,
    pub(crate) own: usize,
}

/// The account: its starting cash, how entries are sized, what fills cost, at most how
/// many positions it holds at once (None: no limit), and its leverage cap
/// ([`Account::with_leverage`]; None: the cash alone pays). With `size_param`, each
/// parameter set's value of that parameter is its size ([`Account::for_params`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Account {
    pub init_cash: f64,
    pub sizing: Sizing,
    pub costs: Costs,
    pub max_positions: Option<usize>,
    pub leverage: Option<f64>,
    pub size_param: Option<usize>,
}

impl Account {
    /// A checked account: a positive, finite starting cash.
    pub fn new(init_cash: f64, sizing: Sizing, costs: Costs) -> Result<Self, BacktestError> {
        if !(init_cash.is_finite() && init_cash > 0.0) {
            return Err(BacktestError::BadValue {
                param: "init_cash".into(),
                value: init_cash.to_string(),
                problem: "the starting cash must be a positive number".into(),
            });
        }
        Ok(Self { init_cash, sizing, costs, max_positions: None, leverage: None, size_param: None })
    }

    /// The checked account `request` asks for with `costs`: its sizing
    /// ([`SizingRequest::sizing`]), a starting cash of 1, no limit on positions and no
    /// leverage where it says nothing. A problem names its field.
    pub fn requested(request: &SizingRequest, costs: Costs) -> Result<Self, BacktestError> {
        let account = Self::new(request.init_cash.unwrap_or(1.0), request.sizing()?, costs)?
            .with_max_positions(request.max_positions)?
            .with_leverage(request.leverage)?;
        Ok(Self { size_param: request.size_param, ..account })
    }

    /// This account with each entry sized `size` (a value [`Account::with_size`] took).
    pub fn sized(&self, size: f64) -> Self {
        Self { sizing: Sizing { size, ..self.sizing }, ..*self }
    }

    /// The account of one parameter set (`values`, in the order of `schema`, a strategy's):
    /// its size parameter's value as its fixed size, checked, a problem naming the
    /// parameter; the account itself without a size parameter.
    pub fn for_params(&self, schema: &[ParamSpec], values: &[f64]) -> Result<Self, BacktestError> {
        match self.size_param {
            Some(p) => Ok(Self { size_param: None, ..self.with_size(values[p], &schema[p].name)? }),
            None => Ok(*self),
        }
    }

    /// This account sizing each entry `size` (the value of parameter `param`), checked.
    pub fn with_size(&self, size: f64, param: &str) -> Result<Self, BacktestError> {
        let s = &self.sizing;
        let lot = Some(s.lot).filter(|l| !l.is_nan());
        let sizing = Sizing::new(size, s.kind, lot, s.min_size).map_err(|e| match e {
            BacktestError::BadValue { value, problem, .. } => BacktestError::BadValue {
                param: param.to_owned(),
                value,
                problem: format!("as [sizing]'s size, {problem}"),
            },
            e => e,
        })?;
        Ok(Self { sizing, ..*self })
    }

    /// The account in words, "cash 1000, 250 per entry"; `size_param` names a swept
    /// size's parameter.
    pub fn describe(&self, size_param: Option<&str>) -> String {
        let s = &self.sizing;
        let each = match (size_param.filter(|_| self.size_param.is_some()), s.kind) {
            (Some(name), kind) => format!("each entry sized by parameter {name} ({})", kind.name()),
            (None, SizeType::Percent) => format!("{}% of the cash left per entry", s.size * 100.0),
            (None, SizeType::Value) => format!("{} per entry", s.size),
            (None, SizeType::TargetPercent) => format!("{}% of the account's value per entry", s.size * 100.0),
            (None, SizeType::Risk) => {
                format!("{}% of the account's value at risk to the stop per entry", s.size * 100.0)
            }
        };
        let lot = if s.lot.is_nan() { String::new() } else { format!(" in lots of {}", s.lot) };
        let most = self
            .max_positions
            .map_or(String::new(), |n| format!(", at most {n} position{}", if n == 1 { "" } else { "s" }));
        let leverage = self.leverage.map_or(String::new(), |l| format!(", positions at most {l}× its value"));
        format!("cash {}, {each}{lot}{most}{leverage}", self.init_cash)
    }

    /// At most `leverage` (> 0) times the account's value held in positions: an entry
    /// buys no more than takes the positions' value (at the bar's prices, after its
    /// earlier orders) to that, borrowing the cash beyond 1 (at no interest; the cash then
    /// goes below zero). 1 is the default: the cash alone pays.
    pub fn with_leverage(self, leverage: Option<f64>) -> Result<Self, BacktestError> {
        match leverage {
            Some(l) if !(l.is_finite() && l > 0.0) => Err(BacktestError::BadValue {
                param: "leverage".into(),
                value: l.to_string(),
                problem: "a leverage cap is a positive multiple of the account's value (e.g. 0.5 or 2)".into(),
            }),
            Some(l) if l != 1.0 => Ok(Self { leverage: Some(l), ..self }),
            _ => Ok(Self { leverage: None, ..self }),
        }
    }

    /// At most `n` positions at once (≥ 1): an entry while `n` are held is skipped, as one
    /// the cash cannot pay for.
    pub fn with_max_positions(self, n: Option<usize>) -> Result<Self, BacktestError> {
        if n == Some(0) {
            return Err(BacktestError::BadValue {
                param: "max_positions".into(),
                value: "0".into(),
                problem: "at least 1 position (leave it out for no limit)".into(),
            });
        }
        Ok(Self { max_positions: n, ..self })
    }
}

/// The bar's orders, taken from the schedule, in two lists run one after the other:
/// those that sell (a long's exit, a short's entry), then those that buy (a short's
/// cover, a long's entry). Each is (its key, its tie-break, symbol), sorted by the key and
/// then the tie-break ([`trade_bar`]); what the symbol does stays in the schedule until
/// its order runs. `mixed[i]`: whether list i holds two different keys or tie-breaks
/// (else it is in symbol order already, and sorting it would change nothing).
struct Due {
    sales: Vec<Order>,
    purchases: Vec<Order>,
    mixed: [bool; 2],
}

type Order = (f64, f64, usize);

/// Runs the account over every bar of `source`: its [`Totals`] (from the equity curve and
/// the closed trades, as every simulation's), and its record when `detailed`. Only the
/// bars with an event (an entry or an exit) trade; every bar is valued. `schedule` is
/// empty and fits the source (a new one is made otherwise); the run leaves it empty.
/// `snapshots`, if any, takes the running sums of the bars' returns at each block start.
pub(crate) fn run<S: Source>(
    source: &S,
    account: &Account,
    (detailed, snapshots): (bool, Option<Snapshots<'_>>),
    schedule: &mut Schedule,
) -> PortfolioRun {
    let mut lane = Lane::start(source, account, (detailed, snapshots), schedule);
    for t in 0..source.bars() {
        lane.bar(source, account, t);
    }
    lane.finish(account)
}

/// Several accounts, `sources[i]` run as `accounts[i]` with `schedules[i]` and
/// `snapshots`' i-th, on one clock, walked bar by bar together: each bar's prices and
/// each symbol's closes come from memory once for all of them (one account at a time
/// read the whole clock's prices from memory for each). Each one's totals are its own
/// [`run`]'s, bit for bit: no figure crosses from one lane to another.
pub(crate) fn run_together<'s, S: Source>(
    sources: &[S],
    accounts: &[Account],
    schedules: &'s mut [Schedule],
    snapshots: Vec<Option<Snapshots<'s>>>,
) -> Vec<(Totals, Activity)> {
    let mut lanes: Vec<Lane<'s>> = sources
        .iter()
        .zip(accounts)
        .zip(schedules.iter_mut().zip(snapshots))
        .map(|((source, account), (schedule, snapshots))| Lane::start(source, account, (false, snapshots), schedule))
        .collect();
    let bars = sources.first().map_or(0, Source::bars);
    for t in 0..bars {
        for ((lane, source), account) in lanes.iter_mut().zip(sources).zip(accounts) {
            lane.bar(source, account, t);
        }
    }
    lanes
        .into_iter()
        .zip(accounts)
        .map(|(lane, account)| {
            let run = lane.finish(account);
            (run.totals, run.activity)
        })
        .collect()
}

/// One account walking the clock: its ledger and schedule, the bar's events, its record
/// and block snapshots where kept, and its equity and drawdown so far.
struct Lane<'s> {
    ledger: Ledger,
    schedule: &'s mut Schedule,
    due: Due,
    record: Option<PortfolioRecord>,
    snapshots: Option<Snapshots<'s>>,
    equity: f64,
    drawdown: Drawdown,
}

impl<'s> Lane<'s> {
    /// The account at its starting cash before the first bar, every symbol's first entry
    /// scheduled.
    fn start<S: Source>(
        source: &S,
        account: &Account,
        (detailed, snapshots): (bool, Option<Snapshots<'s>>),
        schedule: &'s mut Schedule,
    ) -> Self {
        let (bars, symbols) = (source.bars(), source.symbols());
        if !schedule.fits(bars, symbols) {
            *schedule = Schedule::new(bars, symbols);
        }
        let ledger = Ledger::new(account.init_cash, symbols, detailed);
        let record = detailed.then(|| PortfolioRecord {
            equity: Vec::with_capacity(bars),
            cash: Vec::with_capacity(bars),
            positions: Vec::with_capacity(bars * symbols),
            trades: Vec::new(),
        });
        for s in 0..symbols {
            if let Some((at, side)) = source.next_entry(s, 0) {
                schedule.set(s, at, Act::Enter(side));
            }
        }
        let due = Due { sales: Vec::with_capacity(symbols), purchases: Vec::with_capacity(symbols), mixed: [false; 2] };
        Self { ledger, schedule, due, record, snapshots, equity: account.init_cash, drawdown: Drawdown::START }
    }

    /// Bar `t`: its orders, if any, then the close's value and its return.
    #[inline(always)]
    fn bar<S: Source>(&mut self, source: &S, account: &Account, t: usize) {
        let symbols = source.symbols();
        let row = &source.prices()[t * symbols..(t + 1) * symbols];
        let ledger = &mut self.ledger;
        if self.schedule.any_at(t) {
            trade_bar(source, account, (ledger, self.schedule, &mut self.due), t, row);
        }
        let now = ledger.value(row);
        if let Some(snapshots) = self.snapshots.as_mut() {
            snapshots.bar(t, (ledger.totals.sum, ledger.totals.sum_sq));
        }
        ledger.totals.add_bar(return_units(now, self.equity));
        // The drawdown on equity over the starting cash: the same ratios as on equity.
        self.drawdown.step(now / account.init_cash);
        self.equity = now;
        ledger.totals.held += u32::from(ledger.holding > 0);
        ledger.activity.equity += now;
        ledger.activity.held += ledger.holding as u64;
        if let Some(record) = self.record.as_mut() {
            record.equity.push(now);
            record.cash.push(ledger.cash);
            record.positions.extend_from_slice(&ledger.position);
        }
    }

    /// The run after its last bar.
    fn finish(mut self, account: &Account) -> PortfolioRun {
        let mut totals = self.ledger.totals;
        if let Some(snapshots) = self.snapshots.as_mut() {
            snapshots.finish((totals.sum, totals.sum_sq));
        }
        totals.log_equity = log_of(self.equity / account.init_cash);
        totals.drawdown = log_of(self.drawdown.worst());
        if let Some(record) = self.record.as_mut() {
            record.trades = self.ledger.trades.unwrap_or_default();
        }
        PortfolioRun { totals, activity: self.ledger.activity, record: self.record }
    }
}

/// Bar `t`'s orders, sorted as vectorbt's `call_seq="auto"` sorts them, by their
/// approximate value at the bar's prices before its orders: those that sell first (a
/// long's exit, −units · price, the largest first; a short's entry, minus what it takes
/// in), then those that buy (a short's cover, its units · price, the smallest first; a
/// long's entry, what it puts in). What an entry puts in or takes in: its percent of the
/// cash (a short's, of the free cash, none below 0), its value, or its fraction of the
/// account's value. On equal keys exits come first, then entries by rank (the highest
/// first, NaN last), then symbol order. Each symbol's next event is scheduled.
fn trade_bar<S: Source>(
    source: &S,
    account: &Account,
    (ledger, schedule, due): (&mut Ledger, &mut Schedule, &mut Due),
    t: usize,
    row: &[f64],
) {
    // A target percent and a risk size from the value before the bar's orders; no other
    // sizing reads it.
    let sizing = &account.sizing;
    let value = if sizing.kind.reads_value() { ledger.value(row) } else { f64::NAN };
    // What an entry of each side puts in (takes in), the same for every entry of the bar.
    let (long_in, short_in) = match sizing.kind {
        SizeType::Percent => (sizing.size * ledger.cash_now(), sizing.size * ledger.free_cash_now().max(0.0)),
        SizeType::Value => (sizing.size, sizing.size),
        SizeType::TargetPercent | SizeType::Risk => (sizing.size * value, sizing.size * value),
    };
    let ranked = source.ranked();
    due.sales.clear();
    due.purchases.clear();
    due.mixed = [false; 2];
    schedule.take_at(t, |s, own, act| {
        let units = ledger.position[s];
        let (key, tie, sells) = match act {
            Act::Exit(_) => (-units * row[s], f64::NEG_INFINITY, units > 0.0),
            Act::Enter(side) => {
                let rank = if ranked { source.rank(s, own) } else { 0.0 };
                let tie = if rank.is_nan() { f64::INFINITY } else { -rank };
                match side {
                    Side::Long => (long_in, tie, false),
                    Side::Short => (-short_in, tie, true),
                }
            }
        };
        let (list, mixed) =
            if sells { (&mut due.sales, &mut due.mixed[0]) } else { (&mut due.purchases, &mut due.mixed[1]) };
        if let Some(&(k, t, _)) = list.first() {
            *mixed |= k.to_bits() != key.to_bits() || t.to_bits() != tie.to_bits();
        }
        list.push((key, tie, s));
    });
    for (list, mixed) in [&mut due.sales, &mut due.purchases].into_iter().zip(due.mixed) {
        if mixed {
            list.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        }
    }
    for i in 0..due.sales.len() + due.purchases.len() {
        let (_, _, s) = due.sales.get(i).copied().unwrap_or_else(|| due.purchases[i - due.sales.len()]);
        let (own, act) = schedule.pending(s);
        let bar = (t, row, value);
        match act {
            Act::Exit(Exit { reason, inside }) => {
                let Some(side) = ledger.exit(t, s, inside.unwrap_or(row[s]), reason, account) else { continue };
                if reason == ExitReason::Reverse {
                    // A reversal: the other side enters at once, at the same fill.
                    enter_or_wait(source, account, (ledger, schedule), bar, (s, own, side.opposite()));
                } else if let Some((at, side)) = source.next_entry(s, own + 1) {
                    // No entry on the bar of an exit.
                    schedule.set(s, at, Act::Enter(side));
                }
            }
            Act::Enter(side) => enter_or_wait(source, account, (ledger, schedule), bar, (s, own, side)),
        }
    }
}

/// Symbol `s` enters `side` at its own bar `own` (bar `t` of the clock, the bar's prices
/// `row`, the account's `value` before its orders), if the cash and `max_positions` let
/// it, its exit then scheduled; else its next entry.
#[inline(always)]
fn enter_or_wait<S: Source>(
    source: &S,
    account: &Account,
    (ledger, schedule): (&mut Ledger, &mut Schedule),
    (t, row, value): (usize, &[f64], f64),
    (s, own, side): (usize, usize, Side),
) {
    let room = account.max_positions.is_none_or(|n| ledger.holding < n);
    let stop = if account.sizing.kind == SizeType::Risk { source.stop_level(s, own, side) } else { None };
    let price = source.fill_price(s, own).unwrap_or(row[s]);
    if room && ledger.enter((t, s, row), (side, price), account, (value, stop)) {
        if let Some((at, exit)) = source.exit_after(s, own, price, side) {
            schedule.set(s, at, Act::Exit(exit));
        }
    } else if let Some((at, side)) = source.next_entry(s, own + 1) {
        schedule.set(s, at, Act::Enter(side));
    }
}

#[cfg(test)]
mod tests;
