//! The balance and the schedule in time: a throttled worker's ratio found, a run as fast
//! as the workers' summed throughputs allow, a slow worker that cannot stall a run, nor a
//! device still busy with a chunk another worker delivered; a GPU read that is no longer
//! wanted is left without waiting for the device; each worker's time by phase.
//! The simulated CPU devices sleep for their work (their speed is set in time), so the
//! figures hold while other jobs load the machine's cores; they run one at a time.
#![allow(clippy::print_stdout)] // Measured figures are printed for the test log.

use crate::common;

use common::{Hashes, chunks, hash, ratios, run};
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use threadx_dispatch::testing::adapters;
use threadx_multi_gpu::{
    BalanceOptions, DevicePool, DistributeOptions, KernelSeconds, PoolError, WorkError, Worker, WorkerDevice, Workload,
};
use threadx_profile_store::Profiles;

/// 10 µs of sleep per item, 40,000 items.
fn light() -> Hashes {
    Hashes::napping(40_000, Duration::from_micros(10))
}

#[test]
fn the_balance_finds_a_throttled_workers_true_ratio_and_runs_refresh_it() {
    let _alone = common::one_at_a_time();
    let work = light();
    let dir = tempfile::tempdir().unwrap();
    let profiles = Profiles::at(dir.path().join("t.json"), dir.path().join("multigpu.json"), "test");
    // "slow" does the same work, then sleeps twice as long: a third of the speed.
    let pool = DevicePool::new(vec![
        Worker::cpu().with_lanes(1).named("fast"),
        Worker::cpu().with_lanes(1).named("slow").throttled(2.0),
    ])
    .unwrap();
    let options = BalanceOptions { sample_size: 2_000, warmup: 3, runs: 5 };
    let balance = pool.profile_auto_balance(&work, &options, "hashes", Some(&profiles)).unwrap();
    println!("{balance}");
    let slow = balance.ratios["slow"];
    assert!((slow - 0.25).abs() < 0.05, "slow's share {slow:.3}, true 0.25");
    assert_eq!(profiles.multigpu_ratios("hashes").unwrap().unwrap().ratios, balance.ratios, "saved");
    assert!(balance.to_string().contains("balance of hashes: fast 7"), "{balance}");

    // A wrong profile (the seed's single-profile form: even split, no throughputs) is
    // used as the first assignment, then refreshed from what the run observed.
    std::fs::write(
        profiles.multigpu_path(),
        r#"{"updated_at": "2024-01-01T00:00:00Z", "workload_tag": "hashes", "ratios": {"fast": 0.5, "slow": 0.5}}"#,
    )
    .unwrap();
    let mut distribute = DistributeOptions::new("hashes");
    distribute.profiles = Some(profiles.clone());
    let (out, stats) = run(&pool, &work, &chunks(work.items, 500), &distribute);
    assert_eq!(out.len() as u64, work.items);
    assert_eq!(stats.ratios, ratios(&[("fast", 0.5), ("slow", 0.5)]), "the seed file's ratios were read");
    assert!(stats.profiled.is_none());
    let refreshed = profiles.multigpu_ratios("hashes").unwrap().unwrap().ratios["slow"];
    println!("slow's share after one run from an even split: {refreshed:.3}");
    assert!((refreshed - 0.25).abs() < 0.05, "refreshed share {refreshed:.3}, true 0.25");
}

#[test]
fn a_distributed_run_takes_about_the_sum_of_the_workers_throughputs() {
    let _alone = common::one_at_a_time();
    // Sleeping workers, so that the two cores of CI are not what limits three of them
    // side by side: 20 µs, 40 µs and 30 µs per item.
    let work = Hashes::napping(20_000, Duration::from_micros(20));
    let pool = DevicePool::new(vec![
        Worker::cpu().with_lanes(1).named("a"),
        Worker::cpu().with_lanes(1).named("b").throttled(1.0),
        Worker::cpu().with_lanes(1).named("c").throttled(0.5),
    ])
    .unwrap();
    let balance = pool
        .profile_auto_balance(&work, &BalanceOptions { sample_size: 500, warmup: 2, runs: 5 }, "light", None)
        .unwrap();
    println!("{balance}");
    let summed: f64 = balance.throughput.values().sum();
    let mut options = DistributeOptions::new("light");
    options.ratios = Some(balance.ratios.clone());
    let (out, stats) = run(&pool, &work, &chunks(work.items, 250), &options);
    assert_eq!(out.len() as u64, work.items);
    let ideal = work.items as f64 / summed;
    let efficiency = ideal / stats.wall_s;
    // The same against the throughputs the workers kept up in the run: what the schedule
    // itself loses to idle workers and the tail.
    let kept_up: f64 = stats.workers.iter().map(|w| w.items_per_s).sum();
    let scheduling = work.items as f64 / kept_up / stats.wall_s;
    println!(
        "efficiency {efficiency:.3} (ideal {ideal:.3} s from the throughputs measured alone, run {:.3} s); \
         against the throughputs kept up in the run {scheduling:.3}; chunks and shares: {:?}",
        stats.wall_s,
        stats.workers.iter().map(|w| (&w.name, w.chunks, (w.share * 1000.0).round() / 10.0)).collect::<Vec<_>>()
    );
    // Within 10 % of the ideal the workers' own throughputs allow (0.97-0.99 here). The
    // figure against throughputs measured alone also carries the jitter of the simulated
    // devices (their sleeps scale their real work's timing by 100-200); it is 0.90-0.97
    // on this VM, so it is only held to 0.8, which a schedule that idles would miss.
    assert!(scheduling >= 0.9, "efficiency {scheduling:.3} (wall time more than 10% over the ideal)");
    assert!(efficiency >= 0.8, "efficiency against throughputs measured alone {efficiency:.3}");
}

#[test]
fn a_slow_worker_cannot_stall_the_run() {
    let _alone = common::one_at_a_time();
    // Profiled as equal, "sloth" is in truth 40 times slower: the others steal its queue
    // and back up its last chunk.
    let work = Hashes::napping(6_000, Duration::from_micros(50));
    let pool = DevicePool::new(vec![
        Worker::cpu().with_lanes(1).named("quick"),
        Worker::cpu().with_lanes(1).named("sloth").throttled(39.0),
    ])
    .unwrap();
    let mut options = DistributeOptions::new("s");
    options.ratios = Some(ratios(&[("quick", 0.5), ("sloth", 0.5)]));
    let started = std::time::Instant::now();
    let (out, stats) =
        run(&DevicePool::new(vec![Worker::cpu().with_lanes(1)]).unwrap(), &work, &chunks(6_000, 200), &options);
    let alone = started.elapsed().as_secs_f64();
    let (pooled, pooled_stats) = run(&pool, &work, &chunks(6_000, 200), &options);
    assert_eq!(pooled, out);
    let quick = &pooled_stats.workers[0];
    println!("alone {alone:.3} s, with the sloth {:.3} s; {:?}", pooled_stats.wall_s, pooled_stats.workers);
    assert!(quick.chunks >= 25, "quick took most chunks: {quick:?}");
    assert!(pooled_stats.wall_s < 2.0 * alone + 0.1, "{} s vs {alone} s alone", pooled_stats.wall_s);
    assert_eq!(stats.workers.len(), 1);
}

/// A simulated device that answers a range after a latency set by its thread count (2 s
/// on one thread, 20 ms on more), waiting in slices as a GPU read-back does and giving
/// up as soon as the range is no longer wanted. Item i's output is i.
struct Lagging;

impl Workload for Lagging {
    type Lane = ();
    type Pending = (Vec<Range<u64>>, Instant);
    type Output = Vec<u64>;

    fn items(&self) -> u64 {
        6
    }

    fn open(&self, _: &WorkerDevice) -> Result<(), WorkError> {
        Ok(())
    }

    fn submit(&self, _: &mut (), pieces: &[Range<u64>]) -> Result<Self::Pending, WorkError> {
        let latency = if rayon::current_num_threads() == 1 { 2_000 } else { 20 };
        Ok((pieces.to_vec(), Instant::now() + Duration::from_millis(latency)))
    }

    fn finish(
        &self,
        _: &mut (),
        (pieces, ready): Self::Pending,
        wanted: &dyn Fn() -> bool,
    ) -> Result<Option<Vec<Vec<u64>>>, WorkError> {
        while Instant::now() < ready {
            if !wanted() {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(Some(pieces.into_iter().map(|p| p.collect()).collect()))
    }

    fn join(&self, parts: Vec<Vec<u64>>) -> Vec<u64> {
        parts.concat()
    }
}

#[test]
fn a_device_still_working_on_a_chunk_finished_elsewhere_does_not_hold_the_runs_end() {
    let _alone = common::one_at_a_time();
    let threads = |n| Arc::new(rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap());
    let pool = DevicePool::new(vec![
        Worker::cpu_on(threads(2)).with_lanes(1).named("quick"),
        Worker::cpu_on(threads(1)).with_lanes(1).named("lagging"),
    ])
    .unwrap();
    let mut options = DistributeOptions::new("lagging");
    options.ratios = Some(ratios(&[("quick", 0.5), ("lagging", 0.5)]));
    let mut out = Vec::new();
    let stats = pool
        .distribute::<_, PoolError>(&Lagging, &chunks(6, 1), &options, &|_, _| Ok(()), &mut |_, o| {
            out.extend(o);
            Ok(())
        })
        .unwrap();
    println!("{:.3} s; {:?}", stats.wall_s, stats.workers);
    assert_eq!(out, (0..6).collect::<Vec<u64>>());
    assert_eq!(stats.workers[0].chunks, 6, "{stats:?}");
    // The lagging device's 2 s wait is left as soon as "quick" delivers its chunk.
    assert!(stats.wall_s < 1.0, "the run waited for the lagging device: {} s", stats.wall_s);
}

#[test]
fn a_gpu_read_no_longer_wanted_is_left_at_once_and_the_lane_goes_on() {
    let _alone = common::one_at_a_time();
    // About a second of work on lavapipe, in one submission.
    let heavy = Hashes::new(65_536, 20_000);
    // Devices of its own: on lavapipe another test's submit to a shared device blocks
    // until that test's kernel is done, holding the device while it waits. GL runs a
    // submission on the submitting thread: nothing is left to wait for there.
    let own: Vec<_> =
        threadx_dispatch::select_every_gpu().open_all().into_iter().filter_map(|(_, ctx)| ctx.ok()).collect();
    assert_eq!(own.len(), adapters().len());
    for ctx in own.iter().filter(|ctx| ctx.report().backend != "gl") {
        let name = &ctx.report().name;
        let mut lane = heavy.open(&WorkerDevice::Gpu(ctx.clone())).unwrap();
        let started = Instant::now();
        let pending = heavy.submit(&mut lane, std::slice::from_ref(&(0..heavy.items))).unwrap();
        let asked = AtomicUsize::new(0);
        let left = heavy
            .finish(&mut lane, pending, &|| {
                asked.fetch_add(1, Ordering::SeqCst);
                false
            })
            .unwrap();
        let abandoned = started.elapsed();
        // The next read waits behind the abandoned kernel, and is right.
        let small = heavy.submit(&mut lane, &[7..9, 3..4]).unwrap();
        let next = heavy.finish(&mut lane, small, &|| true).unwrap();
        let drained = started.elapsed();
        println!("{name}: left after {abandoned:?}, the lane drained after {drained:?}");
        assert!(left.is_none(), "{name}: the read was waited for");
        assert_eq!(asked.load(Ordering::SeqCst), 1, "{name}");
        assert_eq!(next, Some(vec![vec![hash(7, heavy.rounds), hash(8, heavy.rounds)], vec![hash(3, heavy.rounds)]]));
        assert!(abandoned * 4 < drained, "{name}: left after {abandoned:?}, the kernel ran {drained:?}");
    }
}

#[test]
fn a_workers_phases_fill_its_lane_time_and_gpu_kernels_are_timed() {
    let _alone = common::one_at_a_time();
    let work = Hashes::new(20_000, 500);
    let all = chunks(20_000, 1_000);
    for ctx in adapters() {
        let pool = DevicePool::new(vec![Worker::gpu(0, ctx.clone()), Worker::cpu().with_lanes(1)]).unwrap();
        let mut options = DistributeOptions::new("hashes");
        options.ratios = Some(ratios(&[(pool.names()[0].as_str(), 0.5), ("cpu", 0.5)]));
        let (_, stats) = run(&pool, &work, &all, &options);
        for w in &stats.workers {
            let names: Vec<&str> = w.phases.iter().map(|p| p.0).collect();
            assert_eq!(names, ["submit", "finish", "deliver"], "{w:?}");
            let timed: f64 = w.phases.iter().map(|p| p.1).sum();
            assert!(timed > 0.0 && timed <= w.lane_s && w.idle_s() >= 0.0, "{w:?}");
            assert!((w.lane_s - stats.wall_s).abs() < 0.05, "one lane, the run's wall time: {w:?}");
        }
        let (gpu, cpu) = (&stats.workers[0], &stats.workers[1]);
        assert!(gpu.on_gpu && !cpu.on_gpu && cpu.kernel_s.is_none());
        let json = stats.summary();
        match ctx.kernel_seconds() {
            Some(_) => {
                let k = gpu.kernel_s.unwrap();
                assert!(gpu.chunks == 0 || (k > 0.0 && k < stats.wall_s), "{}: kernel {k} s", ctx.report().label());
                assert_eq!(json[&gpu.name].kernel_s, Some(KernelSeconds::Seconds(k)));
            }
            None => assert!(
                matches!(&json[&gpu.name].kernel_s, Some(KernelSeconds::Unavailable(why)) if why.starts_with("unavailable"))
            ),
        }
        assert!(json["cpu"].kernel_s.is_none());
        assert!(json["cpu"].phases_s["idle"] >= 0.0);
    }
}

#[test]
fn a_wide_device_is_measured_on_one_of_its_dispatches() {
    let _alone = common::one_at_a_time();
    let Some(ctx) = adapters().first() else { return };
    let work = Hashes::new(20_000, 4).gpu_width(10_000);
    let pool = DevicePool::new(vec![Worker::gpu(0, ctx.clone()), Worker::cpu().with_lanes(1)]).unwrap();
    let options = BalanceOptions { sample_size: 1_000, warmup: 0, runs: 1 };
    let balance = pool.profile_auto_balance(&work, &options, "wide", None).unwrap();
    let items: Vec<u64> = balance.timings.iter().map(|t| t.items).collect();
    // The GPU on its width of 10,000 items; the CPU on the sample.
    assert_eq!(items, [10_000, 1_000], "{balance}");
    assert_eq!(*work.dispatched.lock().unwrap(), [10_000, 1_000]);
}
