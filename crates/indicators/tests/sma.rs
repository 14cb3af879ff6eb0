//! SMA: TA-Lib semantics on the CPU, and the same results from the WGSL kernel on every
//! adapter, directly and through the dispatcher.

use proptest::prelude::*;
use serde_json::json;
use threadx_dispatch::testing::adapters;
use threadx_dispatch::{Device, DeviceMode, Dispatcher, Policy};
use threadx_indicators::{IndicatorError, sma, sma_dispatched, sma_gpu};
use threadx_profile_store::Profiles;

/// A deterministic BTC-like walk around 60,000 with small moves.
fn prices(n: usize) -> Vec<f64> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut p = 60_000.0;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 11) as f64 / (1u64 << 53) as f64;
            p *= 1.0 + (u - 0.5) * 2e-3;
            (p * 100.0).round() / 100.0
        })
        .collect()
}

fn assert_close(got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if w.is_nan() {
            assert!(g.is_nan(), "bar {i}: expected NaN, got {g}");
        } else {
            assert!((g - w).abs() <= rel * w.abs(), "bar {i}: got {g}, want {w}");
        }
    }
}

#[test]
fn cpu_sma_matches_hand_computed_values() {
    let out = sma(&[1.0, 2.0, 3.0, 4.0, 5.0, 10.0], 3).unwrap();
    assert!(out[0].is_nan() && out[1].is_nan());
    assert_eq!(&out[2..], &[2.0, 3.0, 4.0, 19.0 / 3.0]);
    assert_eq!(sma(&[4.0], 1).unwrap(), vec![4.0]);
}

#[test]
fn bad_periods_are_refused_before_any_work() {
    assert_eq!(sma(&[1.0, 2.0], 0), Err(IndicatorError::PeriodZero { indicator: "sma", period: 0 }));
    let err = sma(&[1.0, 2.0], 3).unwrap_err();
    assert_eq!(err.to_string(), "sma: period 3 is longer than the data (2 bars)");
}

#[test]
fn cpu_sma_stays_exact_on_large_prices_with_tiny_moves() {
    let p = prices(200_000);
    let out = sma(&p, 50).unwrap();
    for i in (49..p.len()).step_by(997) {
        let direct = p[i + 1 - 50..=i].iter().sum::<f64>() / 50.0;
        assert!((out[i] - direct).abs() <= 1e-10 * direct, "bar {i}: {} vs {direct}", out[i]);
    }
}

proptest! {
    #[test]
    fn cpu_sma_is_the_window_mean(xs in prop::collection::vec(1.0f64..1e5, 1..200), period in 1usize..40) {
        prop_assume!(period <= xs.len());
        let out = sma(&xs, period).unwrap();
        for i in 0..xs.len() {
            if i + 1 < period {
                prop_assert!(out[i].is_nan());
            } else {
                let direct = xs[i + 1 - period..=i].iter().sum::<f64>() / period as f64;
                prop_assert!((out[i] - direct).abs() <= 1e-10 * direct);
            }
        }
    }
}

#[test]
fn gpu_sma_matches_the_cpu_on_every_adapter() {
    let p = prices(100_000);
    for ctx in adapters() {
        for period in [1, 2, 20, 200] {
            let want = sma(&p, period).unwrap();
            let got = sma_gpu(ctx, &p, period).unwrap();
            // f32 on centred prices: far inside the 1e-4 relative bound of the spec.
            assert_close(&got, &want, 1e-6);
        }
    }
}

#[test]
fn gpu_sma_covers_inputs_beyond_one_row_of_workgroups() {
    // 65,535 workgroups of 256 cover 16,776,960 outputs; go past that.
    let n = 16_776_960 + 1_000;
    let p: Vec<f64> = (0..n).map(|i| 100.0 + (i % 1000) as f64 * 0.01).collect();
    let Some(ctx) = adapters().first() else { return };
    let got = sma_gpu(ctx, &p, 2).unwrap();
    let want = sma(&p, 2).unwrap();
    for i in [1, 2, 65_535 * 256, n - 1_001, n - 2, n - 1] {
        assert!((got[i] - want[i]).abs() <= 1e-5 * want[i], "bar {i}: {} vs {}", got[i], want[i]);
    }
}

#[test]
fn sma_runs_through_the_dispatcher_on_the_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let profiles = Profiles::at(dir.path().join("t.json"), dir.path().join("m.json"), "test");
    let p = prices(50_000);
    let want = sma(&p, 20).unwrap();
    for ctx in adapters() {
        let d =
            Dispatcher::new(DeviceMode::Gpu, Some(ctx.clone()), profiles.threshold_store().unwrap(), Policy::default());
        let out = sma_dispatched(&d, &p, 20).unwrap();
        assert_eq!(out.gpu_error, None, "on {}", ctx.report().label());
        assert_eq!(out.device, Device::Gpu);
        assert_close(&out.value, &want, 1e-6);
        drop(d);
        let file = profiles.get_gpu_thresholds().unwrap();
        let key = threadx_profile_store::profile_key("sma", &json!({"period": 20, "size": 50_000}));
        assert!(file.entries[&key].gpu.n >= 1, "the GPU run was timed and recorded");
    }
    // Without a GPU the same call completes on the CPU.
    let d = Dispatcher::new(DeviceMode::Gpu, None, profiles.threshold_store().unwrap(), Policy::default());
    let out = sma_dispatched(&d, &p, 20).unwrap();
    assert_eq!(out.device, Device::Cpu);
    assert_close(&out.value, &want, 0.0);
    assert!(sma_dispatched(&d, &p, 0).is_err());
}
