//! A portfolio sweep from its symbols ([`PortfolioSweep`]): the plan laid out for the
//! longest symbol, every symbol's indicators and book, the run's data, and its device pool
//! (the CPU's threads); what the CLI runs to files and Python runs in memory.

use crate::error::SweepError;
use crate::overfit::Overfitting;
use crate::plan::SweepPlan;
use crate::run_data::RunData;
use crate::runner::{ChunkResult, Sweep, thread_pool};
use crate::search::Constraint;
use crate::session::Preparation;
use crate::spec::SweepSpec;
use std::sync::Arc;
use std::time::Instant;
use threadx_backtest::{Account, PortfolioBooks};
use threadx_dispatch::Dispatcher;
use threadx_indicators::{IndicatorBank, Ohlcv};
use threadx_multi_gpu::{DevicePool, DistributeOptions};

/// A portfolio sweep ready to run.
#[derive(Debug)]
pub struct PortfolioSweep {
    pub sweep: Sweep,
    /// What the run read: every symbol on its clock, and the account.
    pub data: RunData,
    pub preparation: Preparation,
    pub pool: DevicePool,
    pub distribute: DistributeOptions,
}

impl PortfolioSweep {
    /// The plan for `symbols` on their joint clock (refused when their books and prices
    /// cannot fit in memory), before any work.
    pub fn plan(
        spec: &SweepSpec,
        symbols: &[(String, Arc<Ohlcv>)],
        dispatcher: &Dispatcher,
    ) -> Result<SweepPlan, SweepError> {
        let lengths: Vec<usize> = symbols.iter().map(|(_, d)| d.len()).collect();
        let clock = PortfolioBooks::joint_clock(symbols.iter().map(|(_, d)| d.timestamps()));
        SweepPlan::portfolio(spec, &lengths, clock.len(), dispatcher.policy())
    }

    /// `plan` ([`Self::plan`]) for `symbols` (name and bars, in symbol order, read from
    /// `origin`) traded as `account`: every symbol's indicators (each once, on
    /// `dispatcher`) and book, on the spec's threads.
    pub fn prepare(
        plan: SweepPlan,
        (origin, symbols): (&str, &[(String, Arc<Ohlcv>)]),
        account: Account,
        dispatcher: &Dispatcher,
    ) -> Result<Self, SweepError> {
        let started = Instant::now();
        let threads = thread_pool(plan.spec())?;
        let banks: Vec<IndicatorBank<'_>> = symbols.iter().map(|(_, d)| IndicatorBank::new(d, dispatcher)).collect();
        let sweep = match &threads {
            Some(pool) => pool.install(|| plan.prepare_portfolio(&banks, account))?,
            None => plan.prepare_portfolio(&banks, account)?,
        };
        let preparation = Preparation::measured(&banks, started);
        let named: Vec<(&str, &Ohlcv)> = symbols.iter().map(|(n, d)| (n.as_str(), d.as_ref())).collect();
        let clock = sweep.portfolio().map(|p| p.books().times()).unwrap_or_default();
        let data = RunData::portfolio(origin, &named, clock, &account);
        let (pool, distribute) = sweep.device_pool(sweep.spec().device(), dispatcher, threads, &mut |_| {})?;
        Ok(Self { sweep, data, preparation, pool, distribute })
    }

    /// Every combo in memory, in combo order (`progress` as in [`Sweep::run_in_memory`]).
    pub fn run_in_memory(
        &self,
        progress: &mut dyn FnMut(u64, u64) -> Result<(), SweepError>,
    ) -> Result<ChunkResult, SweepError> {
        self.sweep.run_in_memory(&self.pool, &self.distribute, progress)
    }

    /// The overfitting statistics of `rows` (all the combos, run in memory) when the spec
    /// asks for them, as [`Overfitting::of_rows`] makes them; CSCV where `dispatcher` says.
    pub fn overfitting(
        &self,
        dispatcher: &Dispatcher,
        rows: &ChunkResult,
        ranking: (&str, bool, &[Constraint]),
    ) -> Result<Option<Overfitting>, SweepError> {
        Overfitting::of_rows(&self.sweep, dispatcher, rows, ranking)
    }
}
