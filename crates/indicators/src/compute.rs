//! Batched computation: many indicators (typically one family over many parameter sets)
//! in one call, on the CPU (rayon across series), on a GPU (one dispatch per family), or
//! on whichever the dispatcher picks.

use crate::IndicatorError;
use crate::cpu;
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

/// The indicators on the device the dispatcher picks, one decision per family batch,
/// keyed `bollinger_bands:{"period":20,"size":N}` for one set and
/// `bollinger_bands:{"sets":K,"size":N}` for a batch of K.
pub(crate) fn compute_dispatched(
    dispatcher: &Dispatcher,
    data: &Ohlcv,
    indicators: &[Indicator],
) -> Result<(Vec<IndicatorValues>, Vec<FamilyRun>), IndicatorError> {
    check_all(data, indicators)?;
    let mut runs = Vec::new();
    let values = per_family(indicators, |family, batch| {
        let params = match batch {
            [one] => one.cost_params(),
            many => json!({ "sets": many.len() }),
        };
        let op = Operation::new(family.op_name(), params, data.len());
        let outcome =
            dispatcher.run(&op, || cpu_batch(data, batch), |ctx| gpu::compute_family(ctx, data, family, batch));
        runs.push(FamilyRun {
            key: op.key().to_owned(),
            sets: batch.len(),
            device: outcome.device,
            elapsed_ms: outcome.elapsed_ms,
        });
        Ok::<_, IndicatorError>(outcome.value)
    })?;
    Ok((values, runs))
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
    let windows: Vec<(usize, IndicatorValues)> = shared
        .par_iter()
        .with_min_len(grain)
        .map(|&period| {
            let mut window = IndicatorValues::for_kernel(Indicator::BollingerBands { period, std: 1.0 }, n);
            if let [mean, dev, _] = window.rows_as_slices().as_mut_slice() {
                cpu::rolling_mean_std(close, period, mean, Some(dev));
            }
            (period, window)
        })
        .collect();
    indicators
        .par_iter()
        .with_min_len(grain)
        .map(|&indicator| {
            let mut values = IndicatorValues::for_kernel(indicator, n);
            let window = window_of(&indicator).and_then(|p| windows.iter().find(|(q, _)| *q == p)).map(|(_, w)| w);
            let from = indicator.lookback();
            match (indicator, values.rows_as_slices().as_mut_slice(), window) {
                (Indicator::BollingerBands { std, .. }, [middle, upper, lower], Some(w)) => {
                    middle[from..].copy_from_slice(&w.output(0)[from..]);
                    lower[from..].copy_from_slice(&w.output(1)[from..]);
                    bands(std, &middle[from..], &mut upper[from..], &mut lower[from..]);
                }
                (Indicator::BollingerBands { period, std }, [middle, upper, lower], None) => {
                    cpu::rolling_mean_std(close, period, middle, Some(lower));
                    bands(std, &middle[from..], &mut upper[from..], &mut lower[from..]);
                }
                (Indicator::StdDev { .. }, [out], Some(w)) => out[from..].copy_from_slice(&w.output(1)[from..]),
                (Indicator::StdDev { period }, [out], None) => {
                    let mut mean = vec![0.0; n];
                    cpu::rolling_mean_std(close, period, &mut mean, Some(out));
                }
                (Indicator::Sma { period }, [out], _) => cpu::rolling_mean_std(close, period, out, None),
                (Indicator::Ema { period }, [out], _) => cpu::ema(close, period, out),
                (Indicator::TrueRange, [out], _) => cpu::true_range(data.high(), data.low(), close, out),
                (Indicator::Atr { period }, [out], _) => cpu::atr(data.high(), data.low(), close, period, out),
                (Indicator::Rsi { period }, [out], _) => cpu::rsi(close, period, out),
                (Indicator::Macd { fast, slow, signal }, [line, sig, hist], _) => {
                    cpu::macd(close, (fast, slow, signal), line, sig, hist);
                }
                _ => unreachable!("{indicator}: output rows do not match its outputs"),
            }
            values
        })
        .collect()
}

/// Turns deviations (given in `lower`) into bands `middle ± std · deviation`.
fn bands(std: f64, middle: &[f64], upper: &mut [f64], lower: &mut [f64]) {
    for ((m, u), l) in middle.iter().zip(upper.iter_mut()).zip(lower.iter_mut()) {
        let width = std * *l;
        *u = m + width;
        *l = m - width;
    }
}
