//! What a run did, per worker ([`WorkerStats`]) and as a whole ([`RunStats`], with its
//! JSON), and the ratios refreshed from it.

use crate::balance::{Balance, normalised};
use crate::worker::Worker;
use crate::workload::Workload;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use threadx_profile_store::Profiles;

/// What one worker did in a run.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerStats {
    pub name: String,
    /// Chunks whose output came from this worker.
    pub chunks: u64,
    /// Dispatches it ran: a wide device takes several chunks in one.
    pub dispatches: u64,
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
    /// Each worker's line of a summary, by name.
    pub fn summary(&self) -> BTreeMap<String, WorkerSummary> {
        self.workers.iter().map(|w| (w.name.clone(), WorkerSummary::of(w))).collect()
    }
}

/// A worker's line of a run's summary (serde, both ways): chunks, dispatches, combos,
/// busy seconds, combos per busy second, share, seconds per phase (`idle` included), why
/// it failed, backups dropped, out-of-memory splits, and a GPU's kernel seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerSummary {
    pub chunks: u64,
    pub dispatches: u64,
    pub combos: u64,
    pub busy_s: f64,
    pub combos_per_s: f64,
    pub share: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backups_dropped: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_memory_splits: Option<u64>,
    pub phases_s: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_s: Option<KernelSeconds>,
}

/// A GPU worker's kernel seconds, or why they are unknown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KernelSeconds {
    Seconds(f64),
    Unavailable(String),
}

impl WorkerSummary {
    fn of(w: &WorkerStats) -> Self {
        let mut phases_s: BTreeMap<String, f64> = w.phases.iter().map(|(name, s)| ((*name).to_owned(), *s)).collect();
        phases_s.insert("idle".into(), w.idle_s());
        Self {
            chunks: w.chunks,
            dispatches: w.dispatches,
            combos: w.items,
            busy_s: w.busy_s,
            combos_per_s: w.items_per_s,
            share: w.share,
            failed: w.failed.clone(),
            backups_dropped: (w.duplicates > 0).then_some(w.duplicates),
            out_of_memory_splits: (w.splits > 0).then_some(w.splits),
            phases_s,
            kernel_s: w.on_gpu.then(|| {
                w.kernel_s.map_or_else(
                    || KernelSeconds::Unavailable("unavailable (no timestamp queries)".into()),
                    KernelSeconds::Seconds,
                )
            }),
        }
    }
}

/// Worker `w`'s stats from its tally over a pass of `pass_s` seconds.
pub(crate) fn stats_of<W: Workload>(
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
        dispatches: t.dispatches,
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
pub(crate) fn refresh(
    profiles: &Profiles,
    tag: &str,
    stats: &[WorkerStats],
    tally: &[crate::schedule::Tally],
    pool: &[Worker],
) {
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
