//! CPU indicators against TA-Lib's own outputs (tests/golden/talib.json, made by
//! make_talib_golden.py beside it): relative error at most 1e-10 on every defined value,
//! and NaN exactly where TA-Lib has no value. GPU kernels are checked against the CPU
//! on every adapter, with the GPU tolerance.

use serde_json::Value;
use std::sync::OnceLock;
use threadx_dispatch::testing::adapters;
use threadx_indicators::{sma, sma_gpu};

fn golden() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| serde_json::from_str(include_str!("golden/talib.json")).expect("golden file parses"))
}

fn column(section: &str, name: &str) -> Vec<f64> {
    golden()[section][name]
        .as_array()
        .unwrap_or_else(|| panic!("no {section}.{name} in the golden file"))
        .iter()
        .map(|v| v.as_f64().unwrap_or(f64::NAN))
        .collect()
}

fn assert_matches(name: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{name}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.is_nan(), w.is_nan(), "{name} bar {i}: got {g}, TA-Lib {w}");
        if !w.is_nan() {
            assert!((g - w).abs() <= rel * w.abs(), "{name} bar {i}: got {g}, TA-Lib {w}");
        }
    }
}

#[test]
fn sma_matches_talib() {
    let close = column("input", "close");
    for period in [20, 1] {
        let want = column("output", &format!("SMA_{period}"));
        assert_matches(&format!("SMA_{period}"), &sma(&close, period).unwrap(), &want, 1e-10);
        for ctx in adapters() {
            assert_matches(&format!("GPU SMA_{period}"), &sma_gpu(ctx, &close, period).unwrap(), &want, 1e-6);
        }
    }
}
