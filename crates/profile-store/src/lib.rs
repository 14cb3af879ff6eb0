//! Timing profiles on disk: how long each operation took on the CPU and on the GPU
//! (`thresholds.json`), and how a workload splits across several GPUs (`multigpu.json`).
//!
//! Main types: [`Profiles`] (the two files of one machine, with the original API:
//! [`Profiles::update_gpu_threshold_entry`], [`Profiles::get_gpu_thresholds`],
//! [`Profiles::update_multigpu_ratio_profile`], [`Profiles::multigpu_ratios`]),
//! [`ThresholdStore`] (an in-memory profile that batches samples and flushes them),
//! [`RunningStats`] (count, mean, M2; merges exactly) and [`profile_key`], the one
//! function that builds profile keys.
//!
//! This crate is the bottom layer: it knows nothing of wgpu, devices or indicators. The
//! hardware fingerprint is handed in by the caller as an opaque string.
//!
//! [`escape`] makes a user's text safe for each medium ThreadX writes (HTML and SVG, the
//! terminal); it lives here, at the bottom, beside the other rules for what is written.
//!
//! Invariants: a profile file on disk is always complete (written to a temporary file and
//! renamed); every update is a locked read-merge-write, so concurrent processes lose no
//! sample; a file that cannot be parsed is moved aside, never overwritten.

mod error;
pub mod escape;
mod io;
mod key;
mod multigpu;
mod stats;
mod thresholds;

use std::path::{Path, PathBuf};

pub use error::{ProfileError, Result};
pub use io::{
    AtomicFile, Staged, check_writable, free_bytes, is_special_file, is_standard_output, refuse_colliding_outputs,
    refuse_output_over_input, write_file_atomic, write_file_staged, write_held_file,
};
pub use key::{profile_key, split_key};
pub use multigpu::{MultiGpuFile, RatioProfile};
pub use stats::RunningStats;
pub use thresholds::{Device, EntryView, ThresholdEntry, ThresholdStore, ThresholdsFile};

/// Environment variable overriding the path of `thresholds.json`.
pub const THRESHOLD_PATH_ENV: &str = "THREADX_GPU_THRESHOLD_PATH";
/// Environment variable overriding the path of `multigpu.json`.
pub const MULTIGPU_PATH_ENV: &str = "THREADX_MULTIGPU_PROFILE_PATH";
/// Default path of `thresholds.json`, relative to the working directory.
pub const DEFAULT_THRESHOLD_PATH: &str = "artifacts/profiles/thresholds.json";
/// Default path of `multigpu.json`, relative to the working directory.
pub const DEFAULT_MULTIGPU_PATH: &str = "artifacts/profiles/multigpu.json";
/// Version of the file layout written by this crate.
pub const SCHEMA: u32 = 1;

/// This machine's CPU as profiles and reports name it: model and hardware threads,
/// e.g. `Intel(R) Xeon(R) Processor @ 2.10GHz x2`.
pub fn host_cpu() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model} x{threads}")
}

/// The two profile files of one machine, and the fingerprint of the hardware that
/// measures now. Cheap to create; every call reads or updates the files on disk.
#[derive(Debug, Clone)]
pub struct Profiles {
    thresholds_path: PathBuf,
    multigpu_path: PathBuf,
    fingerprint: String,
}

impl Profiles {
    /// Profiles at the paths given by the environment, else the artifacts/ defaults.
    pub fn from_env(fingerprint: impl Into<String>) -> Self {
        let path = |var: &str, default: &str| {
            std::env::var_os(var).filter(|v| !v.is_empty()).map_or_else(|| PathBuf::from(default), PathBuf::from)
        };
        Self::at(
            path(THRESHOLD_PATH_ENV, DEFAULT_THRESHOLD_PATH),
            path(MULTIGPU_PATH_ENV, DEFAULT_MULTIGPU_PATH),
            fingerprint,
        )
    }

    /// Profiles at explicit paths.
    pub fn at(
        thresholds_path: impl Into<PathBuf>,
        multigpu_path: impl Into<PathBuf>,
        fingerprint: impl Into<String>,
    ) -> Self {
        Self {
            thresholds_path: thresholds_path.into(),
            multigpu_path: multigpu_path.into(),
            fingerprint: fingerprint.into(),
        }
    }

    pub fn thresholds_path(&self) -> &Path {
        &self.thresholds_path
    }

    pub fn multigpu_path(&self) -> &Path {
        &self.multigpu_path
    }

    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Records one run of `function_name` with `params` (a JSON object; include the
    /// input size as `"size"`). Either time may be absent: one run measures one device.
    /// The update is merged into the file under a lock and written atomically.
    pub fn update_gpu_threshold_entry(
        &self,
        function_name: &str,
        params: &serde_json::Value,
        cpu_ms: Option<f64>,
        gpu_ms: Option<f64>,
    ) -> Result<()> {
        let mut store = self.threshold_store()?;
        let key = profile_key(function_name, params);
        if let Some(ms) = cpu_ms {
            store.record(&key, Device::Cpu, ms)?;
        }
        if let Some(ms) = gpu_ms {
            store.record(&key, Device::Gpu, ms)?;
        }
        store.flush()
    }

    /// A snapshot of `thresholds.json` (empty when the file does not exist yet).
    pub fn get_gpu_thresholds(&self) -> Result<ThresholdsFile> {
        io::load::<ThresholdsFile>(&self.thresholds_path)
    }

    /// The in-memory threshold profile: decisions read it, samples accumulate in it,
    /// and [`ThresholdStore::flush`] merges them into the file.
    pub fn threshold_store(&self) -> Result<ThresholdStore> {
        ThresholdStore::open(&self.thresholds_path, &self.fingerprint)
    }

    /// Replaces the split ratios (and the measured throughputs, items per second) of
    /// one workload tag. Ratios must be finite, non-negative and sum to 1.
    pub fn update_multigpu_ratio_profile(
        &self,
        ratios: &std::collections::BTreeMap<String, f64>,
        throughput: &std::collections::BTreeMap<String, f64>,
        workload_tag: &str,
    ) -> Result<()> {
        let profile = RatioProfile::new(workload_tag, ratios.clone(), throughput.clone())?;
        io::update::<MultiGpuFile, _>(&self.multigpu_path, |file| {
            file.profiles.insert(workload_tag.to_owned(), profile);
        })?;
        Ok(())
    }

    /// A snapshot of `multigpu.json` (empty when the file does not exist yet).
    pub fn get_multigpu_profiles(&self) -> Result<MultiGpuFile> {
        io::load::<MultiGpuFile>(&self.multigpu_path)
    }

    /// The stored ratio profile of a workload tag, if any.
    pub fn multigpu_ratios(&self, workload_tag: &str) -> Result<Option<RatioProfile>> {
        Ok(self.get_multigpu_profiles()?.profiles.remove(workload_tag))
    }

    /// Empties both profiles (under their locks). Returns the paths that held data.
    pub fn reset(&self) -> Result<Vec<PathBuf>> {
        let mut cleared = Vec::new();
        if self.thresholds_path.exists() {
            io::update::<ThresholdsFile, _>(&self.thresholds_path, |f| f.entries.clear())?;
            cleared.push(self.thresholds_path.clone());
        }
        if self.multigpu_path.exists() {
            io::update::<MultiGpuFile, _>(&self.multigpu_path, |f| f.profiles.clear())?;
            cleared.push(self.multigpu_path.clone());
        }
        Ok(cleared)
    }
}
