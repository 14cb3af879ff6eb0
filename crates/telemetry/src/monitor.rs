//! [`SystemMonitor`]: a background sampler of the machine (CPU %, memory), this process
//! (CPU %, resident memory) and every NVIDIA GPU (utilization, memory, temperature, power
//! through NVML, loaded at run time), with a bounded history (its CSV, summary and plot
//! are `history.rs`'s).

use crate::error::MonitorError;
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

/// The shortest interval: sysinfo measures the machine's CPU use over at least 200 ms.
pub const MIN_INTERVAL: Duration = sysinfo::MINIMUM_CPU_UPDATE_INTERVAL;

/// How to sample.
#[derive(Debug, Clone)]
pub struct MonitorOptions {
    /// Time between samples (0.5 s by default, at least [`MIN_INTERVAL`]).
    pub interval: Duration,
    /// The most samples kept; the oldest go first (7,200 by default: an hour at 0.5 s).
    pub max_history: usize,
    /// Where NVML is (`libnvidia-ml.so.1` by default); a path that does not load gives
    /// the no-GPU path.
    pub nvml_library: Option<PathBuf>,
}

impl Default for MonitorOptions {
    fn default() -> Self {
        Self { interval: Duration::from_millis(500), max_history: 7_200, nvml_library: None }
    }
}

/// One GPU's reading; a value the driver does not give is `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuReading {
    /// Time the GPU was running kernels over the driver's last period, %.
    pub utilization_percent: Option<f64>,
    pub memory_used_percent: Option<f64>,
    pub temperature_c: Option<f64>,
    pub power_w: Option<f64>,
}

/// One sample of the machine, this process and the GPUs (in NVML's order).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Seconds since the monitor started.
    pub elapsed_s: f64,
    /// The machine's CPU use, % of all its cores.
    pub cpu_percent: f64,
    pub memory_used_bytes: u64,
    pub memory_total_bytes: u64,
    /// This process's CPU use, % of one core (200 is two cores busy).
    pub process_cpu_percent: f64,
    pub process_rss_bytes: u64,
    pub gpus: Vec<GpuReading>,
}

/// A background sampler. Samples are taken every `interval` from `start` on (the first
/// one interval after it: CPU use is measured between two readings) until `stop`.
pub struct SystemMonitor {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    interval: Duration,
    gpu_names: Vec<String>,
    gpu_status: String,
    cores: usize,
}

struct Shared {
    history: Mutex<VecDeque<Sample>>,
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl SystemMonitor {
    /// Starts sampling. Without NVML (no NVIDIA driver) it says so once, in the log and
    /// in [`Self::gpu_status`], and records the rest.
    pub fn start(options: &MonitorOptions) -> Result<Self, MonitorError> {
        if !(MIN_INTERVAL..=Duration::from_secs(3_600)).contains(&options.interval) {
            return Err(MonitorError::Interval(options.interval));
        }
        if options.max_history == 0 {
            return Err(MonitorError::History);
        }
        let nvml = open_nvml(options.nvml_library.as_deref().map(|p| p.as_os_str()));
        let gpu_names: Vec<String> = nvml.as_ref().map_or_else(
            |_| Vec::new(),
            |nvml| {
                (0..nvml.device_count().unwrap_or(0))
                    .map(|i| nvml.device_by_index(i).and_then(|d| d.name()).unwrap_or_else(|_| "unknown".into()))
                    .collect()
            },
        );
        let gpu_status = match &nvml {
            Ok(_) => format!("NVML: {} GPU{}", gpu_names.len(), if gpu_names.len() == 1 { "" } else { "s" }),
            Err(e) => {
                let status = format!("NVML unavailable ({}): GPU metrics are not recorded", nvml_problem(e));
                tracing::info!("{status}");
                status
            }
        };
        let nvml = nvml.ok();
        let mut sampler = Sampler::new(nvml);
        let cores = sampler.system.cpus().len().max(1);
        let shared = Arc::new(Shared {
            history: Mutex::new(VecDeque::with_capacity(options.max_history.min(4_096))),
            stopped: Mutex::new(false),
            wake: Condvar::new(),
        });
        let (interval, max_history) = (options.interval, options.max_history);
        let thread = std::thread::Builder::new()
            .name("threadx-monitor".into())
            .spawn({
                let shared = Arc::clone(&shared);
                move || sampler.run(&shared, interval, max_history)
            })
            .map_err(MonitorError::Thread)?;
        Ok(Self { shared, thread: Some(thread), interval, gpu_names, gpu_status, cores })
    }

    /// Stops sampling and joins the sampler at once (it does not finish its wait).
    pub fn stop(&mut self) {
        *self.shared.stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.shared.wake.notify_all();
        if let Some(thread) = self.thread.take() {
            // A panicking sampler leaves the history it had: nothing else to do.
            let _ = thread.join();
        }
    }

    pub fn latest(&self) -> Option<Sample> {
        self.shared.history.lock().unwrap_or_else(PoisonError::into_inner).back().cloned()
    }

    /// The samples kept, oldest first.
    pub fn history(&self) -> Vec<Sample> {
        self.shared.history.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect()
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The GPUs NVML reports, in its order (empty without NVML).
    pub fn gpu_names(&self) -> &[String] {
        &self.gpu_names
    }

    /// `NVML: 2 GPUs`, or why GPU metrics are not recorded.
    pub fn gpu_status(&self) -> &str {
        &self.gpu_status
    }

    /// The machine's logical cores (process CPU % over this is the share of the machine).
    pub fn cores(&self) -> usize {
        self.cores
    }
}

impl std::fmt::Debug for SystemMonitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SystemMonitor")
            .field("interval", &self.interval)
            .field("gpu_status", &self.gpu_status)
            .field("samples", &self.shared.history.lock().unwrap_or_else(PoisonError::into_inner).len())
            .finish()
    }
}

impl Drop for SystemMonitor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How many GPUs NVML sees, or why it cannot be used (no NVIDIA driver).
pub fn nvml_gpus() -> Result<u32, String> {
    open_nvml(None).and_then(|nvml| nvml.device_count()).map_err(|e| nvml_problem(&e))
}

/// Why NVML cannot be used, in words: a library that does not load means no NVIDIA
/// driver, not a loader's error text.
fn nvml_problem(e: &nvml_wrapper::error::NvmlError) -> String {
    match e {
        nvml_wrapper::error::NvmlError::LibloadingError(_) => {
            "no NVIDIA driver (its library libnvidia-ml.so.1 is not installed)".to_owned()
        }
        other => other.to_string(),
    }
}

fn open_nvml(path: Option<&OsStr>) -> Result<nvml_wrapper::Nvml, nvml_wrapper::error::NvmlError> {
    match path {
        Some(path) => nvml_wrapper::Nvml::builder().lib_path(path).init(),
        None => nvml_wrapper::Nvml::init(),
    }
}

/// What the sampler thread owns.
struct Sampler {
    system: System,
    pid: Option<Pid>,
    nvml: Option<nvml_wrapper::Nvml>,
    started: Instant,
    /// This process's CPU time (ms) and when it was read: its CPU % is the change.
    process_time: (u64, Instant),
}

impl Sampler {
    fn new(nvml: Option<nvml_wrapper::Nvml>) -> Self {
        let mut system = System::new();
        let pid = sysinfo::get_current_pid().ok();
        // The first reading: CPU use is the change from it.
        system.refresh_cpu_usage();
        let mut sampler = Self { system, pid, nvml, started: Instant::now(), process_time: (0, Instant::now()) };
        sampler.process_time = (sampler.process_cpu_ms().0, Instant::now());
        sampler
    }

    /// This process's CPU time so far (ms) and resident memory (bytes).
    fn process_cpu_ms(&mut self) -> (u64, u64) {
        let Some(pid) = self.pid else { return (0, 0) };
        self.system.refresh_processes_specifics(ProcessesToUpdate::Some(&[pid]), false, Self::process_kind());
        self.system.process(pid).map_or((0, 0), |p| (p.accumulated_cpu_time(), p.memory()))
    }

    fn process_kind() -> ProcessRefreshKind {
        ProcessRefreshKind::nothing().with_cpu().with_memory()
    }

    fn run(&mut self, shared: &Shared, interval: Duration, max_history: usize) {
        let mut next = self.started + interval;
        loop {
            let stopped = shared.stopped.lock().unwrap_or_else(PoisonError::into_inner);
            let wait = next.saturating_duration_since(Instant::now());
            let (stopped, _) =
                shared.wake.wait_timeout_while(stopped, wait, |s| !*s).unwrap_or_else(PoisonError::into_inner);
            if *stopped {
                return;
            }
            drop(stopped);
            let sample = self.sample();
            {
                let mut history = shared.history.lock().unwrap_or_else(PoisonError::into_inner);
                if history.len() == max_history {
                    history.pop_front();
                }
                history.push_back(sample);
            }
            // A late sample (a suspended machine) does not cause a burst of catch-ups.
            next += interval;
            let now = Instant::now();
            if next < now {
                next = now + interval;
            }
        }
    }

    fn sample(&mut self) -> Sample {
        self.system.refresh_cpu_usage();
        self.system.refresh_memory();
        // From the process's CPU time: sysinfo's own figure divides by the machine's
        // CPU time over a possibly different span.
        let (cpu_ms, rss) = self.process_cpu_ms();
        let now = Instant::now();
        let (last_ms, last) = std::mem::replace(&mut self.process_time, (cpu_ms, now));
        let wall_ms = now.duration_since(last).as_secs_f64() * 1e3;
        let process_cpu = if wall_ms > 0.0 { cpu_ms.saturating_sub(last_ms) as f64 / wall_ms * 100.0 } else { 0.0 };
        Sample {
            elapsed_s: self.started.elapsed().as_secs_f64(),
            cpu_percent: f64::from(self.system.global_cpu_usage()),
            memory_used_bytes: self.system.used_memory(),
            memory_total_bytes: self.system.total_memory(),
            process_cpu_percent: process_cpu,
            process_rss_bytes: rss,
            gpus: self.nvml.as_ref().map_or_else(Vec::new, read_gpus),
        }
    }
}

fn read_gpus(nvml: &nvml_wrapper::Nvml) -> Vec<GpuReading> {
    use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
    let n = nvml.device_count().unwrap_or(0);
    (0..n)
        .map(|i| match nvml.device_by_index(i) {
            Ok(d) => GpuReading {
                utilization_percent: d.utilization_rates().ok().map(|u| f64::from(u.gpu)),
                memory_used_percent: d
                    .memory_info()
                    .ok()
                    .filter(|m| m.total > 0)
                    .map(|m| m.used as f64 / m.total as f64 * 100.0),
                temperature_c: d.temperature(TemperatureSensor::Gpu).ok().map(f64::from),
                power_w: d.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
            },
            Err(_) => {
                GpuReading { utilization_percent: None, memory_used_percent: None, temperature_c: None, power_w: None }
            }
        })
        .collect()
}
