//! The pool and its run: lanes (threads) per worker take chunks from the scheduler, keep
//! up to the worker's depth in flight, split chunks that run out of memory, retire on
//! failure, and hand outputs to the caller's thread, which delivers them in chunk order.

use crate::balance::{Balance, BalanceOptions};
use crate::schedule::{Scheduler, Slot, Take};
use crate::worker::{Fault, PoolOptions, Worker, WorkerDevice, open_workers};
use crate::{PoolError, WorkError};
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, mpsc};
use std::time::{Duration, Instant};
use threadx_dispatch::{DeviceMode, DevicePolicy, Dispatcher};
use threadx_profile_store::{Profiles, RatioProfile};

/// A fixed logical piece of work: its number (results are merged by it) and its items.
/// Its size never depends on the devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub index: u64,
    pub items: Range<u64>,
}

/// Work the pool runs: items `0..items()`, run a range at a time on one device.
///
/// A lane is what one worker keeps between chunks (the data resident on its GPU). `submit`
/// starts a range and may return before the device is done (a GPU keeps two ranges in
/// flight); `finish` waits for it, or gives up with `None` as soon as `wanted()` turns
/// false (another worker delivered that range first, or the run stopped). The output of a range must depend only on the range,
/// and `join` of the outputs of consecutive ranges must equal the output of their union:
/// the pool splits ranges that run out of memory.
pub trait Workload: Sync {
    type Lane: Send;
    type Pending: Send;
    type Output: Send;

    /// The number of items (profiling samples the first ones).
    fn items(&self) -> u64;

    /// What an item is called in logs and reports (`combos`).
    fn unit(&self) -> &'static str {
        "items"
    }

    /// A lane on `device` (called on the worker's own thread).
    fn open(&self, device: &WorkerDevice) -> Result<Self::Lane, WorkError>;

    fn submit(&self, lane: &mut Self::Lane, items: Range<u64>) -> Result<Self::Pending, WorkError>;

    fn finish(
        &self,
        lane: &mut Self::Lane,
        pending: Self::Pending,
        wanted: &dyn Fn() -> bool,
    ) -> Result<Option<Self::Output>, WorkError>;

    /// The outputs of consecutive ranges, in order, as one.
    fn join(&self, parts: Vec<Self::Output>) -> Self::Output;

    /// What a worker on `device` does in `submit`, in `finish` and while its outputs are
    /// handed over (`in_worker`), for [`WorkerStats::phases`]; equal names add up.
    fn phase_names(&self, device: &WorkerDevice) -> [&'static str; 3] {
        let _ = device;
        ["submit", "finish", "deliver"]
    }
}

/// What [`DevicePool::distribute`] calls on the worker's thread right after a chunk.
pub type InWorker<'a, O, E> = dyn Fn(&Chunk, &O) -> Result<(), E> + Sync + 'a;

/// What [`DevicePool::distribute`] calls on the caller's thread, in chunk order.
pub type InOrder<'a, O, E> = dyn FnMut(&Chunk, O) -> Result<(), E> + 'a;

/// How [`DevicePool::distribute`] splits work.
#[derive(Debug, Clone)]
pub struct DistributeOptions {
    /// The workload tag whose ratios split the work (`multigpu.json`).
    pub tag: String,
    /// Where ratios are read, measured on first use when absent, and refreshed after the
    /// run from the throughput observed. None: nothing is read or saved.
    pub profiles: Option<Profiles>,
    /// Ratios to use as they are (by worker name), instead of the profile's.
    pub ratios: Option<BTreeMap<String, f64>>,
    /// How a first-use profile is measured.
    pub balance: BalanceOptions,
    /// Hand chunks out in an order shuffled by this seed (the determinism check).
    pub shuffle: Option<u64>,
}

impl DistributeOptions {
    pub fn new(tag: impl Into<String>) -> Self {
        Self { tag: tag.into(), profiles: None, ratios: None, balance: BalanceOptions::default(), shuffle: None }
    }
}

/// What one worker did in a run.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerStats {
    pub name: String,
    /// Chunks whose output came from this worker.
    pub chunks: u64,
    pub items: u64,
    /// Seconds with at least one chunk in flight.
    pub busy_s: f64,
    /// Items per busy second.
    pub items_per_s: f64,
    /// Its fraction of the run's items.
    pub share: f64,
    /// Backups it ran that another worker finished first.
    pub duplicates: u64,
    /// Times a piece ran out of memory on it and was split in two.
    pub splits: u64,
    /// Why it was retired, if it was.
    pub failed: Option<String>,
    /// Its lanes' seconds per phase ([`Workload::phase_names`]), in order.
    pub phases: Vec<(&'static str, f64)>,
    pub on_gpu: bool,
    /// Seconds its GPU spent running kernels (timestamp queries); `None` on the CPU and
    /// on adapters without timestamps. Device time: it overlaps the lanes' phases.
    pub kernel_s: Option<f64>,
    /// Lanes × the run's wall time: its phases plus `idle_s()` make this up.
    pub lane_s: f64,
}

impl WorkerStats {
    /// Lane time in no phase: waiting for work or for the other lanes, scheduling,
    /// a throttled worker's sleep.
    pub fn idle_s(&self) -> f64 {
        self.lane_s - self.phases.iter().map(|p| p.1).sum::<f64>()
    }
}

/// What a run did: per worker, the ratios it started from, and the balance measured
/// first if there was none.
#[derive(Debug, Clone)]
pub struct RunStats {
    pub workers: Vec<WorkerStats>,
    pub wall_s: f64,
    pub ratios: BTreeMap<String, f64>,
    pub profiled: Option<Balance>,
}

impl RunStats {
    /// Per worker: chunks, `<unit>`, busy_s, `<unit>_per_s`, share (and why it failed).
    pub fn to_json(&self, unit: &str) -> Value {
        let workers: serde_json::Map<String, Value> = self
            .workers
            .iter()
            .map(|w| {
                let mut v = json!({
                    "chunks": w.chunks, unit: w.items, "busy_s": w.busy_s,
                    format!("{unit}_per_s"): w.items_per_s, "share": w.share,
                });
                if let Some(f) = &w.failed {
                    v["failed"] = json!(f);
                }
                if w.duplicates > 0 {
                    v["backups_dropped"] = json!(w.duplicates);
                }
                if w.splits > 0 {
                    v["out_of_memory_splits"] = json!(w.splits);
                }
                let mut phases: serde_json::Map<String, Value> =
                    w.phases.iter().map(|(name, s)| ((*name).to_owned(), json!(s))).collect();
                phases.insert("idle".into(), json!(w.idle_s()));
                v["phases_s"] = Value::Object(phases);
                if w.on_gpu {
                    v["kernel_s"] =
                        w.kernel_s.map_or_else(|| json!("unavailable (no timestamp queries)"), |k| json!(k));
                }
                (w.name.clone(), v)
            })
            .collect();
        Value::Object(workers)
    }
}

/// The workers of one run. See the crate documentation.
#[derive(Debug, Clone)]
pub struct DevicePool {
    workers: Vec<Worker>,
    fallback_cpu: bool,
}

impl DevicePool {
    /// A pool of `workers` (names unique). When every worker fails, the chunks left run
    /// on the CPU (with a warning) unless [`DevicePool::without_fallback`] says otherwise.
    pub fn new(workers: Vec<Worker>) -> Result<Self, PoolError> {
        if workers.is_empty() {
            return Err(PoolError::Empty);
        }
        for (i, w) in workers.iter().enumerate() {
            if workers[..i].iter().any(|o| o.name == w.name) {
                return Err(PoolError::DuplicateName(w.name.clone()));
            }
        }
        Ok(Self { workers, fallback_cpu: true })
    }

    /// A worker per usable physical GPU (see [`PoolOptions`]) and the CPU if asked; an
    /// adapter that does not open is left out with a warning.
    pub fn open(options: &PoolOptions) -> Result<Self, PoolError> {
        let (workers, problems) = open_workers(options);
        for p in problems {
            tracing::warn!("{p}");
        }
        Self::new(workers)
    }

    /// The candidate workers of a device mode: `cpu` the CPU; `gpu` the dispatcher's GPU
    /// (the CPU when it has none); `all` and `auto` every hardware GPU and the CPU (`auto`
    /// then keeps those the balance finds useful: [`DevicePool::useful`]). The adapters
    /// the dispatcher found and its open device are reused. The CPU runs
    /// on `threads` when given.
    pub fn for_mode(
        mode: DeviceMode,
        dispatcher: &Dispatcher,
        threads: Option<Arc<rayon::ThreadPool>>,
    ) -> Result<Self, PoolError> {
        let cpu = || threads.clone().map_or_else(Worker::cpu, Worker::cpu_on);
        // The dispatcher's GPU is asked for only by the modes that use it: asking probes
        // the adapters.
        match mode {
            DeviceMode::Cpu => Self::new(vec![cpu()]),
            DeviceMode::Gpu => match dispatcher.gpu() {
                Some(ctx) => Self::new(vec![Worker::gpu(0, ctx.clone())]),
                None => Self::new(vec![cpu()]),
            },
            DeviceMode::All | DeviceMode::Auto => {
                let gpu = dispatcher.gpu();
                let selection = dispatcher.selection();
                let pool = Self::open(&PoolOptions {
                    cpu: true,
                    threads: threads.clone(),
                    reuse: gpu.cloned(),
                    selection: selection.clone(),
                    ..PoolOptions::default()
                })?;
                // `all` says what it leaves out; `auto` never uses software adapters.
                let names = pool.names();
                let left_out: Vec<String> = selection
                    .iter()
                    .flat_map(|s| s.adapters.iter())
                    .filter(|a| a.software && !names.iter().any(|n| n.ends_with(&a.name)))
                    .map(|a| a.label())
                    .collect();
                if mode == DeviceMode::All && !left_out.is_empty() {
                    tracing::warn!(
                        "--device all leaves out {}: a software adapter runs on the CPU's own cores, beside the CPU worker \
                         ({}=<its name> includes it)",
                        left_out.join(", "),
                        threadx_dispatch::ADAPTER_ENV
                    );
                }
                Ok(pool)
            }
        }
    }

    /// No CPU fallback: when every worker fails, the run fails.
    pub fn without_fallback(mut self) -> Self {
        self.fallback_cpu = false;
        self
    }

    pub fn workers(&self) -> &[Worker] {
        &self.workers
    }

    /// Lanes (threads that take chunks) over every worker.
    pub fn lanes(&self) -> usize {
        self.workers.iter().map(|w| w.lanes).sum()
    }

    /// The workers' names, in pool order.
    pub fn names(&self) -> Vec<String> {
        self.workers.iter().map(|w| w.name.clone()).collect()
    }

    /// The workers `policy` finds useful with their shares in `ratios`
    /// ([`DevicePolicy::is_useful`]): `auto` keeps a worker only when it adds throughput.
    pub fn useful(self, ratios: &BTreeMap<String, f64>, policy: &DevicePolicy) -> Self {
        let share = |w: &Worker| ratios.get(&w.name).copied().unwrap_or(0.0);
        let best = self.workers.iter().map(share).fold(0.0, f64::max);
        let workers: Vec<Worker> = self.workers.into_iter().filter(|w| policy.is_useful(share(w), best)).collect();
        Self { workers, fallback_cpu: self.fallback_cpu }
    }

    /// The saved balance of `tag` if it covers every worker of this pool, its ratios
    /// renormalised over them.
    pub fn saved_ratios(&self, profiles: &Profiles, tag: &str) -> Result<Option<RatioProfile>, PoolError> {
        let Some(mut profile) = profiles.multigpu_ratios(tag)? else {
            return Ok(None);
        };
        if !self.workers.iter().all(|w| profile.ratios.contains_key(&w.name)) {
            return Ok(None);
        }
        let ratios = normalised(self.workers.iter().map(|w| (w.name.clone(), profile.ratios[&w.name])).collect());
        Ok(ratios.map(|ratios| {
            profile.ratios = ratios;
            profile
        }))
    }

    /// Times each worker on the first `options.sample_size` items of `work` (`warmup`
    /// runs, then `runs` timed ones), derives the ratios from the throughputs, saves them
    /// under `tag` in `profiles` (when given) and logs each worker's figures.
    pub fn profile_auto_balance<W: Workload>(
        &self,
        work: &W,
        options: &BalanceOptions,
        tag: &str,
        profiles: Option<&Profiles>,
    ) -> Result<Balance, PoolError> {
        crate::balance::measure(self, work, options, tag, profiles)
    }

    /// Runs `chunks` of `work` on the pool. `in_worker` runs on the worker's thread right
    /// after a chunk (e.g. to write it to disk); `in_order` runs on the calling thread in
    /// chunk-index order, whatever the order in which chunks finish. The first error of
    /// either stops the run and is returned.
    pub fn distribute<W, E>(
        &self,
        work: &W,
        chunks: &[Chunk],
        options: &DistributeOptions,
        in_worker: &InWorker<'_, W::Output, E>,
        in_order: &mut InOrder<'_, W::Output, E>,
    ) -> Result<RunStats, E>
    where
        W: Workload,
        E: From<PoolError> + Send,
    {
        let started = Instant::now();
        if chunks.is_empty() {
            return Ok(RunStats { workers: Vec::new(), wall_s: 0.0, ratios: BTreeMap::new(), profiled: None });
        }
        let mut sorted = chunks.to_vec();
        sorted.sort_by_key(|c| c.index);
        let (ratios, prior, profiled) = self.resolve_ratios(work, options)?;
        let mut order: Vec<Slot> = (0..sorted.len()).collect();
        if let Some(seed) = options.shuffle {
            order.sort_by_key(|&s| mix(seed ^ (s as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        }
        let items: Vec<u64> = sorted.iter().map(|c| c.items.end - c.items.start).collect();
        let ratio_list: Vec<f64> = self.workers.iter().map(|w| ratios[&w.name]).collect();
        let mut delivery = Delivery { waiting: BTreeMap::new(), next: 0, in_order };
        let sched = Scheduler::new(items.clone(), &order, &ratio_list, prior);
        let tally = run_pass(&self.workers, sched, work, &sorted, in_worker, &mut delivery)?;
        let mut stats = tally.stats;
        if !tally.undone.is_empty() {
            let reasons =
                stats.iter().filter_map(|s| s.failed.as_ref().map(|f| format!("{}: {f}", s.name))).collect::<Vec<_>>();
            if !self.fallback_cpu || self.workers.iter().any(|w| matches!(w.device, WorkerDevice::Cpu)) {
                return Err(PoolError::AllFailed(reasons.join("; "), tally.undone.len()).into());
            }
            tracing::warn!("every worker failed; the {} chunks left run on the CPU", tally.undone.len());
            let cpu = [Worker::cpu().named("cpu (fallback)")];
            let sched = Scheduler::new(items, &tally.undone, &[1.0], vec![None]);
            let fallback = run_pass(&cpu, sched, work, &sorted, in_worker, &mut delivery)?;
            if !fallback.undone.is_empty() {
                return Err(PoolError::AllFailed(reasons.join("; "), fallback.undone.len()).into());
            }
            stats.extend(fallback.stats);
        }
        let total: u64 = stats.iter().map(|s| s.items).sum();
        for s in &mut stats {
            s.share = if total == 0 { 0.0 } else { s.items as f64 / total as f64 };
        }
        if let Some(profiles) = &options.profiles
            && options.ratios.is_none()
        {
            refresh(profiles, &options.tag, &stats, &tally.tally, &self.workers);
        }
        Ok(RunStats { workers: stats, wall_s: started.elapsed().as_secs_f64(), ratios, profiled })
    }

    /// The ratios of this run (by name), the throughput expected of each worker, and the
    /// balance measured now when the profile had none.
    #[allow(clippy::type_complexity)]
    fn resolve_ratios<W: Workload>(
        &self,
        work: &W,
        options: &DistributeOptions,
    ) -> Result<(BTreeMap<String, f64>, Vec<Option<f64>>, Option<Balance>), PoolError> {
        let names = self.names();
        if let Some(given) = &options.ratios {
            let ratios = normalised(names.iter().map(|n| (n.clone(), given.get(n).copied().unwrap_or(0.0))).collect())
                .unwrap_or_else(|| equal(&names));
            return Ok((ratios, vec![None; names.len()], None));
        }
        if names.len() == 1 {
            return Ok((equal(&names), vec![None], None));
        }
        let Some(profiles) = &options.profiles else {
            return Ok((equal(&names), vec![None; names.len()], None));
        };
        let (ratios, throughput, profiled) = match self.saved_ratios(profiles, &options.tag)? {
            Some(saved) => (saved.ratios, saved.throughput, None),
            None => {
                let balance = self.profile_auto_balance(work, &options.balance, &options.tag, Some(profiles))?;
                (balance.ratios.clone(), balance.throughput.clone(), Some(balance))
            }
        };
        let prior = names.iter().map(|n| throughput.get(n).copied().filter(|&t| t > 0.0)).collect();
        Ok((ratios, prior, profiled))
    }
}

fn equal(names: &[String]) -> BTreeMap<String, f64> {
    names.iter().map(|n| (n.clone(), 1.0 / names.len() as f64)).collect()
}

/// `ratios` scaled to sum to 1; None when they sum to 0 (or are not finite).
pub(crate) fn normalised(ratios: BTreeMap<String, f64>) -> Option<BTreeMap<String, f64>> {
    let sum: f64 = ratios.values().map(|r| r.max(0.0)).sum();
    (sum > 0.0 && sum.is_finite()).then(|| ratios.into_iter().map(|(n, r)| (n, r.max(0.0) / sum)).collect())
}

/// SplitMix64's finaliser: a well-mixed key per chunk for a shuffled hand-out order.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Worker `w`'s stats from its tally over a pass of `pass_s` seconds.
fn stats_of<W: Workload>(
    work: &W,
    w: &Worker,
    t: &crate::schedule::Tally,
    pass_s: f64,
    kernel_s: Option<f64>,
) -> WorkerStats {
    let mut phases: Vec<(&'static str, f64)> = Vec::new();
    for (name, s) in work.phase_names(&w.device).into_iter().zip(t.phases) {
        match phases.iter_mut().find(|p| p.0 == name) {
            Some(p) => p.1 += s,
            None => phases.push((name, s)),
        }
    }
    WorkerStats {
        phases,
        on_gpu: w.device.gpu().is_some(),
        kernel_s,
        lane_s: w.lanes as f64 * pass_s,
        name: w.name.clone(),
        chunks: t.chunks,
        items: t.items,
        busy_s: t.busy,
        items_per_s: if t.busy > 0.0 { t.finished_items as f64 / t.busy } else { 0.0 },
        share: 0.0,
        duplicates: t.duplicates,
        splits: t.splits,
        failed: t.failed.clone(),
    }
}

/// Saves ratios refreshed from what the run observed: each worker that finished at least
/// two chunks moves its throughput halfway to the one observed. Runs with fewer than two
/// such workers say too little to change anything.
fn refresh(profiles: &Profiles, tag: &str, stats: &[WorkerStats], tally: &[crate::schedule::Tally], pool: &[Worker]) {
    let observed: Vec<(&str, f64)> = pool
        .iter()
        .zip(tally)
        .zip(stats)
        .filter(|((_, t), s)| s.failed.is_none() && t.finished_items > 0 && t.chunks + t.duplicates >= 2)
        .map(|((w, _), s)| (w.name.as_str(), s.items_per_s))
        .collect();
    if observed.len() < 2 {
        return;
    }
    let old = profiles.multigpu_ratios(tag).ok().flatten().map(|p| p.throughput).unwrap_or_default();
    let mut throughput = BTreeMap::new();
    for w in pool {
        let seen = observed.iter().find(|(n, _)| *n == w.name).map(|(_, t)| *t);
        let before = old.get(&w.name).copied();
        let value = match (seen, before) {
            (Some(s), Some(b)) => 0.5 * (s + b),
            (Some(s), None) => s,
            (None, Some(b)) => b,
            (None, None) => continue,
        };
        throughput.insert(w.name.clone(), value);
    }
    let Some(ratios) = normalised(throughput.clone()) else { return };
    if let Err(e) = profiles.update_multigpu_ratio_profile(&ratios, &throughput, tag) {
        tracing::warn!("could not save the refreshed balance of {tag}: {e}");
    }
}

/// The caller's side: outputs waiting for their turn, and the callback that takes them.
struct Delivery<'a, O, E> {
    waiting: BTreeMap<Slot, O>,
    next: Slot,
    in_order: &'a mut InOrder<'a, O, E>,
}

/// What a pass left: the workers' tallies and the chunks no worker finished.
struct Pass {
    /// Per worker: what it did, and its raw tally (the ratios' refresh reads it).
    stats: Vec<WorkerStats>,
    tally: Vec<crate::schedule::Tally>,
    undone: Vec<Slot>,
}

/// What every lane of a pass shares.
struct Shared<'a, W: Workload, E> {
    workers: &'a [Worker],
    work: &'a W,
    chunks: &'a [Chunk],
    sched: Mutex<Scheduler>,
    wake: Condvar,
    stop: AtomicBool,
    /// Chunks taken per worker (for [`Fault::FailAt`]).
    taken: Vec<AtomicU64>,
    /// Lanes still running per worker: all but the last may leave when there is nothing to take.
    alive: Vec<AtomicUsize>,
    in_worker: &'a InWorker<'a, W::Output, E>,
}

enum Message<O, E> {
    Done(Slot, O),
    Error(E),
}

fn run_pass<W, E>(
    workers: &[Worker],
    sched: Scheduler,
    work: &W,
    chunks: &[Chunk],
    in_worker: &InWorker<'_, W::Output, E>,
    delivery: &mut Delivery<'_, W::Output, E>,
) -> Result<Pass, E>
where
    W: Workload,
    E: From<PoolError> + Send,
{
    let shared = Shared {
        workers,
        work,
        chunks,
        sched: Mutex::new(sched),
        wake: Condvar::new(),
        stop: AtomicBool::new(false),
        taken: workers.iter().map(|_| AtomicU64::new(0)).collect(),
        alive: workers.iter().map(|w| AtomicUsize::new(w.lanes)).collect(),
        in_worker,
    };
    let kernels = || -> Vec<Option<f64>> {
        workers.iter().map(|w| w.device.gpu().and_then(|ctx| ctx.kernel_seconds())).collect()
    };
    let kernels_before = kernels();
    let started = Instant::now();
    let (tx, rx) = mpsc::channel::<Message<W::Output, E>>();
    let mut failure = None;
    std::thread::scope(|scope| {
        // Every lane is a thread of its own that mostly waits; the CPU's work inside it
        // runs on the worker's rayon pool (`Worker::install`).
        for (w, worker) in workers.iter().enumerate() {
            for lane in 0..worker.lanes {
                let (shared, tx) = (&shared, tx.clone());
                scope.spawn(move || guarded(shared, w, lane, &tx));
            }
        }
        drop(tx);
        for message in rx {
            let result = match message {
                Message::Done(slot, output) => {
                    delivery.waiting.insert(slot, output);
                    let mut result = Ok(());
                    while let Some(output) = delivery.waiting.remove(&delivery.next) {
                        let chunk = &chunks[delivery.next];
                        delivery.next += 1;
                        result = (delivery.in_order)(chunk, output);
                        if result.is_err() {
                            break;
                        }
                    }
                    result
                }
                Message::Error(e) => Err(e),
            };
            if let Err(e) = result {
                shared.stop.store(true, Ordering::SeqCst);
                shared.wake.notify_all();
                failure = Some(e);
                break;
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let pass_s = started.elapsed().as_secs_f64();
    let sched = shared.sched.into_inner().unwrap_or_else(PoisonError::into_inner);
    let stats = workers
        .iter()
        .zip(&sched.tally)
        .zip(kernels_before.into_iter().zip(kernels()))
        .map(|((w, t), (before, after))| stats_of(work, w, t, pass_s, before.zip(after).map(|(b, a)| a - b)))
        .collect();
    Ok(Pass { stats, undone: sched.undone(), tally: sched.tally })
}

/// Runs a lane; a panic stops the whole pass (so no lane waits for a chunk that will never
/// finish) and is then re-raised.
fn guarded<W: Workload, E: Send>(
    shared: &Shared<'_, W, E>,
    w: usize,
    lane: usize,
    tx: &mpsc::Sender<Message<W::Output, E>>,
) {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_lane(shared, w, lane, tx)));
    if let Err(panic) = result {
        shared.stop.store(true, Ordering::SeqCst);
        shared.wake.notify_all();
        std::panic::resume_unwind(panic);
    }
}

impl<W: Workload, E> Shared<'_, W, E> {
    fn lock(&self) -> MutexGuard<'_, Scheduler> {
        self.sched.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next chunk for this lane; with `block`, waits while other workers may still
    /// fail (requeuing chunks) or a backup may become worth running. A lane that is not
    /// its worker's last leaves instead of waiting: one poller per worker is enough.
    fn take(&self, w: usize, lane: usize, block: bool) -> Take {
        let mut sched = self.lock();
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return Take::Exit;
            }
            match sched.take(w, lane, Instant::now()) {
                Take::Wait if block => {
                    // Under the scheduler's lock: lanes leave one at a time.
                    if self.alive[w].load(Ordering::SeqCst) > 1 {
                        self.alive[w].fetch_sub(1, Ordering::SeqCst);
                        return Take::Exit;
                    }
                    sched = self.wake.wait_timeout(sched, Scheduler::POLL).unwrap_or_else(PoisonError::into_inner).0;
                }
                other => return other,
            }
        }
    }

    /// Runs `items` of chunk `slot` on `lane` to the end, splitting it in halves while it
    /// runs out of memory; the learned largest piece (`fits`) cuts later chunks up front.
    /// `None` when another copy of the chunk was delivered first.
    fn run_split(
        &self,
        w: usize,
        state: &mut W::Lane,
        slot: Slot,
        items: Range<u64>,
        fits: &mut u64,
    ) -> Result<Option<W::Output>, WorkError> {
        let index = self.chunks[slot].index;
        let len = items.end - items.start;
        if len <= *fits || len == 1 {
            match self.submit(w, state, items.clone()).and_then(|p| self.finish(w, state, slot, p)) {
                Err(WorkError::OutOfMemory(e)) if len > 1 => {
                    let first = {
                        let mut sched = self.lock();
                        sched.tally[w].splits += 1;
                        sched.tally[w].splits == 1
                    };
                    if first {
                        tracing::warn!(
                            "{}: out of memory on chunk {index} ({len} {}): {e}; splitting it and retrying on the same device",
                            self.workers[w].name,
                            self.work.unit()
                        );
                    }
                    *fits = (*fits).min(len / 2);
                }
                other => return other,
            }
        }
        let mid = items.start + len / 2;
        let Some(first) = self.run_split(w, state, slot, items.start..mid, fits)? else { return Ok(None) };
        let Some(second) = self.run_split(w, state, slot, mid..items.end, fits)? else { return Ok(None) };
        Ok(Some(self.work.join(vec![first, second])))
    }

    fn submit(&self, w: usize, state: &mut W::Lane, items: Range<u64>) -> Result<W::Pending, WorkError> {
        let worker = &self.workers[w];
        worker.injected_out_of_memory(&items)?;
        self.timed(w, 0, || worker.install(|| self.work.submit(state, items)))
    }

    /// Runs `f`, adding its time to phase `phase` of worker `w`.
    fn timed<R>(&self, w: usize, phase: usize, f: impl FnOnce() -> R) -> R {
        let started = Instant::now();
        let r = f();
        self.lock().tally[w].phases[phase] += started.elapsed().as_secs_f64();
        r
    }

    /// Waits for `slot`'s output on worker `w`, or gives up once another copy of it was
    /// delivered or the run stopped: a lagging device does not hold the run's end.
    fn finish(
        &self,
        w: usize,
        state: &mut W::Lane,
        slot: Slot,
        pending: W::Pending,
    ) -> Result<Option<W::Output>, WorkError> {
        let wanted = || !self.stop.load(Ordering::SeqCst) && !self.lock().is_done(slot);
        self.timed(w, 1, || self.workers[w].install(|| self.work.finish(state, pending, &wanted)))
    }

    /// Books a copy of `slot` that worker `w` leaves unread (another copy came first).
    fn drop_unread(&self, w: usize, lane: usize, slot: Slot) {
        self.lock().complete(slot, w, lane, Instant::now());
        self.wake.notify_all();
    }

    /// Whether the `FailAt` fault of worker `w` strikes on the chunk it takes now.
    fn injected_failure(&self, w: usize) -> bool {
        let n = self.taken[w].fetch_add(1, Ordering::SeqCst);
        matches!(self.workers[w].fault, Some(Fault::FailAt { chunk }) if chunk == n)
    }

    /// Sleeps a throttled worker's extra time, waking early when the run stops or the
    /// chunk was finished elsewhere.
    fn throttle(&self, w: usize, slot: Slot, worked: Duration) {
        let deadline = Instant::now() + worked.mul_f64(self.workers[w].slowdown);
        // Plain sleeps in short slices: as precise as the device they stand in for.
        while !self.stop.load(Ordering::SeqCst) && !self.lock().is_done(slot) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(25)));
        }
    }

    /// Hands over the output of `slot`, taken at `started` (after a throttled worker's
    /// extra time): to `in_worker` and the caller when it is the first copy finished.
    fn deliver(
        &self,
        w: usize,
        lane: usize,
        slot: Slot,
        output: W::Output,
        started: Instant,
        tx: &mpsc::Sender<Message<W::Output, E>>,
    ) {
        self.throttle(w, slot, started.elapsed());
        let first = self.lock().complete(slot, w, lane, Instant::now());
        self.wake.notify_all();
        if first && !self.stop.load(Ordering::SeqCst) {
            let message = match self.timed(w, 2, || (self.in_worker)(&self.chunks[slot], &output)) {
                Ok(()) => Message::Done(slot, output),
                Err(e) => Message::Error(e),
            };
            // The receiver leaves only after an error; nothing is left to report then.
            let _ = tx.send(message);
        }
    }

    fn fail(&self, w: usize, lane: usize, slots: &[Slot], reason: &str) {
        let name = &self.workers[w].name;
        let mut sched = self.lock();
        if sched.tally[w].failed.is_none() {
            tracing::warn!(
                "{name} failed ({reason}); its chunks go to the other workers and it is retired for this run"
            );
        }
        sched.fail(w, lane, slots, reason, Instant::now());
        drop(sched);
        self.wake.notify_all();
    }
}

/// One lane: take chunks, keep up to the worker's depth in flight, deliver in the order
/// taken, split what runs out of memory, retire the worker on failure.
fn run_lane<W: Workload, E>(
    shared: &Shared<'_, W, E>,
    w: usize,
    lane: usize,
    tx: &mpsc::Sender<Message<W::Output, E>>,
) {
    let worker = &shared.workers[w];
    let mut state = match worker.install(|| shared.work.open(&worker.device)) {
        Ok(state) => state,
        Err(e) => return shared.fail(w, lane, &[], &e.to_string()),
    };
    let mut fits = u64::MAX;
    let mut flight: VecDeque<(Slot, W::Pending, Instant)> = VecDeque::new();
    // Every chunk this lane holds goes back to the others when it fails.
    let held = |flight: &VecDeque<(Slot, W::Pending, Instant)>, more: &[Slot]| -> Vec<Slot> {
        flight.iter().map(|f| f.0).chain(more.iter().copied()).collect()
    };
    loop {
        while flight.len() < worker.depth {
            // With nothing in flight this waits; it returns Exit when the lane should stop.
            let Take::Chunk(slot) = shared.take(w, lane, flight.is_empty()) else { break };
            let chunk = &shared.chunks[slot];
            let started = Instant::now();
            if shared.injected_failure(w) {
                return shared.fail(w, lane, &held(&flight, &[slot]), "injected failure (device lost)");
            }
            let len = chunk.items.end - chunk.items.start;
            let submitted = if len > fits {
                Err(WorkError::OutOfMemory("larger than the largest piece that fit".into()))
            } else {
                shared.submit(w, &mut state, chunk.items.clone())
            };
            match submitted {
                Ok(pending) => flight.push_back((slot, pending, started)),
                Err(WorkError::OutOfMemory(_)) => {
                    // Finish what is in flight first (it may be what holds the memory).
                    while let Some((s, p, t)) = flight.pop_front() {
                        if let Err(e) = finish_one(shared, w, lane, &mut state, s, p, t, &mut fits, tx) {
                            return shared.fail(w, lane, &held(&flight, &[s, slot]), &e);
                        }
                    }
                    match shared.run_split(w, &mut state, slot, chunk.items.clone(), &mut fits) {
                        Ok(Some(output)) => shared.deliver(w, lane, slot, output, started, tx),
                        Ok(None) => shared.drop_unread(w, lane, slot),
                        Err(e) => return shared.fail(w, lane, &[slot], &e.to_string()),
                    }
                }
                Err(WorkError::Failed(e)) => return shared.fail(w, lane, &held(&flight, &[slot]), &e),
            }
        }
        let Some((slot, pending, started)) = flight.pop_front() else { return };
        if let Err(e) = finish_one(shared, w, lane, &mut state, slot, pending, started, &mut fits, tx) {
            return shared.fail(w, lane, &held(&flight, &[slot]), &e);
        }
    }
}

/// Finishes one chunk in flight and delivers it (splitting it if it ran out of memory);
/// the error is why the worker must be retired.
#[allow(clippy::too_many_arguments)]
fn finish_one<W: Workload, E>(
    shared: &Shared<'_, W, E>,
    w: usize,
    lane: usize,
    state: &mut W::Lane,
    slot: Slot,
    pending: W::Pending,
    started: Instant,
    fits: &mut u64,
    tx: &mpsc::Sender<Message<W::Output, E>>,
) -> Result<(), String> {
    let output = match shared.finish(w, state, slot, pending) {
        Err(WorkError::OutOfMemory(_)) => shared.run_split(w, state, slot, shared.chunks[slot].items.clone(), fits),
        other => other,
    };
    match output.map_err(|e| e.to_string())? {
        Some(output) => shared.deliver(w, lane, slot, output, started, tx),
        None => shared.drop_unread(w, lane, slot),
    }
    Ok(())
}
