//! Batched computation: many indicators (typically one family over many parameter sets)
//! in one call, on the CPU (rayon across series), on a GPU (one dispatch per family), or
//! on whichever the dispatcher picks.

use crate::cpu;
use crate::gpu;
use crate::indicator::{Family, Indicator, IndicatorValues};
use crate::ohlcv::Ohlcv;
use crate::IndicatorError;
use ndarray::Axis;
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
pub fn compute_gpu(
    ctx: &GpuContext,
    data: &Ohlcv,
    indicators: &[Indicator],
) -> Result<Vec<IndicatorValues>, GpuError> {
    check_all(data, indicators).map_err(|e| GpuError::Unsupported(e.to_string()))?;
    let mut out: Vec<Option<IndicatorValues>> = vec![None; indicators.len()];
    for (family, members) in by_family(indicators) {
        let batch: Vec<Indicator> = members.iter().map(|&i| indicators[i]).collect();
        for (i, values) in members.into_iter().zip(gpu::compute_family(ctx, data, family, &batch)?) {
            out[i] = Some(values);
        }
    }
    Ok(out.into_iter().flatten().collect())
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
    let mut out: Vec<Option<IndicatorValues>> = vec![None; indicators.len()];
    let mut runs = Vec::new();
    for (family, members) in by_family(indicators) {
        let batch: Vec<Indicator> = members.iter().map(|&i| indicators[i]).collect();
        let params = match batch.as_slice() {
            [one] => one.cost_params(),
            many => json!({ "sets": many.len() }),
        };
        let op = Operation::new(family.op_name(), params, data.len());
        let outcome = dispatcher.run(
            &op,
            || cpu_batch(data, &batch),
            |ctx| gpu::compute_family(ctx, data, family, &batch),
        );
        runs.push(FamilyRun {
            key: op.key().to_owned(),
            sets: batch.len(),
            device: outcome.device,
            elapsed_ms: outcome.elapsed_ms,
        });
        for (i, values) in members.into_iter().zip(outcome.value) {
            out[i] = Some(values);
        }
    }
    Ok((out.into_iter().flatten().collect(), runs))
}

/// Indices of `indicators` per family, families in a fixed order.
fn by_family(indicators: &[Indicator]) -> BTreeMap<Family, Vec<usize>> {
    let mut groups: BTreeMap<Family, Vec<usize>> = BTreeMap::new();
    for (i, indicator) in indicators.iter().enumerate() {
        groups.entry(indicator.family()).or_default().push(i);
    }
    groups
}

/// The CPU batch of checked indicators. Bollinger bands and standard deviations of the
/// same period share one rolling pass.
fn cpu_batch(data: &Ohlcv, indicators: &[Indicator]) -> Vec<IndicatorValues> {
    let n = data.len();
    let mut windows: Vec<usize> = indicators
        .iter()
        .filter(|i| matches!(i, Indicator::BollingerBands { .. } | Indicator::StdDev { .. }))
        .map(|i| i.lookback() + 1)
        .collect();
    windows.sort_unstable();
    windows.dedup();
    let close = data.close();
    let rolled: Vec<(usize, IndicatorValues)> = windows
        .par_iter()
        .map(|&period| {
            let mut v = IndicatorValues::nan(Indicator::BollingerBands { period, std: 1.0 }, n);
            let mut rows = v.rows_mut().axis_iter_mut(Axis(0));
            if let (Some(mut mean), Some(mut std)) = (rows.next(), rows.next()) {
                if let (Some(mean), Some(std)) = (mean.as_slice_mut(), std.as_slice_mut()) {
                    cpu::rolling_mean_std(close, period, mean, Some(std));
                }
            }
            (period, v)
        })
        .collect();
    let window = |period: usize| rolled.iter().find(|(p, _)| *p == period).map(|(_, v)| v);
    indicators
        .par_iter()
        .map(|&indicator| {
            let mut values = IndicatorValues::nan(indicator, n);
            let rows = values.rows_mut();
            let from = indicator.lookback();
            match indicator {
                Indicator::BollingerBands { period, std } => {
                    if let Some(w) = window(period) {
                        let (mean, dev) = (w.output(0), w.output(1));
                        for t in from..n {
                            rows[[0, t]] = mean[t];
                            rows[[1, t]] = mean[t] + std * dev[t];
                            rows[[2, t]] = mean[t] - std * dev[t];
                        }
                    }
                }
                Indicator::StdDev { period } => {
                    if let Some(w) = window(period) {
                        rows.row_mut(0).assign(&w.rows().row(1));
                    }
                }
                _ => {
                    let slices: Vec<&mut [f64]> =
                        rows.as_slice_mut().map(|all| all.chunks_mut(n).collect()).unwrap_or_default();
                    run_one(data, indicator, slices);
                }
            }
            values
        })
        .collect()
}

/// One single-pass indicator into its output rows.
fn run_one(data: &Ohlcv, indicator: Indicator, mut rows: Vec<&mut [f64]>) {
    let close = data.close();
    match (indicator, rows.as_mut_slice()) {
        (Indicator::Sma { period }, [out]) => cpu::rolling_mean_std(close, period, out, None),
        (Indicator::Ema { period }, [out]) => cpu::ema(close, period, out),
        (Indicator::TrueRange, [out]) => cpu::true_range(data.high(), data.low(), close, out),
        (Indicator::Atr { period }, [out]) => cpu::atr(data.high(), data.low(), close, period, out),
        (Indicator::Rsi { period }, [out]) => cpu::rsi(close, period, out),
        (Indicator::Macd { fast, slow, signal }, [line, sig, hist]) => {
            cpu::macd(close, (fast, slow, signal), line, sig, hist);
        }
        _ => {}
    }
}
