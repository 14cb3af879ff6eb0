//! Why a worker or a pool could not run.

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
