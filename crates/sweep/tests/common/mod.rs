//! What the sweep's run tests share: the CPU's dispatcher and pool, the data, the grid,
//! the output options, and a run to files.
#![allow(dead_code)] // Each test file uses the helpers it needs.

use std::path::Path;
use std::sync::Arc;
use threadx_dispatch::testing::dispatcher_in;
use threadx_dispatch::{DeviceMode, Dispatcher};
use threadx_indicators::{IndicatorBank, Ohlcv};
use threadx_multi_gpu::{DevicePool, DistributeOptions, Worker};
use threadx_sweep::{OutputOptions, RunData, Shard, Sweep, SweepError, SweepRequest, SweepSpec, run_to_files};
use threadx_telemetry::PhaseTimer;

/// A CPU dispatcher with its profile in `dir` (which must outlive it).
pub fn cpu(dir: &tempfile::TempDir) -> Dispatcher {
    dispatcher_in(dir.path(), DeviceMode::Cpu)
}

pub fn data() -> Ohlcv {
    Ohlcv::load("synthetic:bars=3000,seed=5").unwrap()
}

pub fn bb_spec() -> SweepRequest {
    SweepRequest::new(
        "bb_atr",
        &[("bb_period", "10:40:10"), ("bb_std", "1.5,2,2.5"), ("atr_period", "7,14"), ("atr_mult", "1:3:1")],
    )
}

pub fn checked(request: &SweepRequest) -> SweepSpec {
    request.check().unwrap()
}

pub fn options(out: &Path) -> OutputOptions {
    OutputOptions {
        out: out.to_owned(),
        resume: false,
        shard: Shard::WHOLE,
        top: 5,
        by: "sharpe".into(),
        minimize: false,
        constraints: Vec::new(),
        heatmap: None,
        overfitting_plots: None,
        blocks_out: None,
        symbol: None,
        hold: None,
    }
}

/// A pool of the CPU alone, on `threads` threads.
pub fn cpu_pool(threads: usize) -> DevicePool {
    let threads = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    DevicePool::new(vec![Worker::cpu_on(Arc::new(threads))]).unwrap()
}

/// Runs `sweep` to files on `pool` (ratios as given, none saved); returns its summary as
/// the JSON its file holds.
pub fn to_files(
    sweep: &Sweep,
    data: &Ohlcv,
    pool: &DevicePool,
    ratios: &[f64],
    opts: &OutputOptions,
) -> Result<serde_json::Value, SweepError> {
    let mut distribute = DistributeOptions::new(sweep.workload_tag());
    distribute.ratios = Some(pool.names().into_iter().zip(ratios.iter().copied()).collect());
    let profile = tempfile::tempdir().unwrap();
    let dispatcher = cpu(&profile);
    run_to_files(
        sweep,
        &RunData::of(data),
        pool,
        &dispatcher,
        &distribute,
        opts,
        PhaseTimer::start(),
        &mut |_, _| {},
        None,
    )
    .map(|r| serde_json::to_value(r.summary).unwrap())
}

/// Runs `spec` on `data` into `out` with `threads` CPU threads; returns the CSV bytes.
pub fn run(data: &Ohlcv, spec: &SweepRequest, opts: &OutputOptions, threads: usize) -> Vec<u8> {
    let profile = tempfile::tempdir().unwrap();
    let dispatcher = cpu(&profile);
    let bank = IndicatorBank::new(data, &dispatcher);
    let sweep = Sweep::prepare(&bank, &checked(spec)).unwrap();
    to_files(&sweep, data, &cpu_pool(threads), &[1.0], opts).unwrap();
    std::fs::read(&opts.out).unwrap()
}

pub fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8(bytes.to_vec()).unwrap().lines().map(str::to_owned).collect()
}
