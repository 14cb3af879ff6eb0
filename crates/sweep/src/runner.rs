//! The runner: a prepared [`Sweep`] (indicators computed once, the signal book, the
//! combos) runs chunks on an [`Executor`] from a pool of workers, and hands the results
//! back in chunk order.

use crate::SweepError;
use crate::combos::ComboSet;
use crate::spec::SweepSpec;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;
use threadx_backtest::{Backtester, BookLayout, ComboPlan, Metrics, ParamGrid, SignalBook};
use threadx_dispatch::{Dispatcher, format_bytes, thousands};
use threadx_indicators::IndicatorBank;

/// Runs the plans of one chunk somewhere. The sweep does not care where: the dispatcher's
/// choice ([`DispatchExecutor`]) today; a multi-GPU device pool plugs in here.
pub trait Executor: Sync {
    /// The metrics of `plans`, in order, and the device that computed them (`cpu`,
    /// `gpu:<adapter>`).
    fn execute(&self, plans: &[ComboPlan]) -> (Vec<Metrics>, String);
}

/// Runs each chunk on the device the dispatcher picks for its size (profiles in `auto`,
/// or the forced device), with the book kept on the GPU between chunks.
#[derive(Debug)]
pub struct DispatchExecutor<'a> {
    backtester: Backtester<'a>,
    dispatcher: &'a Dispatcher,
}

impl<'a> DispatchExecutor<'a> {
    pub fn new(book: &'a SignalBook, fee: f64, dispatcher: &'a Dispatcher) -> Result<Self, SweepError> {
        Ok(Self { backtester: Backtester::new(book, fee)?, dispatcher })
    }
}

impl Executor for DispatchExecutor<'_> {
    fn execute(&self, plans: &[ComboPlan]) -> (Vec<Metrics>, String) {
        let outcome = self.backtester.run(self.dispatcher, plans);
        let device = match (outcome.device, self.dispatcher.gpu()) {
            (threadx_dispatch::Device::Gpu, Some(gpu)) => format!("gpu:{}", gpu.report().name),
            (device, _) => device.to_string(),
        };
        (outcome.value, device)
    }
}

/// What one chunk produced: the grid numbers of the combos it ran (those the strategy's
/// rules allow) and their metrics, in combo order.
#[derive(Debug, Clone)]
pub struct ChunkResult {
    pub chunk: u64,
    pub combos: Vec<u64>,
    pub metrics: Vec<Metrics>,
    pub device: String,
    pub elapsed_s: f64,
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
}

impl SweepPlan {
    /// Checks `spec`, draws its sample and lays out its book for `bars` bars, refusing
    /// when that needs more than `memory_limit` bytes (`None`: no limit).
    pub fn new(spec: &SweepSpec, bars: usize, memory_limit: Option<u64>) -> Result<Self, SweepError> {
        spec.check()?;
        let grid = ParamGrid::new(spec.strategy, spec.axes())?;
        let limit = memory_limit.unwrap_or(u64::MAX);
        let refuse = |needs: u64, what: String| {
            SweepError::Spec(format!(
                "this sweep needs about {} to prepare ({what}), more than the {} of memory available; \
                 sweep a sample of the grid with --random N (only the sampled combos' series and rows are \
                 prepared), or use fewer values or fewer bars{}",
                format_bytes(needs),
                format_bytes(limit),
                if memory_limit.is_some() { "; --max-memory sets the limit" } else { "" }
            ))
        };
        let sample_bytes = spec.sample.map_or(0, |s| s.n.saturating_mul(BYTES_PER_SAMPLED_COMBO));
        if sample_bytes > limit {
            let n = spec.sample.map_or(0, |s| s.n);
            return Err(refuse(sample_bytes, format!("{n} sampled combos")));
        }
        let combos = ComboSet::new(&grid, spec.sample, spec.chunk_size, bars)?;
        let layout = BookLayout::new(grid, combos.sample());
        let plan = Self { spec: spec.clone(), layout, combos, bars };
        if plan.bytes() > limit {
            return Err(refuse(plan.bytes(), plan.describe()));
        }
        Ok(plan)
    }

    /// About how many bytes preparing takes at its peak.
    pub fn bytes(&self) -> u64 {
        let sample = self.combos.sample().map_or(0, |s| s.len() as u64 * BYTES_PER_SAMPLED_COMBO);
        self.layout.bytes(self.bars).saturating_add(sample)
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
        if let Some(per_year) = self.spec.periods_per_year {
            book = book.with_bars_per_year(per_year);
        }
        Ok(Sweep { spec: self.spec, book, combos: self.combos })
    }
}

/// The memory this machine can give a new allocation now (its cgroup's limit included);
/// `None` where the system does not say.
pub fn available_memory() -> Option<u64> {
    let mut system = sysinfo::System::new();
    system.refresh_memory();
    let available = system.available_memory();
    let limited = system.cgroup_limits().map_or(available, |c| available.min(c.free_memory));
    (limited > 0).then_some(limited)
}

/// A sweep ready to run: its spec, the signal book (every indicator the combos need,
/// computed once through the bank) and its combos.
#[derive(Debug)]
pub struct Sweep {
    spec: SweepSpec,
    book: SignalBook,
    combos: ComboSet,
}

impl Sweep {
    /// Checks the spec, computes the indicators and decision rows its combos need
    /// (through `bank`, each once; a sample's only) and lays out the combos, refusing
    /// before any work what would not fit in the memory available ([`SweepPlan`]).
    pub fn prepare(bank: &IndicatorBank<'_>, spec: &SweepSpec) -> Result<Self, SweepError> {
        SweepPlan::new(spec, bank.data().len(), available_memory())?.prepare(bank)
    }

    pub fn spec(&self) -> &SweepSpec {
        &self.spec
    }

    pub fn book(&self) -> &SignalBook {
        &self.book
    }

    pub fn combos(&self) -> &ComboSet {
        &self.combos
    }

    /// The executor of this sweep on the dispatcher's devices.
    pub fn executor<'a>(&'a self, dispatcher: &'a Dispatcher) -> Result<DispatchExecutor<'a>, SweepError> {
        DispatchExecutor::new(&self.book, self.spec.fee, dispatcher)
    }

    /// The combos of chunk `chunk` that the strategy's rules allow, with their plans.
    fn chunk_plans(&self, chunk: u64) -> (Vec<u64>, Vec<ComboPlan>) {
        let strategy = self.spec.strategy;
        let positions = self.combos.chunk(chunk);
        let mut combos = Vec::with_capacity((positions.end - positions.start) as usize);
        let mut plans = Vec::with_capacity(combos.capacity());
        for position in positions {
            let combo = self.combos.combo_at(position);
            if strategy.allows(&self.book.combo_values(combo)) {
                combos.push(combo);
                plans.push(self.book.combo_plan(combo));
            }
        }
        (combos, plans)
    }

    /// Runs one chunk.
    pub fn run_chunk(&self, executor: &dyn Executor, chunk: u64) -> ChunkResult {
        let start = Instant::now();
        let (combos, plans) = self.chunk_plans(chunk);
        let (metrics, device) = if plans.is_empty() { (Vec::new(), "none".into()) } else { executor.execute(&plans) };
        ChunkResult { chunk, combos, metrics, device, elapsed_s: start.elapsed().as_secs_f64() }
    }

    /// Every combo of the sweep in one executor call, in combo order: the in-memory path
    /// for small sweeps and for walk-forward training windows.
    pub fn run_all(&self, executor: &dyn Executor) -> ChunkResult {
        let start = Instant::now();
        let mut combos = Vec::new();
        let mut plans = Vec::new();
        for chunk in 0..self.combos.chunks() {
            let (c, p) = self.chunk_plans(chunk);
            combos.extend(c);
            plans.extend(p);
        }
        let (metrics, device) = executor.execute(&plans);
        ChunkResult { chunk: 0, combos, metrics, device, elapsed_s: start.elapsed().as_secs_f64() }
    }

    /// Runs `chunks` on the workers of `pool` (the global rayon pool if `None`), each
    /// chunk taken by the next free worker, in order. `in_worker` runs on the worker right after its
    /// chunk (e.g. to write it to disk); `in_order` runs on the calling thread, in the order
    /// of `chunks` whatever the order in which they finish. The first error stops the run.
    pub fn run(
        &self,
        executor: &dyn Executor,
        chunks: &[u64],
        pool: Option<&rayon::ThreadPool>,
        in_worker: &(dyn Fn(&ChunkResult) -> Result<(), SweepError> + Sync),
        in_order: &mut dyn FnMut(ChunkResult) -> Result<(), SweepError>,
    ) -> Result<(), SweepError> {
        let stop = AtomicBool::new(false);
        let next_chunk = AtomicUsize::new(0);
        let workers = pool.map_or_else(rayon::current_num_threads, |p| p.current_num_threads());
        // Workers take chunks in order from a shared counter (self-scheduling), so chunks
        // finish nearly in order and the reorder buffer stays a few chunks deep.
        let (tx, rx) = mpsc::sync_channel::<(usize, Result<ChunkResult, SweepError>)>(workers);
        std::thread::scope(|scope| {
            let (stop, next_chunk) = (&stop, &next_chunk);
            scope.spawn(move || {
                let work = move || {
                    rayon::scope(|s| {
                        for _ in 0..workers {
                            let tx = tx.clone();
                            s.spawn(move |_| {
                                while !stop.load(Ordering::Relaxed) {
                                    let i = next_chunk.fetch_add(1, Ordering::Relaxed);
                                    let Some(&chunk) = chunks.get(i) else { break };
                                    let result = self.run_chunk(executor, chunk);
                                    let result = in_worker(&result).map(|()| result);
                                    // The receiver is gone only after an error; nothing to report then.
                                    if tx.send((i, result)).is_err() {
                                        break;
                                    }
                                }
                            });
                        }
                    });
                };
                match pool {
                    Some(pool) => pool.install(work),
                    None => work(),
                }
            });
            let mut waiting = BTreeMap::new();
            let mut next = 0;
            for (i, result) in rx {
                waiting.insert(i, result);
                while let Some(result) = waiting.remove(&next) {
                    next += 1;
                    if let Err(e) = result.and_then(&mut *in_order) {
                        stop.store(true, Ordering::Relaxed);
                        return Err(e);
                    }
                }
            }
            Ok(())
        })
    }
}
