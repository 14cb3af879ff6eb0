//! Every indicator against TA-Lib's own outputs (tests/golden/talib.json, made by
//! make_talib_golden.py beside it with ta-lib 0.8.2 from PyPI, TA-Lib C 0.8.1): NaN
//! exactly where TA-Lib has no value, and a relative error of at most 1e-10 on the CPU
//! (we measure at most 2e-11, on STDDEV, where TA-Lib's sum of squares is itself 1e-11
//! off the exact value; 1e-15 elsewhere) and 1e-4 on every adapter (about 1e-7 measured;
//! MACD's outputs, which cross zero, relative to 1% of their range where smaller).

#![allow(clippy::print_stdout)] // The measured errors are printed for the record (--nocapture).

use serde_json::Value;
use std::sync::OnceLock;
use threadx_dispatch::testing::adapters;
use threadx_indicators::{Indicator, IndicatorValues, Ohlcv, compute_cpu, compute_gpu, compute_on_series};

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

fn bars() -> Ohlcv {
    let close = column("input", "close");
    let ts = (0..close.len() as i64).map(|i| 1_700_000_000_000 + i * 900_000).collect();
    let volume = column("input", "volume");
    Ohlcv::new("golden", ts, column("input", "open"), column("input", "high"), column("input", "low"), close, volume)
        .expect("golden bars are valid")
}

/// Each indicator with the golden columns of its outputs, in output order.
fn cases() -> Vec<(Indicator, Vec<&'static str>)> {
    vec![
        (Indicator::Sma { period: 20 }, vec!["SMA_20"]),
        (Indicator::Sma { period: 1 }, vec!["SMA_1"]),
        (Indicator::Ema { period: 20 }, vec!["EMA_20"]),
        (Indicator::Ema { period: 5 }, vec!["EMA_5"]),
        (Indicator::StdDev { period: 20 }, vec!["STDDEV_20"]),
        (Indicator::TrueRange, vec!["TRANGE"]),
        (Indicator::Atr { period: 14 }, vec!["ATR_14"]),
        (Indicator::Atr { period: 1 }, vec!["ATR_1"]),
        (Indicator::Rsi { period: 14 }, vec!["RSI_14"]),
        (Indicator::Rsi { period: 2 }, vec!["RSI_2"]),
        (
            Indicator::BollingerBands { period: 20, std: 2.0 },
            vec!["BBANDS_20_2_middle", "BBANDS_20_2_upper", "BBANDS_20_2_lower"],
        ),
        (
            Indicator::Macd { fast: 12, slow: 26, signal: 9 },
            vec!["MACD_12_26_9_macd", "MACD_12_26_9_signal", "MACD_12_26_9_hist"],
        ),
    ]
}

/// The largest relative error of `got` against TA-Lib, after checking NaN positions.
/// With `floor` > 0, values smaller than `floor` times the series' largest magnitude are
/// compared relative to that (f32 cannot give relative precision where MACD crosses 0).
fn worst_error(name: &str, got: &[f64], want: &[f64], floor: f64) -> f64 {
    assert_eq!(got.len(), want.len(), "{name}: length");
    let scale = want.iter().filter(|w| !w.is_nan()).fold(0.0f64, |m, w| m.max(w.abs()));
    let mut worst = 0.0f64;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.is_nan(), w.is_nan(), "{name} bar {i}: got {g}, TA-Lib {w}");
        if !w.is_nan() {
            let denominator = w.abs().max(scale * floor);
            worst = worst.max(if denominator == 0.0 { (g - w).abs() } else { (g - w).abs() / denominator });
        }
    }
    worst
}

fn check_all(device: &str, values: &[IndicatorValues], tolerance: f64, floor: f64) {
    for ((indicator, columns), values) in cases().iter().zip(values) {
        assert_eq!(values.indicator(), indicator);
        for (i, name) in columns.iter().enumerate() {
            let worst = worst_error(name, values.output(i), &column("output", name), floor);
            println!("{device} {name}: worst relative error {worst:.2e}");
            assert!(worst <= tolerance, "{device} {name}: relative error {worst:e} > {tolerance:e}");
        }
    }
}

/// Indicators without a GPU kernel (the CPU computes them; a GPU declines them).
fn cpu_only_cases() -> Vec<(Indicator, Vec<&'static str>)> {
    vec![
        (Indicator::Cci { period: 14 }, vec!["CCI_14"]),
        (Indicator::Cci { period: 20 }, vec!["CCI_20"]),
        (Indicator::Obv, vec!["OBV"]),
        (Indicator::Adx { period: 14 }, vec!["ADX_14"]),
        (Indicator::Adx { period: 5 }, vec!["ADX_5"]),
        (Indicator::PlusDi { period: 14 }, vec!["PLUS_DI_14"]),
        (Indicator::MinusDi { period: 14 }, vec!["MINUS_DI_14"]),
        (Indicator::MinusDi { period: 2 }, vec!["MINUS_DI_2"]),
    ]
}

#[test]
fn cpu_matches_talib_to_1e_10() {
    let indicators: Vec<Indicator> = cases().into_iter().map(|(i, _)| i).collect();
    check_all("CPU", &compute_cpu(&bars(), &indicators).unwrap(), 1e-10, 0.0);
    let (cases, indicators): (Vec<_>, Vec<Indicator>) =
        cpu_only_cases().into_iter().map(|(i, columns)| ((i, columns), i)).unzip();
    for ((indicator, columns), values) in cases.iter().zip(compute_cpu(&bars(), &indicators).unwrap()) {
        assert_eq!(values.indicator(), indicator);
        let worst = worst_error(columns[0], values.output(0), &column("output", columns[0]), 0.0);
        println!("CPU {}: worst relative error {worst:.2e}", columns[0]);
        assert!(worst <= 1e-10, "{}: relative error {worst:e}", columns[0]);
    }
}

#[test]
fn indicators_of_other_series_match_talib_to_1e_10() {
    let data = bars();
    let rsi = compute_on_series(Indicator::Rsi { period: 14 }, data.close()).unwrap().remove(0);
    let sma = compute_on_series(Indicator::Sma { period: 5 }, data.close()).unwrap().remove(0);
    let series_cases = [
        (Indicator::Sma { period: 20 }, data.volume().to_vec(), "SMA_20_of_volume"),
        (Indicator::StdDev { period: 10 }, data.volume().to_vec(), "STDDEV_10_of_volume"),
        // Sources with a warm-up: the indicator starts after it, as TA-Lib's wrapper does.
        (Indicator::Ema { period: 5 }, rsi, "EMA_5_of_RSI_14"),
        (Indicator::Rsi { period: 14 }, sma, "RSI_14_of_SMA_5"),
    ];
    for (indicator, source, name) in series_cases {
        let got = compute_on_series(indicator, &source).unwrap().remove(0);
        let worst = worst_error(name, &got, &column("output", name), 0.0);
        println!("CPU {name}: worst relative error {worst:.2e}");
        assert!(worst <= 1e-10, "{name}: relative error {worst:e}");
    }
    // On the close, the bank's bits.
    for (indicator, _) in cases() {
        if threadx_indicators::reads_one_series(&indicator) {
            let bank = compute_cpu(&data, &[indicator]).unwrap().remove(0);
            let of_close = compute_on_series(indicator, data.close()).unwrap();
            for (k, row) in of_close.iter().enumerate() {
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(row), bits(bank.output(k)), "{indicator} output {k}");
            }
        }
    }
    // A gap of NaN starts the indicator again, with its own warm-up.
    let mut gapped = data.close().to_vec();
    gapped[100] = f64::NAN;
    let got = compute_on_series(Indicator::Sma { period: 3 }, &gapped).unwrap().remove(0);
    assert!(got[100..102].iter().all(|v| v.is_nan()) && got[99].is_finite() && got[103].is_finite());
    assert_eq!(got[103], compute_on_series(Indicator::Sma { period: 3 }, &gapped[101..]).unwrap()[0][2]);
    // An indicator that reads the bars' columns takes no series.
    let e = compute_on_series(Indicator::Atr { period: 14 }, data.close()).unwrap_err();
    assert!(e.to_string().contains("takes no other series"), "{e}");
}

#[test]
fn a_gpu_declines_indicators_without_a_kernel() {
    for ctx in adapters() {
        let e = compute_gpu(ctx, &bars(), &[Indicator::Obv]).unwrap_err();
        assert!(e.to_string().contains("obv has no GPU kernel; the CPU computes it"), "{e}");
    }
}

#[test]
fn every_adapter_matches_talib_to_1e_4() {
    let indicators: Vec<Indicator> = cases().into_iter().map(|(i, _)| i).collect();
    for ctx in adapters() {
        let values = compute_gpu(ctx, &bars(), &indicators).unwrap();
        check_all(&ctx.report().label(), &values, 1e-4, 1e-2);
    }
}
