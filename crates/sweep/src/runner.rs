//! The runner: a prepared [`Sweep`] (indicators computed once, the signal book, the
//! combos) as a [`Workload`] of the device pool: its chunks run on the pool's workers and
//! come back in chunk order.

use crate::combos::ComboSet;
use crate::error::SweepError;
use crate::search::SearchMethod;
use crate::spec::SweepSpec;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::Arc;
use std::sync::Mutex;
use threadx_backtest::{
    BacktestError, Backtester, BarTables, BatchTotals, BlockCuts, BookLayout, ComboPlan, GpuBacktester, Metrics,
    PendingTotals, SignalBook, simulate_cpu,
};
use threadx_dispatch::{DeviceMode, DevicePolicy, Dispatcher, format_bytes, thousands};
use threadx_indicators::IndicatorBank;
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

/// Bytes a sample takes per drawn combo while it is drawn (the list, the set that keeps
/// it distinct) and held.
const BYTES_PER_SAMPLED_COMBO: u64 = 48;

/// What preparing a spec on data of a given length computes and holds, laid out before
/// any work: the combos (a sample drawn), the signal book's rows, stops and indicator
/// series, and about how much memory they take. A plan that cannot fit is refused here,
/// with the estimate and what would help.
#[derive(Debug, Clone)]
pub struct SweepPlan {
    spec: SweepSpec,
    layout: BookLayout,
    combos: ComboSet,
    bars: usize,
    /// Whether a GPU may run it (its upload copies count).
    gpu: bool,
    /// What the process held when the plan was made (the data read included).
    process: u64,
}

/// What the process holds besides the plan's own data where the system does not say (the
/// binary, the allocator, the data read: 12 MiB in a release build, 33 MiB in a debug one,
/// measured), and the transient part of preparing as a share of that data (bb_atr,
/// rule-file grids, TPE and Sobol searches of 10–184 MiB peaked up to 7.5 % above it).
const PROCESS_BYTES: u64 = 16 << 20;
const TRANSIENT_SHARE: u64 = 8;

/// What starting a GPU costs the host before any upload: the driver, wgpu and the
/// compiled kernels (measured with lavapipe: a 10,000-combo sweep peaks about 100 MB
/// higher on it than on the CPU).
const GPU_STACK_BYTES: u64 = 96 << 20;

impl SweepPlan {
    /// Draws the sample of `spec` and lays out its book for `bars` bars, refusing when
    /// that needs more than the spec's memory limit (else the memory available now). In
    /// the spec's device mode a GPU may take part (every mode but `cpu`; `auto` only for
    /// sweeps `policy` finds large enough to balance): then the copies made to upload the
    /// book count too.
    pub fn new(spec: &SweepSpec, bars: usize, policy: &DevicePolicy) -> Result<Self, SweepError> {
        let memory_limit = spec.max_memory().or_else(threadx_telemetry::available_memory);
        let mode = spec.device();
        let grid = spec.grid().clone();
        let limit = memory_limit.unwrap_or(u64::MAX);
        let refuse = |needs: u64, what: String| {
            SweepError::Spec(format!(
                "this sweep needs about {} to prepare ({what}), more than the {} of memory available; \
                 sweep a sample of the grid with --random N or --search sobol|lhs|random (only the drawn \
                 combos' series and rows are prepared), or use fewer values or fewer bars{}",
                format_bytes(needs),
                format_bytes(limit),
                if memory_limit.is_some() { "; --max-memory sets the limit" } else { "" }
            ))
        };
        // A --random sample or a design's trials: drawn first, and only their series and
        // rows prepared. An adaptive search may go anywhere: it prepares the whole grid.
        let drawn = match (spec.sample(), spec.search()) {
            (Some(sample), _) => Some((SearchMethod::Random, sample.seed, sample.n)),
            (None, Some(search)) if !search.method.is_adaptive() => Some((search.method, search.seed, search.trials)),
            _ => None,
        };
        let sample_bytes = drawn.map_or(0, |(_, _, n)| n.saturating_mul(BYTES_PER_SAMPLED_COMBO));
        if sample_bytes > limit {
            let n = drawn.map_or(0, |(_, _, n)| n);
            return Err(refuse(sample_bytes, format!("{n} sampled combos")));
        }
        let sample = match drawn {
            Some((method, seed, n)) => {
                let combos = method.design_combos(&grid, seed, n).unwrap_or_default();
                if spec.sample().is_some() && (combos.len() as u64) < n {
                    return Err(SweepError::Spec(format!(
                        "--random {n}: only {} distinct combos of the grid pass the strategy's rules; ask for \
                         fewer or widen the grid",
                        combos.len()
                    )));
                }
                Some(combos)
            }
            None => None,
        };
        let combos = ComboSet::new(grid.len(), sample, spec.chunk_size(), bars);
        let layout = BookLayout::new(grid, combos.sample())?;
        let gpu = match mode {
            DeviceMode::Cpu => false,
            DeviceMode::Auto => !policy.is_small_sweep(combos.len(), bars as u64),
            DeviceMode::Gpu | DeviceMode::All => true,
        };
        let process = threadx_telemetry::resident_bytes().unwrap_or(PROCESS_BYTES);
        let plan = Self { spec: spec.clone(), layout, combos, bars, gpu, process };
        if plan.bytes() > limit {
            return Err(refuse(plan.bytes(), plan.describe()));
        }
        Ok(plan)
    }

    /// About how many bytes the process holds at its peak: what it held when the plan was
    /// made, and [`SweepPlan::data_bytes`].
    pub fn bytes(&self) -> u64 {
        self.data_bytes().saturating_add(self.process)
    }

    /// About how many bytes preparing adds at its peak: the book, the sample, the GPU's
    /// upload copies and what the overfitting statistics keep.
    pub fn data_bytes(&self) -> u64 {
        let sample = self.combos.sample().map_or(0, |s| s.len() as u64 * BYTES_PER_SAMPLED_COMBO);
        // Where a stop's exit pays no slippage and the exit rule's does, the kernel takes
        // that exit's per-bar terms too (32 bytes a bar, made on the host and uploaded).
        let stop_terms =
            if self.spec.costs().slippage > 0.0 && self.layout.stops() > 0 { 2 * 32 * self.bars as u64 } else { 0 };
        let upload = if self.gpu { GPU_STACK_BYTES + self.layout.gpu_upload_bytes(self.bars) + stop_terms } else { 0 };
        // The overfitting statistics keep each combo's blocks and Sharpe ratio.
        let kept = self.spec.overfitting().map_or(0, |o| self.combos.len() * (2 * u64::from(o.blocks) + 1) * 8);
        let book = self.layout.bytes(self.bars).saturating_add(sample);
        book.saturating_add(book / TRANSIENT_SHARE).saturating_add(upload).saturating_add(kept)
    }

    /// Indicator series to compute.
    pub fn series(&self) -> usize {
        self.layout.indicators().len()
    }

    /// `N indicator series of B bars, R decision rows, S stops`.
    pub fn describe(&self) -> String {
        format!(
            "{} indicator series of {} bars, {} decision rows, {} stops",
            thousands(self.series() as u64),
            thousands(self.bars as u64),
            thousands(self.layout.decision_rows()),
            thousands(self.layout.stops())
        )
    }

    pub fn combos(&self) -> &ComboSet {
        &self.combos
    }

    pub fn spec(&self) -> &SweepSpec {
        &self.spec
    }

    /// Computes the indicators (through `bank`, each once) and the book the plan laid out.
    pub fn prepare(self, bank: &IndicatorBank<'_>) -> Result<Sweep, SweepError> {
        if bank.data().len() != self.bars {
            return Err(SweepError::Spec(format!(
                "the sweep was planned for {} bars but the data has {}",
                self.bars,
                bank.data().len()
            )));
        }
        let mut book = SignalBook::from_layout(bank, self.layout)?;
        if let Some(per_year) = self.spec.periods_per_year() {
            book = book.with_bars_per_year(per_year);
        }
        let blocks = match self.spec.overfitting() {
            Some(o) => Some(BlockCuts::new(self.bars, o.blocks).map_err(|e| SweepError::Spec(format!("--{e}")))?),
            None => None,
        };
        let tables = BarTables::new(&book, self.spec.costs()).with_blocks(blocks);
        Ok(Sweep { spec: self.spec, book, tables, combos: self.combos, resident: Mutex::new(Vec::new()) })
    }
}

/// A sweep ready to run: its spec, the signal book (every indicator the combos need,
/// computed once through the bank), its per-bar tables and its combos. The book is
/// uploaded to each GPU once, on first use, and stays resident for every later run.
#[derive(Debug)]
pub struct Sweep {
    spec: SweepSpec,
    book: SignalBook,
    tables: BarTables,
    combos: ComboSet,
    /// The book resident on each GPU it has run on.
    resident: Mutex<Vec<Arc<GpuBacktester>>>,
}

impl Sweep {
    /// Checks the spec, computes the indicators and decision rows its combos need
    /// (through `bank`, each once; a sample's only) and lays out the combos, refusing
    /// before any work what would not fit in the memory available ([`SweepPlan`]).
    pub fn prepare(bank: &IndicatorBank<'_>, spec: &SweepSpec) -> Result<Self, SweepError> {
        SweepPlan::new(spec, bank.data().len(), bank.dispatcher().policy())?.prepare(bank)
    }

    pub fn spec(&self) -> &SweepSpec {
        &self.spec
    }

    pub fn book(&self) -> &SignalBook {
        &self.book
    }

    /// Refuses a sweep some of whose combos cannot trade on its data, where every combo
    /// must be comparable (a universe's symbols, a walk-forward's train windows): the
    /// data too short for the slowest combo (the largest value of every axis).
    pub fn require_every_combo(&self) -> Result<(), SweepError> {
        if !self.book.some_cannot_trade() {
            return Ok(());
        }
        let strategy = self.spec.strategy();
        let slowest: Vec<f64> =
            self.spec.axes().iter().map(|values| values.iter().copied().fold(f64::MIN, f64::max)).collect();
        Err(SweepError::Backtest(BacktestError::TooShort {
            strategy: strategy.name().to_owned(),
            params: strategy.describe(&slowest),
            needed: self.book.bars_needed(),
            len: self.book.bars(),
        }))
    }

    /// The blocks each combo's statistics are kept in, when the spec asks for them.
    pub fn blocks(&self) -> Option<&BlockCuts> {
        self.tables.blocks()
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

    /// The book resident on the GPU of `ctx`: uploaded on first use, then shared.
    fn resident_on(&self, ctx: &Arc<threadx_dispatch::GpuContext>) -> Result<Arc<GpuBacktester>, WorkError> {
        let mut resident = self.resident.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(gpu) = resident.iter().find(|g| Arc::ptr_eq(g.context(), ctx)) {
            return Ok(gpu.clone());
        }
        let gpu = Arc::new(GpuBacktester::new(ctx.clone(), &self.book, &self.tables)?);
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
                plans.push(self.book.plan(index));
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
        if mode == DeviceMode::Auto && policy.is_small_sweep(self.combos.len(), self.book.bars() as u64) {
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
        let batch = Backtester::with_tables(&self.book, &self.tables).run_batch(dispatcher, &plans).value;
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
        SweepWork { sweep: self, batch: None }.rows(combos, simulate_cpu(&self.book, &self.tables, &plans))
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
        let book = &self.sweep.book;
        let mut metrics: Vec<Metrics> =
            batch.totals.par_iter().map(|t| t.metrics(book.bars(), book.bars_per_year())).collect();
        if book.some_cannot_trade() {
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
        let per = self.sweep.tables.blocks().map_or(0, BlockCuts::stats_len);
        let mut pieces = Vec::with_capacity(combos.len());
        // From the last range back, so that each cut leaves the ranges before it in place.
        for combos in combos.into_iter().rev() {
            let first = batch.totals.len() - combos.len();
            let part =
                BatchTotals { totals: batch.totals.split_off(first), blocks: batch.blocks.split_off(first * per) };
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
                        self.rows(combos, simulate_cpu(&self.sweep.book, &self.sweep.tables, &plans))
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
                let twin = (&self.sweep.book, &self.sweep.tables);
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
