//! `cargo xtask determinism`: one sweep, run again and again on pools that differ in
//! every way the device pool allows (workers, logical devices per adapter, ratios,
//! hand-out order, an injected failure); every results file must have the same SHA-256.

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;
use threadx_dispatch::{DeviceMode, Dispatcher, GpuContext, select_gpu};
use threadx_indicators::{IndicatorBank, Ohlcv};
use threadx_multi_gpu::{DevicePool, DistributeOptions, Fault, Worker};
use threadx_stats::SeededRng;
use threadx_sweep::{OutputOptions, RunData, Shard, Sweep, run_to_files};
use threadx_telemetry::PhaseTimer;

/// `below(n)`: a draw in 0..n.
fn below(rng: &mut SeededRng, n: u64) -> u64 {
    rng.next_u64() % n.max(1)
}

pub fn run(args: &[String]) -> Result<()> {
    let value = |flag: &str, default: u64| -> Result<u64> {
        match args.iter().position(|a| a == flag) {
            Some(i) => args.get(i + 1).and_then(|v| v.parse().ok()).with_context(|| format!("{flag} takes a number")),
            None => Ok(default),
        }
    };
    let runs = value("--runs", 6)?.max(2);
    let seed = value("--seed", 2026)?;
    let data = Ohlcv::load("synthetic:bars=4000,seed=42")?;
    let mut request = crate::bb_atr_request(&[
        ("bb_period", "10:40:5"),
        ("bb_std", "1.5,2,2.5"),
        ("atr_period", "7,14"),
        ("atr_mult", "1:3:0.5"),
    ]);
    request.chunk_size = Some(16);
    let spec = request.check()?;
    let dispatcher = Dispatcher::from_env(Some(DeviceMode::Cpu)).map_err(anyhow::Error::msg)?;
    let bank = IndicatorBank::new(&data, &dispatcher);
    let sweep = Sweep::prepare(&bank, &spec)?;
    // Every adapter, software ones included: the check is about bytes, not speed.
    let adapters: Vec<Arc<GpuContext>> = select_gpu().open_all().into_iter().filter_map(|(_, c)| c.ok()).collect();
    println!(
        "determinism: {} combos in {} chunks of {}, {runs} runs; adapters: {}",
        sweep.combos().len(),
        sweep.combos().chunks(),
        sweep.combos().chunk_size(),
        if adapters.is_empty() {
            "none (CPU workers only)".to_owned()
        } else {
            adapters.iter().map(|a| a.report().label()).collect::<Vec<_>>().join(", ")
        }
    );
    let dir = std::env::temp_dir().join(format!("threadx-determinism-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut rng = SeededRng::new(seed);
    let mut digests = Vec::new();
    for run in 0..runs {
        let mut workers = vec![Worker::cpu().with_lanes(1 + below(&mut rng, 2) as usize)];
        for (a, ctx) in adapters.iter().enumerate() {
            for k in 0..below(&mut rng, 3) {
                workers.push(Worker::gpu(a, ctx.clone()).named(format!("gpu{a}.{k}:{}", ctx.report().name)));
            }
        }
        for k in 0..below(&mut rng, 2) {
            workers.push(Worker::cpu().with_lanes(1).named(format!("cpu.{k} (throttled)")).throttled(1.0));
        }
        // The first run is the reference; every later one loses a worker on the way.
        let mut failure = String::from("none");
        if run > 0 {
            if workers.len() < 2 {
                workers.push(Worker::cpu().with_lanes(1).named("cpu.spare"));
            }
            let victim = below(&mut rng, workers.len() as u64) as usize;
            let chunk = below(&mut rng, 3);
            failure = format!("{} at its chunk {chunk}", workers[victim].name());
            workers[victim] = workers[victim].clone().with_fault(Fault::FailAt { chunk });
        }
        let pool = DevicePool::new(workers)?;
        // Any positive weights: the pool scales them to shares.
        let weights: BTreeMap<String, f64> = pool.names().into_iter().map(|n| (n, 0.05 + rng.uniform())).collect();
        let mut distribute = DistributeOptions::new(sweep.workload_tag());
        distribute.ratios = Some(weights);
        distribute.shuffle = Some(rng.next_u64());
        let out = dir.join(format!("run-{run}.csv"));
        let opts = OutputOptions {
            out: out.clone(),
            resume: false,
            shard: Shard::WHOLE,
            top: 1,
            by: "sharpe".into(),
            minimize: false,
            constraints: Vec::new(),
            heatmap: None,
            overfitting_plots: None,
            blocks_out: None,
            symbol: None,
            hold: None,
        };
        let report = run_to_files(
            &sweep,
            &RunData::of(&data),
            &pool,
            &dispatcher,
            &distribute,
            &opts,
            PhaseTimer::start(),
            &mut |_, _| {},
            None,
        )?;
        let digest = hex(&Sha256::digest(std::fs::read(&out)?));
        let shares = report.summary.balance.map(|b| b.ratios).unwrap_or_default();
        let split: Vec<String> = shares.iter().map(|(n, r)| format!("{n} {:.0}%", r * 100.0)).collect();
        println!("run {run}: {digest}  {} rows; workers {}; failure: {failure}", report.rows, split.join(", "));
        digests.push(digest);
    }
    std::fs::remove_dir_all(&dir)?;
    if digests.iter().any(|d| d != &digests[0]) {
        bail!("the results differ between runs: {digests:?}");
    }
    println!("determinism: all {runs} results files are identical");
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
