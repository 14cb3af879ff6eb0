//! [`StatsError`]: input the statistics cannot use, named before any work; [`PboError`]:
//! why a device's CSCV gave no report.

/// Input the statistics cannot use.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("{what}: {problem}")]
    Bad { what: String, problem: String },
}

pub(crate) fn bad(what: &str, problem: impl Into<String>) -> StatsError {
    StatsError::Bad { what: what.into(), problem: problem.into() }
}

/// Why [`pbo_on`](crate::pbo_on) gave no report: the input, or the device (whose error says why).
#[derive(Debug, thiserror::Error)]
pub enum PboError<E> {
    #[error(transparent)]
    Input(StatsError),
    #[error("the device failed: {0}")]
    Device(E),
    #[error("the device's answer does not fit the pass: {0}")]
    Answer(String),
}
