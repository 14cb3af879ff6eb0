//! What the system monitor could not do.

use std::time::Duration;

/// Why the monitor could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error(
        "the sampling interval must be at least 0.2 s (the shortest span CPU use is measured over) and at most an hour, not {0:?}"
    )]
    Interval(Duration),
    #[error("the history must hold at least one sample")]
    History,
    #[error("starting the sampler thread: {0}")]
    Thread(std::io::Error),
    #[error("monitor history CSV, line {line}: {reason}")]
    Csv { line: usize, reason: String },
    #[error("drawing the monitor plot: {0}")]
    Plot(String),
}
