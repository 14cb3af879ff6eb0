//! The device pool gives the bytes of one CPU whatever the workers (CPU, every adapter,
//! several logical workers on one), ratios, hand-out orders, failures and splits; a GPU
//! read that is no longer wanted is left without waiting for the device.

#![allow(clippy::print_stdout)] // Measured figures are printed for the test log.

mod common;

use common::{Hashes, chunks, hash, ratios, run};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use threadx_dispatch::testing::adapters;
use threadx_multi_gpu::{DevicePool, DistributeOptions, Fault, PoolError, Worker, WorkerDevice, Workload};

#[test]
fn every_mix_of_workers_gives_the_bytes_of_one_cpu() {
    let work = Hashes { items: 5_000, rounds: 64 };
    let expected: Vec<u32> = (0..5_000).map(|i| hash(i, 64)).collect();
    let all = chunks(5_000, 97);
    let one = DevicePool::new(vec![Worker::cpu()]).unwrap();
    let (out, stats) = run(&one, &work, &all, &DistributeOptions::new("hashes"));
    assert_eq!(out, expected);
    assert_eq!(stats.workers[0].chunks, all.len() as u64);

    // N identical logical workers on each adapter (two chunks in flight each), with and
    // without the CPU, under several ratios and hand-out orders.
    for ctx in adapters() {
        for logical in [1, 3] {
            let mut workers: Vec<Worker> = (0..logical)
                .map(|k| Worker::gpu(0, ctx.clone()).named(format!("gpu0.{k}:{}", ctx.report().name)))
                .collect();
            let gpu_only = DevicePool::new(workers.clone()).unwrap();
            let (out, stats) = run(&gpu_only, &work, &all, &DistributeOptions::new("hashes"));
            assert_eq!(out, expected, "{logical} logical workers on {}", ctx.report().name);
            assert_eq!(stats.workers.iter().map(|w| w.chunks).sum::<u64>(), all.len() as u64);
            workers.push(Worker::cpu().with_lanes(1));
            let mixed = DevicePool::new(workers).unwrap();
            for (seed, cpu_share) in [(1, 0.1), (2, 0.5), (3, 0.9)] {
                let mut options = DistributeOptions::new("hashes");
                let gpu_share = (1.0 - cpu_share) / logical as f64;
                let mut r: BTreeMap<String, f64> = mixed.names().into_iter().map(|n| (n, gpu_share)).collect();
                r.insert("cpu".into(), cpu_share);
                options.ratios = Some(r);
                options.shuffle = Some(seed);
                let (out, _) = run(&mixed, &work, &all, &options);
                assert_eq!(out, expected, "{logical} logical workers and the CPU, seed {seed}");
            }
        }
    }
}

#[test]
fn a_failing_worker_and_an_out_of_memory_chunk_leave_the_outputs_unchanged() {
    let work = Hashes { items: 3_000, rounds: 32 };
    let expected: Vec<u32> = (0..3_000).map(|i| hash(i, 32)).collect();
    let all = chunks(3_000, 100);
    let mut options = DistributeOptions::new("hashes");
    options.ratios = Some(ratios(&[("lost", 0.5), ("small", 0.5)]));
    // No healthy worker beside them: "small" (and the GPU) must split what "lost" leaves.
    let mut workers = vec![
        Worker::cpu().with_lanes(1).named("lost").with_fault(Fault::FailAt { chunk: 3 }),
        Worker::cpu().with_lanes(1).named("small").with_fault(Fault::OutOfMemoryAbove { items: 30 }),
    ];
    if let Some(ctx) = adapters().first() {
        // A GPU whose memory holds only 40 items: every chunk it takes is split.
        workers.push(Worker::gpu(0, ctx.clone()).with_fault(Fault::OutOfMemoryAbove { items: 40 }));
        options.ratios.as_mut().unwrap().insert(workers[2].name().to_owned(), 0.5);
    }
    let pool = DevicePool::new(workers).unwrap();
    let (out, stats) = run(&pool, &work, &all, &options);
    assert_eq!(out, expected);
    let lost = &stats.workers[0];
    assert!(lost.chunks <= 3, "the failing worker delivered at most its first three chunks: {lost:?}");
    assert!(lost.failed.as_deref().unwrap().contains("injected failure"), "{lost:?}");
    for w in &stats.workers[1..] {
        assert!(w.failed.is_none(), "{w:?}");
        // After its first split, a worker cuts later chunks to the piece that fit, up front.
        assert!(w.chunks == 0 || w.splits >= 1, "{} split its chunks: {w:?}", w.name);
    }
    assert!(stats.workers[1..].iter().map(|w| w.chunks).sum::<u64>() >= 27, "{stats:?}");

    // When every worker fails, the CPU finishes the run; without the fallback it is an error.
    let Some(ctx) = adapters().first() else { return };
    let doomed = || vec![Worker::gpu(0, ctx.clone()).with_fault(Fault::FailAt { chunk: 0 })];
    let pool = DevicePool::new(doomed()).unwrap();
    let (out, stats) = run(&pool, &work, &all, &DistributeOptions::new("hashes"));
    assert_eq!(out, expected);
    assert_eq!(stats.workers.last().unwrap().name, "cpu (fallback)");
    let pool = DevicePool::new(doomed()).unwrap().without_fallback();
    let err = pool
        .distribute::<_, PoolError>(&work, &all, &DistributeOptions::new("h"), &|_, _| Ok(()), &mut |_, _| Ok(()))
        .unwrap_err();
    assert!(err.to_string().contains("every worker failed") && err.to_string().contains("30 chunks"), "{err}");
}

#[test]
fn a_gpu_read_no_longer_wanted_is_left_at_once_and_the_lane_goes_on() {
    // About a second of work on lavapipe, in one submission.
    let heavy = Hashes { items: 65_536, rounds: 20_000 };
    // GL runs a submission on the submitting thread: nothing is left to wait for there.
    for ctx in adapters().iter().filter(|ctx| ctx.report().backend != "gl") {
        let name = &ctx.report().name;
        let mut lane = heavy.open(&WorkerDevice::Gpu(ctx.clone())).unwrap();
        let started = Instant::now();
        let pending = heavy.submit(&mut lane, 0..heavy.items).unwrap();
        let asked = AtomicUsize::new(0);
        let left = heavy
            .finish(&mut lane, pending, &|| {
                asked.fetch_add(1, Ordering::SeqCst);
                false
            })
            .unwrap();
        let abandoned = started.elapsed();
        // The next read waits behind the abandoned kernel, and is right.
        let small = heavy.submit(&mut lane, 7..9).unwrap();
        let next = heavy.finish(&mut lane, small, &|| true).unwrap();
        let drained = started.elapsed();
        println!("{name}: left after {abandoned:?}, the lane drained after {drained:?}");
        assert!(left.is_none(), "{name}: the read was waited for");
        assert_eq!(asked.load(Ordering::SeqCst), 1, "{name}");
        assert_eq!(next, Some(vec![hash(7, heavy.rounds), hash(8, heavy.rounds)]), "{name}");
        assert!(abandoned * 4 < drained, "{name}: left after {abandoned:?}, the kernel ran {drained:?}");
    }
}

#[test]
fn a_workers_phases_fill_its_lane_time_and_gpu_kernels_are_timed() {
    let work = Hashes { items: 20_000, rounds: 500 };
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
        let json = stats.to_json("items");
        match ctx.kernel_seconds() {
            Some(_) => {
                let k = gpu.kernel_s.unwrap();
                assert!(gpu.chunks == 0 || (k > 0.0 && k < stats.wall_s), "{}: kernel {k} s", ctx.report().label());
                assert_eq!(json[&gpu.name]["kernel_s"], k);
            }
            None => assert!(json[&gpu.name]["kernel_s"].as_str().unwrap().starts_with("unavailable")),
        }
        assert!(json["cpu"].get("kernel_s").is_none());
        assert!(json["cpu"]["phases_s"]["idle"].as_f64().unwrap() >= 0.0);
    }
}
