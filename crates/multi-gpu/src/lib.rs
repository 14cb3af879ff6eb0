//! Runs large work on every device at once: a [`DevicePool`] of [`Worker`]s (one per
//! physical GPU, named `gpu0:<adapter>`, `gpu1:…`, and the CPU as `cpu` on its rayon
//! pool) that [`DevicePool::distribute`]s fixed logical [`Chunk`]s of a [`Workload`]: the
//! first assignment in proportion to the workload tag's ratios from `multigpu.json`
//! ([`DevicePool::profile_auto_balance`] measures them on first use), the tail
//! self-scheduled (idle workers steal queued chunks and back up a slow worker's last
//! ones), failed workers retired with their chunks re-run elsewhere, out-of-memory chunks
//! split on the same GPU, and results handed back in chunk order.
//!
//! Work is items cut into chunks and a per-device closure ([`Workload`]): this crate
//! knows nothing of indicators, strategies or sweeps. It stands on threadx-dispatch (GPU
//! contexts, adapters) and threadx-profile-store (the ratios on disk).
//!
//! Invariant: a chunk's output depends only on the chunk (the workload promises that;
//! split pieces are joined in item order), and outputs are delivered in chunk order, so
//! what the caller sees is the same whatever the workers, ratios, failures or timing.
//!
//! Telemetry lives here too: [`SystemMonitor`] samples the machine, this process and
//! every NVIDIA GPU (NVML, loaded at run time) in the background; [`PhaseTimer`] splits a
//! run's wall time into phases and the unaccounted rest; each worker's
//! [`WorkerStats::phases`] splits its lane time, and GPU kernel time comes from
//! timestamp queries.

mod balance;
mod monitor;
mod phases;
mod pool;
mod schedule;
mod worker;

pub use balance::{Balance, BalanceOptions, WorkerTiming};
pub use monitor::{
    GpuReading, MIN_INTERVAL, MonitorError, MonitorOptions, Sample, SystemMonitor, history_csv, nvml_gpus,
    parse_history_csv, plot_svg, sample_line, summary_json,
};
pub use phases::{PhaseReport, PhaseTimer};
pub use pool::{Chunk, DevicePool, DistributeOptions, InOrder, InWorker, RunStats, WorkerStats, Workload};
pub use worker::{Fault, PoolOptions, Worker, WorkerDevice};

use threadx_dispatch::GpuError;

/// Why a worker could not do a piece of work.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkError {
    /// The device ran out of memory (or a buffer exceeded its limits): a smaller piece may fit.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// The device cannot go on (lost, rejected the work, unsupported): retire it.
    #[error("{0}")]
    Failed(String),
}

impl From<GpuError> for WorkError {
    fn from(e: GpuError) -> Self {
        match e {
            GpuError::OutOfMemory(_) | GpuError::TooLarge { .. } => Self::OutOfMemory(e.to_string()),
            other => Self::Failed(other.to_string()),
        }
    }
}

/// A pool that cannot run.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("the device pool has no workers")]
    Empty,
    #[error("two workers are named {0}; worker names must be unique")]
    DuplicateName(String),
    #[error("every worker failed ({0}); {1} chunks were not run")]
    AllFailed(String, usize),
    #[error("balance: {0}")]
    Balance(String),
    #[error(transparent)]
    Profile(#[from] threadx_profile_store::ProfileError),
}
