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
//! Each worker's [`WorkerStats::phases`] splits its lane time, and GPU kernel time comes
//! from timestamp queries; machine-wide telemetry is threadx-telemetry's.

mod balance;
mod engine;
mod error;
mod pool;
mod schedule;
mod stats;
mod worker;
mod workload;

pub use balance::{Balance, WorkerTiming};
pub use error::{PoolError, WorkError};
pub use pool::DevicePool;
pub use stats::{KernelSeconds, RunStats, WorkerStats, WorkerSummary};
pub use worker::{Fault, PoolOptions, Worker, WorkerDevice};
pub use workload::{BalanceOptions, Chunk, DistributeOptions, InOrder, InWorker, Workload};
