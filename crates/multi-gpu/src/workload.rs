//! The work API: what the pool runs ([`Workload`], cut into [`Chunk`]s), what it calls
//! with each chunk's output, and how it splits the work ([`DistributeOptions`], with the
//! [`BalanceOptions`] of a first-use measurement).

use crate::error::WorkError;
use crate::worker::WorkerDevice;
use std::collections::BTreeMap;
use std::ops::Range;
use threadx_profile_store::Profiles;

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
/// starts one or more ranges as one dispatch and may return before the device is done (a
/// GPU keeps two dispatches in flight); `finish` waits for them and gives one output per
/// range, or gives up with `None` as soon as `wanted()` turns false (another worker
/// delivered those ranges first, or the run stopped). A lane whose
/// [`Workload::dispatch_items`] is above one chunk's items is handed several chunks a
/// dispatch, so that a wide device is not fed a narrow one's work. The output of a range
/// must depend only on the range (not on the ranges dispatched beside it), and `join` of
/// the outputs of consecutive ranges must equal the output of their union: the pool splits
/// ranges that run out of memory.
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

    /// About how many items `lane` needs in one dispatch to keep its device busy; the pool
    /// hands it consecutive chunks until they hold this many. 0 (the default): one chunk.
    fn dispatch_items(&self, lane: &Self::Lane) -> u64 {
        let _ = lane;
        0
    }

    /// Starts `pieces` (at least one range) as one dispatch.
    fn submit(&self, lane: &mut Self::Lane, pieces: &[Range<u64>]) -> Result<Self::Pending, WorkError>;

    /// The outputs of a submitted dispatch, one per piece in order; `None` when no longer wanted.
    fn finish(
        &self,
        lane: &mut Self::Lane,
        pending: Self::Pending,
        wanted: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<Self::Output>>, WorkError>;

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

/// How a balance is measured: `warmup` untimed runs, then `runs` timed runs of the
/// first `sample_size` items on each worker (more on a wide device: one of its dispatches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BalanceOptions {
    pub sample_size: u64,
    pub warmup: usize,
    pub runs: usize,
}

impl Default for BalanceOptions {
    fn default() -> Self {
        Self { sample_size: 8192, warmup: 3, runs: 5 }
    }
}
