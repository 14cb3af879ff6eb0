//! One parity suite, run on the CPU reference and on every adapter: batched calls over
//! many parameter sets against the CPU, one indicator at a time; properties of the CPU
//! kernels (proptest); the bank's compute-once promise and dispatcher keys.

#![allow(clippy::print_stdout)] // The measured errors are printed for the record (--nocapture).

use proptest::prelude::*;
use threadx_dispatch::testing::adapters;
use threadx_dispatch::{Device, DeviceMode, DevicePolicy, Dispatcher};
use threadx_indicators::{Indicator, IndicatorBank, IndicatorError, Ohlcv, SyntheticSpec, compute_cpu, compute_gpu};
use threadx_profile_store::Profiles;

/// A batch touching every family: several parameter sets each, shared periods included.
fn batch() -> Vec<Indicator> {
    let mut all = Vec::new();
    for period in [2, 5, 14, 20, 50] {
        all.push(Indicator::Sma { period });
        all.push(Indicator::Ema { period });
        all.push(Indicator::StdDev { period });
        all.push(Indicator::Atr { period });
        all.push(Indicator::Rsi { period });
        for std in [1.0, 2.0, 2.5] {
            all.push(Indicator::BollingerBands { period, std });
        }
    }
    all.push(Indicator::TrueRange);
    all.push(Indicator::Macd { fast: 12, slow: 26, signal: 9 });
    all.push(Indicator::Macd { fast: 5, slow: 35, signal: 5 });
    all
}

/// Largest relative error over defined values; where a series crosses zero (MACD), values
/// below 1% of its largest magnitude are compared relative to that.
fn worst_error(got: &[f64], want: &[f64]) -> f64 {
    let scale = want.iter().filter(|w| !w.is_nan()).fold(0.0f64, |m, w| m.max(w.abs()));
    got.iter()
        .zip(want)
        .map(|(g, w)| {
            assert_eq!(g.is_nan(), w.is_nan(), "NaN positions differ: {g} vs {w}");
            if w.is_nan() { 0.0 } else { (g - w).abs() / w.abs().max(scale * 1e-2).max(f64::MIN_POSITIVE) }
        })
        .fold(0.0, f64::max)
}

#[test]
fn batched_cpu_equals_one_call_per_indicator_bit_for_bit() {
    let data = SyntheticSpec { bars: 5000, seed: 1, ..SyntheticSpec::default() }.generate();
    let all = batch();
    let batched = compute_cpu(&data, &all).unwrap();
    for (indicator, values) in all.iter().zip(&batched) {
        let alone = compute_cpu(&data, &[*indicator]).unwrap();
        let bits = |v: &threadx_indicators::IndicatorValues| v.rows().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(values), bits(&alone[0]), "{indicator}");
        assert_eq!(values.indicator(), indicator);
    }
}

#[test]
fn every_adapter_agrees_with_the_cpu_on_a_batch() {
    // Long enough for recursions to run, with BTC-like levels and moves.
    let data = SyntheticSpec { bars: 20_000, seed: 2, ..SyntheticSpec::default() }.generate();
    let all = batch();
    let cpu = compute_cpu(&data, &all).unwrap();
    for ctx in adapters() {
        let gpu = compute_gpu(ctx, &data, &all).unwrap();
        let mut worst: Vec<(f64, String)> = Vec::new();
        for (c, g) in cpu.iter().zip(&gpu) {
            assert_eq!(c.indicator(), g.indicator());
            for (i, name) in c.indicator().columns().iter().enumerate() {
                let e = std::panic::catch_unwind(|| worst_error(g.output(i), c.output(i)))
                    .unwrap_or_else(|_| panic!("{}: {name}", ctx.report().label()));
                assert!(e <= 1e-4, "{}: {name} relative error {e:e}", ctx.report().label());
                worst.push((e, name.clone()));
            }
        }
        worst.sort_by(|a, b| b.0.total_cmp(&a.0));
        println!("{}: worst GPU-vs-CPU relative errors {:?}", ctx.report().label(), &worst[..3]);
    }
}

/// Past `MAX_LOOP_STEPS` loop iterations per invocation (lavapipe ends a kernel's loops
/// after 65,535 iterations, leaving the rest of the output unwritten), a kernel is refused
/// before any work and the CPU runs it; below, the GPU still agrees with the CPU.
#[test]
fn kernels_are_refused_past_the_loop_bound_and_agree_below_it() {
    let data = SyntheticSpec { bars: 100_000, seed: 3, ..SyntheticSpec::default() }.generate();
    let runs =
        [Indicator::Sma { period: 20 }, Indicator::BollingerBands { period: 50, std: 2.0 }, Indicator::TrueRange];
    let refused = [
        Indicator::Ema { period: 20 },
        Indicator::Rsi { period: 14 },
        Indicator::Atr { period: 14 },
        Indicator::Macd { fast: 12, slow: 26, signal: 9 },
        Indicator::Sma { period: 40_000 },
    ];
    for ctx in adapters() {
        for indicator in runs {
            let gpu = compute_gpu(ctx, &data, &[indicator]).unwrap();
            let cpu = compute_cpu(&data, &[indicator]).unwrap();
            for i in 0..indicator.columns().len() {
                let e = worst_error(gpu[0].output(i), cpu[0].output(i));
                assert!(e <= 1e-4, "{indicator} on {}: relative error {e:e}", ctx.report().label());
            }
        }
        for indicator in refused {
            let err = compute_gpu(ctx, &data, &[indicator]).unwrap_err();
            assert!(err.to_string().contains("loops"), "{indicator}: {err}");
        }
    }
    // Through the bank in GPU mode the refused ones fall back to the CPU's values.
    let dir = tempfile::tempdir().unwrap();
    let gpu_mode = dispatcher(DeviceMode::Gpu, &dir);
    let bank = IndicatorBank::new(&data, &gpu_mode);
    let ema = bank.get(&Indicator::Ema { period: 20 }).unwrap();
    let cpu = compute_cpu(&data, &[Indicator::Ema { period: 20 }]).unwrap();
    assert_eq!(worst_error(ema.output(0), cpu[0].output(0)), 0.0);
}

#[test]
fn bad_parameters_are_refused_before_any_work() {
    let data = SyntheticSpec { bars: 30, seed: 3, ..SyntheticSpec::default() }.generate();
    let cases = [
        (Indicator::Sma { period: 0 }, "period must be at least 1"),
        (Indicator::Sma { period: 31 }, "sma_31 needs at least 31 bars"),
        (Indicator::Atr { period: 30 }, "atr_30 needs at least 31 bars"),
        (Indicator::BollingerBands { period: 5, std: 0.0 }, "std must be a positive number"),
        (Indicator::BollingerBands { period: 5, std: f64::NAN }, "std must be a positive number"),
        (Indicator::Macd { fast: 26, slow: 12, signal: 9 }, "fast (26) must be shorter than slow (12)"),
        (Indicator::Macd { fast: 12, slow: 26, signal: 9 }, "macd_12_26_9 needs at least 34 bars"),
    ];
    for (indicator, says) in cases {
        let err = compute_cpu(&data, &[Indicator::Sma { period: 2 }, indicator]).unwrap_err();
        assert!(err.to_string().contains(says), "{indicator}: {err}");
        for ctx in adapters() {
            let err = compute_gpu(ctx, &data, &[indicator]).unwrap_err();
            assert!(err.to_string().contains(says), "{indicator}: {err}");
        }
    }
}

#[test]
fn specs_parse_with_defaults_and_refuse_what_is_unknown() {
    assert_eq!(Indicator::parse("bbands:period=20,std=2"), Ok(Indicator::BollingerBands { period: 20, std: 2.0 }));
    assert_eq!(Indicator::parse("BBANDS"), Ok(Indicator::BollingerBands { period: 20, std: 2.0 }));
    assert_eq!(Indicator::parse("macd:slow=30"), Ok(Indicator::Macd { fast: 12, slow: 30, signal: 9 }));
    assert_eq!(Indicator::parse("trange"), Ok(Indicator::TrueRange));
    assert_eq!(Indicator::parse("vwap"), Ok(Indicator::Vwap));
    assert_eq!(Indicator::parse("cci"), Ok(Indicator::Cci { period: 14 }));
    assert!(matches!(Indicator::parse("kama"), Err(IndicatorError::Unknown { .. })));
    assert!(matches!(Indicator::parse("adx:period=1"), Err(IndicatorError::BadValue { .. })));
    assert!(matches!(Indicator::parse("rsi:length=3"), Err(IndicatorError::UnknownParam { .. })));
    assert!(matches!(Indicator::parse("rsi:period"), Err(IndicatorError::Syntax { .. })));
    assert!(matches!(Indicator::parse("rsi:period=-1"), Err(IndicatorError::BadValue { .. })));
    // A parameter given twice is refused, not last-wins (`sma:period=10,period=20` was sma_20).
    let twice = Indicator::parse("sma:period=10,PERIOD=20").unwrap_err().to_string();
    assert_eq!(
        twice,
        "bad indicator spec `sma:period=10,PERIOD=20`: period is given twice (10 and 20); one spec is one indicator, so ask for each in its own"
    );
    let bb = Indicator::BollingerBands { period: 20, std: 2.0 };
    assert_eq!(bb.columns(), ["bbands_20_2_middle", "bbands_20_2_upper", "bbands_20_2_lower"]);
    assert_eq!(Indicator::Macd { fast: 12, slow: 26, signal: 9 }.columns()[2], "macd_12_26_9_hist");
    assert_eq!(Indicator::BollingerBands { period: 20, std: 2.5 }.label(), "bbands_20_2.5");
    assert_eq!(bb.key(), r#"bollinger_bands:{"period":20,"std":2}"#);
}

fn dispatcher(mode: DeviceMode, dir: &tempfile::TempDir) -> Dispatcher {
    let profiles = Profiles::at(dir.path().join("t.json"), dir.path().join("m.json"), "test");
    let gpu = adapters().first().cloned();
    Dispatcher::new(
        mode,
        gpu,
        profiles.threshold_store().unwrap(),
        DevicePolicy { min_gpu_size: 0, ..DevicePolicy::default() },
    )
}

#[test]
fn the_bank_computes_each_unique_indicator_once_and_shares_it() {
    let data = SyntheticSpec { bars: 3000, seed: 4, ..SyntheticSpec::default() }.generate();
    let dir = tempfile::tempdir().unwrap();
    let d = dispatcher(DeviceMode::Cpu, &dir);
    let bank = IndicatorBank::new(&data, &d);
    // 24 combos of 4 bb periods × 2 widths × 3 ATR periods need 8 bands + 3 ATRs.
    let mut asked = Vec::new();
    for period in [10, 20, 30, 40] {
        for std in [1.5, 2.0] {
            for atr in [7, 14, 21] {
                asked.push(Indicator::BollingerBands { period, std });
                asked.push(Indicator::Atr { period: atr });
            }
        }
    }
    let got = bank.get_many(&asked).unwrap();
    assert_eq!(bank.computations(), 11);
    assert!(std::sync::Arc::ptr_eq(&got[0], &got[2]), "the same bands are one shared value");
    // `std=2` and `std=2.0` are one indicator; asking again computes nothing.
    let again = bank.get(&Indicator::parse("bbands:period=20,std=2").unwrap()).unwrap();
    assert_eq!(bank.computations(), 11);
    let alone = compute_cpu(&data, &[Indicator::BollingerBands { period: 20, std: 2.0 }]).unwrap();
    assert!(again.rows().iter().zip(alone[0].rows()).all(|(a, b)| a.to_bits() == b.to_bits()));
    // One batch per family, keyed by the batch size; a single set is keyed by its period.
    let keys: Vec<String> = bank.runs().iter().map(|r| r.key.clone()).collect();
    assert_eq!(keys, [r#"bollinger_bands:{"sets":8,"size":3000}"#, r#"atr:{"sets":3,"size":3000}"#]);
    bank.get(&Indicator::Rsi { period: 14 }).unwrap();
    assert_eq!(bank.runs()[2].key, r#"rsi:{"period":14,"size":3000}"#);
    assert!(bank.runs().iter().all(|r| r.device == Device::Cpu));
    drop(d);
}

#[test]
fn the_bank_runs_through_the_dispatcher_on_every_mode() {
    let data = SyntheticSpec { bars: 6000, seed: 5, ..SyntheticSpec::default() }.generate();
    let want = compute_cpu(&data, &[Indicator::BollingerBands { period: 20, std: 2.0 }]).unwrap();
    for mode in [DeviceMode::Cpu, DeviceMode::Gpu, DeviceMode::Auto] {
        let dir = tempfile::tempdir().unwrap();
        let d = dispatcher(mode, &dir);
        let bank = IndicatorBank::new(&data, &d);
        let got = bank.get(&Indicator::BollingerBands { period: 20, std: 2.0 }).unwrap();
        let run = &bank.runs()[0];
        assert_eq!(run.key, r#"bollinger_bands:{"period":20,"size":6000}"#);
        let expected = if mode == DeviceMode::Cpu || adapters().is_empty() { Device::Cpu } else { run.device };
        assert_eq!(run.device, expected, "{mode:?}");
        if mode == DeviceMode::Gpu && !adapters().is_empty() {
            assert_eq!(run.device, Device::Gpu);
        }
        for i in 0..3 {
            let e = worst_error(got.output(i), want[0].output(i));
            assert!(e <= 1e-4, "{mode:?}: {e}");
        }
        d.flush().unwrap();
        let profile = std::fs::read_to_string(dir.path().join("t.json")).unwrap();
        assert!(profile.contains(r#"bollinger_bands:{\"period\":20,\"size\":6000}"#), "{profile}");
    }
}

/// A price walk with tiny moves on a large level: the case naive rolling sums get wrong.
fn walk(start: f64, moves: &[i32]) -> Vec<f64> {
    let mut p = start;
    moves
        .iter()
        .map(|&m| {
            p = (p + f64::from(m) / 100.0).max(1.0);
            p
        })
        .collect()
}

fn ohlcv(close: Vec<f64>) -> Ohlcv {
    let n = close.len();
    let high: Vec<f64> = close.iter().map(|c| c + 0.5).collect();
    let low: Vec<f64> = close.iter().map(|c| c - 0.5).collect();
    Ohlcv::new("prop", (0..n as i64).collect(), close.clone(), high, low, close, vec![1.0; n]).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The O(n) rolling deviation equals the two-pass deviation of each window.
    #[test]
    fn rolling_std_equals_two_pass(start in 1_000.0f64..100_000.0, moves in prop::collection::vec(-500i32..500, 40..600), period in 1usize..40) {
        let close = walk(start, &moves);
        let values = compute_cpu(&ohlcv(close.clone()), &[Indicator::StdDev { period }]).unwrap();
        for t in period - 1..close.len() {
            let w = &close[t + 1 - period..=t];
            let mean = w.iter().sum::<f64>() / period as f64;
            let direct = (w.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / period as f64).sqrt();
            let got = values[0].output(0)[t];
            // Relative, except for deviations below ~1e-7 of the price level, where even
            // the two-pass reference has no more digits.
            prop_assert!((got - direct).abs() <= 1e-9 * direct + 1e-13 * mean, "bar {}: {} vs {}", t, got, direct);
        }
    }

    /// The blocked EMA equals the textbook one-bar recursion.
    #[test]
    fn ema_equals_the_plain_recursion(start in 1_000.0f64..100_000.0, moves in prop::collection::vec(-500i32..500, 40..600), period in 1usize..40) {
        let close = walk(start, &moves);
        let values = compute_cpu(&ohlcv(close.clone()), &[Indicator::Ema { period }]).unwrap();
        let k = 2.0 / (period as f64 + 1.0);
        let mut e = close[..period].iter().sum::<f64>() / period as f64;
        for (t, &c) in close.iter().enumerate().skip(period - 1) {
            if t >= period {
                e += (c - e) * k;
            }
            let got = values[0].output(0)[t];
            prop_assert!((got - e).abs() <= 1e-12 * e, "bar {}: {} vs {}", t, got, e);
        }
    }

    /// The blocked SMA equals the mean of each window.
    #[test]
    fn sma_equals_the_mean_of_each_window(start in 1_000.0f64..100_000.0, moves in prop::collection::vec(-500i32..500, 40..600), period in 1usize..40) {
        let close = walk(start, &moves);
        let values = compute_cpu(&ohlcv(close.clone()), &[Indicator::Sma { period }]).unwrap();
        for t in period - 1..close.len() {
            let mean = close[t + 1 - period..=t].iter().sum::<f64>() / period as f64;
            let got = values[0].output(0)[t];
            prop_assert!((got - mean).abs() <= 1e-13 * mean, "bar {}: {} vs {}", t, got, mean);
        }
    }

    /// ATR and RSI, four bars per step of their chains, equal TA-Lib's one-bar updates
    /// `avg = (avg · (p − 1) + today) / p`; MACD keeps TA-Lib's update bit for bit.
    #[test]
    fn recursions_equal_talib_one_bar_updates(start in 1_000.0f64..100_000.0, moves in prop::collection::vec(-500i32..500, 60..600), period in 1usize..30) {
        let data = ohlcv(walk(start, &moves));
        let (high, low, close) = (data.high(), data.low(), data.close());
        let p = period as f64;
        let macd = (period.min(5), period.max(6), 1 + period % 9);
        let out = compute_cpu(&data, &[Indicator::Atr { period }, Indicator::Rsi { period }, Indicator::Macd { fast: macd.0, slow: macd.1, signal: macd.2 }]).unwrap();
        let tr = |t: usize| (high[t] - low[t]).max((high[t] - close[t - 1]).abs()).max((low[t] - close[t - 1]).abs());
        let mut atr = (1..=period).map(tr).sum::<f64>() / p;
        let (mut gain, mut loss) = (0.0, 0.0);
        for t in 1..=period {
            let change = close[t] - close[t - 1];
            if change > 0.0 { gain += change } else { loss -= change }
        }
        (gain, loss) = (gain / p, loss / p);
        for t in period..close.len() {
            if t > period {
                atr = (atr * (p - 1.0) + tr(t)) / p;
                let change = close[t] - close[t - 1];
                gain = (gain * (p - 1.0) + change.max(0.0)) / p;
                loss = (loss * (p - 1.0) + (-change).max(0.0)) / p;
            }
            let got = out[0].output(0)[t];
            prop_assert!((got - atr).abs() <= 1e-12 * atr, "ATR bar {}: {} vs {}", t, got, atr);
            let rsi = if gain + loss == 0.0 { 0.0 } else { 100.0 * gain / (gain + loss) };
            prop_assert!((out[1].output(0)[t] - rsi).abs() <= 1e-10, "RSI bar {}: {} vs {}", t, out[1].output(0)[t], rsi);
        }
        // MACD: the slow EMA seeded on the first `slow` bars, the fast one on the `fast`
        // bars ending there, the signal on the first `signal` lines.
        let (fast, slow, signal) = macd;
        let k = |n: usize| 2.0 / (n as f64 + 1.0);
        let mut slow_ema = close[..slow].iter().sum::<f64>() / slow as f64;
        let mut fast_ema = close[slow - fast..slow].iter().sum::<f64>() / fast as f64;
        let mut lines = vec![fast_ema - slow_ema];
        for &c in &close[slow..] {
            fast_ema += (c - fast_ema) * k(fast);
            slow_ema += (c - slow_ema) * k(slow);
            lines.push(fast_ema - slow_ema);
        }
        let mut sig = lines[..signal].iter().sum::<f64>() / signal as f64;
        for (i, &line) in lines.iter().enumerate().skip(signal - 1) {
            if i >= signal {
                sig += (line - sig) * k(signal);
            }
            let t = slow - 1 + i;
            prop_assert_eq!(out[2].output(0)[t].to_bits(), line.to_bits(), "line, bar {}", t);
            prop_assert_eq!(out[2].output(1)[t].to_bits(), sig.to_bits(), "signal, bar {}", t);
            prop_assert_eq!(out[2].output(2)[t].to_bits(), (line - sig).to_bits(), "hist, bar {}", t);
        }
    }

    /// RSI stays in [0, 100], ATR is positive, and bands are ordered.
    #[test]
    fn outputs_stay_in_their_ranges(moves in prop::collection::vec(-500i32..500, 60..400), period in 1usize..30) {
        let data = ohlcv(walk(50_000.0, &moves));
        let out = compute_cpu(&data, &[Indicator::Rsi { period }, Indicator::Atr { period }, Indicator::BollingerBands { period, std: 2.0 }]).unwrap();
        for t in period..data.len() {
            let rsi = out[0].output(0)[t];
            prop_assert!((0.0..=100.0).contains(&rsi));
            prop_assert!(out[1].output(0)[t] >= 0.5 - 1e-9);
            let (m, u, l) = (out[2].output(0)[t], out[2].output(1)[t], out[2].output(2)[t]);
            prop_assert!(l <= m && m <= u);
        }
    }
}

/// Long enough for the rolling windows' periodic refresh, with what makes them recentre: a
/// steady trend, a gap, and flat stretches (equal closes, whose deviation is exactly 0).
#[test]
fn rolling_windows_stay_exact_through_trends_gaps_and_flat_stretches() {
    let mut rng = threadx_stats::SeededRng::new(11);
    let mut close = Vec::new();
    let mut p = 60_000.0;
    for t in 0..30_000 {
        let step = match t {
            5_000..8_000 => 7.5,                                     // a trend
            12_000 => 5_000.0,                                       // a gap
            15_000..15_300 | 20_000..20_007 | 25_000..25_400 => 0.0, // flat
            _ => ((rng.uniform() - 0.5) * 1_000.0).round() / 100.0,
        };
        p += step;
        close.push(p);
    }
    let data = ohlcv(close.clone());
    for period in [3, 20, 200] {
        let values = compute_cpu(&data, &[Indicator::Sma { period }, Indicator::StdDev { period }]).unwrap();
        for t in period - 1..close.len() {
            let w = &close[t + 1 - period..=t];
            let mean = w.iter().sum::<f64>() / period as f64;
            let dev = (w.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / period as f64).sqrt();
            let (got_mean, got_dev) = (values[0].output(0)[t], values[1].output(0)[t]);
            assert!((got_mean - mean).abs() <= 1e-13 * mean, "period {period}, bar {t}: mean {got_mean} vs {mean}");
            if w.iter().all(|&x| x == w[0]) {
                assert_eq!(got_dev, 0.0, "period {period}, bar {t}: a flat window");
            } else {
                assert!(
                    (got_dev - dev).abs() <= 1e-9 * dev + 1e-13 * mean,
                    "period {period}, bar {t}: {got_dev} vs {dev}"
                );
            }
        }
    }
}

/// One bad tick (a close of 1e20 or 1e99, the edge of the price range, among prices near 40,000): once the window no
/// longer holds it, SMA, the Bollinger middle and the deviation are the window's again.
#[test]
fn rolling_windows_recover_after_an_outlier_leaves() {
    let data = Ohlcv::load("synthetic:bars=2000,seed=3").unwrap();
    for spike in [1e20, 1e99] {
        for at in [5, 700] {
            let mut close = data.close().to_vec();
            close[at] = spike;
            let high: Vec<f64> = data.high().iter().zip(&close).map(|(&h, &c)| h.max(c)).collect();
            let bad = Ohlcv::new(
                "spiked",
                data.timestamps().to_vec(),
                data.open().to_vec(),
                high,
                data.low().to_vec(),
                close.clone(),
                data.volume().to_vec(),
            )
            .unwrap();
            let period = 20;
            let values = compute_cpu(
                &bad,
                &[
                    Indicator::Sma { period },
                    Indicator::BollingerBands { period, std: 2.0 },
                    Indicator::StdDev { period },
                ],
            )
            .unwrap();
            for t in (at + period..close.len()).step_by(7) {
                let window = &close[t + 1 - period..=t];
                let mean = window.iter().sum::<f64>() / period as f64;
                let dev = (window.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / period as f64).sqrt();
                let (sma, middle, sd) = (values[0].output(0)[t], values[1].output(0)[t], values[2].output(0)[t]);
                assert!((sma - mean).abs() <= 1e-11 * mean, "spike {spike} at {at}: sma[{t}] = {sma}, mean {mean}");
                assert!((middle - mean).abs() <= 1e-11 * mean, "spike {spike} at {at}: middle[{t}] = {middle}");
                assert!((sd - dev).abs() <= 1e-9 * mean, "spike {spike} at {at}: stddev[{t}] = {sd}, want {dev}");
            }
        }
    }
}
