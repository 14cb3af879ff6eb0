//! `cargo xtask`: project automation in plain Rust, needing no tool beyond cargo.
//!
//! `cargo xtask bench [--quick] [CRATE...]` runs the criterion benches and writes
//! `artifacts/bench/REPORT.md`: every benchmark's mean time with the machine it ran on.
//! `cargo xtask determinism [--runs N --seed S]` runs one sweep on differently made
//! device pools and fails unless every results file has the same SHA-256.
//! `cargo xtask reference [--quick]` times the original system's reference workload;
//! `cargo xtask matrix [--quick]` times every indicator family and sweeps over sizes and
//! devices (crossover, auto's regret). Both write to `artifacts/bench/`; see
//! docs/benchmarks.md.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod bench;
mod determinism;
mod matrix;
mod reference;

use anyhow::{Context, Result, bail};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("bench") => bench(&args[1..]),
        Some("determinism") => determinism::run(&args[1..]),
        Some("reference") => reference::run(&args[1..]),
        Some("matrix") => matrix::run(&args[1..]),
        _ => {
            eprintln!(
                "usage: cargo xtask bench [--quick] [CRATE...] | determinism [--runs N --seed S] | reference [--quick] | matrix [--quick]\n\n  \
                 bench         run the criterion benches and write artifacts/bench/REPORT.md\n  \
                 determinism   run one sweep on differently made device pools; fail unless the results are identical\n  \
                 reference     the original's reference workload per device mode: artifacts/bench/reference.{{json,md}}\n  \
                 matrix        sizes × devices for every indicator family and sweeps: artifacts/bench/matrix.{{json,md}} and plots"
            );
            bail!("unknown or missing task")
        }
    }
}

/// A bb_atr sweep over `grid` (`name`, values as `--grid` takes them); every other
/// parameter at its default. The one request builder of xtask's tasks.
fn bb_atr_request(grid: &[(&str, &str)]) -> threadx_sweep::SweepRequest {
    threadx_sweep::SweepRequest::new("bb_atr", grid)
}

/// [`bb_atr_request`], checked.
fn bb_atr_spec(grid: &[(&str, &str)]) -> Result<threadx_sweep::SweepSpec> {
    Ok(bb_atr_request(grid).check()?)
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask lives in the workspace").to_owned()
}

fn bench(args: &[String]) -> Result<()> {
    let quick = args.iter().any(|a| a == "--quick");
    let crates: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    // Only the criterion targets: the libtest harness of lib and bin targets would reject
    // criterion's options.
    cmd.current_dir(root()).args(["bench", "--bench", "*"]);
    if crates.is_empty() {
        cmd.arg("--workspace");
    }
    for c in &crates {
        cmd.args(["-p", c]);
    }
    if quick {
        cmd.args(["--", "--warm-up-time", "1", "--measurement-time", "2"]);
    }
    let status = cmd.status().context("running cargo bench")?;
    if !status.success() {
        bail!("cargo bench failed ({status})");
    }
    let command =
        ["cargo xtask bench".to_owned()].into_iter().chain(args.iter().cloned()).collect::<Vec<_>>().join(" ");
    let report = report(&root().join("target/criterion"), &command)?;
    let out = root().join("artifacts/bench/REPORT.md");
    std::fs::create_dir_all(out.parent().unwrap())?;
    let tmp = out.with_extension("md.tmp");
    std::fs::write(&tmp, report)?;
    std::fs::rename(&tmp, &out)?;
    println!("wrote {}", out.display());
    Ok(())
}

/// One row per benchmark found under criterion's output folder.
fn report(criterion: &Path, command: &str) -> Result<String> {
    let mut rows = Vec::new();
    collect(criterion, criterion, &mut rows)?;
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let mut md = format!("# Benchmarks\n\nMachine: {}. Command: `{command}`.\n\n", threadx_profile_store::host_cpu());
    md.push_str("| benchmark | mean | 95% interval |\n|---|---|---|\n");
    for (name, mean, lo, hi) in rows {
        let _ = writeln!(md, "| {name} | {} | {} – {} |", human(mean), human(lo), human(hi));
    }
    Ok(md)
}

fn collect(base: &Path, dir: &Path, rows: &mut Vec<(String, f64, f64, f64)>) -> Result<()> {
    let estimates = dir.join("new/estimates.json");
    if estimates.exists() {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&estimates)?)?;
        let mean = &v["mean"];
        let num = |x: &serde_json::Value| x.as_f64().unwrap_or(f64::NAN);
        let name = dir.strip_prefix(base).unwrap_or(dir).display().to_string();
        rows.push((
            name,
            num(&mean["point_estimate"]),
            num(&mean["confidence_interval"]["lower_bound"]),
            num(&mean["confidence_interval"]["upper_bound"]),
        ));
        return Ok(());
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() && path.file_name().is_some_and(|n| n != "report") {
            collect(base, &path, rows)?;
        }
    }
    Ok(())
}

fn human(ns: f64) -> String {
    match ns {
        x if x < 1e3 => format!("{x:.1} ns"),
        x if x < 1e6 => format!("{:.2} µs", x / 1e3),
        x if x < 1e9 => format!("{:.2} ms", x / 1e6),
        x => format!("{:.2} s", x / 1e9),
    }
}
