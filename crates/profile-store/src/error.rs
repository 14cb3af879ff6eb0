//! Why profiles could not be read or written.

use std::path::PathBuf;

/// Errors of the profile store.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    // The cause is in the message, not a `source`: error chains would print it twice.
    #[error("profile file {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    #[error("profile file {path}: cannot encode: {source}")]
    Encode {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("invalid timing for {key}: {ms} ms (must be finite and >= 0)")]
    InvalidTiming { key: String, ms: f64 },
    #[error("invalid multi-GPU ratios for workload '{tag}': {reason}")]
    InvalidRatios { tag: String, reason: String },
}

/// Result type of this crate.
pub type Result<T, E = ProfileError> = std::result::Result<T, E>;
