//! The runner: a prepared [`Sweep`] (indicators computed once, the signal book or a
//! portfolio's books, the combos) as a [`Workload`] of the device pool: its chunks run on
//! the pool's workers and come back in chunk order.

use crate::combos::ComboSet;
use crate::error::SweepError;
use crate::portfolio::PortfolioSim;
use crate::spec::SweepSpec;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::Arc;
use std::sync::Mutex;
use threadx_backtest::{
    BacktestError, Backtester, BarTables, BatchTotals, BlockCuts, ComboPlan, GpuBacktester, MetricSet, Metrics,
    PendingTotals, SignalBook, simulate_cpu, simulate_detailed,
};
use threadx_dispatch::{DeviceMode, Dispatcher};
use threadx_multi_gpu::{
    BalanceOptions, Chunk, DevicePool, DistributeOptions, RunStats, WorkError, WorkerDevice, Workload,
};
use threadx_profile_store::Profiles;

/// What a chunk (or any range of combo positions) produced: the grid numbers of the
/// combos it ran (those the strategy's rules allow) and their metrics, in combo order,
/// and when the spec asks for them their block statistics (`BlockCuts::stats_len` per
/// combo).
#[derive(Debug, Clone, Default)]
pub struct ChunkResult {
    pub combos: Vec<u64>,
    pub metrics: Vec<Metrics>,
    pub blocks: Vec<f64>,
}

impl ChunkResult {
    /// Appends `part` (the next combos in order).
    pub fn extend(&mut self, part: ChunkResult) {
        self.combos.extend(part.combos);
        self.metrics.extend(part.metrics);
        self.blocks.extend(part.blocks);
    }

    /// Keeps the first `n` combos' rows and blocks.
    pub fn truncate(&mut self, n: usize) {
        let per = self.blocks.len() / self.combos.len().max(1);
        self.combos.truncate(n);
        self.metrics.truncate(n);
        self.blocks.truncate(n * per);
    }
}

/// A sweep ready to run: its spec, what its combos run on (computed once: every indicator
/// through the bank, the signal book) and its combos.
#[derive(Debug)]
pub struct Sweep {
    spec: SweepSpec,
    simulation: Simulation,
    combos: ComboSet,
}

/// What a sweep's combos run on.
#[derive(Debug)]
// One per sweep, made once and never moved in a loop: the book's size is no cost.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Simulation {
    /// One data set: its book and per-bar tables, the book uploaded to each GPU once, on
    /// first use, and resident there for every later run.
    Book { book: SignalBook, tables: BarTables, resident: Mutex<Vec<Arc<GpuBacktester>>> },
    /// A universe as one account, on the CPU.
    Portfolio(PortfolioSim),
}

impl Sweep {
    pub(crate) fn new(spec: SweepSpec, simulation: Simulation, combos: ComboSet) -> Self {
        Self { spec, simulation, combos }
    }

    pub fn spec(&self) -> &SweepSpec {
        &self.spec
    }

    /// The signal book: the data set's, or a portfolio's first symbol's (every symbol's
    /// book is laid out from one grid: the same rows, plans and parameter values).
    pub fn book(&self) -> &SignalBook {
        match &self.simulation {
            Simulation::Book { book, .. } => book,
            Simulation::Portfolio(portfolio) => portfolio.first_book(),
        }
    }

    /// Whether the combos run as one account over a universe.
    pub fn is_portfolio(&self) -> bool {
        matches!(self.simulation, Simulation::Portfolio(_))
    }

    /// The metrics its rows carry: a portfolio's, or every run's.
    pub fn metric_set(&self) -> MetricSet {
        if self.is_portfolio() { MetricSet::Portfolio } else { MetricSet::Run }
    }

    /// The portfolio the combos run as, if they do.
    pub fn portfolio(&self) -> Option<&PortfolioSim> {
        match &self.simulation {
            Simulation::Portfolio(portfolio) => Some(portfolio),
            Simulation::Book { .. } => None,
        }
    }

    /// Combo `combo`'s returns bar by bar, in detail on the CPU: those its Sharpe ratio
    /// and blocks are made of.
    pub(crate) fn returns(&self, combo: u64) -> Vec<f64> {
        match &self.simulation {
            Simulation::Book { book, .. } => {
                simulate_detailed(book, &book.combo_plan(combo), self.spec.costs()).returns()
            }
            Simulation::Portfolio(portfolio) => portfolio.returns(combo),
        }
    }

    /// How many of `combos` cannot trade on the data (too short for their parameters; in
    /// a portfolio, on every symbol).
    pub(crate) fn untradeable(&self, combos: &[u64]) -> u64 {
        match &self.simulation {
            Simulation::Book { book, .. } if book.some_cannot_trade() => {
                combos.iter().filter(|&&c| book.cannot_trade(&book.combo_plan(c))).count() as u64
            }
            Simulation::Book { .. } => 0,
            Simulation::Portfolio(portfolio) => combos.iter().filter(|&&c| portfolio.cannot_trade(c)).count() as u64,
        }
    }

    /// The bars a combo's metrics are measured over, and what annualises them.
    pub(crate) fn bars(&self) -> (usize, f64) {
        match &self.simulation {
            Simulation::Book { book, .. } => (book.bars(), book.bars_per_year()),
            Simulation::Portfolio(portfolio) => portfolio.bars(),
        }
    }

    /// The totals of `plans` (those of `combos`) on the CPU.
    fn totals_on_cpu(&self, combos: &[u64], plans: &[ComboPlan]) -> BatchTotals {
        match &self.simulation {
            Simulation::Book { book, tables, .. } => simulate_cpu(book, tables, plans),
            Simulation::Portfolio(portfolio) => portfolio.totals(combos),
        }
    }

    /// Refuses a sweep some of whose combos cannot trade on its data, where every combo
    /// must be comparable (a universe's symbols, a walk-forward's train windows): the
    /// data too short for the slowest combo (the largest value of every axis).
    pub fn require_every_combo(&self) -> Result<(), SweepError> {
        // A portfolio's combo trades where its longest symbol can.
        let book = match &self.simulation {
            Simulation::Book { book, .. } => book,
            Simulation::Portfolio(portfolio) => portfolio.longest_book(),
        };
        if !book.some_cannot_trade() {
            return Ok(());
        }
        let strategy = self.spec.strategy();
        let slowest: Vec<f64> =
            self.spec.axes().iter().map(|values| values.iter().copied().fold(f64::MIN, f64::max)).collect();
        Err(SweepError::Backtest(BacktestError::TooShort {
            strategy: strategy.name().to_owned(),
            params: strategy.describe(&slowest),
            needed: book.bars_needed(),
            len: book.bars(),
        }))
    }

    /// The blocks each combo's statistics are kept in, when the spec asks for them.
    pub fn blocks(&self) -> Option<&BlockCuts> {
        match &self.simulation {
            Simulation::Book { tables, .. } => tables.blocks(),
            Simulation::Portfolio(portfolio) => portfolio.blocks(),
        }
    }

    pub fn combos(&self) -> &ComboSet {
        &self.combos
    }

    /// The profile tag of this sweep's work: `backtest_<strategy>` (one balance per
    /// strategy; combos per second scale alike on every device with the data length).
    pub fn workload_tag(&self) -> String {
        format!("backtest_{}", self.spec.strategy().name())
    }

    /// This sweep as work for the device pool: its combo positions, run a range at a time.
    pub fn workload(&self) -> SweepWork<'_> {
        SweepWork { sweep: self, batch: None }
    }

    /// The combos `batch` (grid numbers) as work for the device pool: item `i` is `batch[i]`.
    pub fn batch_workload<'a>(&'a self, batch: &'a [u64]) -> SweepWork<'a> {
        SweepWork { sweep: self, batch: Some(batch) }
    }

    /// The book resident on the GPU of `ctx`: uploaded on first use, then shared. A
    /// portfolio runs on the CPU.
    fn resident_on(&self, ctx: &Arc<threadx_dispatch::GpuContext>) -> Result<Arc<GpuBacktester>, WorkError> {
        let Simulation::Book { book, tables, resident } = &self.simulation else {
            return Err(WorkError::Failed("a portfolio runs on the CPU".into()));
        };
        let mut resident = resident.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(gpu) = resident.iter().find(|g| Arc::ptr_eq(g.context(), ctx)) {
            return Ok(gpu.clone());
        }
        let gpu = Arc::new(GpuBacktester::new(ctx.clone(), book, tables)?);
        resident.push(gpu.clone());
        Ok(gpu)
    }

    /// The logical chunk `chunk` of the combos (its size depends only on the data length).
    pub fn chunk(&self, chunk: u64) -> Chunk {
        Chunk { index: chunk, items: self.combos.chunk(chunk) }
    }

    /// The combos at `positions` (of the sweep, or of `batch`) that the strategy's rules
    /// allow, with their plans.
    fn plans(&self, positions: Range<u64>, batch: Option<&[u64]>) -> (Vec<u64>, Vec<ComboPlan>) {
        let (strategy, grid) = (self.spec.strategy(), self.spec.grid());
        let mut combos = Vec::with_capacity((positions.end - positions.start) as usize);
        let mut plans = Vec::with_capacity(combos.capacity());
        let mut cursor = grid.cursor();
        for position in positions {
            let combo = match batch {
                Some(batch) => batch[position as usize],
                None => self.combos.combo_at(position),
            };
            let index = cursor.index(combo);
            if strategy.allows(&grid.values_at(index)) {
                combos.push(combo);
                plans.push(self.book().plan(index));
            }
        }
        (combos, plans)
    }

    /// The workers this sweep runs on in `mode`, and how the work is split among them.
    /// With several workers and no balance saved for the sweep's workload, the balance is
    /// measured first (and saved), telling `note` what it does; `auto` then keeps the
    /// workers that add throughput. The CPU runs on `threads` when given.
    pub fn device_pool(
        &self,
        mode: DeviceMode,
        dispatcher: &Dispatcher,
        threads: Option<Arc<rayon::ThreadPool>>,
        note: &mut dyn FnMut(&str),
    ) -> Result<(DevicePool, DistributeOptions), SweepError> {
        let mut distribute = DistributeOptions::new(self.workload_tag());
        // A small sweep runs on the CPU in `auto` mode, decided before the adapters are
        // probed (it never waits for them), whatever balance is saved.
        let policy = dispatcher.policy();
        let small = mode == DeviceMode::Auto && policy.is_small_sweep(self.combos.len(), self.bars().0 as u64);
        if small || self.is_portfolio() {
            return Ok((DevicePool::for_mode(DeviceMode::Cpu, dispatcher, threads)?, distribute));
        }
        let mut pool = DevicePool::for_mode(mode, dispatcher, threads.clone())?;
        if pool.workers().len() < 2 {
            return Ok((pool, distribute));
        }
        let profiles = Profiles::from_env(dispatcher.fingerprint());
        let ratios = match pool.saved_ratios(&profiles, &distribute.tag)? {
            Some(saved) => saved.ratios,
            None => {
                note(&format!(
                    "measuring the balance of {} on {} (once; `threadx balance` measures it again):",
                    distribute.tag,
                    pool.names().join(", ")
                ));
                let balance = pool.profile_auto_balance(
                    &self.workload(),
                    &BalanceOptions::default(),
                    &distribute.tag,
                    Some(&profiles),
                )?;
                note(&balance.to_string());
                balance.ratios
            }
        };
        if mode == DeviceMode::Auto {
            pool = pool.useful(&ratios, policy);
        }
        distribute.profiles = Some(profiles);
        Ok((pool, distribute))
    }

    /// Every combo of the sweep run on `pool`, the rows kept in memory in combo order (no
    /// files, no checkpoint): for callers that want the rows themselves. `progress(done,
    /// total)` runs on the calling thread after each chunk, in chunk order; an error it
    /// returns (e.g. [`SweepError::Cancelled`]) stops the run between chunks.
    pub fn run_in_memory(
        &self,
        pool: &DevicePool,
        options: &DistributeOptions,
        progress: &mut dyn FnMut(u64, u64) -> Result<(), SweepError>,
    ) -> Result<ChunkResult, SweepError> {
        let chunks: Vec<u64> = (0..self.combos.chunks()).collect();
        let total = self.combos.len();
        let mut rows = ChunkResult::default();
        let mut done = 0;
        progress(0, total)?;
        self.run(pool, &chunks, options, &|_, _| Ok(()), &mut |chunk, part| {
            rows.extend(part);
            done += self.combos.chunk_len(chunk);
            progress(done, total)
        })?;
        Ok(rows)
    }

    /// Every combo of the sweep in one call, on the device the dispatcher picks, in combo
    /// order: the in-memory path for small sweeps and for walk-forward training windows.
    pub fn run_all(&self, dispatcher: &Dispatcher) -> Result<ChunkResult, SweepError> {
        let (combos, plans) = self.plans(0..self.combos.len(), None);
        let batch = match &self.simulation {
            Simulation::Book { book, tables, .. } => {
                Backtester::with_tables(book, tables).run_batch(dispatcher, &plans).value
            }
            Simulation::Portfolio(portfolio) => portfolio.totals(&combos),
        };
        Ok(SweepWork { sweep: self, batch: None }.rows(combos, batch))
    }

    /// The rows of `combos` (grid numbers; those the rules refuse, and those a sampled
    /// sweep did not prepare, left out), run on the CPU: for a handful of combos beside a
    /// run, e.g. a top combo's grid neighbours.
    pub fn evaluate_on_cpu(&self, combos: &[u64]) -> ChunkResult {
        let held: Vec<u64> = match self.combos.sample() {
            Some(sample) => combos.iter().copied().filter(|c| sample.binary_search(c).is_ok()).collect(),
            None => combos.to_vec(),
        };
        let (combos, plans) = self.plans(0..held.len() as u64, Some(&held));
        let totals = self.totals_on_cpu(&combos, &plans);
        SweepWork { sweep: self, batch: None }.rows(combos, totals)
    }

    /// Runs `chunks` on the workers of `pool` as `options` split them. `in_worker` runs on
    /// the worker right after its chunk (e.g. to write it to disk); `in_order` runs on the
    /// calling thread, in chunk order whatever the order in which they finish. The first
    /// error stops the run.
    pub fn run(
        &self,
        pool: &DevicePool,
        chunks: &[u64],
        options: &DistributeOptions,
        in_worker: &(dyn Fn(u64, &ChunkResult) -> Result<(), SweepError> + Sync),
        in_order: &mut dyn FnMut(u64, ChunkResult) -> Result<(), SweepError>,
    ) -> Result<RunStats, SweepError> {
        let work = self.workload();
        let chunks: Vec<Chunk> = chunks.iter().map(|&c| self.chunk(c)).collect();
        pool.distribute(
            &work,
            &chunks,
            options,
            &|chunk, rows: &ChunkResult| in_worker(chunk.index, rows),
            &mut |chunk, rows: ChunkResult| in_order(chunk.index, rows),
        )
    }
}

/// A [`Sweep`] as work for the device pool: items are the sweep's combo positions, or
/// positions in a batch of combos; a lane on a GPU uses the book resident there.
#[derive(Debug, Clone, Copy)]
pub struct SweepWork<'a> {
    sweep: &'a Sweep,
    batch: Option<&'a [u64]>,
}

/// A lane of [`SweepWork`]: the CPU, or the book resident on one GPU.
#[derive(Debug)]
pub enum SweepLane {
    Cpu,
    Gpu(Arc<GpuBacktester>),
}

/// Ranges submitted: done (the CPU, a result per range), or their totals still on the GPU
/// (with each range's combos).
#[derive(Debug)]
pub enum SweepPending {
    Done(Vec<ChunkResult>),
    Gpu(Vec<Vec<u64>>, PendingTotals),
}

impl SweepWork<'_> {
    fn rows(&self, combos: Vec<u64>, batch: BatchTotals) -> ChunkResult {
        let book = self.sweep.book();
        let (bars, per_year) = self.sweep.bars();
        let mut metrics = batch.metrics(bars, per_year);
        // A portfolio trades the symbols whose data is long enough for a combo.
        if book.some_cannot_trade() && !self.sweep.is_portfolio() {
            // A combo whose indicators need more bars than the data has: an empty row.
            let grid = self.sweep.spec.grid();
            let mut cursor = grid.cursor();
            for (m, &combo) in metrics.iter_mut().zip(&combos) {
                if book.cannot_trade(&book.plan(cursor.index(combo))) {
                    *m = Metrics::empty();
                }
            }
        }
        ChunkResult { combos, metrics, blocks: batch.blocks }
    }

    /// The rows of one dispatch's `batch`, cut back into its ranges (`combos` of each).
    fn rows_of_pieces(&self, combos: Vec<Vec<u64>>, mut batch: BatchTotals) -> Vec<ChunkResult> {
        let per = self.sweep.blocks().map_or(0, BlockCuts::stats_len);
        let mut pieces = Vec::with_capacity(combos.len());
        // From the last range back, so that each cut leaves the ranges before it in place.
        for combos in combos.into_iter().rev() {
            let first = batch.totals.len() - combos.len();
            let activity = if batch.activity.is_empty() { Vec::new() } else { batch.activity.split_off(first) };
            let (totals, blocks) = (batch.totals.split_off(first), batch.blocks.split_off(first * per));
            let part = BatchTotals { totals, blocks, activity };
            pieces.push((combos, part));
        }
        pieces.into_par_iter().rev().map(|(combos, part)| self.rows(combos, part)).collect()
    }
}

impl Workload for SweepWork<'_> {
    type Lane = SweepLane;
    type Pending = SweepPending;
    type Output = ChunkResult;

    fn items(&self) -> u64 {
        self.batch.map_or(self.sweep.combos.len(), |b| b.len() as u64)
    }

    fn unit(&self) -> &'static str {
        "combos"
    }

    fn open(&self, device: &WorkerDevice) -> Result<SweepLane, WorkError> {
        Ok(match device {
            WorkerDevice::Cpu => SweepLane::Cpu,
            WorkerDevice::Gpu(ctx) => SweepLane::Gpu(self.sweep.resident_on(ctx)?),
        })
    }

    fn dispatch_items(&self, lane: &SweepLane) -> u64 {
        match lane {
            SweepLane::Cpu => 0,
            // The host makes each chunk's plans, rows and file on its pool, a chunk a
            // thread: a dispatch of short data holds a chunk for every thread.
            SweepLane::Gpu(gpu) => {
                let threads = rayon::current_num_threads() as u64;
                gpu.dispatch_combos(self.sweep.combos.chunk_size().saturating_mul(threads))
            }
        }
    }

    fn submit(&self, lane: &mut SweepLane, pieces: &[Range<u64>]) -> Result<SweepPending, WorkError> {
        // Each range's plans packed on the host's pool.
        let parts: Vec<(Vec<u64>, Vec<ComboPlan>)> =
            pieces.par_iter().map(|p| self.sweep.plans(p.clone(), self.batch)).collect();
        Ok(match lane {
            SweepLane::Cpu => SweepPending::Done(
                parts
                    .into_iter()
                    .map(|(combos, plans)| {
                        let totals = self.sweep.totals_on_cpu(&combos, &plans);
                        self.rows(combos, totals)
                    })
                    .collect(),
            ),
            SweepLane::Gpu(gpu) => {
                let plans: Vec<ComboPlan> =
                    parts.par_iter().flat_map_iter(|(_, plans)| plans.iter().copied()).collect();
                let pending = gpu.submit(&plans)?;
                SweepPending::Gpu(parts.into_iter().map(|(combos, _)| combos).collect(), pending)
            }
        })
    }

    fn finish(
        &self,
        lane: &mut SweepLane,
        pending: SweepPending,
        wanted: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<ChunkResult>>, WorkError> {
        match (lane, pending) {
            (_, SweepPending::Done(rows)) => Ok(Some(rows)),
            (SweepLane::Gpu(gpu), SweepPending::Gpu(combos, totals)) => {
                let Simulation::Book { book, tables, .. } = &self.sweep.simulation else {
                    return Err(WorkError::Failed("GPU totals of a portfolio".into()));
                };
                let twin = (book, tables);
                Ok(gpu.collect(totals, twin, wanted)?.map(|batch| self.rows_of_pieces(combos, batch)))
            }
            (SweepLane::Cpu, SweepPending::Gpu(..)) => Err(WorkError::Failed("GPU totals on a CPU lane".into())),
        }
    }

    fn phase_names(&self, device: &WorkerDevice) -> [&'static str; 3] {
        match device {
            // A CPU chunk is simulated in `submit`; `finish` only hands it back.
            WorkerDevice::Cpu => ["simulate", "simulate", "write"],
            WorkerDevice::Gpu(_) => ["upload", "readback", "write"],
        }
    }

    fn join(&self, parts: Vec<ChunkResult>) -> ChunkResult {
        let mut all = ChunkResult::default();
        for part in parts {
            all.extend(part);
        }
        all
    }
}

/// The worker pool of the spec's threads (checked with the spec), or `None` for the
/// global one (a thread per core).
pub fn thread_pool(spec: &SweepSpec) -> Result<Option<Arc<rayon::ThreadPool>>, SweepError> {
    let Some(n) = spec.threads() else { return Ok(None) };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .map_err(|e| SweepError::Spec(format!("threads: cannot start {n} worker threads: {e}")))?;
    Ok(Some(Arc::new(pool)))
}
