//! Why GPU work could not be done.

/// Why GPU work could not be done. Every variant makes the dispatcher fall back to the CPU.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GpuError {
    #[error("{0}")]
    NoAdapter(String),
    #[error("could not open a device on {adapter}: {reason}")]
    Open { adapter: String, reason: String },
    #[error("GPU device lost: {0}")]
    Lost(String),
    #[error("GPU out of memory: {0}")]
    OutOfMemory(String),
    #[error("GPU rejected the work: {0}")]
    Validation(String),
    #[error("{what} needs {needed} but the adapter allows at most {limit}")]
    TooLarge { what: String, needed: u64, limit: u64 },
    #[error("reading results back from the GPU failed: {0}")]
    Readback(String),
    #[error("not supported on the GPU: {0}")]
    Unsupported(String),
}

impl GpuError {
    /// Errors after which this GPU is not tried again in the same process.
    pub fn disables_gpu(&self) -> bool {
        matches!(self, Self::NoAdapter(_) | Self::Open { .. } | Self::Lost(_))
    }
}

pub(crate) fn from_wgpu(e: wgpu::Error) -> GpuError {
    match e {
        wgpu::Error::OutOfMemory { source } => GpuError::OutOfMemory(source.to_string()),
        other => GpuError::Validation(other.to_string()),
    }
}
