//! The WGSL twins (f32): one dispatch per family and batch, cut only where a batch's
//! output would not fit one storage binding of the adapter.
//!
//! Every price series goes up as (hi, lo) f32 pairs of `price − close[0]` computed in
//! f64, and kernels return small quantities (offsets, ranges, oscillators) to which the
//! host adds the price level back in f64: that keeps f32's relative precision on the
//! moves, not on the 60,000 of the price (see the comments of each kernel).

use crate::indicator::{Family, Indicator, IndicatorValues};
use crate::ohlcv::Ohlcv;
use threadx_dispatch::{GpuContext, GpuError, Kernel, f32_pairs, wgpu};

const ROLLING: Kernel = Kernel {
    name: "rolling_mean_std",
    source: include_str!("../../../kernels-wgsl/rolling.wgsl"),
    entry: "rolling_mean_std",
};
const EMA: Kernel = Kernel { name: "ema", source: include_str!("../../../kernels-wgsl/smoothing.wgsl"), entry: "ema" };
const RSI: Kernel = Kernel { name: "rsi", source: include_str!("../../../kernels-wgsl/smoothing.wgsl"), entry: "rsi" };
const MACD: Kernel =
    Kernel { name: "macd", source: include_str!("../../../kernels-wgsl/smoothing.wgsl"), entry: "macd" };
const TRUE_RANGE: Kernel =
    Kernel { name: "true_range", source: include_str!("../../../kernels-wgsl/range.wgsl"), entry: "true_range" };
const ATR: Kernel = Kernel { name: "atr", source: include_str!("../../../kernels-wgsl/range.wgsl"), entry: "atr" };

/// Every kernel of this crate, for tests that compile them all.
pub const KERNELS: [Kernel; 6] = [ROLLING, EMA, RSI, MACD, TRUE_RANGE, ATR];

/// Workgroup sizes of the per-bar and the per-set entry points.
const PER_BAR_WORKGROUP: u32 = 256;
const PER_SET_WORKGROUP: u32 = 64;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    n: u32,
    sets: u32,
    pad: [u32; 2],
}

/// Computes `indicators` (all of one family, checked against the data) on `ctx`.
pub(crate) fn compute_family(
    ctx: &GpuContext,
    data: &Ohlcv,
    family: Family,
    indicators: &[Indicator],
) -> Result<Vec<IndicatorValues>, GpuError> {
    let n = data.len();
    let n32 = u32::try_from(n).map_err(|_| GpuError::Unsupported(format!("{n} bars exceed the GPU's u32 indices")))?;
    let reference = data.close()[0];
    let close = ctx.storage_buffer("close", &f32_pairs(data.close(), reference))?;
    let mut out: Vec<IndicatorValues> = indicators.iter().map(|&i| IndicatorValues::for_kernel(i, n)).collect();
    match family {
        Family::Sma | Family::StdDev | Family::BollingerBands => {
            // One window pass per distinct period; band widths are applied on the host.
            let mut periods: Vec<u32> = indicators.iter().map(|i| i.lookback() as u32 + 1).collect();
            periods.sort_unstable();
            periods.dedup();
            let rows = run_batched(ctx, &ROLLING, &[&close], n32, &periods, 1, 2, PER_BAR_WORKGROUP, true)?;
            let close = data.close();
            for values in &mut out {
                let period = values.indicator().lookback() + 1;
                let set = periods.iter().position(|&p| p as usize == period).unwrap_or_default();
                let (offsets, devs) = (&rows[0][set * n..][..n], &rows[1][set * n..][..n]);
                let indicator = *values.indicator();
                let rows_out = values.rows_mut();
                for t in period - 1..n {
                    let mean = close[t + 1 - period] + f64::from(offsets[t]);
                    let dev = f64::from(devs[t]);
                    match indicator {
                        Indicator::StdDev { .. } => rows_out[[0, t]] = dev,
                        Indicator::BollingerBands { std, .. } => {
                            rows_out[[0, t]] = mean;
                            rows_out[[1, t]] = mean + std * dev;
                            rows_out[[2, t]] = mean - std * dev;
                        }
                        _ => rows_out[[0, t]] = mean,
                    }
                }
            }
        }
        Family::Ema => {
            let periods: Vec<u32> = indicators.iter().map(|i| i.lookback() as u32 + 1).collect();
            let rows = run_batched(ctx, &EMA, &[&close], n32, &periods, 1, 1, PER_SET_WORKGROUP, false)?;
            let close = data.close();
            for (set, values) in out.iter_mut().enumerate() {
                let from = values.indicator().lookback();
                let offsets = &rows[0][set * n..][..n];
                let row = values.rows_mut();
                for t in from..n {
                    row[[0, t]] = close[t] - f64::from(offsets[t]);
                }
            }
        }
        Family::Rsi => {
            let periods: Vec<u32> = indicators.iter().map(|i| i.lookback() as u32).collect();
            let rows = run_batched(ctx, &RSI, &[&close], n32, &periods, 1, 1, PER_SET_WORKGROUP, false)?;
            copy_rows(&mut out, &rows, n);
        }
        Family::Macd => {
            let periods: Vec<u32> = indicators
                .iter()
                .flat_map(|i| match *i {
                    Indicator::Macd { fast, slow, signal } => [fast as u32, slow as u32, signal as u32],
                    _ => [0; 3],
                })
                .collect();
            let rows = run_batched(ctx, &MACD, &[&close], n32, &periods, 3, 3, PER_SET_WORKGROUP, false)?;
            copy_rows(&mut out, &rows, n);
        }
        Family::TrueRange | Family::Atr => {
            let high = ctx.storage_buffer("high", &f32_pairs(data.high(), reference))?;
            let low = ctx.storage_buffer("low", &f32_pairs(data.low(), reference))?;
            let inputs = [&high, &low, &close];
            if family == Family::TrueRange {
                let rows = run_batched(ctx, &TRUE_RANGE, &inputs, n32, &[], 0, 1, PER_BAR_WORKGROUP, true)?;
                // Every true range of the batch is the same series.
                for values in &mut out {
                    copy_rows(std::slice::from_mut(values), &rows, n);
                }
            } else {
                let periods: Vec<u32> = indicators.iter().map(|i| i.lookback() as u32).collect();
                let rows = run_batched(ctx, &ATR, &inputs, n32, &periods, 1, 1, PER_SET_WORKGROUP, false)?;
                copy_rows(&mut out, &rows, n);
            }
        }
    }
    Ok(out)
}

/// Copies set `s`'s output block `b` (bars from the warm-up on) into row `b` of `out[s]`.
fn copy_rows(out: &mut [IndicatorValues], blocks: &[Vec<f32>], n: usize) {
    for (set, values) in out.iter_mut().enumerate() {
        let from = values.indicator().lookback();
        let rows = values.rows_mut();
        for (b, block) in blocks.iter().enumerate() {
            let src = &block[set * n..][..n];
            for t in from..n {
                rows[[b, t]] = f64::from(src[t]);
            }
        }
    }
}

/// Runs `kernel` over the parameter sets in `per_set`-word groups (none: one set), in as
/// few dispatches as the adapter's binding size allows, and returns `blocks` output
/// blocks, each `sets × n` long. `per_bar`: one invocation per (set, bar), else per set.
#[allow(clippy::too_many_arguments)]
fn run_batched(
    ctx: &GpuContext,
    kernel: &Kernel,
    inputs: &[&wgpu::Buffer],
    n: u32,
    sets_data: &[u32],
    per_set: usize,
    blocks: usize,
    workgroup: u32,
    per_bar: bool,
) -> Result<Vec<Vec<f32>>, GpuError> {
    let sets = sets_data.len().checked_div(per_set).unwrap_or(1);
    let bytes_per_set = blocks as u64 * u64::from(n) * 4;
    let fit = (ctx.max_binding_bytes() / bytes_per_set.max(1)) as usize;
    if fit == 0 {
        return Err(GpuError::TooLarge {
            what: format!("{} output for {n} bars", kernel.name),
            needed: bytes_per_set,
            limit: ctx.max_binding_bytes(),
        });
    }
    let n_us = n as usize;
    let mut out: Vec<Vec<f32>> = (0..blocks).map(|_| Vec::with_capacity(sets * n_us)).collect();
    let mut done = 0;
    while done < sets {
        let count = fit.min(sets - done);
        let chunk_sets =
            if per_set == 0 { vec![0u32] } else { sets_data[done * per_set..][..count * per_set].to_vec() };
        let periods = ctx.storage_buffer("periods", &chunk_sets)?;
        let len = blocks * count * n_us;
        let output = ctx.output_buffer::<f32>("indicator out", len)?;
        let params = ctx.uniform_buffer("params", &Params { n, sets: count as u32, pad: [0; 2] })?;
        let mut bindings: Vec<&wgpu::Buffer> = inputs.to_vec();
        bindings.push(&output);
        bindings.push(&params);
        if per_set > 0 {
            bindings.push(&periods);
        }
        let invocations = if per_bar { count as u64 * u64::from(n) } else { count as u64 };
        ctx.dispatch(kernel, &bindings, ctx.grid(invocations, workgroup)?)?;
        let data = ctx.read_back::<f32>(&output, len)?;
        for (b, block) in out.iter_mut().enumerate() {
            block.extend_from_slice(&data[b * count * n_us..][..count * n_us]);
        }
        done += count;
    }
    Ok(out)
}
