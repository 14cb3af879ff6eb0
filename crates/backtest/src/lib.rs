//! Strategies written as rule files (the built-ins `bb_atr`, `ma_cross`, `rsi_reversion`
//! are embedded ones), trade simulation over precomputed series and per-combo metrics,
//! on the CPU and in a whole-backtest WGSL kernel (one invocation per combo).
//!
//! Main types: [`Strategy`] with its parameter schema ([`ParamSpec`]) and rules
//! ([`RuleKind`]; the language is in `rules/`), the [`SignalBook`] (every entry/exit
//! decision and stop level the combos of a parameter space need, derived once in f64
//! from the [`IndicatorBank`](threadx_indicators::IndicatorBank), or a user's own
//! [`UserSignals`]), [`ComboPlan`] (a combo as a few numbers), [`Costs`] and [`Fills`]
//! (fee, slippage, when orders fill), [`BarTables`] (the per-bar fixed-point tables of a
//! book and its costs), [`Totals`] (a combo's integer totals) and [`Metrics`], and
//! [`Backtester`], which runs plans on the device the dispatcher picks. [`backtest`] runs
//! one parameter set with its trades and equity. Plain books (long, filled at the close,
//! stops on closes) run in the whole-backtest kernel and its CPU twin; books with shorts,
//! trails, next-open fills or stops inside the bar run in the market simulation
//! (`market.rs`) and its GPU twin, the market kernel (`gpu_market.rs`), whose exact f64
//! arithmetic in integers gives the CPU's bits.
//!
//! Invariant: a combo's metrics are the same bytes on every device: decisions come from
//! the book's f64 bits, totals are integers, and [`Totals::metrics`] is the one
//! conversion. They depend only on the book, the plan and the costs, never on which other
//! combos run with it, how they are cut, how many threads or which device runs them.
//!
//! This crate stands on threadx-indicators and threadx-dispatch; it must not depend on
//! sweeps or the CLI.

mod bar_tables;
mod blocks;
mod book;
mod costs;
mod error;
mod fixed;
mod gpu;
mod gpu_market;
mod gpu_sums;
mod gpu_tables;
mod grid;
mod market;
mod market_close;
mod market_position;
mod metrics;
mod param;
mod portfolio;
mod rules;
mod simulate;
mod strategy;
mod trade_parts;

pub use bar_tables::BarTables;
pub use blocks::{BlockCuts, DEFAULT_BLOCKS};
pub use book::{BookLayout, ComboPlan, SignalBook, UserSignals};
pub use costs::{Costs, Fill, Fills};
pub use error::BacktestError;
pub use fixed::{LOG_BITS, RET_BITS, Totals};
pub use gpu::{GpuBacktester, KERNELS, PendingTotals};
pub use grid::{Grid, GridCursor};
pub use metrics::{ExitReason, MOST_METRICS, MetricSet, Metrics, Side, Trade, null_as_nan};
pub use param::{Axis, AxisValue, MAX_AXIS_VALUES, MAX_PARAMS, ParamCell, ParamKind, ParamSpec, ParamValues};
pub use portfolio::{
    Account, Activity, Filled, PortfolioBooks, PortfolioRecord, PortfolioRun, PortfolioSignals, PortfolioTrade,
    SignalLevels, SizeType, Sizing, SizingRequest, simulate_portfolio,
};
pub use rules::{RuleKind, price_series, rank_params, rank_series, rule_functions};
pub use simulate::{
    BacktestReport, BatchTotals, curve_metrics, simulate_cpu, simulate_detailed, simulate_totals, simulate_with_blocks,
};
pub use strategy::{Strategy, strategy_help};

use serde_json::json;
use std::borrow::Cow;
use std::sync::OnceLock;
use threadx_dispatch::{Dispatcher, GpuError, Operation, Outcome};
use threadx_indicators::IndicatorBank;

/// Runs plans of one signal book and fee on the device the dispatcher picks, keeping the
/// book and its tables resident on the GPU (uploaded on first use) across calls.
#[derive(Debug)]
pub struct Backtester<'a> {
    book: &'a SignalBook,
    tables: Cow<'a, BarTables>,
    gpu: OnceLock<Result<GpuBacktester, GpuError>>,
}

impl<'a> Backtester<'a> {
    pub fn new(book: &'a SignalBook, costs: Costs) -> Self {
        Self { book, tables: Cow::Owned(BarTables::new(book, costs)), gpu: OnceLock::new() }
    }

    /// Runs plans of `book` with the `tables` already made for it.
    pub fn with_tables(book: &'a SignalBook, tables: &'a BarTables) -> Self {
        Self { book, tables: Cow::Borrowed(tables), gpu: OnceLock::new() }
    }

    pub fn book(&self) -> &'a SignalBook {
        self.book
    }

    pub fn costs(&self) -> Costs {
        self.tables.costs()
    }

    pub fn tables(&self) -> &BarTables {
        &self.tables
    }

    /// One plan's metrics on the CPU (the same bytes as on any device).
    pub fn metrics(&self, plan: &ComboPlan) -> Metrics {
        simulate_totals(self.book, &self.tables, plan).metrics(self.book.bars(), self.book.bars_per_year())
    }

    /// The profile key of a run of `combos` plans, `backtest_<strategy>:{"bars":N,"size":W}`
    /// with W = N · combos, the work in bar·combos: one family per data length, so unseen
    /// chunk sizes are predicted from measured ones.
    pub fn operation(&self, combos: usize) -> Operation {
        let bars = self.book.bars();
        Operation::new(&format!("backtest_{}", self.book.name()), json!({ "bars": bars }), bars * combos)
    }

    /// Metrics of every plan, in order, on the CPU or the GPU as `dispatcher` decides (a
    /// GPU failure falls back to the CPU); the same bytes either way.
    pub fn run(&self, dispatcher: &Dispatcher, plans: &[ComboPlan]) -> Outcome<Vec<Metrics>> {
        let (bars, per_year) = (self.book.bars(), self.book.bars_per_year());
        self.run_batch(dispatcher, plans).map(|batch| batch.totals.iter().map(|t| t.metrics(bars, per_year)).collect())
    }

    /// The totals (and block statistics, when the tables ask for them) of every plan, in
    /// order, where `dispatcher` decides.
    pub fn run_batch(&self, dispatcher: &Dispatcher, plans: &[ComboPlan]) -> Outcome<BatchTotals> {
        dispatcher.run(
            &self.operation(plans.len()),
            || simulate_cpu(self.book, &self.tables, plans),
            |_| self.on_gpu(dispatcher)?.run(self.book, &self.tables, plans),
        )
    }

    fn on_gpu(&self, dispatcher: &Dispatcher) -> Result<&GpuBacktester, GpuError> {
        self.gpu
            .get_or_init(|| {
                let ctx = dispatcher.gpu().ok_or_else(|| GpuError::NoAdapter("no GPU in the dispatcher".into()))?;
                GpuBacktester::new(ctx.clone(), self.book, &self.tables)
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// Checks a user's bars per year (`--periods-per-year`): positive and finite.
pub fn check_bars_per_year(bars_per_year: f64) -> Result<f64, BacktestError> {
    if bars_per_year.is_finite() && bars_per_year > 0.0 {
        Ok(bars_per_year)
    } else {
        Err(BacktestError::BadValue {
            param: "periods_per_year".into(),
            value: bars_per_year.to_string(),
            problem: "must be a positive number of bars per year (e.g. 252 for daily stock bars)".into(),
        })
    }
}

/// One parameter set (schema order, checked) over the bank's data, with trades and the
/// equity curve (the f64 simulation) and the metrics every device reports for it (the
/// integer totals: the same bytes as the combo's row in a sweep). Indicators are the
/// bank's f64 values; the simulation runs on the CPU. A strategy whose `[sizing]` is an
/// account's is refused ([`Strategy::require_all_in`]).
pub fn backtest(
    bank: &IndicatorBank<'_>,
    strategy: &Strategy,
    values: &[f64],
    costs: Costs,
    bars_per_year: Option<f64>,
) -> Result<BacktestReport, BacktestError> {
    strategy.check(values)?;
    strategy.require_all_in()?;
    let bars_per_year = bars_per_year.map(check_bars_per_year).transpose()?;
    let axes: Vec<Vec<f64>> = values.iter().map(|&v| vec![v]).collect();
    let mut book = SignalBook::build(bank, strategy, &axes)?;
    if let Some(per_year) = bars_per_year {
        book = book.with_bars_per_year(per_year);
    }
    let plan = book.plan(&vec![0; values.len()]);
    let mut report = simulate_detailed(&book, &plan, costs);
    // A market book's detailed run made its metrics from the totals a sweep's row is made
    // of; a plain book's come from the f64 simulation: they are replaced by the row's.
    if book.is_plain() {
        report.metrics = Backtester::new(&book, costs).metrics(&plan);
    }
    Ok(report)
}
