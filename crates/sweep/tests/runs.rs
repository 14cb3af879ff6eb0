//! Sweeps run to files: rows equal single backtests in combo order; bytes do not depend
//! on threads, shards or interruptions; merge and resume refuse what does not belong.

use std::path::PathBuf;
use threadx_backtest::MetricSet::Run;
use threadx_backtest::{Costs, Metrics, Strategy, backtest};
use threadx_dispatch::testing::adapters;
use threadx_dispatch::{DeviceMode, DevicePolicy};
use threadx_indicators::{IndicatorBank, Ohlcv};
use threadx_multi_gpu::{DevicePool, DistributeOptions, Fault, Worker};
use threadx_sweep::{
    OutputOptions, Sample, Shard, Sweep, SweepData, SweepError, SweepPlan, SweepRequest, WindowRanking, merge,
    parse_row, walk_forward,
};

use crate::common;

use common::{bb_spec, checked, cpu, cpu_pool, data, lines, options, run, to_files};

#[test]
fn rows_are_single_backtests_in_combo_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = data();
    let spec = bb_spec();
    let csv = lines(&run(&d, &spec, &options(&dir.path().join("r.csv")), 2));
    assert_eq!(
        csv[0],
        "combo,bb_period,bb_std,atr_period,atr_mult,total_return,trades,closed_trades,win_rate,max_drawdown,sharpe,sharpe_annual,exposure,cagr,volatility,sortino,calmar,profit_factor,expectancy,sqn"
    );
    assert_eq!(csv.len(), 1 + 4 * 3 * 2 * 3);
    let profile = tempfile::tempdir().unwrap();
    let dispatcher = cpu(&profile);
    let bank = IndicatorBank::new(&d, &dispatcher);
    let mut n = 0;
    for p in [10.0, 20.0, 30.0, 40.0] {
        for k in [1.5, 2.0, 2.5] {
            for a in [7.0, 14.0] {
                for m in [1.0, 2.0, 3.0] {
                    let row = parse_row((&Strategy::parse("bb_atr").unwrap(), Run), &csv[n + 1]).unwrap();
                    assert_eq!(row.combo, n as u64);
                    assert_eq!(row.values[..], [p, k, a, m], "combo {n}: the last parameter varies fastest");
                    let want = backtest(
                        &bank,
                        &Strategy::parse("bb_atr").unwrap(),
                        &[p, k, a, m],
                        Costs { fee: 0.001, slippage: 0.0 },
                        None,
                    )
                    .unwrap()
                    .metrics;
                    let bits = |m: &Metrics| m.values().map(f64::to_bits);
                    assert_eq!(bits(&row.metrics), bits(&want), "combo {n}");
                    n += 1;
                }
            }
        }
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(summary["combos"]["rows"], 72);
    assert_eq!(summary["workers"]["cpu"]["chunks"], 1);
    assert_eq!(summary["workers"]["cpu"]["combos"], 72);
    assert_eq!(summary["workers"]["cpu"]["share"], 1.0);
    assert!(!dir.path().join("r.csv.parts").exists(), "the checkpoint is removed once the results are whole");
    // The best list is the top of a full sort (largest sharpe, ties to the lower combo).
    let mut rows: Vec<_> =
        csv[1..].iter().map(|l| parse_row((&Strategy::parse("bb_atr").unwrap(), Run), l).unwrap()).collect();
    rows.sort_by(|a, b| b.metrics.sharpe.total_cmp(&a.metrics.sharpe).then(a.combo.cmp(&b.combo)));
    let best: Vec<u64> =
        summary["best"]["rows"].as_array().unwrap().iter().map(|r| r["combo"].as_u64().unwrap()).collect();
    assert_eq!(best, rows[..5].iter().map(|r| r.combo).collect::<Vec<_>>());
}

#[test]
fn combos_the_rules_refuse_are_skipped_but_keep_their_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SweepRequest::new("ma_cross", &[("fast", "10,20,30"), ("slow", "20,40")]);
    let csv = lines(&run(&data(), &spec, &options(&dir.path().join("r.csv")), 1));
    let kept: Vec<(u64, f64, f64)> = csv[1..]
        .iter()
        .map(|l| parse_row((&Strategy::parse("ma_cross").unwrap(), Run), l).unwrap())
        .map(|r| (r.combo, r.values[1], r.values[2]))
        .collect();
    // Grid: (10,20) (10,40) (20,20) (20,40) (30,20) (30,40); fast ≥ slow is skipped.
    assert_eq!(kept, [(0, 10.0, 20.0), (1, 10.0, 40.0), (3, 20.0, 40.0), (5, 30.0, 40.0)]);
}

/// A grid of 320 combos in chunks of 64, so that it has several chunks.
fn many_chunks() -> (Ohlcv, SweepRequest) {
    let d = data();
    let mut spec =
        SweepRequest::new("bb_atr", &[("bb_period", "10,20"), ("atr_period", "7,14"), ("atr_mult", "0.25:20:0.25")]);
    spec.chunk_size = Some(64);
    (d, spec)
}

#[test]
fn bytes_do_not_depend_on_threads_shards_or_sampling() {
    let dir = tempfile::tempdir().unwrap();
    let (d, spec) = many_chunks();
    let whole = run(&d, &spec, &options(&dir.path().join("whole.csv")), 2);
    assert_eq!(lines(&whole).len(), 1 + 320);
    assert_eq!(run(&d, &spec, &options(&dir.path().join("one.csv")), 1), whole, "1 thread vs 2");

    let shards: Vec<PathBuf> = (0..3)
        .map(|i| {
            let out = dir.path().join(format!("shard{i}.csv"));
            run(&d, &spec, &OutputOptions { shard: Shard { index: i, count: 3 }, ..options(&out) }, 2);
            out
        })
        .collect();
    let merged = dir.path().join("merged.csv");
    let report =
        merge(&[shards[2].clone(), shards[0].clone(), shards[1].clone()], &merged, 5, "sharpe", None, None).unwrap();
    assert_eq!(report.rows, 320);
    assert_eq!(std::fs::read(&merged).unwrap(), whole, "merged shards equal a one-process run, byte for byte");

    // Refusals: a missing shard, the same shard twice, a shard of another sweep.
    let missing = merge(&shards[..2], &dir.path().join("m1.csv"), 5, "sharpe", None, None).unwrap_err().to_string();
    assert_eq!(missing, "merge: missing shard(s) 2/3");
    let twice = merge(&[shards[0].clone(), shards[0].clone()], &dir.path().join("m2.csv"), 5, "sharpe", None, None)
        .unwrap_err();
    assert!(twice.to_string().contains("are both shard 0/3"), "{twice}");
    let mut other = spec.clone();
    other.fee = Some(0.002);
    let foreign = dir.path().join("foreign.csv");
    run(&d, &other, &OutputOptions { shard: Shard { index: 2, count: 3 }, ..options(&foreign) }, 2);
    let mismatch =
        merge(&[shards[0].clone(), shards[1].clone(), foreign], &dir.path().join("m3.csv"), 5, "sharpe", None, None);
    assert!(mismatch.unwrap_err().to_string().contains("belongs to a different sweep"));
    assert!(!dir.path().join("m1.csv").exists() && !dir.path().join("m3.csv").exists(), "nothing written on refusal");
    // A shard edited after it ran (one metric of one row) is refused by its checksum.
    let text = std::fs::read_to_string(&shards[1]).unwrap();
    let line = text.lines().nth(5).unwrap();
    let (head, last) = line.rsplit_once(',').unwrap();
    let edited = text.replacen(line, &format!("{head},{}", last.parse::<f64>().unwrap_or(0.0) + 0.5), 1);
    std::fs::write(&shards[1], edited).unwrap();
    let changed = merge(&shards, &dir.path().join("m4.csv"), 5, "sharpe", None, None).unwrap_err().to_string();
    assert!(changed.contains("shard1.csv was changed after its shard ran"), "{changed}");
    std::fs::write(&shards[1], text).unwrap();

    // A Monte-Carlo sample: distinct combos, the same for a seed, rows equal to the grid's.
    let mut sampled = spec.clone();
    sampled.random = Some(Sample { n: 100, seed: 7 });
    let a = lines(&run(&d, &sampled, &options(&dir.path().join("a.csv")), 2));
    assert_eq!(a, lines(&run(&d, &sampled, &options(&dir.path().join("b.csv")), 1)));
    assert_eq!(a.len(), 101);
    let grid_rows = lines(&whole);
    let mut last = None;
    for row in &a[1..] {
        let combo = threadx_sweep::parse_row((&Strategy::parse("bb_atr").unwrap(), Run), row).unwrap().combo;
        assert!(last.is_none_or(|l| combo > l), "sorted and distinct");
        last = Some(combo);
        assert_eq!(row, &grid_rows[combo as usize + 1], "a sampled combo's row is its grid row");
    }
    sampled.random = Some(Sample { n: 100, seed: 8 });
    assert_ne!(a, lines(&run(&d, &sampled, &options(&dir.path().join("c.csv")), 2)), "another seed, another sample");
}

/// A pool whose only worker dies on its third chunk, with no fallback: a run killed
/// mid-way.
fn dying_pool() -> DevicePool {
    DevicePool::new(vec![Worker::cpu().with_lanes(1).with_fault(Fault::FailAt { chunk: 2 })])
        .unwrap()
        .without_fallback()
}

#[test]
fn resume_runs_only_missing_chunks_and_gives_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (d, spec) = many_chunks();
    let whole = run(&d, &spec, &options(&dir.path().join("whole.csv")), 2);
    let out = dir.path().join("r.csv");
    let profile = tempfile::tempdir().unwrap();
    let dispatcher = cpu(&profile);
    let bank = IndicatorBank::new(&d, &dispatcher);
    let sweep = Sweep::prepare(&bank, &checked(&spec)).unwrap();
    let dying = dying_pool();
    let crash = to_files(&sweep, &d, &dying, &[1.0], &options(&out)).unwrap_err();
    assert!(crash.to_string().contains("every worker failed"), "{crash}");
    assert!(!out.exists(), "no results file from an interrupted run");
    let parts = dir.path().join("r.csv.parts");
    assert_eq!(std::fs::read_dir(&parts).unwrap().count(), 2 + 2, "sweep.json, the lock and the two finished chunks");

    // Without --resume the checkpoint is not overwritten; with another spec it is refused.
    let refused = to_files(&sweep, &d, &cpu_pool(2), &[1.0], &options(&out)).unwrap_err();
    assert!(refused.to_string().contains("pass --resume to continue it"), "{refused}");
    let mut other = spec.clone();
    other.fee = Some(0.002);
    let other_sweep = Sweep::prepare(&bank, &checked(&other)).unwrap();
    let resume = OutputOptions { resume: true, ..options(&out) };
    let err = to_files(&other_sweep, &d, &cpu_pool(2), &[1.0], &resume).unwrap_err();
    // Which field differs is named, with both values.
    assert!(err.to_string().contains("was made by a different sweep (spec.fee: 0.001 before, 0.002 now)"), "{err}");

    let summary = to_files(&sweep, &d, &cpu_pool(2), &[1.0], &resume).unwrap();
    assert_eq!(summary["workers"]["cpu"]["chunks"], 5 - 2, "only the missing chunks ran");
    assert_eq!(summary["chunks"]["resumed"], 2);
    assert_eq!(std::fs::read(&out).unwrap(), whole, "resumed results equal an uninterrupted run, byte for byte");
    assert!(!parts.exists());
}

#[test]
fn a_devices_scratch_checkpoint_never_outlives_its_run() {
    let null = PathBuf::from("/dev/null");
    let scratch = threadx_sweep::checkpoint_dir(&null);
    // A dead process that had this pid left its scratch folder: nothing can resume it.
    std::fs::create_dir_all(&scratch).unwrap();
    std::fs::write(scratch.join("sweep.json"), "{}").unwrap();
    let (d, spec) = many_chunks();
    let profile = tempfile::tempdir().unwrap();
    let dispatcher = cpu(&profile);
    let bank = IndicatorBank::new(&d, &dispatcher);
    let sweep = Sweep::prepare(&bank, &checked(&spec)).unwrap();
    let dying = dying_pool();
    let crash = to_files(&sweep, &d, &dying, &[1.0], &options(&null)).unwrap_err();
    assert!(crash.to_string().contains("every worker failed"), "{crash}");
    assert!(!scratch.exists(), "a failed run leaves no scratch folder");
    to_files(&sweep, &d, &cpu_pool(2), &[1.0], &options(&null)).unwrap();
    assert!(!scratch.exists(), "nor does a finished one");
}

#[test]
fn walk_forward_picks_the_in_sample_best_and_chains_the_tests() {
    let d = Ohlcv::load("synthetic:bars=6000,seed=11").unwrap();
    let mut spec = bb_spec();
    spec.walk_forward = Some(threadx_sweep::WalkForward { train: 2000, test: 1000, step: 1000 });
    let profile = tempfile::tempdir().unwrap();
    let dispatcher = cpu(&profile);
    let report = walk_forward(
        SweepData::One(&d),
        &dispatcher,
        &checked(&spec),
        WindowRanking::by("total_return"),
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(report.windows.len(), 4);
    let mut growth = 1.0;
    for (w, window) in report.windows.iter().enumerate() {
        assert_eq!(
            (window.train.clone(), window.test.clone()),
            (w * 1000..w * 1000 + 2000, w * 1000 + 2000..w * 1000 + 3000)
        );
        // The winner is the largest in-sample total_return of a sweep over the train bars.
        let train = d.slice(window.train.clone());
        let mut plain = spec.clone();
        plain.walk_forward = None;
        let bank = IndicatorBank::new(&train, &dispatcher);
        let sweep = Sweep::prepare(&bank, &checked(&plain)).unwrap();
        let all = sweep.run_all(&dispatcher).unwrap();
        let best = all.metrics.iter().map(|m| m.total_return).fold(f64::MIN, f64::max);
        assert_eq!(window.best.metrics.total_return, best);
        assert_eq!(window.test_report.equity.len(), 1000);
        assert!(window.test_report.trades.iter().all(|t| t.entry_bar < 1000));
        growth *= 1.0 + window.test_report.metrics.total_return;
        // The out-of-sample Sharpe ratio deflated by the train window's selection: SR₀
        // from its combos' Sharpe ratios, N = its combos, moments of the test's returns.
        let dsr = window.deflated;
        let sharpes: Vec<f64> = all.metrics.iter().map(|m| m.sharpe).filter(|s| !s.is_nan()).collect();
        let n = sharpes.len() as f64;
        let mean = sharpes.iter().sum::<f64>() / n;
        let std = (sharpes.iter().map(|s| (s - mean) * (s - mean)).sum::<f64>() / (n - 1.0)).sqrt();
        assert_eq!(dsr.trials, all.combos.len());
        assert!((dsr.sr0 - std * threadx_stats::expected_max(all.combos.len() as f64)).abs() < 1e-15);
        let (skew, kurt) = threadx_stats::moments(&window.test_report.returns());
        assert_eq!((dsr.skew, dsr.kurtosis, dsr.sharpe), (skew, kurt, window.test_report.metrics.sharpe));
        assert!(dsr.dsr <= dsr.psr && (0.0..=1.0).contains(&dsr.dsr), "{dsr:?}");
    }
    assert!((report.overall.total_return - (growth - 1.0)).abs() < 1e-12);
    let too_long = threadx_sweep::WalkForward { train: 5000, test: 2000, step: 2000 };
    spec.walk_forward = Some(too_long);
    let err =
        walk_forward(SweepData::One(&d), &dispatcher, &checked(&spec), WindowRanking::by("sharpe"), &mut |_, _| {})
            .unwrap_err()
            .to_string();
    assert!(err.contains("fewer than one train and one test window"), "{err}");
}

/// The CPU and N logical workers on every adapter (two chunks in flight each).
fn mixed_pool(logical: usize) -> DevicePool {
    let mut workers = vec![Worker::cpu()];
    for (a, ctx) in adapters().iter().enumerate() {
        for k in 0..logical {
            workers.push(Worker::gpu(a, ctx.clone()).named(format!("gpu{a}.{k}")));
        }
    }
    DevicePool::new(workers).unwrap()
}

#[test]
fn the_cpu_and_every_adapter_together_resume_and_merge_to_the_cpus_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (d, spec) = many_chunks();
    let whole = run(&d, &spec, &options(&dir.path().join("whole.csv")), 2);
    let profile = tempfile::tempdir().unwrap();
    let dispatcher = cpu(&profile);
    let bank = IndicatorBank::new(&d, &dispatcher);
    let sweep = Sweep::prepare(&bank, &checked(&spec)).unwrap();

    // N identical logical workers give the bytes of one, whatever the ratios.
    for (logical, cpu_share) in [(1, 0.5), (3, 0.1)] {
        let pool = mixed_pool(logical);
        let n = pool.workers().len() - 1;
        let ratios: Vec<f64> = [cpu_share].into_iter().chain(vec![(1.0 - cpu_share) / n.max(1) as f64; n]).collect();
        let out = dir.path().join(format!("mixed{logical}.csv"));
        let summary = to_files(&sweep, &d, &pool, &ratios, &options(&out)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), whole, "{logical} logical workers per adapter and the CPU");
        let workers = summary["workers"].as_object().unwrap();
        let chunks: u64 = workers.values().map(|w| w["chunks"].as_u64().unwrap()).sum();
        assert_eq!(chunks, 5, "{summary:#}");
        if !adapters().is_empty() {
            assert!(workers.keys().any(|k| k.starts_with("gpu")), "{summary:#}");
        }
    }

    // A worker lost on its first chunk, and a GPU that runs out of memory above 10 combos,
    // beside a slow CPU that gets nothing up front: the same bytes.
    let mut workers = vec![Worker::cpu().with_lanes(1).named("lost").with_fault(Fault::FailAt { chunk: 0 })];
    for (a, ctx) in adapters().iter().enumerate() {
        workers.push(Worker::gpu(a, ctx.clone()).with_fault(Fault::OutOfMemoryAbove { items: 10 }));
    }
    workers.push(Worker::cpu().with_lanes(1).throttled(20.0));
    let faulty = DevicePool::new(workers).unwrap();
    let n = faulty.workers().len();
    let mut ratios = vec![1.0; n];
    ratios[n - 1] = 0.0;
    let out = dir.path().join("faulty.csv");
    let summary = to_files(&sweep, &d, &faulty, &ratios, &options(&out)).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), whole, "a failure and out-of-memory splits change nothing");
    assert!(summary["workers"]["lost"]["failed"].as_str().unwrap().contains("injected"), "{summary:#}");
    for (name, w) in summary["workers"].as_object().unwrap() {
        if name.starts_with("gpu") && w["chunks"].as_u64() > Some(0) {
            assert!(w["out_of_memory_splits"].as_u64() >= Some(1), "{summary:#}");
        }
    }

    // Interrupted (every worker dies), then resumed on the mixed pool; then sharded.
    let out = dir.path().join("resumed.csv");
    let dying = DevicePool::new(vec![Worker::cpu().with_lanes(1).with_fault(Fault::FailAt { chunk: 3 })])
        .unwrap()
        .without_fallback();
    assert!(to_files(&sweep, &d, &dying, &[1.0], &options(&out)).is_err());
    let pool = mixed_pool(2);
    let even = vec![1.0; pool.workers().len()];
    to_files(&sweep, &d, &pool, &even, &OutputOptions { resume: true, ..options(&out) }).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), whole, "resumed on the pool: the uninterrupted CPU bytes");
    let shards: Vec<PathBuf> = (0..2)
        .map(|i| {
            let out = dir.path().join(format!("pool-shard{i}.csv"));
            to_files(&sweep, &d, &pool, &even, &OutputOptions { shard: Shard { index: i, count: 2 }, ..options(&out) })
                .unwrap();
            out
        })
        .collect();
    let merged = dir.path().join("pool-merged.csv");
    merge(&shards, &merged, 5, "sharpe", None, None).unwrap();
    assert_eq!(std::fs::read(&merged).unwrap(), whole, "pool shards merge to the CPU bytes");
}

#[test]
fn a_samples_book_holds_only_its_own_combos_and_gives_the_grids_metrics() {
    let d = data();
    let profile = tempfile::tempdir().unwrap();
    let dispatcher = cpu(&profile);
    for strategy in Strategy::builtins() {
        let grid_spec = SweepRequest { strategy: Some(strategy.locator().to_owned()), ..SweepRequest::default() };
        let mut sample_spec = grid_spec.clone();
        sample_spec.random = Some(Sample { n: 12, seed: 3 });
        let (grid_bank, sample_bank) = (IndicatorBank::new(&d, &dispatcher), IndicatorBank::new(&d, &dispatcher));
        let grid = Sweep::prepare(&grid_bank, &checked(&grid_spec)).unwrap();
        let sample = Sweep::prepare(&sample_bank, &checked(&sample_spec)).unwrap();
        // Each combo reads at most three series (bb_atr: middle band, deviation, ATR).
        assert!(sample_bank.computations() <= 3 * 12, "{strategy}: {}", sample_bank.computations());
        assert!(sample_bank.computations() <= grid_bank.computations(), "{strategy}");
        if *strategy != Strategy::parse("rsi_reversion").unwrap() {
            // (rsi_reversion's grid has only 5 series.)
            assert!(sample_bank.computations() < grid_bank.computations(), "{strategy}");
        }
        let from_grid = grid.run_all(&dispatcher).unwrap();
        let from_sample = sample.run_all(&dispatcher).unwrap();
        assert_eq!(from_sample.combos.len(), 12);
        for (&combo, m) in from_sample.combos.iter().zip(&from_sample.metrics) {
            let at = from_grid.combos.binary_search(&combo).unwrap();
            assert_eq!(m.to_json(), from_grid.metrics[at].to_json(), "{strategy} combo {combo}");
            assert_eq!(sample.book().combo_values(combo), grid.book().combo_values(combo));
        }
    }
}

/// The 10^12-combo grid (1,000 values of each bb_atr parameter).
fn trillion() -> SweepRequest {
    let mut spec = SweepRequest::new(
        "bb_atr",
        &[
            ("bb_period", "2:1001:1"),
            ("bb_std", "0.01:10:0.01"),
            ("atr_period", "1:1000:1"),
            ("atr_mult", "0.1:100:0.1"),
        ],
    );
    spec.device = Some(DeviceMode::Cpu);
    spec
}

/// `request` planned for `bars` bars within `limit` bytes (`u64::MAX`: none).
fn plan(request: &SweepRequest, bars: usize, limit: u64) -> Result<SweepPlan, SweepError> {
    let spec = SweepRequest { max_memory: Some(limit), ..request.clone() }.check()?;
    SweepPlan::new(&spec, bars, &DevicePolicy::default())
}

#[test]
fn preparation_is_laid_out_before_work_and_refused_when_it_cannot_fit() {
    let spec = trillion();
    assert_eq!(checked(&spec).grid_len(), 1_000_000_000_000);
    // The whole grid: 1,000 periods (middle band and deviation each) and 1,000 ATR
    // series, one entry row per (bb_period, bb_std): gigabytes, known without computing.
    let whole = plan(&spec, 35_040, u64::MAX).unwrap();
    assert_eq!(whole.series(), 3_000);
    assert!(whole.bytes() > 5_000_000_000, "{}", whole.bytes());
    let err = plan(&spec, 35_040, 1 << 30).unwrap_err().to_string();
    // 6.0 GiB of book and its transient eighth while it is built, then what the test
    // process holds (which varies with the tests beside it).
    let data_gib = whole.data_bytes() as f64 / f64::from(1u32 << 30);
    assert!((6.7..6.8).contains(&data_gib), "{data_gib}");
    let gib: f64 = err.split("about ").nth(1).and_then(|e| e.split(" GiB").next()).unwrap().parse().unwrap();
    assert!(gib >= data_gib - 0.05 && err.contains("1.0 GiB") && err.contains("--random N"), "{err}");
    // A sample of 10 needs only its own series: at most 3 each.
    let mut sampled = spec.clone();
    sampled.random = Some(Sample { n: 10, seed: 1 });
    let small = plan(&sampled, 35_040, 1 << 30).unwrap();
    assert!(small.series() <= 30, "{}", small.series());
    assert!(small.data_bytes() < 50_000_000, "{}", small.data_bytes());
    assert_eq!(small.combos().len(), 10);
    // Drawing an enormous sample is refused before the draw allocates.
    sampled.random = Some(Sample { n: 100_000_000_000, seed: 1 });
    let err = plan(&sampled, 35_040, 1 << 30).unwrap_err().to_string();
    assert!(err.contains("100000000000 sampled combos"), "{err}");
}

#[test]
fn a_portfolios_preparation_counts_every_symbols_book_and_the_accounts_prices() {
    let mut spec = trillion();
    spec.random = Some(Sample { n: 10, seed: 1 });
    let checked = SweepRequest { max_memory: Some(u64::MAX), ..spec.clone() }.check().unwrap();
    let policy = DevicePolicy::default();
    let one = plan(&spec, 35_040, u64::MAX).unwrap().data_bytes();
    let of = |symbols: &[usize], clock| SweepPlan::portfolio(&checked, symbols, clock, &policy).unwrap();
    // 100 symbols on one calendar: 100 books and a close per symbol per bar.
    let hundred = of(&[35_040; 100], 35_040);
    // (Each with the eighth more that building it holds for a while; the sample once.)
    let prices = (35_040.0 * 808.0 + 100.0 * 35_040.0 * 12.0) * 1.125;
    let books = (hundred.data_bytes() as f64 - prices) / (100 * one) as f64;
    assert!((books - 1.0).abs() < 1e-4, "{books}");
    assert!(hundred.describe().ends_with("for each of 100 symbols"), "{}", hundred.describe());
    // Symbols on clocks that interleave: the account's prices are on the longer clock.
    let apart = of(&[35_040; 100], 100 * 35_040);
    let more = (apart.data_bytes() - hundred.data_bytes()) as f64 / (99.0 * 35_040.0 * 808.0);
    assert!((more - 1.125).abs() < 1e-6, "{more}");
    // Refused for all the symbols together, though one would fit.
    let spec = SweepRequest { max_memory: Some(hundred.bytes() / 2), ..spec }.check().unwrap();
    let err = SweepPlan::portfolio(&spec, &[35_040; 100], 35_040, &policy).unwrap_err().to_string();
    assert!(err.contains("for each of 100 symbols") && err.contains("fewer symbols"), "{err}");
}

#[test]
fn rows_in_memory_are_the_files_rows_and_a_cancel_stops_between_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let d = data();
    let mut spec = bb_spec();
    spec.chunk_size = Some(5);
    let opts = options(&dir.path().join("r.csv"));
    let file = lines(&run(&d, &spec, &opts, 2));
    let dispatcher = cpu(&dir);
    let bank = IndicatorBank::new(&d, &dispatcher);
    let sweep = Sweep::prepare(&bank, &checked(&spec)).unwrap();
    let distribute = DistributeOptions::new(sweep.workload_tag());
    let mut seen = Vec::new();
    let rows = sweep
        .run_in_memory(&cpu_pool(2), &distribute, &mut |done, total| {
            seen.push((done, total));
            Ok(())
        })
        .unwrap();
    let mut text = String::new();
    for (&combo, m) in rows.combos.iter().zip(&rows.metrics) {
        threadx_sweep::write_row(
            &mut text,
            (&Strategy::parse("bb_atr").unwrap(), Run),
            combo,
            &sweep.book().combo_values(combo),
            m,
        );
    }
    assert_eq!(text.lines().collect::<Vec<_>>(), file[1..], "the same rows as the CSV");
    let chunks = sweep.combos().chunks();
    assert_eq!(seen.len() as u64, chunks + 1, "once at the start and once per chunk");
    assert_eq!(seen.last(), Some(&(72, 72)));

    let mut calls = 0;
    let cancelled = sweep.run_in_memory(&cpu_pool(2), &distribute, &mut |done, _| {
        calls += 1;
        if done > 0 { Err(SweepError::Cancelled) } else { Ok(()) }
    });
    assert!(matches!(cancelled, Err(SweepError::Cancelled)), "{cancelled:?}");
    assert_eq!(calls, 2, "stopped after the first chunk");
}

/// A sweep a GPU may run counts the copies made to upload its book (and the GPU stack):
/// measured with lavapipe on the 10^9-combo grid below, 539 MiB estimated (+96 MiB for
/// the stack) against a 569 MB peak, and 395 MiB against 332 MB on the CPU.
#[test]
fn the_estimate_counts_the_gpu_upload_where_a_gpu_may_run() {
    let spec = SweepRequest::new(
        "bb_atr",
        &[("bb_period", "2:201:1"), ("bb_std", "0.1:5:0.1"), ("atr_period", "1:100:1"), ("atr_mult", "0.01:10:0.01")],
    );
    let bytes =
        |mode| plan(&SweepRequest { device: Some(mode), ..spec.clone() }, 35_040, u64::MAX).unwrap().data_bytes();
    let (cpu, gpu) = (bytes(DeviceMode::Cpu), bytes(DeviceMode::Gpu));
    // 10,200 bit rows of 548 words and 100 ATR series of 35,040 bars, twice, and the
    // per-bar tables (104 bytes: close and log, downside, four sums, a gain), and the stack.
    let upload = 2 * (10_200 * 548 * 8 + 100 * 35_040 * 8 + 35_040 * 104) + (96 << 20);
    assert_eq!(gpu - cpu, upload);
    assert_eq!(bytes(DeviceMode::Auto), gpu, "10^9 combos: auto may use a GPU");
    let small = SweepRequest::new("bb_atr", &[("bb_period", "10,20")]);
    let small_bytes =
        |mode| plan(&SweepRequest { device: Some(mode), ..small.clone() }, 35_040, u64::MAX).unwrap().data_bytes();
    assert_eq!(small_bytes(DeviceMode::Auto), small_bytes(DeviceMode::Cpu), "small: auto runs on the CPU");
}

#[test]
fn a_gpu_takes_long_datas_chunks_a_dispatch_at_a_time_and_gives_the_cpus_bytes() {
    // 2^20 bars: the CPU's logical chunks of one combo each, as long data's are narrow.
    let d = Ohlcv::load("synthetic:bars=1048576,seed=9").unwrap();
    let mut spec = SweepRequest::new(
        "bb_atr",
        &[("bb_period", "10,20"), ("bb_std", "2"), ("atr_period", "14"), ("atr_mult", "1:3:1")],
    );
    spec.chunk_size = Some(1);
    spec.overfitting = Some(Default::default());
    let dir = tempfile::tempdir().unwrap();
    let whole = run(&d, &spec, &options(&dir.path().join("cpu.csv")), 2);
    let profile = tempfile::tempdir().unwrap();
    let dispatcher = cpu(&profile);
    let bank = IndicatorBank::new(&d, &dispatcher);
    let sweep = Sweep::prepare(&bank, &checked(&spec)).unwrap();
    for (a, ctx) in adapters().iter().enumerate() {
        let pool = DevicePool::new(vec![Worker::gpu(a, ctx.clone())]).unwrap();
        let out = dir.path().join(format!("gpu{a}.csv"));
        let summary = to_files(&sweep, &d, &pool, &[1.0], &options(&out)).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), whole, "{}", ctx.report().name);
        let cpu_summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("cpu.json")).unwrap()).unwrap();
        let statistics = |s: &serde_json::Value| {
            let mut o = s["overfitting"].clone();
            o.as_object_mut().unwrap().remove("seconds");
            o
        };
        assert_eq!(statistics(&summary), statistics(&cpu_summary), "{}", ctx.report().name);
        // Six chunks of one combo, in one dispatch: the adapter asks for thousands of combos.
        let worker = summary["workers"].as_object().unwrap().values().next().unwrap().clone();
        assert_eq!((worker["chunks"].as_u64(), worker["dispatches"].as_u64()), (Some(6), Some(1)), "{summary:#}");
    }
}

#[test]
fn parquet_and_arrow_results_are_the_same_bytes_whatever_the_chunks_threads_and_devices() {
    // 126,000 combos: row groups of 65,536 and 60,464 rows, however the chunks fall.
    let d = Ohlcv::load("synthetic:bars=300,seed=3").unwrap();
    let grid = [("bb_period", "5:54:1"), ("bb_std", "1:3:0.1"), ("atr_period", "5:34:1"), ("atr_mult", "1:4:1")];
    let profile = tempfile::tempdir().unwrap();
    let dispatcher = cpu(&profile);
    let bank = IndicatorBank::new(&d, &dispatcher);
    let dir = tempfile::tempdir().unwrap();
    for ext in ["parquet", "arrow"] {
        let mut first: Option<Vec<u8>> = None;
        for (chunk, threads, gpu) in [(None, 2, false), (Some(7_777), 1, false), (Some(50_000), 2, true)] {
            let mut spec = SweepRequest::new("bb_atr", &grid);
            spec.chunk_size = chunk;
            let sweep = Sweep::prepare(&bank, &checked(&spec)).unwrap();
            let out = dir.path().join(format!("r{chunk:?}{threads}{gpu}.{ext}"));
            let pool = if gpu { mixed_pool(1) } else { cpu_pool(threads) };
            let n = pool.workers().len();
            to_files(&sweep, &d, &pool, &vec![1.0 / n as f64; n], &options(&out)).unwrap();
            let bytes = std::fs::read(&out).unwrap();
            match &first {
                None => first = Some(bytes),
                Some(first) => assert!(first == &bytes, "{}: other bytes", out.display()),
            }
        }
        if ext == "parquet" {
            let file = bytes::Bytes::from(first.unwrap());
            let meta = parquet::file::metadata::ParquetMetaDataReader::new().parse_and_finish(&file).unwrap();
            let groups: Vec<i64> = meta.row_groups().iter().map(|g| g.num_rows()).collect();
            assert_eq!(groups, [65_536, 60_464]);
        }
    }
}
