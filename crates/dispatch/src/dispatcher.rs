//! The CPU-vs-GPU decision and the timed, fault-tolerant run of one operation.

use crate::error::GpuError;
use crate::gpu::GpuContext;
use crate::mode::DeviceMode;
use crate::{Device, DevicePolicy, adapters};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use threadx_profile_store::{EntryView, Profiles, ThresholdStore, profile_key, split_key};

/// One call of an operation: its name, its parameters (a JSON object, without the size)
/// and its input size. Its profile key is `name:{params + size}`.
#[derive(Debug, Clone)]
pub struct Operation {
    name: String,
    params: Value,
    size: usize,
    key: String,
}

impl Operation {
    /// `params` must be a JSON object (or null for none); `size` is the input length.
    pub fn new(name: &str, params: Value, size: usize) -> Self {
        let mut with_size = match &params {
            Value::Object(m) => m.clone(),
            _ => serde_json::Map::new(),
        };
        with_size.insert("size".into(), size.into());
        let key = profile_key(name, &Value::Object(with_size));
        Self { name: name.to_owned(), params, size, key }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// The profile key of this call.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Rebuilds an operation from a profile key (for `threadx profile show`).
    pub fn from_key(key: &str) -> Option<Self> {
        let (name, Value::Object(mut params)) = split_key(key)? else {
            return None;
        };
        let size = params.remove("size")?.as_u64()? as usize;
        Some(Self::new(name, Value::Object(params), size))
    }

    /// What the keys of this operation and parameters at every size share.
    fn family(&self) -> String {
        profile_key(&self.name, &self.params)
    }
}

/// Why a device was chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reason {
    /// The mode forced it.
    Forced,
    /// No GPU is available (none found, or it failed earlier).
    NoGpu,
    /// The input is below [`DevicePolicy::min_gpu_size`].
    BelowFloor,
    /// This device has too few samples for this operation.
    Explore { samples: u64 },
    /// Both devices' times are known for this key or predicted from other sizes.
    Faster { cpu_ms: f64, gpu_ms: f64, predicted: bool },
    /// The periodic re-measurement of the slower device.
    Recheck { cpu_ms: f64, gpu_ms: f64 },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Forced => write!(f, "forced by the device mode"),
            Reason::NoGpu => write!(f, "no GPU available"),
            Reason::BelowFloor => write!(f, "input below the GPU floor"),
            Reason::Explore { samples } => write!(f, "exploring ({samples} trusted samples)"),
            Reason::Faster { cpu_ms, gpu_ms, predicted } => write!(
                f,
                "{} cpu {cpu_ms:.3} ms vs gpu {gpu_ms:.3} ms",
                if *predicted { "predicted" } else { "measured" }
            ),
            Reason::Recheck { cpu_ms, gpu_ms } => {
                write!(f, "re-measuring the slower device (cpu {cpu_ms:.3} ms vs gpu {gpu_ms:.3} ms)")
            }
        }
    }
}

/// Where an operation runs, and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub device: Device,
    pub reason: Reason,
}

/// The result of [`Dispatcher::run`]: the value, where it was computed and how long it took.
#[derive(Debug)]
pub struct Outcome<T> {
    pub value: T,
    /// The device that produced `value` (the CPU after a fallback).
    pub device: Device,
    pub decision: Decision,
    /// The GPU error that caused a fallback to the CPU, if any.
    pub gpu_error: Option<GpuError>,
    pub elapsed_ms: f64,
}

impl<T> Outcome<T> {
    /// The same outcome with its value transformed (device, decision and time kept).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Outcome<U> {
        Outcome {
            value: f(self.value),
            device: self.device,
            decision: self.decision,
            gpu_error: self.gpu_error,
            elapsed_ms: self.elapsed_ms,
        }
    }
}

/// Runs operations on the device the mode and the timing profile choose.
///
/// Decisions read the in-memory profile; samples are written to disk by
/// [`Dispatcher::flush`] or when the dispatcher is dropped, never per call.
#[derive(Debug)]
pub struct Dispatcher {
    mode: DeviceMode,
    policy: DevicePolicy,
    /// The adapters and the open device, probed once: when the dispatcher is made, or in
    /// `auto` mode on the first operation large enough for a GPU to be considered (small
    /// runs never pay the tens of milliseconds that enumerating adapters costs).
    probe: std::sync::OnceLock<Probe>,
    /// Set after an error that disables the GPU for this process.
    gpu_failed: AtomicBool,
    /// One warning per dispatcher is enough to tell the user the GPU is not used.
    warned: AtomicBool,
    store: Mutex<ThresholdStore>,
    calls: Mutex<HashMap<String, u64>>,
    /// Profile keys by family (see [`Operation::family`]), with their sizes, so that a
    /// prediction reads only its neighbours. Lock order: `store`, then `families`.
    families: Mutex<HashMap<String, Vec<(usize, String)>>>,
}

/// What probing the adapters found: the GPU operations may use (if any) and the
/// adapters, shared with the device pools made from the dispatcher so that they do not
/// enumerate them again (none when the CPU is forced).
#[derive(Debug, Default)]
struct Probe {
    gpu: Option<Arc<GpuContext>>,
    selection: Option<Arc<adapters::GpuSelection>>,
}

impl Dispatcher {
    pub fn new(mode: DeviceMode, gpu: Option<Arc<GpuContext>>, store: ThresholdStore, policy: DevicePolicy) -> Self {
        let mut families: HashMap<String, Vec<(usize, String)>> = HashMap::new();
        for (key, _) in store.entries() {
            if let Some(op) = Operation::from_key(&key) {
                families.entry(op.family()).or_default().push((op.size, key));
            }
        }
        Self {
            mode,
            policy,
            probe: std::sync::OnceLock::from(Probe { gpu, selection: None }),
            gpu_failed: AtomicBool::new(false),
            warned: AtomicBool::new(false),
            store: Mutex::new(store),
            calls: Mutex::default(),
            families: Mutex::new(families),
        }
    }

    /// The mode from `THREADX_DEVICE` (or `mode` when given), the adapter chosen as
    /// `threadx devices` shows, and the profile at the paths of the environment. A device
    /// is only opened when the mode may use it: `auto` never opens a CPU-software adapter
    /// (it shares the CPU's cores and only slows the CPU path); `gpu` does.
    ///
    /// With the CPU forced no GPU stack is started, and in `auto` mode the adapters are
    /// probed only when an operation is large enough for the GPU to be considered
    /// ([`DevicePolicy::min_gpu_size`]): enumerating them costs tens of milliseconds, more than
    /// a small run. Until then, samples go under the fingerprint of the profile's last
    /// writer when that was this host and version (its probe, cached in the file), else
    /// under the host's with the GPU "not probed" (a later probing run re-measures them).
    pub fn from_env(mode: Option<DeviceMode>) -> Result<Self, String> {
        let mode = match mode {
            Some(m) => m,
            None => DeviceMode::from_env()?,
        };
        let mut store = Profiles::from_env(String::new()).threshold_store().map_err(|e| e.to_string())?;
        let host = adapters::host_fingerprint();
        let cached = store.written_by().filter(|f| f.starts_with(&host)).map(str::to_owned);
        store.set_fingerprint(&cached.unwrap_or_else(|| format!("{host}not probed")));
        let dispatcher =
            Self { probe: std::sync::OnceLock::new(), ..Self::new(mode, None, store, DevicePolicy::default()) };
        match mode {
            DeviceMode::Cpu => {
                let _ = dispatcher.probe.set(Probe::default());
            }
            DeviceMode::Auto => {}
            DeviceMode::Gpu | DeviceMode::All => {
                dispatcher.probed();
            }
        }
        Ok(dispatcher)
    }

    /// The probe's result, probing now if that has not been done: the adapters are
    /// enumerated, the profile's fingerprint set from the chosen one, and the device the
    /// mode may use opened.
    fn probed(&self) -> &Probe {
        self.probe.get_or_init(|| {
            let selection = adapters::select_gpu();
            let report = selection.chosen_report().cloned();
            self.store
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .set_fingerprint(&adapters::fingerprint(report.as_ref()));
            let admitted = report.as_ref().is_none_or(|r| DevicePolicy::admits(r, self.mode == DeviceMode::Gpu));
            let gpu = if admitted {
                match selection.open() {
                    Ok(ctx) => Some(ctx),
                    Err(e) => {
                        self.warn_once(&format!("{e}; running on the CPU"));
                        None
                    }
                }
            } else {
                None
            };
            Probe { gpu, selection: Some(Arc::new(selection)) }
        })
    }

    /// Where the timing profile is kept.
    pub fn profile_path(&self) -> std::path::PathBuf {
        self.store.lock().unwrap_or_else(PoisonError::into_inner).path().to_owned()
    }

    /// The fingerprint that new samples are recorded under.
    pub fn fingerprint(&self) -> String {
        self.store.lock().unwrap_or_else(PoisonError::into_inner).fingerprint().to_owned()
    }

    pub fn mode(&self) -> DeviceMode {
        self.mode
    }

    pub fn policy(&self) -> &DevicePolicy {
        &self.policy
    }

    /// The adapters found (None when the CPU was forced); probes them if not done yet.
    pub fn selection(&self) -> Option<Arc<adapters::GpuSelection>> {
        self.probed().selection.clone()
    }

    /// The GPU operations may run on, unless it failed earlier; probes the adapters if
    /// not done yet.
    pub fn gpu(&self) -> Option<&Arc<GpuContext>> {
        self.probed().gpu.as_ref().filter(|_| !self.gpu_failed.load(Ordering::Relaxed))
    }

    /// Where `op` would run now. Counts the call (for the periodic re-measurement).
    pub fn decide(&self, op: &Operation) -> Decision {
        self.decide_with(op, true)
    }

    fn decide_with(&self, op: &Operation, count_call: bool) -> Decision {
        let decision = |device, reason| Decision { device, reason };
        // Small inputs stay on the CPU before anything else: in `auto` mode they never
        // wait for the adapters to be probed.
        if self.mode == DeviceMode::Auto && op.size < self.policy.min_gpu_size {
            return decision(Device::Cpu, Reason::BelowFloor);
        }
        match (self.mode, self.gpu().is_some()) {
            (DeviceMode::Cpu, _) => return decision(Device::Cpu, Reason::Forced),
            (_, false) => return decision(Device::Cpu, Reason::NoGpu),
            (DeviceMode::Gpu, true) => return decision(Device::Gpu, Reason::Forced),
            (DeviceMode::Auto | DeviceMode::All, true) => {}
        }
        if op.size < self.policy.min_gpu_size {
            return decision(Device::Cpu, Reason::BelowFloor);
        }
        let store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        let view = store.view(&op.key).filter(|v| v.trusted).unwrap_or_default();
        let estimate = |device| self.estimate(&store, op, &view, device);
        let (cpu, gpu) = (estimate(Device::Cpu), estimate(Device::Gpu));
        drop(store);
        match (cpu, gpu) {
            (Some((cpu_ms, p1)), Some((gpu_ms, p2))) => {
                let (winner, loser) =
                    if gpu_ms < cpu_ms { (Device::Gpu, Device::Cpu) } else { (Device::Cpu, Device::Gpu) };
                let gap = (cpu_ms.max(gpu_ms) / cpu_ms.min(gpu_ms).max(1e-9)).round();
                let period =
                    self.policy.recheck_every.saturating_mul(if gap.is_finite() { gap.max(1.0) as u64 } else { 1 });
                if count_call && self.count_call(&op.key).is_multiple_of(period) {
                    decision(loser, Reason::Recheck { cpu_ms, gpu_ms })
                } else {
                    decision(winner, Reason::Faster { cpu_ms, gpu_ms, predicted: p1 || p2 })
                }
            }
            (c, g) => {
                // Explore the device that has no estimate; both missing: the one with fewer samples.
                let device = match (c, g) {
                    (None, Some(_)) => Device::Cpu,
                    (Some(_), None) => Device::Gpu,
                    _ if view.gpu.n < view.cpu.n => Device::Gpu,
                    _ => Device::Cpu,
                };
                decision(device, Reason::Explore { samples: view.stats(device).n })
            }
        }
    }

    /// Counts calls per key; the first call is 1.
    fn count_call(&self, key: &str) -> u64 {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = calls.get_mut(key) {
            *n += 1;
            return *n;
        }
        calls.insert(key.to_owned(), 1);
        1
    }

    /// Expected time of `op` on `device`: the key's own mean when it has enough trusted
    /// samples, else a prediction from other sizes of the same operation and parameters.
    fn estimate(
        &self,
        store: &ThresholdStore,
        op: &Operation,
        view: &EntryView,
        device: Device,
    ) -> Option<(f64, bool)> {
        let own = view.stats(device);
        if own.n >= self.policy.min_samples {
            return Some((own.mean, false));
        }
        let families = self.families.lock().unwrap_or_else(PoisonError::into_inner);
        let mut points: Vec<(f64, f64)> = families
            .get(&op.family())?
            .iter()
            .filter(|(_, key)| key != &op.key)
            .filter_map(|(size, key)| {
                let v = store.view(key).filter(|v| v.trusted && v.stats(device).n >= self.policy.min_samples)?;
                Some((*size as f64, v.stats(device).mean))
            })
            .collect();
        predict_log_log(&mut points, op.size as f64).map(|ms| (ms, true))
    }

    /// Runs `op` on the chosen device, times it end to end (for the GPU: upload, kernel
    /// and readback, all inside `gpu`) and records the sample. A GPU error falls back to
    /// `cpu` with one warning.
    pub fn run<T>(
        &self,
        op: &Operation,
        cpu: impl FnOnce() -> T,
        gpu: impl FnOnce(&GpuContext) -> Result<T, GpuError>,
    ) -> Outcome<T> {
        let decision = self.decide(op);
        let profiled = decision.reason != Reason::BelowFloor;
        if decision.reason == Reason::NoGpu && self.mode == DeviceMode::Gpu {
            self.warn_once("the GPU was requested but none is available; running on the CPU");
        }
        let ctx = (decision.device == Device::Gpu).then(|| self.probed().gpu.as_ref()).flatten();
        if let Some(ctx) = ctx {
            let start = Instant::now();
            match gpu(ctx) {
                Ok(value) => {
                    let elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
                    self.record(op, Device::Gpu, elapsed_ms);
                    return Outcome { value, device: Device::Gpu, decision, gpu_error: None, elapsed_ms };
                }
                Err(e) => {
                    if e.disables_gpu() {
                        self.gpu_failed.store(true, Ordering::Relaxed);
                    }
                    self.warn_once(&format!(
                        "GPU {} failed on {} ({e}); falling back to the CPU",
                        ctx.report().label(),
                        op.name
                    ));
                    let (value, elapsed_ms) = self.time_cpu(op, cpu, true);
                    return Outcome { value, device: Device::Cpu, decision, gpu_error: Some(e), elapsed_ms };
                }
            }
        }
        let (value, elapsed_ms) = self.time_cpu(op, cpu, profiled);
        Outcome { value, device: Device::Cpu, decision, gpu_error: None, elapsed_ms }
    }

    fn time_cpu<T>(&self, op: &Operation, cpu: impl FnOnce() -> T, profiled: bool) -> (T, f64) {
        let start = Instant::now();
        let value = cpu();
        let elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
        if profiled {
            self.record(op, Device::Cpu, elapsed_ms);
        }
        (value, elapsed_ms)
    }

    fn record(&self, op: &Operation, device: Device, ms: f64) {
        let mut store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        let new_key = store.view(&op.key).is_none();
        // A measured duration is finite and non-negative, so this cannot fail.
        let _ = store.record(&op.key, device, ms);
        if new_key {
            let mut families = self.families.lock().unwrap_or_else(PoisonError::into_inner);
            families.entry(op.family()).or_default().push((op.size, op.key.clone()));
        }
    }

    fn warn_once(&self, message: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!("{message}");
        }
    }

    /// Every key of the profile with the decision it would get now.
    pub fn profile_decisions(&self) -> Vec<(String, EntryView, Option<Decision>)> {
        let entries = self.store.lock().unwrap_or_else(PoisonError::into_inner).entries();
        entries
            .into_iter()
            .map(|(key, view)| {
                let decision = Operation::from_key(&key).map(|op| self.decide_with(&op, false));
                (key, view, decision)
            })
            .collect()
    }

    /// Writes the samples recorded so far to the profile file.
    pub fn flush(&self) -> threadx_profile_store::Result<()> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner).flush()
    }
}

/// Predicts y at x from (x, y) points by linear interpolation in log-log space between
/// the two neighbours of x (or from the two nearest points outside their range, with the
/// slope bounded to [0, 2] so that extrapolation stays sane). Needs two distinct sizes.
fn predict_log_log(points: &mut Vec<(f64, f64)>, x: f64) -> Option<f64> {
    points.retain(|&(px, py)| px > 0.0 && py > 0.0);
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    points.dedup_by(|a, b| a.0 == b.0);
    if points.len() < 2 {
        return None;
    }
    let i = points.partition_point(|p| p.0 < x).clamp(1, points.len() - 1);
    let ((x0, y0), (x1, y1)) = (points[i - 1], points[i]);
    let slope = (y1.ln() - y0.ln()) / (x1.ln() - x0.ln());
    let slope = if (x0..=x1).contains(&x) { slope } else { slope.clamp(0.0, 2.0) };
    let (ax, ay) = if x > x1 { (x1, y1) } else { (x0, y0) };
    Some((ay.ln() + slope * (x.ln() - ax.ln())).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_log_prediction_interpolates_and_extrapolates() {
        // y = 2 * x: exact in log-log space.
        let mut pts = vec![(1000.0, 2.0), (100_000.0, 200.0)];
        assert!((predict_log_log(&mut pts, 10_000.0).unwrap() - 20.0).abs() < 1e-9);
        assert!((predict_log_log(&mut pts, 1_000_000.0).unwrap() - 2000.0).abs() < 1e-6);
        // A steep segment is bounded when extrapolating: slope 2 at most.
        let mut steep = vec![(10.0, 1.0), (20.0, 1000.0)];
        assert!((predict_log_log(&mut steep, 40.0).unwrap() - 4000.0).abs() < 1e-6);
        // Decreasing times extrapolate flat.
        let mut falling = vec![(10.0, 5.0), (20.0, 4.0)];
        assert!((predict_log_log(&mut falling, 80.0).unwrap() - 4.0).abs() < 1e-12);
        assert_eq!(predict_log_log(&mut vec![(10.0, 1.0)], 20.0), None);
        assert_eq!(predict_log_log(&mut vec![(10.0, 1.0), (10.0, 2.0)], 20.0), None);
    }

    #[test]
    fn operation_keys_round_trip() {
        let op = Operation::new("bollinger_bands", serde_json::json!({"period": 20, "std": 2.0}), 10_000);
        assert_eq!(op.key(), r#"bollinger_bands:{"period":20,"size":10000,"std":2}"#);
        let back = Operation::from_key(op.key()).unwrap();
        assert_eq!(back.key(), op.key());
        assert_eq!(back.size(), 10_000);
        assert!(Operation::from_key("sma:{\"period\":3}").is_none(), "a key without size");
    }
}
