//! Batched computation: many indicators (typically one family over many parameter sets)
//! in one call, on the CPU (rayon across series), on a GPU (one dispatch per family), or
//! on whichever the dispatcher picks.

use crate::cpu;
use crate::error::IndicatorError;
use crate::gpu;
use crate::indicator::{Family, Indicator, IndicatorValues};
use crate::ohlcv::Ohlcv;
use rayon::prelude::*;
use serde_json::json;
use std::collections::BTreeMap;
use threadx_dispatch::{Device, Dispatcher, GpuContext, GpuError, Operation};

/// Checks every indicator against the data, before any work.
fn check_all(data: &Ohlcv, indicators: &[Indicator]) -> Result<(), IndicatorError> {
    indicators.iter().try_for_each(|i| i.check(data.len()))
}

/// The indicators on the CPU (f64, the reference), in parallel across series.
pub fn compute_cpu(data: &Ohlcv, indicators: &[Indicator]) -> Result<Vec<IndicatorValues>, IndicatorError> {
    check_all(data, indicators)?;
    Ok(cpu_batch(data, indicators))
}

/// The indicators on `ctx` (f32), one dispatch per family present (more only where a
/// batch's output exceeds one storage binding). Bad parameters are
/// [`GpuError::Unsupported`] naming the problem.
pub fn compute_gpu(ctx: &GpuContext, data: &Ohlcv, indicators: &[Indicator]) -> Result<Vec<IndicatorValues>, GpuError> {
    check_all(data, indicators).map_err(|e| GpuError::Unsupported(e.to_string()))?;
    per_family(indicators, |family, batch| gpu::compute_family(ctx, data, family, batch))
}

/// How one family's batch was computed (for logs and sweep summaries).
#[derive(Debug, Clone, PartialEq)]
pub struct FamilyRun {
    /// The profile key the dispatcher decided on.
    pub key: String,
    pub sets: usize,
    pub device: Device,
    pub elapsed_ms: f64,
}

/// What [`compute_dispatched`] computed.
pub(crate) struct Dispatched {
    pub values: Vec<IndicatorValues>,
    /// Whether each value is the CPU's f64 one.
    pub on_cpu: Vec<bool>,
    pub runs: Vec<FamilyRun>,
}

/// The indicators on the device the dispatcher picks (`exact`: always on the CPU, in
/// f64), one decision per family batch, keyed `bollinger_bands:{"period":20,"size":N}`
/// for one set and `bollinger_bands:{"sets":K,"size":N}` for a batch of K.
pub(crate) fn compute_dispatched(
    dispatcher: &Dispatcher,
    data: &Ohlcv,
    indicators: &[Indicator],
    exact: bool,
) -> Result<Dispatched, IndicatorError> {
    check_all(data, indicators)?;
    let mut runs = Vec::new();
    let mut on_cpu = BTreeMap::new();
    let values = per_family(indicators, |family, batch| {
        let params = match batch {
            [one] => one.cost_params(),
            many => json!({ "sets": many.len() }),
        };
        let op = Operation::new(family.op_name(), params, data.len());
        // A family without a GPU kernel is declined before any dispatch.
        let (value, device, elapsed_ms) = if exact || !family.has_gpu_kernel() {
            let start = std::time::Instant::now();
            let value = cpu_batch(data, batch);
            (value, Device::Cpu, start.elapsed().as_secs_f64() * 1e3)
        } else {
            let outcome =
                dispatcher.run(&op, || cpu_batch(data, batch), |ctx| gpu::compute_family(ctx, data, family, batch));
            (outcome.value, outcome.device, outcome.elapsed_ms)
        };
        runs.push(FamilyRun { key: op.key().to_owned(), sets: batch.len(), device, elapsed_ms });
        on_cpu.insert(family, device == Device::Cpu);
        Ok::<_, IndicatorError>(value)
    })?;
    let on_cpu = indicators.iter().map(|i| on_cpu[&i.family()]).collect();
    Ok(Dispatched { values, on_cpu, runs })
}

/// Runs `compute` on each family's batch (families in a fixed order) and puts the values
/// back in the order of `indicators`.
fn per_family<E>(
    indicators: &[Indicator],
    mut compute: impl FnMut(Family, &[Indicator]) -> Result<Vec<IndicatorValues>, E>,
) -> Result<Vec<IndicatorValues>, E> {
    let mut out: Vec<Option<IndicatorValues>> = vec![None; indicators.len()];
    for (family, members) in by_family(indicators) {
        let batch: Vec<Indicator> = members.iter().map(|&i| indicators[i]).collect();
        for (i, values) in members.into_iter().zip(compute(family, &batch)?) {
            out[i] = Some(values);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// Indices of `indicators` per family, families in a fixed order.
fn by_family(indicators: &[Indicator]) -> BTreeMap<Family, Vec<usize>> {
    let mut groups: BTreeMap<Family, Vec<usize>> = BTreeMap::new();
    for (i, indicator) in indicators.iter().enumerate() {
        groups.entry(indicator.family()).or_default().push(i);
    }
    groups
}

/// The CPU batch of checked indicators, in parallel across series. Bollinger bands and
/// standard deviations of the same period share one rolling pass.
fn cpu_batch(data: &Ohlcv, indicators: &[Indicator]) -> Vec<IndicatorValues> {
    let n = data.len();
    let close = data.close();
    let window_of = |i: &Indicator| match *i {
        Indicator::BollingerBands { period, .. } | Indicator::StdDev { period } => Some(period),
        _ => None,
    };
    let mut shared: Vec<usize> = indicators.iter().filter_map(window_of).collect();
    shared.sort_unstable();
    let shared: Vec<usize> = shared.chunk_by(|a, b| a == b).filter(|run| run.len() > 1).map(|run| run[0]).collect();
    // Mean and deviation rows of each period used more than once.
    let grain = threadx_dispatch::cpu_grain(n);
    let windows: Vec<(usize, Vec<f64>, Vec<f64>)> = shared
        .par_iter()
        .with_min_len(grain)
        .map(|&period| {
            let (mut mean, mut dev) = (vec![0.0; n], vec![0.0; n]);
            cpu::rolling::<true>(close, period, |t, m, d| {
                mean[t..t + m.len()].copy_from_slice(m);
                dev[t..t + d.len()].copy_from_slice(d);
            });
            (period, mean, dev)
        })
        .collect();
    let values = |&indicator: &Indicator| {
        let window = window_of(&indicator).and_then(|p| windows.iter().find(|(q, ..)| *q == p));
        let from = indicator.lookback();
        IndicatorValues::build(indicator, n, |rows| match (indicator, rows, window) {
            (Indicator::BollingerBands { std, .. }, [middle, upper, lower], Some((_, mean, dev))) => {
                bands(std, from, &mean[from..], &dev[from..], [middle, upper, lower]);
            }
            (Indicator::StdDev { .. }, [out], Some((_, _, dev))) => cpu::put(out, from, &dev[from..]),
            (Indicator::TrueRange, [out], _) => cpu::true_range(data.high(), data.low(), close, out),
            (Indicator::Atr { period }, [out], _) => cpu::atr(data.high(), data.low(), close, period, out),
            (Indicator::Cci { period }, [out], _) => cpu::cci(data.high(), data.low(), close, period, out),
            (Indicator::Obv, [out], _) => cpu::obv(close, data.volume(), out),
            (Indicator::Vwap, [out], _) => {
                cpu::vwap(data.timestamps(), (data.high(), data.low(), close, data.volume()), out);
            }
            (Indicator::Adx { period }, [out], _) => cpu::adx(data.high(), data.low(), close, period, out),
            (Indicator::PlusDi { period } | Indicator::MinusDi { period }, [out], _) => {
                let plus = matches!(indicator, Indicator::PlusDi { .. });
                cpu::directional_index(data.high(), data.low(), close, period, plus, out);
            }
            (_, rows, _) => one_input(indicator, close, rows),
        })
    };
    // One series is one thread's work: computed right here, without a hop into the pool.
    match indicators {
        [one] => vec![values(one)],
        many => many.par_iter().with_min_len(grain).map(values).collect(),
    }
}

/// Writes an indicator that reads one series, `x` (a number on every bar), into its rows
/// from its first value on. The others read several columns of the bars.
fn one_input(indicator: Indicator, x: &[f64], rows: &mut [cpu::Row]) {
    match (indicator, rows) {
        (Indicator::Sma { period }, [out]) => cpu::rolling::<false>(x, period, |t, mean, _| cpu::put(out, t, mean)),
        (Indicator::Ema { period }, [out]) => cpu::ema(x, period, out),
        (Indicator::StdDev { period }, [out]) => cpu::rolling::<true>(x, period, |t, _, dev| cpu::put(out, t, dev)),
        (Indicator::BollingerBands { period, std }, [middle, upper, lower]) => {
            cpu::rolling::<true>(x, period, |t, mean, dev| {
                bands(std, t, mean, dev, [&mut **middle, &mut **upper, &mut **lower]);
            });
        }
        (Indicator::Rsi { period }, [out]) => cpu::rsi(x, period, out),
        (Indicator::Macd { fast, slow, signal }, [line, sig, hist]) => {
            cpu::macd(x, (fast, slow, signal), line, sig, hist);
        }
        _ => unreachable!("{indicator}: reads more than one series, or its rows do not match its outputs"),
    }
}

/// Whether `indicator` reads one series (the close, in the bank), so that it can be
/// computed on any series ([`compute_on_series`]).
pub fn reads_one_series(indicator: &Indicator) -> bool {
    !matches!(
        indicator,
        Indicator::TrueRange
            | Indicator::Atr { .. }
            | Indicator::Cci { .. }
            | Indicator::Obv
            | Indicator::Adx { .. }
            | Indicator::PlusDi { .. }
            | Indicator::MinusDi { .. }
            | Indicator::Vwap
    )
}

/// `indicator` computed on the series `x` instead of the close, one row per output: on
/// each stretch of bars where `x` is a number (a source's warm-up, or a gap of NaN,
/// starts it again), from its lookback into the stretch on; NaN elsewhere. The values
/// are the bank's kernels' on that stretch, so on the close they are the bank's bits.
pub fn compute_on_series(indicator: Indicator, x: &[f64]) -> Result<Vec<Vec<f64>>, IndicatorError> {
    if !reads_one_series(&indicator) {
        return Err(IndicatorError::BadValue {
            indicator: indicator.short_name().to_owned(),
            problem: "reads the bars' high, low and close (or volume); it takes no other series".into(),
        });
    }
    indicator.check_params()?;
    let outputs = indicator.output_names().len();
    let mut rows = vec![vec![f64::NAN; x.len()]; outputs];
    let lookback = indicator.lookback();
    let mut t = 0;
    while t < x.len() {
        let start = t + x[t..].iter().position(|v| !v.is_nan()).unwrap_or(x.len() - t);
        let end = start + x[start..].iter().position(|v| v.is_nan()).unwrap_or(x.len() - start);
        if end - start > lookback {
            let stretch = &x[start..end];
            let values = IndicatorValues::build(indicator, stretch.len(), |out| one_input(indicator, stretch, out));
            for (k, row) in rows.iter_mut().enumerate() {
                row[start + lookback..end].copy_from_slice(&values.output(k)[lookback..]);
            }
        }
        t = end;
    }
    Ok(rows)
}

/// Writes the bands `mean ± std · deviation` (and the mean as the middle) from bar `t` on.
fn bands(std: f64, t: usize, mean: &[f64], dev: &[f64], [middle, upper, lower]: [cpu::Row; 3]) {
    let rows = middle[t..t + mean.len()].iter_mut().zip(&mut upper[t..]).zip(&mut lower[t..]);
    for (((middle, upper), lower), (&m, &d)) in rows.zip(mean.iter().zip(dev)) {
        let width = std * d;
        middle.write(m);
        upper.write(m + width);
        lower.write(m - width);
    }
}
