//! `threadx monitor`: sample the machine, this process and every NVIDIA GPU, print each
//! sample, and keep the history as a table (CSV, Parquet or Arrow) and a plot.

use crate::outputs::check_every_output;
use anyhow::{Context, Result, bail};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use threadx_profile_store::write_file_atomic;
use threadx_sweep::{ColumnType, write_table};
use threadx_telemetry::{MonitorOptions, SystemMonitor, history_csv, plot_svg, sample_line};

#[derive(Debug, Args)]
pub struct MonitorArgs {
    /// Seconds between samples (at least 0.2).
    #[arg(long, default_value_t = 0.5, value_name = "S")]
    interval: f64,
    /// Stop after this many seconds (default: at Ctrl-C).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Write the history (one row per sample) to this file when stopping: CSV, or Parquet
    /// (.parquet) or Arrow IPC (.arrow, .feather) by its extension.
    #[arg(long, value_name = "FILE.csv")]
    out: Option<PathBuf>,
    /// Draw each metric over time (a panel per family) into this SVG when stopping.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// The most samples kept; the oldest go first.
    #[arg(long, default_value_t = MonitorOptions::default().max_history, value_name = "N")]
    max_history: usize,
}

/// Seconds as a duration, or why not.
fn seconds(flag: &str, s: f64) -> Result<Duration> {
    const MAX_S: f64 = 1e7;
    if !(s.is_finite() && s > 0.0) {
        bail!("{flag} must be a positive number of seconds, not {s}");
    }
    if s > MAX_S {
        bail!("{flag} {s:e} is more than the {MAX_S:e} seconds (about 116 days) it may be");
    }
    Ok(Duration::from_secs_f64(s))
}

pub fn run(args: &MonitorArgs) -> Result<()> {
    let options = MonitorOptions {
        interval: seconds("--interval", args.interval)?,
        max_history: args.max_history,
        ..MonitorOptions::default()
    };
    let duration = args.duration.map(|d| seconds("--duration", d)).transpose()?;
    let outputs = [("--out", &args.out), ("--plot", &args.plot)];
    let outputs: Vec<_> = outputs.into_iter().filter_map(|(flag, p)| Some((flag, p.clone()?))).collect();
    check_every_output(&outputs, &[])?;
    use crate::outputs::Written::{Drawing, Table};
    crate::outputs::check_names(&[("--out", args.out.as_deref(), Table), ("--plot", args.plot.as_deref(), Drawing)])?;
    let stop = Arc::new(AtomicBool::new(false));
    crate::stop_on_interrupt(Arc::clone(&stop));
    let mut monitor = SystemMonitor::start(&options)?;
    let started = Instant::now();
    outln!(
        "sampling every {} s{}; {}",
        args.interval,
        duration.map(|d| format!(" for {} s", d.as_secs_f64())).unwrap_or_else(|| " until Ctrl-C".into()),
        monitor.gpu_status()
    );
    for (i, name) in monitor.gpu_names().iter().enumerate() {
        outln!("gpu{i}: {name}");
    }
    let mut printed = 0.0;
    let tick = options.interval / 4;
    while !stop.load(Ordering::SeqCst) && duration.is_none_or(|d| started.elapsed() < d) {
        std::thread::sleep(tick.min(duration.map_or(tick, |d| d.saturating_sub(started.elapsed()))));
        if let Some(sample) = monitor.latest().filter(|s| s.elapsed_s > printed) {
            printed = sample.elapsed_s;
            outln!("{}", sample_line(&sample));
        }
    }
    monitor.stop();
    save(&monitor, args.out.as_deref(), args.plot.as_deref(), "threadx monitor")
}

/// Writes the monitor's history to `csv` and its plot to `svg` (each when given).
pub fn save(monitor: &SystemMonitor, csv: Option<&Path>, svg: Option<&Path>, title: &str) -> Result<()> {
    let history = monitor.history();
    if let Some(path) = csv {
        // A table as every other: CSV, or Parquet or Arrow by its extension; the byte
        // counts are integers.
        let text = history_csv(&history);
        let header = text.lines().next().unwrap_or_default();
        let types: Vec<ColumnType> = header
            .split(',')
            .map(|c| if c.ends_with("_bytes") { ColumnType::Int } else { ColumnType::Float })
            .collect();
        write_table(path, &text, &types).with_context(|| format!("writing {}", path.display()))?;
        outln!("wrote {} samples to {}", history.len(), path.display());
    }
    if let Some(path) = svg {
        let plot = plot_svg(&history, monitor.gpu_names(), monitor.cores(), title)?;
        write_file_atomic(path, plot.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
        outln!("wrote the plot to {}", path.display());
    }
    Ok(())
}
