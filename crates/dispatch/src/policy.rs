//! [`DevicePolicy`]: the one place where ThreadX's `auto` rules live: when the dispatcher
//! measures or trusts a device, which sweeps are too small to balance, which workers are
//! worth keeping, when a CPU-software adapter may run, and how `THREADX_ADAPTER` names one.

use crate::ADAPTER_ENV;
use crate::adapter_report::AdapterReport;

/// The thresholds and rules of the `auto` device choice, for single operations (the
/// dispatcher) and for sweeps split over a device pool alike.
#[derive(Debug, Clone, Copy)]
pub struct DevicePolicy {
    /// Inputs smaller than this go to the CPU without profiling.
    pub min_gpu_size: usize,
    /// Samples a device needs before its mean is trusted; fewer means explore it.
    pub min_samples: u64,
    /// Re-checks cost about 1/`recheck_every` of the time spent on a key: its losing device
    /// runs every `recheck_every × (loser's time / winner's time)`-th call, so a stale
    /// decision heals while a device 100 times slower is re-run 100 times less often
    /// (0: never).
    pub recheck_every: u64,
    /// Sweeps of less work than this (bars × combos) run on the CPU alone in `auto`,
    /// whatever balance is saved: opening a GPU and feeding it (a quarter of a second on
    /// an H100) costs more than the CPU's whole run (under a second on 16 cores). A saved
    /// balance says how devices share a long run, not whether a short one pays a GPU's
    /// start-up.
    pub small_sweep_work: u64,
    /// A worker whose measured share of a balanced run is below this is dropped in `auto`
    /// (it adds less throughput than it costs to feed).
    pub min_useful_share: f64,
}

impl Default for DevicePolicy {
    fn default() -> Self {
        Self {
            min_gpu_size: 4096,
            min_samples: 3,
            recheck_every: 50,
            small_sweep_work: 1 << 32,
            min_useful_share: 0.05,
        }
    }
}

impl DevicePolicy {
    /// Whether a sweep of `combos` combos over `bars` bars is too small for `auto` to use a
    /// GPU for ([`Self::small_sweep_work`]).
    pub fn is_small_sweep(&self, combos: u64, bars: u64) -> bool {
        combos.saturating_mul(bars) < self.small_sweep_work
    }

    /// Whether a worker with `share` of the work is kept when the best has `best`: it adds
    /// enough, or nothing does better.
    pub fn is_useful(&self, share: f64, best: f64) -> bool {
        share >= self.min_useful_share.min(best)
    }

    /// Whether `adapter` may run: when `THREADX_ADAPTER` is set, only an adapter it names;
    /// a CPU-software adapter (lavapipe, llvmpipe, WARP) shares the CPU's own cores, so it
    /// runs only where `software` allows it (the `gpu` mode, a pool opened with software
    /// adapters) or when `THREADX_ADAPTER` names it.
    pub fn admits(adapter: &AdapterReport, software: bool) -> bool {
        let wanted = Self::wanted_adapter();
        let named = wanted.as_ref().is_some_and(|w| Self::names_adapter(w, &adapter.name));
        (wanted.is_none() || named) && (!adapter.software || software || named)
    }

    /// The adapter `THREADX_ADAPTER` asks for: part of a name, lower-cased and trimmed;
    /// `None` when unset or blank.
    pub fn wanted_adapter() -> Option<String> {
        std::env::var(ADAPTER_ENV).ok().map(|s| s.trim().to_lowercase()).filter(|s| !s.is_empty())
    }

    /// Whether `name` is the adapter `wanted` ([`DevicePolicy::wanted_adapter`]) names.
    pub fn names_adapter(wanted: &str, name: &str) -> bool {
        name.to_lowercase().contains(wanted)
    }
}
