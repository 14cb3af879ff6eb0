//! The device pool gives the bytes of one CPU whatever the workers (CPU, every adapter,
//! several logical workers on one), ratios, hand-out orders, failures and splits.

#![allow(clippy::print_stdout)] // Measured figures are printed for the test log.

use crate::common;

use common::{Hashes, chunks, hash, ratios, run};
use std::collections::BTreeMap;
use threadx_dispatch::testing::adapters;
use threadx_multi_gpu::{DevicePool, DistributeOptions, Fault, PoolError, Worker};

#[test]
fn every_mix_of_workers_gives_the_bytes_of_one_cpu() {
    let _alone = common::one_at_a_time();
    let work = Hashes::new(5_000, 64);
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
    let _alone = common::one_at_a_time();
    let work = Hashes::new(3_000, 32);
    let expected: Vec<u32> = (0..3_000).map(|i| hash(i, 32)).collect();
    let all = chunks(3_000, 100);
    let mut options = DistributeOptions::new("hashes");
    options.ratios = Some(ratios(&[("lost", 0.5), ("small", 0.5)]));
    // No healthy worker beside them: "small" (and the GPU) must split what "lost" leaves.
    let mut workers = vec![
        Worker::cpu().with_lanes(1).named("lost").with_fault(Fault::FailAt { chunk: 1 }),
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
    assert!(lost.chunks <= 1, "the failing worker delivered at most its first chunk: {lost:?}");
    // On a loaded machine the others may take every chunk before "lost" asks for its
    // second; when it did, it failed (the pool-of-one case below fails for certain).
    assert!(lost.failed.as_deref().is_none_or(|f| f.contains("injected failure")), "{lost:?}");
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
fn a_wide_device_takes_several_chunks_a_dispatch_and_the_bytes_stay_those_of_one_cpu() {
    let _alone = common::one_at_a_time();
    let expected: Vec<u32> = (0..5_000).map(|i| hash(i, 64)).collect();
    // 52 chunks: 51 of 97 items and one of 53.
    let all = chunks(5_000, 97);
    for ctx in adapters() {
        let name = &ctx.report().name;
        let work = Hashes::new(5_000, 64).gpu_width(1_000);
        let pool = DevicePool::new(vec![Worker::gpu(0, ctx.clone())]).unwrap();
        let (out, stats) = run(&pool, &work, &all, &DistributeOptions::new("hashes"));
        assert_eq!(out, expected, "{name}");
        assert_eq!(stats.workers[0].chunks, 52);
        // Eleven chunks (1,067 items) reach the width of 1,000: four such dispatches, then the rest.
        assert_eq!(*work.dispatched.lock().unwrap(), [1_067, 1_067, 1_067, 1_067, 732], "{name}");

        // A memory that holds 500 items: the first dispatch is refused, its chunks run one
        // by one, and later dispatches take what fits (five chunks, 485 items).
        let work = Hashes::new(5_000, 64).gpu_width(1_000);
        let gpu = Worker::gpu(0, ctx.clone()).with_fault(Fault::OutOfMemoryAbove { items: 500 });
        let (out, _) = run(&DevicePool::new(vec![gpu]).unwrap(), &work, &all, &DistributeOptions::new("hashes"));
        assert_eq!(out, expected, "{name}");
        let sizes = [vec![97; 11], vec![485; 8], vec![53]].concat();
        assert_eq!(*work.dispatched.lock().unwrap(), sizes, "{name}");

        // Beside the CPU, in shuffled orders: running out of memory above 500 items, or
        // lost on the 16th chunk it takes (in its second dispatch).
        for (seed, fault) in [(1, Fault::OutOfMemoryAbove { items: 500 }), (2, Fault::FailAt { chunk: 15 })] {
            let work = Hashes::new(5_000, 64).gpu_width(1_000);
            let gpu = Worker::gpu(0, ctx.clone()).with_fault(fault);
            let mut options = DistributeOptions::new("hashes");
            options.ratios = Some(ratios(&[(gpu.name(), 0.7), ("cpu", 0.3)]));
            options.shuffle = Some(seed);
            let pool = DevicePool::new(vec![gpu, Worker::cpu().with_lanes(1)]).unwrap();
            let (out, stats) = run(&pool, &work, &all, &options);
            assert_eq!(out, expected, "{name}: {fault:?}");
            // The CPU may take every chunk before the GPU's 16th; if the GPU failed, it was this.
            let failed = stats.workers[0].failed.as_deref();
            assert!(failed.is_none_or(|f| f.contains("injected failure")), "{stats:?}");
        }
    }
}
