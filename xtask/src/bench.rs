//! What `reference` and `matrix` share: timing, the dispatchers of each device mode on a
//! profile of their own, the `threadx` binary, and writing reports.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;
use threadx_dispatch::{DeviceMode, DevicePolicy, Dispatcher, GpuContext, select_gpu};
use threadx_profile_store::ThresholdStore;

/// The device modes both benchmarks time, in their reports' order.
pub const MODES: [DeviceMode; 3] = [DeviceMode::Cpu, DeviceMode::Gpu, DeviceMode::Auto];

/// Whether `--quick` was given, the only argument `task` takes.
pub fn quick_flag(task: &str, args: &[String]) -> Result<bool> {
    if let Some(bad) = args.iter().find(|a| *a != "--quick") {
        bail!("{task}: unknown argument `{bad}` (usage: cargo xtask {task} [--quick])");
    }
    Ok(!args.is_empty())
}

/// Measurements made by a debug build say nothing of speed: a full run re-runs the task
/// in a release build of xtask (and `--quick`, the CI's smoke run, stays as it is).
/// Returns `true` when it did so, and the caller stops.
pub fn rerun_in_release(task: &str, args: &[String], quick: bool) -> Result<bool> {
    if quick || !cfg!(debug_assertions) {
        return Ok(false);
    }
    println!("{task}: a debug build would time itself; running it again in a release build");
    let status = Command::new(cargo())
        .current_dir(crate::root())
        .args(["run", "--quiet", "--release", "--package", "xtask", "--", task])
        .args(args)
        .status()
        .context("running cargo")?;
    if !status.success() {
        bail!("the release build of `cargo xtask {task}` failed ({status})");
    }
    Ok(true)
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Builds the `threadx` binary in the profile xtask itself runs in and returns its path.
pub fn threadx_binary() -> Result<PathBuf> {
    let release = !cfg!(debug_assertions);
    let mut cmd = Command::new(cargo());
    cmd.current_dir(crate::root()).args(["build", "--quiet", "--package", "threadx"]);
    if release {
        cmd.arg("--release");
    }
    let status = cmd.status().context("running cargo build")?;
    if !status.success() {
        bail!("building threadx failed ({status})");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| crate::root().join("target"), PathBuf::from);
    let bin = target.join(build_profile()).join(format!("threadx{}", std::env::consts::EXE_SUFFIX));
    if !bin.exists() {
        bail!("cargo built threadx but {} is not there", bin.display());
    }
    Ok(bin)
}

/// The cargo profile these figures come from.
pub fn build_profile() -> &'static str {
    if cfg!(debug_assertions) { "debug" } else { "release" }
}

/// The best-ranked adapter, opened once (software ones included), or why there is none.
pub fn open_gpu() -> (Option<Arc<GpuContext>>, String) {
    let selection = select_gpu();
    match selection.chosen_report().map(|r| (r.label(), selection.open())) {
        Some((label, Ok(ctx))) => (Some(ctx), label),
        Some((label, Err(e))) => (None, format!("{label}: {e}")),
        None => (None, "no adapter".into()),
    }
}

/// A dispatcher in `mode` on `gpu`, recording its timings in the profile at `profile`
/// (the user's own profiles are left alone).
pub fn dispatcher(mode: DeviceMode, gpu: Option<Arc<GpuContext>>, profile: &Path) -> Result<Dispatcher> {
    let fingerprint = threadx_dispatch::fingerprint(gpu.as_ref().map(|g| g.report()));
    let store = ThresholdStore::open(profile, &fingerprint)?;
    Ok(Dispatcher::new(mode, if mode == DeviceMode::Cpu { None } else { gpu }, store, DevicePolicy::default()))
}

/// Seconds per call of `f`: `runs` figures, each the mean over as many calls as fill
/// `min_s` (at least one).
pub fn time_runs(runs: usize, min_s: f64, mut f: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    let mut out = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let mut calls = 0u32;
        while calls == 0 || start.elapsed().as_secs_f64() < min_s {
            f()?;
            calls += 1;
        }
        out.push(start.elapsed().as_secs_f64() / f64::from(calls));
    }
    Ok(out)
}

pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Writes `bytes` to `artifacts/bench/<name>` (temp file and rename) and says so.
pub fn write_report(name: &str, bytes: &[u8]) -> Result<PathBuf> {
    let path = crate::root().join("artifacts/bench").join(name);
    std::fs::create_dir_all(path.parent().expect("artifacts/bench has a parent"))?;
    threadx_profile_store::write_file_atomic(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    println!("wrote {}", path.display());
    Ok(path)
}

/// A duration for a table, in the unit that keeps it short (µs up to h).
pub fn seconds(s: f64) -> String {
    match s {
        x if x < 1e-3 => format!("{:.1} µs", x * 1e6),
        x if x < 1.0 => format!("{:.2} ms", x * 1e3),
        x if x < 120.0 => format!("{x:.2} s"),
        x if x < 7200.0 => format!("{:.1} min", x / 60.0),
        x => format!("{:.1} h", x / 3600.0),
    }
}

/// A rate with thousands separators (no decimals above 100).
pub fn rate(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    if x < 100.0 { format!("{x:.2}") } else { threadx_dispatch::thousands(x.round() as u64) }
}
