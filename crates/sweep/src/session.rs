//! [`Session`]: a sweep prepared once (data, indicator bank, signal book, device pool,
//! worker threads) that the CLI, Python and every search drive. It evaluates any batch
//! of combos, or runs the whole plan to files with checkpoints, shards and resume. Its
//! data is one data set, or a universe's symbols traded as one account
//! ([`Session::portfolio`]): the same lifecycle for both.
//!
//! Invariant: [`Session::evaluate`] gives exactly the rows the full sweep gives for the
//! same combos, on whatever device: both run the same book through the same pool.

use crate::error::SweepError;
use crate::leaderboard::check_ranked_metrics;
use crate::output::{KeepFn, SweepReport, run_keeping, run_to_files};
use crate::overfit::{Overfitting, SweepBlocks, warm_up};
use crate::plan::SweepPlan;
use crate::run_data::RunData;
use crate::run_files::{OutputOptions, ProgressFn};
use crate::runner::{ChunkResult, Sweep, thread_pool};
use crate::search::{Constraint, SearchOptions, SearchReport, SearchSpace};
use crate::spec::SweepSpec;
use std::sync::Arc;
use std::time::Instant;
use threadx_backtest::{Account, MetricSet};
use threadx_dispatch::Dispatcher;
use threadx_indicators::{IndicatorBank, Ohlcv};
use threadx_multi_gpu::{Chunk, DevicePool, DistributeOptions};
use threadx_telemetry::PhaseTimer;

/// What preparing a session took: the indicator series computed and where the time went.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Preparation {
    /// Unique indicator series computed (each once).
    pub series: usize,
    pub indicators_s: f64,
    pub book_s: f64,
    pub devices_s: f64,
}

impl Preparation {
    /// What preparing through `banks` since `started` took: their indicators' time (at
    /// most the whole), the rest the books' (the devices' time left at zero).
    pub(crate) fn measured(banks: &[IndicatorBank<'_>], started: Instant) -> Self {
        let indicators_s = banks.iter().flat_map(|b| b.runs()).map(|r| r.elapsed_ms).sum::<f64>() / 1e3;
        let prepare_s = started.elapsed().as_secs_f64();
        let indicators_s = indicators_s.min(prepare_s);
        Self {
            series: banks.iter().map(IndicatorBank::computations).sum(),
            indicators_s,
            book_s: prepare_s - indicators_s,
            devices_s: 0.0,
        }
    }
}

/// What sessions of one spec on other data (a universe's symbols, one after another)
/// share: the dispatcher, the device pool and its worker threads, and how work is split.
#[derive(Debug, Clone)]
pub struct Devices {
    dispatcher: Arc<Dispatcher>,
    pool: Arc<DevicePool>,
    threads: Option<Arc<rayon::ThreadPool>>,
    /// How the whole plan is split (the saved balance, refreshed after the run).
    distribute: DistributeOptions,
    /// How a batch is split: the same ratios, read once, and nothing saved per batch.
    batches: DistributeOptions,
}

/// What a session's combos run on.
#[derive(Debug)]
enum SessionData {
    One(Arc<Ohlcv>),
    /// A universe's symbols as one account: what the run read, as its summary names it.
    Portfolio(Box<RunData>),
}

/// A sweep prepared on data, ready to evaluate combos or run to files.
#[derive(Debug)]
pub struct Session {
    data: SessionData,
    sweep: Sweep,
    devices: Devices,
    preparation: Preparation,
}

impl Session {
    /// Prepares `spec` on `data`: lays out the plan (refusing what would not fit in
    /// memory), computes each indicator once, builds the book, opens the worker threads
    /// and the device pool (measuring the balance first when none is saved, which `note`
    /// is told about).
    pub fn new(
        spec: &SweepSpec,
        data: Arc<Ohlcv>,
        dispatcher: Arc<Dispatcher>,
        note: &mut dyn FnMut(&str),
    ) -> Result<Self, SweepError> {
        let plan = SweepPlan::new(spec, data.len(), dispatcher.policy())?;
        Self::from_plan(plan, data, dispatcher, note)
    }

    /// Prepares a plan already laid out (for a caller that shows it first).
    pub fn from_plan(
        plan: SweepPlan,
        data: Arc<Ohlcv>,
        dispatcher: Arc<Dispatcher>,
        note: &mut dyn FnMut(&str),
    ) -> Result<Self, SweepError> {
        refuse_walk_forward(plan.spec())?;
        if let Some(search) = plan.spec().search() {
            check_ranked_metrics(search.objective.metrics(), MetricSet::Run)?;
        }
        if let Some(options) = plan.spec().overfitting() {
            warm_up(&dispatcher, plan.combos().len(), options);
        }
        let threads = thread_pool(plan.spec())?;
        let (sweep, preparation) = prepare(plan, &data, &dispatcher, threads.as_ref())?;
        Self::opened(SessionData::One(data), sweep, preparation, (dispatcher, threads), note)
    }

    /// Prepares a plan laid out for a universe's symbols ([`SweepPlan::for_symbols`]) as
    /// one account: `symbols` (name and bars, in symbol order, read from `origin`) each
    /// get their indicators (each once) and book; the combos run on the CPU's threads.
    pub fn portfolio(
        plan: SweepPlan,
        (origin, symbols): (&str, &[(String, Arc<Ohlcv>)]),
        account: Account,
        dispatcher: Arc<Dispatcher>,
        note: &mut dyn FnMut(&str),
    ) -> Result<Self, SweepError> {
        refuse_walk_forward(plan.spec())?;
        let started = Instant::now();
        let threads = thread_pool(plan.spec())?;
        let banks: Vec<IndicatorBank<'_>> = symbols.iter().map(|(_, d)| IndicatorBank::new(d, &dispatcher)).collect();
        let sweep = match &threads {
            Some(pool) => pool.install(|| plan.prepare_portfolio(&banks, account))?,
            None => plan.prepare_portfolio(&banks, account)?,
        };
        let preparation = Preparation::measured(&banks, started);
        drop(banks);
        let named: Vec<(&str, &Ohlcv)> = symbols.iter().map(|(n, d)| (n.as_str(), d.as_ref())).collect();
        let clock = sweep.portfolio().map(|p| p.books().times()).unwrap_or_default();
        let schema = sweep.spec().strategy().schema();
        let size_param = account.size_param.map(|p| schema[p].name.as_str());
        let data = RunData::portfolio(origin, &named, clock, (&account, size_param));
        let data = SessionData::Portfolio(Box::new(data));
        Self::opened(data, sweep, preparation, (dispatcher, threads), note)
    }

    /// The session of a prepared sweep: its device pool opened on `threads` (the balance
    /// measured first when none is saved, which `note` is told about).
    fn opened(
        data: SessionData,
        sweep: Sweep,
        mut preparation: Preparation,
        (dispatcher, threads): (Arc<Dispatcher>, Option<Arc<rayon::ThreadPool>>),
        note: &mut dyn FnMut(&str),
    ) -> Result<Self, SweepError> {
        let started = Instant::now();
        let (pool, distribute) = sweep.device_pool(sweep.spec().device(), &dispatcher, threads.clone(), note)?;
        let saved = match &distribute.profiles {
            Some(profiles) => pool.saved_ratios(profiles, &distribute.tag)?.map(|saved| saved.ratios),
            None => None,
        };
        let batches = DistributeOptions { profiles: None, ratios: saved, ..distribute.clone() };
        preparation.devices_s = started.elapsed().as_secs_f64();
        let devices = Devices { dispatcher, pool: Arc::new(pool), threads, distribute, batches };
        Ok(Self { data, sweep, devices, preparation })
    }

    /// Prepares a plan on `data` (of the plan's length) on the devices another session of
    /// the same spec opened ([`Session::devices`]): nothing about the devices is set up or
    /// measured again.
    pub fn with_devices(plan: SweepPlan, data: Arc<Ohlcv>, devices: &Devices) -> Result<Self, SweepError> {
        let (sweep, preparation) = prepare(plan, &data, &devices.dispatcher, devices.threads.as_ref())?;
        Ok(Self { data: SessionData::One(data), sweep, devices: devices.clone(), preparation })
    }

    /// The devices this session runs on, for the next session of its spec.
    pub fn devices(&self) -> &Devices {
        &self.devices
    }

    pub fn spec(&self) -> &SweepSpec {
        self.sweep.spec()
    }

    pub fn sweep(&self) -> &Sweep {
        &self.sweep
    }

    /// The one data set the combos run on; None for a portfolio.
    pub fn bars(&self) -> Option<&Ohlcv> {
        match &self.data {
            SessionData::One(data) => Some(data),
            SessionData::Portfolio(_) => None,
        }
    }

    /// What the run reads, as its identity and summary name it.
    pub fn run_data(&self) -> RunData {
        match &self.data {
            SessionData::One(data) => RunData::of(data),
            SessionData::Portfolio(data) => data.as_ref().clone(),
        }
    }

    pub fn dispatcher(&self) -> &Dispatcher {
        &self.devices.dispatcher
    }

    pub fn preparation(&self) -> Preparation {
        self.preparation
    }

    /// The workers' names, in pool order.
    pub fn workers(&self) -> Vec<String> {
        self.devices.pool.names()
    }

    /// The rows of the combos `combos` (grid numbers), in the order given: the same rows
    /// the full sweep gives for them. Combos the strategy's `require` rule refuses give
    /// no row, as in the sweep. In a sampled session only the sample's combos can run
    /// (the book holds only what they read).
    pub fn evaluate(&self, combos: &[u64]) -> Result<ChunkResult, SweepError> {
        let set = self.sweep.combos();
        for &combo in combos {
            if combo >= set.grid_len() {
                return Err(SweepError::Spec(format!(
                    "combo {combo} is not in the grid, which has {} combos (0 to {})",
                    set.grid_len(),
                    set.grid_len() - 1
                )));
            }
            if set.sample().is_some_and(|s| s.binary_search(&combo).is_err()) {
                return Err(SweepError::Spec(format!(
                    "combo {combo} is not among the combos this session drew (--random or a design's \
                     trials); a session over the whole grid evaluates any combo"
                )));
            }
        }
        let chunks = batch_chunks(combos.len() as u64, set.chunk_size(), &self.devices.pool);
        let work = self.sweep.batch_workload(combos);
        let mut rows = ChunkResult::default();
        self.devices.pool.distribute(
            &work,
            &chunks,
            &self.devices.batches,
            &|_, _| Ok(()),
            &mut |_, part: ChunkResult| {
                rows.extend(part);
                Ok::<(), SweepError>(())
            },
        )?;
        Ok(rows)
    }

    /// A search over the session's grid ([`search`](crate::search)): each batch the
    /// sampler proposes runs on the pool as [`Session::evaluate`] runs it. A session
    /// prepared for a design (its spec's search) holds only that design's combos. Gives
    /// the report and the trials' rows in trial order (with their blocks when the spec
    /// asks for the overfitting statistics: [`Session::search_overfitting`]).
    pub fn search(
        &self,
        options: &SearchOptions,
        progress: &mut dyn FnMut(&SearchReport) -> Result<(), SweepError>,
    ) -> Result<(SearchReport, ChunkResult), SweepError> {
        let space = SearchSpace::new(self.spec().grid());
        let mut rows = ChunkResult::default();
        let report = crate::search::search(
            space,
            options,
            &mut |combos| {
                let batch = self.evaluate(combos)?;
                let metrics = batch.metrics.clone();
                rows.extend(batch);
                Ok(metrics)
            },
            progress,
        )?;
        // A stopping rule ends the trials inside a batch.
        rows.truncate(report.trials.len());
        Ok((report, rows))
    }

    /// The overfitting statistics of a search's trials (`rows`, from [`Session::search`])
    /// with its best feasible trials by the objective, when the spec asks for them: what
    /// a search run to files puts in its summary.
    pub fn search_overfitting(
        &self,
        report: &SearchReport,
        options: &SearchOptions,
        rows: &ChunkResult,
    ) -> Result<Option<Overfitting>, SweepError> {
        let (Some(o), Some(cuts)) = (self.spec().overfitting(), self.sweep.blocks()) else { return Ok(None) };
        let book = self.sweep.book();
        let best = report.best_rows(options, crate::overfit::TOP, |c| book.combo_values(c));
        Overfitting::compute(
            &self.sweep,
            self.dispatcher(),
            cuts,
            o,
            SweepBlocks::of(rows),
            &best,
            options.objective.metric(),
        )
        .map(|o| Some(o.minimizing(options.objective.minimize())))
    }

    /// The rows of parameter sets (schema order), each value on the grid's axis for its
    /// parameter: [`Session::evaluate`] of their combos.
    pub fn evaluate_params(&self, params: &[Vec<f64>]) -> Result<ChunkResult, SweepError> {
        let combos = params.iter().map(|values| self.combo_of(values)).collect::<Result<Vec<_>, _>>()?;
        self.evaluate(&combos)
    }

    /// The combo number of a parameter set, or which value is not on the grid.
    pub fn combo_of(&self, values: &[f64]) -> Result<u64, SweepError> {
        let grid = self.spec().grid();
        let schema = grid.strategy().schema();
        if values.len() != schema.len() {
            return Err(SweepError::Spec(format!(
                "{} values given for the {} parameters of {}",
                values.len(),
                schema.len(),
                grid.strategy()
            )));
        }
        grid.combo_of(values).ok_or_else(|| {
            let (p, v, axis) = schema
                .iter()
                .zip(values)
                .zip(grid.axes())
                .find(|((_, v), axis)| !axis.contains(v))
                .map(|((p, &v), axis)| (p, v, axis))
                .expect("a value off its axis");
            let on: Vec<String> = axis.iter().take(12).map(|&a| p.format(a)).collect();
            SweepError::Spec(format!(
                "{}={}: not on the session's grid (its values: {}{})",
                p.name,
                p.format(v),
                on.join(", "),
                if axis.len() > on.len() { ", …" } else { "" }
            ))
        })
    }

    /// Every combo of the plan, the rows kept in memory in combo order. `progress(done,
    /// total)` runs after each chunk; an error it returns (e.g. [`SweepError::Cancelled`])
    /// stops the run between chunks.
    pub fn run_in_memory(
        &self,
        progress: &mut dyn FnMut(u64, u64) -> Result<(), SweepError>,
    ) -> Result<ChunkResult, SweepError> {
        self.sweep.run_in_memory(&self.devices.pool, &self.devices.distribute, progress)
    }

    /// The overfitting statistics of `rows` (a run of the whole plan, in memory) with the
    /// best combos by `by` (the smallest when `minimize`) among those that keep
    /// `constraints`, when the spec asks for them: what a run to files puts in its
    /// summary, from the same numbers.
    pub fn overfitting(
        &self,
        rows: &ChunkResult,
        by: &str,
        minimize: bool,
        constraints: &[Constraint],
    ) -> Result<Option<Overfitting>, SweepError> {
        Overfitting::of_rows(&self.sweep, self.dispatcher(), rows, (by, minimize, constraints))
    }

    /// The whole plan to files as `opts` says: checkpoints, shards and resume. `phases`
    /// holds the caller's phases so far (e.g. load); the session's preparation is added.
    /// `telemetry`, if given, fills the summary's telemetry slot before it is written.
    pub fn run_to_files(
        &self,
        opts: &OutputOptions,
        mut phases: PhaseTimer,
        progress: ProgressFn<'_>,
        telemetry: Option<&mut dyn FnMut() -> threadx_telemetry::MachineSummary>,
    ) -> Result<SweepReport, SweepError> {
        let p = self.preparation;
        phases.add("indicators", p.indicators_s);
        phases.add("book", p.book_s);
        phases.add("devices", p.devices_s);
        run_to_files(
            &self.sweep,
            &self.run_data(),
            &self.devices.pool,
            &self.devices.dispatcher,
            &self.devices.distribute,
            opts,
            phases,
            progress,
            telemetry,
        )
    }

    /// [`Session::run_to_files`] with no telemetry, handing `keep` every row as it is taken.
    pub(crate) fn run_keeping(
        &self,
        opts: &OutputOptions,
        phases: PhaseTimer,
        progress: ProgressFn<'_>,
        keep: KeepFn<'_>,
    ) -> Result<SweepReport, SweepError> {
        let d = &self.devices;
        let data = self.run_data();
        run_keeping(&self.sweep, &data, &d.pool, &d.dispatcher, &d.distribute, opts, phases, progress, None, keep)
    }

    /// Saves the timing samples the session's indicators took.
    pub fn flush(&self) -> Result<(), String> {
        self.devices.dispatcher.flush().map_err(|e| e.to_string())
    }
}

/// Computes the indicators (each once, through a bank on `data`) and the book of `plan`,
/// on `threads` when given; what that took (the devices' time left at zero).
fn prepare(
    plan: SweepPlan,
    data: &Ohlcv,
    dispatcher: &Dispatcher,
    threads: Option<&Arc<rayon::ThreadPool>>,
) -> Result<(Sweep, Preparation), SweepError> {
    let started = Instant::now();
    let bank = IndicatorBank::new(data, dispatcher);
    let sweep = match threads {
        Some(pool) => pool.install(|| plan.prepare(&bank))?,
        None => plan.prepare(&bank)?,
    };
    Ok((sweep, Preparation::measured(std::slice::from_ref(&bank), started)))
}

/// Chunks of a batch of `len` combos: at most `max` each, and enough of them to keep
/// every lane of the pool busy. How a batch is cut never changes its rows.
fn batch_chunks(len: u64, max: u64, pool: &DevicePool) -> Vec<Chunk> {
    const MIN_PIECE: u64 = 16;
    let lanes = pool.lanes().max(1) as u64;
    let size = len.div_ceil(2 * lanes).clamp(MIN_PIECE, max.max(MIN_PIECE));
    (0..len.div_ceil(size)).map(|i| Chunk { index: i, items: i * size..((i + 1) * size).min(len) }).collect()
}

/// A walk-forward is one sweep per window ([`crate::walk_forward`]), no session's.
fn refuse_walk_forward(spec: &SweepSpec) -> Result<(), SweepError> {
    match spec.walk_forward() {
        Some(_) => {
            Err(SweepError::Spec("a walk-forward runs one sweep per window: call walk_forward, not a session".into()))
        }
        None => Ok(()),
    }
}
