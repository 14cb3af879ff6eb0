//! Why a sweep could not run.

use std::path::Path;
use threadx_backtest::BacktestError;

/// A sweep that cannot run, named before work where it can be.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{0}")]
    Spec(String),
    #[error(transparent)]
    Backtest(#[from] BacktestError),
    #[error(transparent)]
    Pool(#[from] threadx_multi_gpu::PoolError),
    #[error("{0}")]
    Results(String),
    #[error("merge: {0}")]
    Merge(String),
    /// The caller asked the run to stop (e.g. Ctrl-C); the rows so far are dropped.
    #[error("the sweep was cancelled")]
    Cancelled,
    // The cause is in the message, not a `source`: error chains would print it twice.
    #[error("{path}: {error}")]
    Io { path: std::path::PathBuf, error: std::io::Error },
}

/// A problem with the table file `name`.
pub(crate) fn file_error(name: impl std::fmt::Display, e: &dyn std::fmt::Display) -> SweepError {
    SweepError::Results(format!("{name}: {e}"))
}

/// An I/O error on `path` as a [`SweepError::Io`].
pub(crate) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> SweepError + '_ {
    move |error| SweepError::Io { path: path.to_owned(), error }
}

/// `e`, naming the file it was found in.
pub(crate) fn in_file(path: &Path, e: SweepError) -> SweepError {
    SweepError::Results(format!("{}: {e}", path.display()))
}
