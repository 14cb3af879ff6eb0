//! Auto-balance: each worker timed alone on a representative sample of the workload; the
//! ratios follow the throughputs and are kept per workload tag in `multigpu.json`.

use crate::error::{PoolError, WorkError};
use crate::worker::Worker;
use crate::workload::{BalanceOptions, Workload};
use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};
use threadx_dispatch::thousands;
use threadx_profile_store::Profiles;

/// One worker's timed runs.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerTiming {
    pub name: String,
    pub items: u64,
    /// Seconds of each timed run.
    pub runs_s: Vec<f64>,
    /// Why it could not be measured (it gets no share).
    pub failed: Option<String>,
}

impl WorkerTiming {
    pub fn mean_s(&self) -> f64 {
        self.runs_s.iter().sum::<f64>() / self.runs_s.len().max(1) as f64
    }

    /// Sample standard deviation of the runs (0 with one run).
    pub fn std_s(&self) -> f64 {
        let n = self.runs_s.len();
        if n < 2 {
            return 0.0;
        }
        let mean = self.mean_s();
        (self.runs_s.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    }

    /// Items per second over the mean run (0 when it failed).
    pub fn items_per_s(&self) -> f64 {
        let mean = self.mean_s();
        if self.failed.is_some() || mean <= 0.0 { 0.0 } else { self.items as f64 / mean }
    }
}

/// A measured balance: each worker's timing, and the ratios and throughputs saved.
#[derive(Debug, Clone, PartialEq)]
pub struct Balance {
    pub tag: String,
    pub unit: &'static str,
    pub timings: Vec<WorkerTiming>,
    pub ratios: BTreeMap<String, f64>,
    pub throughput: BTreeMap<String, f64>,
}

impl fmt::Display for Balance {
    /// `gpu0:…: 5,204,122 combos/s (avg 0.019 s ± 0.010 s)` per worker, then
    /// `balance: gpu0:… 66.3 %, cpu 33.7 %`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for t in &self.timings {
            match &t.failed {
                Some(e) => writeln!(f, "  {}: failed ({e}); no share", t.name)?,
                None => writeln!(
                    f,
                    "  {}: {} {}/s (avg {:.3} s ± {:.3} s over {} runs of {})",
                    t.name,
                    thousands(t.items_per_s().round() as u64),
                    self.unit,
                    t.mean_s(),
                    t.std_s(),
                    t.runs_s.len(),
                    thousands(t.items)
                )?,
            }
        }
        let shares: Vec<String> =
            self.timings.iter().map(|t| format!("{} {:.1} %", t.name, self.ratios[&t.name] * 100.0)).collect();
        write!(f, "  balance of {}: {}", self.tag, shares.join(", "))
    }
}

/// See [`DevicePool::profile_auto_balance`](crate::DevicePool::profile_auto_balance).
pub(crate) fn measure<W: Workload>(
    workers: &[Worker],
    work: &W,
    options: &BalanceOptions,
    tag: &str,
    profiles: Option<&Profiles>,
) -> Result<Balance, PoolError> {
    if options.runs == 0 {
        return Err(PoolError::Balance("--runs must be at least 1".into()));
    }
    let items = options.sample_size.min(work.items());
    if items == 0 {
        return Err(PoolError::Balance(format!("nothing to measure: the sample has {items} items")));
    }
    let timings: Vec<WorkerTiming> = workers
        .iter()
        .map(|worker| {
            let (items, runs_s, failed) = match time_worker(worker, work, items, options) {
                Ok((items, runs)) => (items, runs, None),
                Err(e) => {
                    tracing::warn!("{}: could not be measured ({e}); it gets no share", worker.name());
                    (items, Vec::new(), Some(e.to_string()))
                }
            };
            WorkerTiming { name: worker.name().to_owned(), items, runs_s, failed }
        })
        .collect();
    let throughput: BTreeMap<String, f64> = timings.iter().map(|t| (t.name.clone(), t.items_per_s())).collect();
    let ratios =
        normalised(throughput.clone()).ok_or_else(|| PoolError::Balance("no worker could be measured".into()))?;
    let balance = Balance { tag: tag.to_owned(), unit: work.unit(), timings, ratios, throughput };
    tracing::info!("measured the balance of {tag}:\n{balance}");
    if let Some(profiles) = profiles {
        profiles.update_multigpu_ratio_profile(&balance.ratios, &balance.throughput, tag)?;
    }
    Ok(balance)
}

/// The items timed on `worker` (the first `sample`, or as many as one of its dispatches
/// takes where that is more: a wide device is measured as it will run) and the seconds of
/// each timed run (a throttled worker's sleep included; an out-of-memory sample is
/// refused: measure with a smaller one).
fn time_worker<W: Workload>(
    worker: &Worker,
    work: &W,
    sample: u64,
    options: &BalanceOptions,
) -> Result<(u64, Vec<f64>), WorkError> {
    worker.install(|| {
        let mut lane = work.open(&worker.device)?;
        let items = 0..sample.max(work.dispatch_items(&lane)).min(work.items());
        let mut runs = Vec::with_capacity(options.runs);
        for run in 0..options.warmup + options.runs {
            worker.injected_out_of_memory(&items)?;
            let started = Instant::now();
            let pending = work.submit(&mut lane, std::slice::from_ref(&items))?;
            work.finish(&mut lane, pending, &|| true)?;
            let worked = started.elapsed();
            std::thread::sleep(Duration::from_secs_f64(worked.as_secs_f64() * worker.slowdown));
            if run >= options.warmup {
                runs.push(started.elapsed().as_secs_f64());
            }
        }
        Ok((items.end, runs))
    })
}

/// `ratios` scaled to sum to 1; None when they sum to 0 (or are not finite).
pub(crate) fn normalised(ratios: BTreeMap<String, f64>) -> Option<BTreeMap<String, f64>> {
    let sum: f64 = ratios.values().map(|r| r.max(0.0)).sum();
    (sum > 0.0 && sum.is_finite()).then(|| ratios.into_iter().map(|(n, r)| (n, r.max(0.0) / sum)).collect())
}
