//! Chooses where each operation runs, and owns the GPU it may run on.
//!
//! Main types: [`AdapterReport`] (every adapter wgpu finds, ranked discrete > integrated >
//! virtual > CPU-software, then by memory), [`GpuContext`] (one device and queue, with
//! compute pipelines compiled once per [`Kernel`] and cached), [`DeviceMode`]
//! (`THREADX_DEVICE=auto|cpu|gpu`) and [`Dispatcher`], which runs an [`Operation`] given
//! its CPU and GPU implementations: in `auto` it picks the device with the lower expected
//! time from the timing profile, times the run, and falls back to the CPU on any GPU error.
//!
//! This crate knows nothing of indicators, strategies or sweeps: operations are a name, a
//! size and parameters. It stands only on threadx-profile-store.
//!
//! Invariant: [`Dispatcher::run`] always returns a complete result; a failing GPU costs a
//! warning and a CPU run, never an error or a panic.

mod adapter_report;
mod adapters;
mod dispatcher;
mod error;
mod gpu;
mod mode;
mod policy;
mod shader;
#[cfg(feature = "testing")]
pub mod testing;

pub use adapter_report::AdapterReport;
pub use adapters::{
    GpuSelection, fingerprint, format_bytes, host_fingerprint, select_every_gpu, select_gpu, thousands,
};
pub use dispatcher::{Decision, Dispatcher, Operation, Outcome, Reason};
pub use error::GpuError;
pub use gpu::{Dispatch, GpuContext, HARDWARE_LOOP_STEPS, MAX_LOOP_STEPS, PendingRead, ReadBack, f32_pairs};
pub use mode::{DEVICE_ENV, DeviceMode};
pub use policy::DevicePolicy;
pub use shader::{Kernel, ShaderInfo, workgroup_size};
pub use threadx_profile_store::Device;
/// The wgpu this crate is built on, so kernels' crates bind buffers of the same version.
pub use wgpu;

/// Environment variable: a substring of the adapter name to use (case-insensitive).
pub const ADAPTER_ENV: &str = "THREADX_ADAPTER";

/// Items per rayon task when each item costs about `steps` element-steps (e.g. one series
/// of `bars` bars): enough that a task holds some 65,536 steps (tens of microseconds).
/// Below that, waking threads costs more than it saves: small sweeps run on one thread,
/// large ones on every core. One grain for every parallel CPU loop of ThreadX.
pub fn cpu_grain(steps: usize) -> usize {
    ((1 << 16) / steps.max(1)).max(1)
}
