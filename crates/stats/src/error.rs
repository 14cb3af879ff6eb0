//! [`StatsError`]: input the statistics cannot use, named before any work.

/// Input the statistics cannot use.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("{what}: {problem}")]
    Bad { what: String, problem: String },
}

pub(crate) fn bad(what: &str, problem: impl Into<String>) -> StatsError {
    StatsError::Bad { what: what.into(), problem: problem.into() }
}
