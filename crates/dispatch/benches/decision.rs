//! Cost of one auto decision (target: below 2 µs), on the best adapter found.
#![allow(clippy::print_stderr)]

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use std::hint::black_box;
use threadx_dispatch::{Device, DeviceMode, DevicePolicy, Dispatcher, Operation, select_gpu};
use threadx_profile_store::Profiles;

fn decision(c: &mut Criterion) {
    let Ok(gpu) = select_gpu().open() else {
        eprintln!("no GPU adapter: the auto decision needs one to decide about; skipping");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let profiles = Profiles::at(dir.path().join("t.json"), dir.path().join("m.json"), "bench");
    let mut store = profiles.threshold_store().unwrap();
    // A realistic profile: 4 operations × 5 parameter sets × 12 sizes.
    for name in ["bollinger_bands", "atr", "rsi", "ema"] {
        for period in [10, 14, 20, 30, 50] {
            for k in 0..12 {
                let size = 1000usize << k;
                let op = Operation::new(name, json!({"period": period}), size);
                for _ in 0..3 {
                    store.record(op.key(), Device::Cpu, size as f64 * 1e-4).unwrap();
                    store.record(op.key(), Device::Gpu, 0.5 + size as f64 * 1e-6).unwrap();
                }
            }
        }
    }
    let d = Dispatcher::new(DeviceMode::Auto, Some(gpu), store, DevicePolicy::default());
    let known = Operation::new("bollinger_bands", json!({"period": 20}), 1000 << 6);

    let mut g = c.benchmark_group("dispatch_decision");
    g.bench_function("measured_key", |b| b.iter(|| d.decide(black_box(&known))));
    g.bench_function("build_key_and_decide", |b| {
        b.iter(|| d.decide(&Operation::new("bollinger_bands", json!({"period": black_box(20)}), black_box(64_000))))
    });
    let unseen = Operation::new("bollinger_bands", json!({"period": 20}), 100_000);
    g.bench_function("predicted_from_neighbours", |b| b.iter(|| d.decide(black_box(&unseen))));
    g.finish();
    // The bench must not write into the temp profile after the directory is gone.
    drop(d);
}

criterion_group!(benches, decision);
criterion_main!(benches);
