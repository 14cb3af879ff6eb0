//! [`SystemMonitor`]: a background sampler of the machine (CPU %, memory), this process
//! (CPU %, resident memory) and every NVIDIA GPU (utilization, memory, temperature, power
//! through NVML, loaded at run time), with a bounded history, CSV export, a summary and
//! a plot.

use crate::error::MonitorError;
use plotters::prelude::*;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

const GIB: f64 = (1u64 << 30) as f64;

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

const MACHINE_COLUMNS: [&str; 6] =
    ["elapsed_s", "cpu_percent", "memory_used_bytes", "memory_total_bytes", "process_cpu_percent", "process_rss_bytes"];
const GPU_COLUMNS: [&str; 4] = ["utilization_percent", "memory_used_percent", "temperature_c", "power_w"];

/// The history as CSV: the machine's columns, then `gpu<i>_<metric>` for each GPU (empty
/// where the driver gave nothing). Floats are written so that they read back exactly.
pub fn history_csv(history: &[Sample]) -> String {
    let gpus = history.iter().map(|s| s.gpus.len()).max().unwrap_or(0);
    let mut out = MACHINE_COLUMNS.join(",");
    for g in 0..gpus {
        for c in GPU_COLUMNS {
            let _ = write!(out, ",gpu{g}_{c}");
        }
    }
    out.push('\n');
    for s in history {
        let _ = write!(
            out,
            "{:?},{:?},{},{},{:?},{}",
            s.elapsed_s,
            s.cpu_percent,
            s.memory_used_bytes,
            s.memory_total_bytes,
            s.process_cpu_percent,
            s.process_rss_bytes
        );
        for g in 0..gpus {
            let r = s.gpus.get(g);
            for v in [
                r.and_then(|r| r.utilization_percent),
                r.and_then(|r| r.memory_used_percent),
                r.and_then(|r| r.temperature_c),
                r.and_then(|r| r.power_w),
            ] {
                out.push(',');
                if let Some(v) = v {
                    let _ = write!(out, "{v:?}");
                }
            }
        }
        out.push('\n');
    }
    out
}

/// Reads what [`history_csv`] wrote.
pub fn parse_history_csv(text: &str) -> Result<Vec<Sample>, MonitorError> {
    let mut lines = text.lines().enumerate();
    let bad = |line: usize, reason: String| MonitorError::Csv { line: line + 1, reason };
    let Some((_, header)) = lines.next() else { return Err(bad(0, "the file is empty".into())) };
    let columns: Vec<&str> = header.split(',').collect();
    let gpus = columns.len().saturating_sub(MACHINE_COLUMNS.len()) / GPU_COLUMNS.len();
    let expected: Vec<String> = MACHINE_COLUMNS
        .iter()
        .map(|c| (*c).to_owned())
        .chain((0..gpus).flat_map(|g| GPU_COLUMNS.iter().map(move |c| format!("gpu{g}_{c}"))))
        .collect();
    if columns != expected {
        return Err(bad(0, format!("expected the columns {}", expected.join(","))));
    }
    lines
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, line)| {
            let fields: Vec<&str> = line.split(',').collect();
            if fields.len() != columns.len() {
                return Err(bad(i, format!("{} fields, expected {}", fields.len(), columns.len())));
            }
            let float = |k: usize| fields[k].parse::<f64>().map_err(|e| bad(i, format!("{}: {e}", columns[k])));
            let int = |k: usize| fields[k].parse::<u64>().map_err(|e| bad(i, format!("{}: {e}", columns[k])));
            let optional = |k: usize| if fields[k].is_empty() { Ok(None) } else { float(k).map(Some) };
            let gpus = (0..gpus)
                .map(|g| {
                    let k = MACHINE_COLUMNS.len() + g * GPU_COLUMNS.len();
                    Ok(GpuReading {
                        utilization_percent: optional(k)?,
                        memory_used_percent: optional(k + 1)?,
                        temperature_c: optional(k + 2)?,
                        power_w: optional(k + 3)?,
                    })
                })
                .collect::<Result<Vec<_>, MonitorError>>()?;
            Ok(Sample {
                elapsed_s: float(0)?,
                cpu_percent: float(1)?,
                memory_used_bytes: int(2)?,
                memory_total_bytes: int(3)?,
                process_cpu_percent: float(4)?,
                process_rss_bytes: int(5)?,
                gpus,
            })
        })
        .collect()
}

/// Mean and max of each metric (per GPU for the GPUs' ones, named by `gpu_names`), as
/// JSON: `{"samples", "duration_s", "cpu_percent": {"mean", "max"}, …, "gpus": {…}}`.
pub fn summary_json(history: &[Sample], gpu_names: &[String], gpu_status: &str) -> Value {
    let stat = |values: Vec<f64>| -> Value {
        if values.is_empty() {
            return Value::Null;
        }
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        json!({"mean": mean, "max": values.iter().copied().fold(f64::NEG_INFINITY, f64::max)})
    };
    let of = |f: &dyn Fn(&Sample) -> f64| stat(history.iter().map(f).collect());
    let gpus = history.iter().map(|s| s.gpus.len()).max().unwrap_or(0);
    let gpu_stats: serde_json::Map<String, Value> = (0..gpus)
        .map(|g| {
            let of = |f: &dyn Fn(&GpuReading) -> Option<f64>| {
                stat(history.iter().filter_map(|s| s.gpus.get(g).and_then(f)).collect())
            };
            let name = gpu_names.get(g).cloned().unwrap_or_else(|| "unknown".into());
            (
                format!("gpu{g}"),
                json!({
                    "name": name,
                    "utilization_percent": of(&|r| r.utilization_percent),
                    "memory_used_percent": of(&|r| r.memory_used_percent),
                    "temperature_c": of(&|r| r.temperature_c),
                    "power_w": of(&|r| r.power_w),
                }),
            )
        })
        .collect();
    json!({
        "samples": history.len(),
        "duration_s": history.last().map_or(0.0, |s| s.elapsed_s),
        "gpu_status": gpu_status,
        "cpu_percent": of(&|s| s.cpu_percent),
        "memory_used_bytes": of(&|s| s.memory_used_bytes as f64),
        "process_cpu_percent": of(&|s| s.process_cpu_percent),
        "process_rss_bytes": of(&|s| s.process_rss_bytes as f64),
        "gpus": gpu_stats,
    })
}

/// One line per sample for a terminal: `12.5 s  cpu 48.0 %  mem 5.1/23.4 GiB  process
/// 97.0 % of a core, 120 MB  gpu0 87 % busy, 41 % mem, 63 °C, 250 W`.
pub fn sample_line(s: &Sample) -> String {
    let mut line = format!(
        "{:7.1} s  cpu {:5.1} %  mem {:.1}/{:.1} GiB  process {:5.1} % of a core, {} MB",
        s.elapsed_s,
        s.cpu_percent,
        s.memory_used_bytes as f64 / GIB,
        s.memory_total_bytes as f64 / GIB,
        s.process_cpu_percent,
        s.process_rss_bytes / 1_000_000
    );
    let show = |v: Option<f64>, unit: &str| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}{unit}"));
    for (g, r) in s.gpus.iter().enumerate() {
        let _ = write!(
            line,
            "  gpu{g} {} busy, {} mem, {}, {}",
            show(r.utilization_percent, " %"),
            show(r.memory_used_percent, " %"),
            show(r.temperature_c, " °C"),
            show(r.power_w, " W")
        );
    }
    line
}

/// Each metric over time as an SVG: one panel per family (CPU %, memory; with GPUs also
/// their utilization %, memory %, temperature and power), `cores` scaling this process's
/// CPU to a share of the machine.
pub fn plot_svg(history: &[Sample], gpu_names: &[String], cores: usize, title: &str) -> Result<String, MonitorError> {
    type Series = (String, Vec<(f64, f64)>);
    let gpus = history.iter().map(|s| s.gpus.len()).max().unwrap_or(0);
    let machine =
        |f: &dyn Fn(&Sample) -> f64| -> Vec<(f64, f64)> { history.iter().map(|s| (s.elapsed_s, f(s))).collect() };
    let per_gpu = |f: &dyn Fn(&GpuReading) -> Option<f64>| -> Vec<Series> {
        (0..gpus)
            .map(|g| {
                let name = gpu_names.get(g).map_or_else(|| format!("gpu{g}"), |n| format!("gpu{g} {n}"));
                (name, history.iter().filter_map(|s| s.gpus.get(g).and_then(f).map(|v| (s.elapsed_s, v))).collect())
            })
            .collect()
    };
    let mut panels: Vec<(&str, Vec<Series>)> = vec![
        (
            "CPU, % of the machine",
            vec![
                ("machine".into(), machine(&|s| s.cpu_percent)),
                ("this process".into(), machine(&|s| s.process_cpu_percent / cores.max(1) as f64)),
            ],
        ),
        (
            "memory, GiB",
            vec![
                ("machine used".into(), machine(&|s| s.memory_used_bytes as f64 / GIB)),
                ("this process (RSS)".into(), machine(&|s| s.process_rss_bytes as f64 / GIB)),
            ],
        ),
    ];
    if gpus > 0 {
        panels.push(("GPU utilization, %", per_gpu(&|r| r.utilization_percent)));
        panels.push(("GPU memory used, %", per_gpu(&|r| r.memory_used_percent)));
        panels.push(("GPU temperature, °C", per_gpu(&|r| r.temperature_c)));
        panels.push(("GPU power, W", per_gpu(&|r| r.power_w)));
    }
    let end = history.last().map_or(1.0, |s| s.elapsed_s).max(1e-3);
    let mut svg = String::new();
    {
        let height = 60 + 220 * panels.len() as u32;
        let root = SVGBackend::with_string(&mut svg, (960, height)).into_drawing_area();
        let draw = |e: DrawingAreaErrorKind<_>| MonitorError::Plot(e.to_string());
        root.fill(&WHITE).map_err(draw)?;
        let root = root.titled(title, ("sans-serif", 20)).map_err(draw)?;
        let areas = root.split_evenly((panels.len(), 1));
        for ((caption, series), area) in panels.iter().zip(&areas) {
            let top = series.iter().flat_map(|(_, p)| p.iter().map(|&(_, v)| v)).fold(0.0f64, f64::max);
            let top = if caption.contains('%') { top.max(100.0) } else { (top * 1.1).max(1e-3) };
            let mut chart = ChartBuilder::on(area)
                .caption(*caption, ("sans-serif", 15))
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(56)
                .build_cartesian_2d(0.0..end, 0.0..top)
                .map_err(draw)?;
            chart.configure_mesh().x_desc("seconds").max_light_lines(2).draw().map_err(draw)?;
            for (k, (name, points)) in series.iter().enumerate() {
                let colour = Palette99::pick(k).to_rgba();
                chart
                    .draw_series(LineSeries::new(points.iter().copied(), colour.stroke_width(2)))
                    .map_err(draw)?
                    .label(name.as_str())
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2)));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(draw)?;
        }
        root.present().map_err(draw)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, gpus: usize) -> Sample {
        Sample {
            elapsed_s: t,
            cpu_percent: 12.345_678_9 + t,
            memory_used_bytes: 5_000_000_000 + t as u64,
            memory_total_bytes: 25_000_000_000,
            process_cpu_percent: 0.1 + t / 3.0,
            process_rss_bytes: 40_000_000,
            gpus: (0..gpus)
                .map(|g| GpuReading {
                    utilization_percent: Some(87.0 + g as f64),
                    memory_used_percent: Some(1.0 / 3.0),
                    temperature_c: (g == 0).then_some(63.0),
                    power_w: Some(251.375),
                })
                .collect(),
        }
    }

    #[test]
    fn csv_round_trips_exactly_with_and_without_gpus() {
        for gpus in [0, 2] {
            let history: Vec<Sample> = (1..=5).map(|k| sample(k as f64 * 0.1, gpus)).collect();
            let text = history_csv(&history);
            assert_eq!(parse_history_csv(&text).unwrap(), history, "{text}");
            assert_eq!(text.lines().count(), 6);
        }
        let header = history_csv(&[sample(0.5, 1)]).lines().next().unwrap().to_owned();
        assert!(header.ends_with("gpu0_utilization_percent,gpu0_memory_used_percent,gpu0_temperature_c,gpu0_power_w"));
        let err = parse_history_csv("elapsed_s,cpu\n1,2\n").unwrap_err();
        assert!(err.to_string().contains("line 1: expected the columns elapsed_s,cpu_percent"), "{err}");
        let err = parse_history_csv(&format!("{}\n0.5,x,1,2,3,4\n", MACHINE_COLUMNS.join(","))).unwrap_err();
        assert!(err.to_string().contains("line 2: cpu_percent"), "{err}");
    }

    #[test]
    fn summary_has_mean_and_max_per_metric_and_gpu() {
        let history: Vec<Sample> = (1..=4).map(|k| sample(k as f64, 1)).collect();
        let s = summary_json(&history, &["NVIDIA H100".into()], "NVML: 1 GPU");
        assert_eq!(s["samples"], 4);
        assert_eq!(s["cpu_percent"]["mean"].as_f64().unwrap(), 12.345_678_9 + 2.5);
        assert_eq!(s["cpu_percent"]["max"].as_f64().unwrap(), 12.345_678_9 + 4.0);
        assert_eq!(s["gpus"]["gpu0"]["name"], "NVIDIA H100");
        assert_eq!(s["gpus"]["gpu0"]["power_w"]["max"], 251.375);
        assert!(summary_json(&[], &[], "none")["cpu_percent"].is_null());
    }

    #[test]
    fn the_plot_has_a_panel_per_family() {
        let svg = plot_svg(&(1..=6).map(|k| sample(k as f64, 0)).collect::<Vec<_>>(), &[], 2, "t").unwrap();
        assert!(svg.contains("CPU, % of the machine") && svg.contains("memory, GiB"));
        assert!(!svg.contains("GPU power"));
        let svg = plot_svg(&(1..=6).map(|k| sample(k as f64, 2)).collect::<Vec<_>>(), &["A".into()], 2, "t").unwrap();
        for panel in ["GPU utilization, %", "GPU memory used, %", "GPU temperature, °C", "GPU power, W", "gpu0 A"] {
            assert!(svg.contains(panel), "{panel}");
        }
    }
}
