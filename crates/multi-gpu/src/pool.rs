//! The [`DevicePool`]: its workers, how a device mode and the saved ratios choose them,
//! and [`DevicePool::distribute`], which resolves the ratios and runs the passes.

use crate::balance::{Balance, normalised};
use crate::engine::{Delivery, run_pass};
use crate::error::PoolError;
use crate::schedule::{Scheduler, Slot};
use crate::stats::{RunStats, refresh};
use crate::worker::{PoolOptions, Worker, WorkerDevice, open_workers};
use crate::workload::{BalanceOptions, Chunk, DistributeOptions, InOrder, InWorker, Workload};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use threadx_dispatch::{DeviceMode, DevicePolicy, Dispatcher};
use threadx_profile_store::{Profiles, RatioProfile};

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
        crate::balance::measure(&self.workers, work, options, tag, profiles)
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

/// SplitMix64's finaliser: a well-mixed key per chunk for a shuffled hand-out order.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}
