//! What a run did to the machine, kept apart from the work itself: [`SystemMonitor`]
//! samples the machine, this process and every NVIDIA GPU (NVML, loaded at run time) in
//! the background into a bounded history ([`history_csv`], [`plot_svg`],
//! [`machine_summary`]); [`PhaseTimer`] splits a run's wall time into named phases and the
//! unaccounted rest ([`PhaseReport`]); [`peak_resident_bytes`] is the process's peak memory.
//!
//! Invariant: a phase report's phases plus its unaccounted remainder are the wall time.
//!
//! This crate depends on no other ThreadX crate, so the device pool and the sweep carry
//! no NVML, sysinfo or plotters unless they report telemetry.

mod error;
mod history;
mod memory;
mod monitor;
mod phases;

pub use error::MonitorError;
pub use history::{
    GpuSummary, MachineSummary, MeanMax, history_csv, machine_summary, parse_history_csv, plot_svg, sample_line,
};
pub use memory::{available_memory, peak_resident_bytes, resident_bytes};
pub use monitor::{GpuReading, MIN_INTERVAL, MonitorOptions, Sample, SystemMonitor, nvml_gpus};
pub use phases::{PhaseReport, PhaseShare, PhaseTimer, PhasesSummary};
