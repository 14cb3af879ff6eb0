//! The dispatcher's decisions, fallback and persistence. The decision tests need an
//! adapter to decide about (lavapipe in CI); they skip without one, as the testing
//! module says.

use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use threadx_dispatch::testing::best_adapter;
use threadx_dispatch::{Device, DeviceMode, DevicePolicy, Dispatcher, GpuContext, GpuError, Operation, Reason};
use threadx_profile_store::{Profiles, ThresholdStore};

const FP: &str = "fp";

fn store(dir: &Path) -> ThresholdStore {
    Profiles::at(dir.join("thresholds.json"), dir.join("multigpu.json"), FP).threshold_store().unwrap()
}

fn seed(store: &mut ThresholdStore, op: &Operation, cpu_ms: &[f64], gpu_ms: &[f64]) {
    for &ms in cpu_ms {
        store.record(op.key(), Device::Cpu, ms).unwrap();
    }
    for &ms in gpu_ms {
        store.record(op.key(), Device::Gpu, ms).unwrap();
    }
}

fn auto(gpu: Arc<GpuContext>, store: ThresholdStore) -> Dispatcher {
    Dispatcher::new(
        DeviceMode::Auto,
        Some(gpu),
        store,
        DevicePolicy { recheck_every: 1_000_000, ..DevicePolicy::default() },
    )
}

fn bb(period: u32, size: usize) -> Operation {
    Operation::new("bollinger_bands", json!({"period": period, "std": 2}), size)
}

#[test]
fn auto_decision_follows_recorded_timings_and_flips() {
    let Some(gpu) = best_adapter() else { return };
    let dir = tempfile::tempdir().unwrap();
    let op = bb(20, 100_000);
    let mut s = store(dir.path());
    seed(&mut s, &op, &[10.0, 11.0, 9.0], &[1.0, 1.2, 0.8]);
    let mut d = auto(gpu.clone(), s);
    let first = d.decide(&op);
    assert_eq!(first.device, Device::Gpu);
    assert_eq!(first.reason, Reason::Faster { cpu_ms: 10.0, gpu_ms: 1.0, predicted: false });

    // The GPU gets much slower (say, a busy card): its mean passes the CPU's.
    let mut s = store(dir.path());
    seed(&mut s, &op, &[10.0, 11.0, 9.0], &[1.0, 1.2, 0.8]);
    seed(&mut s, &op, &[], &[40.0; 5]);
    d = auto(gpu, s);
    let flipped = d.decide(&op);
    assert_eq!(flipped.device, Device::Cpu);
    match flipped.reason {
        Reason::Faster { cpu_ms, gpu_ms, predicted: false } => {
            assert_eq!(cpu_ms, 10.0);
            assert!((gpu_ms - 25.375).abs() < 1e-9, "{gpu_ms}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn unseen_size_is_predicted_from_neighbouring_sizes() {
    let Some(gpu) = best_adapter() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut s = store(dir.path());
    // CPU scales linearly; the GPU has a fixed cost and a flat slope.
    seed(&mut s, &bb(20, 10_000), &[1.0; 3], &[5.0; 3]);
    seed(&mut s, &bb(20, 1_000_000), &[100.0; 3], &[10.0; 3]);
    // Another parameter set of the same operation must not be mistaken for a neighbour.
    seed(&mut s, &bb(30, 50_000), &[0.001; 3], &[1000.0; 3]);
    let d = auto(gpu, s);

    let big = d.decide(&bb(20, 100_000));
    assert_eq!(big.device, Device::Gpu);
    let Reason::Faster { cpu_ms, gpu_ms, predicted: true } = big.reason else { panic!("{big:?}") };
    assert!((cpu_ms - 10.0).abs() < 1e-9, "{cpu_ms}");
    assert!((gpu_ms - 50f64.sqrt()).abs() < 1e-9, "{gpu_ms}");

    let small = d.decide(&bb(20, 20_000));
    assert_eq!(small.device, Device::Cpu, "{small:?}");

    let other_params = d.decide(&bb(50, 100_000));
    assert!(matches!(other_params.reason, Reason::Explore { samples: 0 }), "{other_params:?}");
}

#[test]
fn devices_with_few_samples_are_explored_then_the_faster_wins() {
    let Some(gpu) = best_adapter() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = auto(gpu, store(dir.path()));
    let op = Operation::new("work", json!({}), 10_000);
    let mut ran = Vec::new();
    for _ in 0..8 {
        let out = d.run(
            &op,
            || {
                std::thread::sleep(std::time::Duration::from_millis(4));
                "cpu"
            },
            |_| Ok("gpu"),
        );
        assert_eq!(out.gpu_error, None);
        ran.push((out.value, matches!(out.decision.reason, Reason::Explore { .. })));
    }
    // Three samples on each device are explored first (alternating), then the fast GPU wins.
    assert_eq!(ran.iter().filter(|(_, explored)| *explored).count(), 6, "{ran:?}");
    assert_eq!(ran.iter().filter(|(v, e)| *v == "cpu" && *e).count(), 3);
    assert_eq!(&ran[6..], &[("gpu", false), ("gpu", false)]);
}

#[test]
fn the_slower_device_is_remeasured_less_often_the_slower_it_is() {
    let Some(gpu) = best_adapter() else { return };
    // (cpu ms, gpu ms, the calls that re-run the slower device among the first 300).
    let cases: [(f64, f64, Vec<usize>); 3] = [
        (1.2, 1.0, (0..30).map(|k| 10 * k + 9).collect()),
        (2.0, 1.0, (0..15).map(|k| 20 * k + 19).collect()),
        (1.0, 100.0, vec![]),
    ];
    for (cpu_ms, gpu_ms, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let op = bb(20, 100_000);
        let mut s = store(dir.path());
        seed(&mut s, &op, &[cpu_ms; 3], &[gpu_ms; 3]);
        let d = Dispatcher::new(
            DeviceMode::Auto,
            Some(gpu.clone()),
            s,
            DevicePolicy { recheck_every: 10, ..DevicePolicy::default() },
        );
        let winner = if gpu_ms < cpu_ms { Device::Gpu } else { Device::Cpu };
        let rechecks: Vec<usize> = (0..300).filter(|_| d.decide(&op).device != winner).collect();
        assert_eq!(rechecks, expected, "cpu {cpu_ms} ms, gpu {gpu_ms} ms");
        // Whatever the gap, re-checks add about 1/recheck_every to the time of the calls.
        let (fast, slow) = (cpu_ms.min(gpu_ms), cpu_ms.max(gpu_ms));
        let spent = rechecks.len() as f64 * slow + (300 - rechecks.len()) as f64 * fast;
        assert!(spent / (300.0 * fast) <= 1.0 + 1.0 / 10.0 + 1e-9, "{spent}");
    }
    let dir = tempfile::tempdir().unwrap();
    let op = bb(20, 100_000);
    let mut s = store(dir.path());
    seed(&mut s, &op, &[1.0; 3], &[100.0; 3]);
    let d =
        Dispatcher::new(DeviceMode::Auto, Some(gpu), s, DevicePolicy { recheck_every: 10, ..DevicePolicy::default() });
    let first = (0..2000).position(|_| d.decide(&op).device == Device::Gpu);
    assert_eq!(first, Some(999), "a device 100 times slower is re-run every 1,000th call");
}

#[test]
fn gpu_errors_fall_back_to_the_cpu_with_a_complete_result() {
    let Some(gpu) = best_adapter() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = Dispatcher::new(DeviceMode::Gpu, Some(gpu), store(dir.path()), DevicePolicy::default());
    let op = Operation::new("work", json!({"k": 1}), 50_000);

    let oom = d.run(&op, || vec![1.0, 2.0], |_| Err(GpuError::OutOfMemory("test".into())));
    assert_eq!(oom.value, vec![1.0, 2.0]);
    assert_eq!(oom.device, Device::Cpu);
    assert_eq!(oom.gpu_error, Some(GpuError::OutOfMemory("test".into())));
    assert_eq!(d.decide(&op).device, Device::Gpu, "out of memory does not disable the GPU");

    let lost = d.run(&op, || 7, |_| Err(GpuError::Lost("test".into())));
    assert_eq!((lost.value, lost.device), (7, Device::Cpu));
    let after = d.decide(&op);
    assert_eq!((after.device, after.reason), (Device::Cpu, Reason::NoGpu), "a lost device is not retried");
    assert_eq!(d.run(&op, || 8, |_| Ok(9)).value, 8);
}

#[test]
fn no_gpu_and_tiny_inputs_go_to_the_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let d = Dispatcher::new(DeviceMode::Gpu, None, store(dir.path()), DevicePolicy::default());
    let op = Operation::new("work", json!({}), 1_000_000);
    let out = d.run(&op, || 1, |_| Ok(2));
    assert_eq!((out.value, out.device, out.decision.reason), (1, Device::Cpu, Reason::NoGpu));

    if let Some(gpu) = best_adapter() {
        let d = auto(gpu, store(dir.path()));
        let tiny = Operation::new("work", json!({}), 10);
        let out = d.run(&tiny, || 1, |_| Ok(2));
        assert_eq!((out.value, out.decision.reason), (1, Reason::BelowFloor));
        d.flush().unwrap();
        let file = Profiles::at(dir.path().join("thresholds.json"), "m", FP).get_gpu_thresholds().unwrap();
        assert!(!file.entries.contains_key(tiny.key()), "tiny inputs are not profiled");
    }
}

#[test]
fn samples_are_persisted_on_drop_not_per_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("thresholds.json");
    let d = Dispatcher::new(DeviceMode::Cpu, None, store(dir.path()), DevicePolicy::default());
    let op = Operation::new("work", json!({"p": 2}), 100_000);
    for _ in 0..4 {
        assert_eq!(d.run(&op, || 3, |_| Ok(4)).value, 3);
    }
    assert!(!path.exists(), "nothing is written per call");
    drop(d);
    let file = Profiles::at(&path, "m", FP).get_gpu_thresholds().unwrap();
    assert_eq!(file.entries[op.key()].cpu.n, 4);
    assert_eq!(file.entries[op.key()].gpu.n, 0);
}

#[test]
fn mode_is_forced_by_the_environment() {
    const PROBE: &str = "THREADX_DISPATCH_TEST_MODE_PROBE";
    if let Ok(expected) = std::env::var(PROBE) {
        match Dispatcher::from_env(None) {
            Ok(d) => assert_eq!(d.mode().to_string(), expected),
            Err(e) => assert_eq!(expected, format!("error: {e}")),
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let probe = |value: &str, expected: &str| {
        let status = Command::new(std::env::current_exe().unwrap())
            .args(["mode_is_forced_by_the_environment", "--exact", "--test-threads=1"])
            .env(PROBE, expected)
            .env("THREADX_DEVICE", value)
            .env("THREADX_GPU_THRESHOLD_PATH", dir.path().join("t.json"))
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "THREADX_DEVICE={value} did not give {expected}");
    };
    probe("cpu", "cpu");
    probe("GPU", "gpu");
    probe("", "auto");
    probe("quantum", "error: THREADX_DEVICE: unknown device mode 'quantum' (expected auto, cpu, gpu or all)");
}

#[test]
fn a_broken_kernel_is_an_error_not_a_panic() {
    use threadx_dispatch::Kernel;
    let Some(gpu) = best_adapter() else { return };
    let broken = Kernel { name: "broken", source: "@compute @workgroup_size(1) fn main( {", entry: "main" };
    assert!(matches!(gpu.pipeline(&broken), Err(GpuError::Validation(_))));
    // Binding a buffer the kernel does not declare is refused too.
    let fine = Kernel {
        name: "fine",
        source: "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n\
                 @compute @workgroup_size(1) fn main() { x[0] = 1.0; }",
        entry: "main",
    };
    let a = gpu.storage_buffer("a", &[0f32; 4]).unwrap();
    let b = gpu.storage_buffer("b", &[0f32; 4]).unwrap();
    assert!(matches!(gpu.dispatch(&fine, &[&a, &b], [1, 1, 1]), Err(GpuError::Validation(_))));
    gpu.dispatch(&fine, &[&a], [1, 1, 1]).unwrap();
    assert_eq!(gpu.read_back::<f32>(&a, 4).unwrap(), vec![1.0, 0.0, 0.0, 0.0]);
    // Too many workgroups for one dimension is refused before reaching the driver.
    let too_many = gpu.limits().max_compute_workgroups_per_dimension + 1;
    assert!(matches!(gpu.dispatch(&fine, &[&a], [too_many, 1, 1]), Err(GpuError::TooLarge { .. })));
}

#[test]
fn threads_sharing_one_context_each_read_their_own_results() {
    use threadx_dispatch::Kernel;
    let Some(gpu) = best_adapter() else { return };
    let fill = Kernel {
        name: "fill_from_seed",
        source: "@group(0) @binding(0) var<storage, read_write> x: array<u32>;\n\
                 @group(0) @binding(1) var<uniform> seed: vec4<u32>;\n\
                 @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {\n\
                     var h = seed.x * 2654435761u + id.x;\n\
                     for (var k = 0u; k < seed.y; k++) { h = h * 1664525u + 1013904223u; }\n\
                     x[id.x] = h;\n\
                 }",
        entry: "main",
    };
    let expected = |seed: u32, steps: u32, i: u32| {
        (0..steps).fold(seed.wrapping_mul(2654435761).wrapping_add(i), |h, _| {
            h.wrapping_mul(1664525).wrapping_add(1013904223)
        })
    };
    // Submits and polls from several threads at once on one device: each must get its own
    // data back, and none may trip wgpu-core's concurrent-maintain assert.
    std::thread::scope(|s| {
        for thread in 0..4u32 {
            let gpu = gpu.clone();
            let fill = &fill;
            s.spawn(move || {
                for round in 0..24u32 {
                    let seed = thread * 1000 + round;
                    // Long kernels make the waits time out and poll again, short ones
                    // finish between another thread's polls.
                    let steps = [20, 1500, 5000][(round % 3) as usize];
                    let x = gpu.output_buffer::<u32>("x", 4096).unwrap();
                    let u = gpu.uniform_buffer("seed", &[seed, steps, 0, 0]).unwrap();
                    gpu.dispatch(fill, &[&x, &u], [64, 1, 1]).unwrap();
                    let got = gpu.read_back::<u32>(&x, 4096).unwrap();
                    for (i, v) in got.iter().enumerate() {
                        assert_eq!(*v, expected(seed, steps, i as u32), "thread {thread} round {round} item {i}");
                    }
                }
            });
        }
    });
}

#[test]
fn a_run_probes_gl_only_where_no_native_backend_has_an_adapter() {
    // WGPU_BACKEND picks the backends itself; this test is about the default.
    if std::env::var_os("WGPU_BACKEND").is_some() {
        return;
    }
    let every = threadx_dispatch::select_every_gpu();
    let run = threadx_dispatch::select_gpu();
    let backends =
        |s: &threadx_dispatch::GpuSelection| -> Vec<String> { s.adapters.iter().map(|a| a.backend.clone()).collect() };
    let native: Vec<String> = backends(&every).into_iter().filter(|b| b != "gl").collect();
    if native.is_empty() {
        assert_eq!(backends(&run), backends(&every), "without a native adapter, GL is what a run has");
    } else {
        assert_eq!(backends(&run), native, "GL is not started beside a native adapter");
    }
    assert_eq!(
        run.chosen_report().map(|r| (r.name.clone(), r.backend.clone())),
        every.chosen_report().map(|r| (r.name.clone(), r.backend.clone())),
        "the adapter a run picks is the one the full list ranks first"
    );
}
