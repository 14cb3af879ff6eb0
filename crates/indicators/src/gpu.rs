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

/// A kernel file with the shared definitions in front (WGSL has no include).
macro_rules! source {
    ($file:literal) => {
        concat!(
            include_str!("../../../kernels-wgsl/indicators_common.wgsl"),
            include_str!(concat!("../../../kernels-wgsl/", $file))
        )
    };
}

/// An indicator kernel and the shape of its work: parameter words per set, output
/// blocks, and what one invocation computes.
struct IndicatorKernel {
    kernel: Kernel,
    /// Parameter words per set; 0: one set with none.
    per_set: usize,
    /// Output blocks, each `sets × bars` values.
    blocks: usize,
    grain: Grain,
}

/// `name` of `file`, its entry point of the same name.
macro_rules! kernel {
    ($name:literal, $file:literal, $per_set:expr, $blocks:expr, $grain:expr) => {
        IndicatorKernel {
            kernel: Kernel { name: $name, source: source!($file), entry: $name },
            per_set: $per_set,
            blocks: $blocks,
            grain: $grain,
        }
    };
}

const ROLLING: IndicatorKernel = kernel!("rolling_mean_std", "rolling.wgsl", 1, 2, Grain::PerBar);
const EMA: IndicatorKernel = kernel!("ema", "smoothing.wgsl", 1, 1, Grain::PerSet);
const RSI: IndicatorKernel = kernel!("rsi", "smoothing.wgsl", 1, 1, Grain::PerSet);
const MACD: IndicatorKernel = kernel!("macd", "smoothing.wgsl", 3, 3, Grain::PerSet);
const TRUE_RANGE: IndicatorKernel = kernel!("true_range", "range.wgsl", 0, 1, Grain::PerBar);
const ATR: IndicatorKernel = kernel!("atr", "range.wgsl", 1, 1, Grain::PerSet);

/// Every kernel of this crate, for tests that compile them all.
pub const KERNELS: [Kernel; 6] = [ROLLING.kernel, EMA.kernel, RSI.kernel, MACD.kernel, TRUE_RANGE.kernel, ATR.kernel];

/// What a kernel's invocations each compute: one (set, bar), or a whole set's bars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grain {
    PerBar,
    PerSet,
}

/// One batched kernel launch: the kernel, what it reads, and its parameter sets.
struct Launch<'a> {
    kernel: &'a IndicatorKernel,
    inputs: &'a [&'a wgpu::Buffer],
    bars: u32,
    /// Parameter words, the kernel's `per_set` per set.
    sets: &'a [u32],
}

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
    if !family.has_gpu_kernel() {
        return Err(GpuError::Unsupported(format!("{} has no GPU kernel; the CPU computes it", family.op_name())));
    }
    let n = data.len();
    let n32 = u32::try_from(n).map_err(|_| GpuError::Unsupported(format!("{n} bars exceed the GPU's u32 indices")))?;
    let steps = loop_steps(family, indicators, n);
    let most = ctx.max_loop_steps();
    if steps > u64::from(most) {
        return Err(GpuError::Unsupported(format!(
            "{} on {n} bars loops {steps} times in one invocation, more than the {most} a dispatch may on {}",
            family.op_name(),
            ctx.report().label()
        )));
    }
    let reference = data.close()[0];
    let close = ctx.storage_buffer("close", &f32_pairs(data.close(), reference))?;
    let out = match family {
        Family::Sma | Family::StdDev | Family::BollingerBands => {
            // One window pass per distinct period; band widths are applied on the host.
            let mut periods: Vec<u32> = indicators.iter().map(|i| i.lookback() as u32 + 1).collect();
            periods.sort_unstable();
            periods.dedup();
            let rows = run_batched(ctx, &Launch { kernel: &ROLLING, inputs: &[&close], bars: n32, sets: &periods })?;
            let close = data.close();
            let values = |&indicator: &Indicator| {
                let period = indicator.lookback() + 1;
                let set = periods.iter().position(|&p| p as usize == period).unwrap_or_default();
                let (offsets, devs) = (&rows[0][set * n..][..n], &rows[1][set * n..][..n]);
                IndicatorValues::build(indicator, n, |out| {
                    for t in period - 1..n {
                        let mean = close[t + 1 - period] + f64::from(offsets[t]);
                        let dev = f64::from(devs[t]);
                        match (indicator, &mut *out) {
                            (Indicator::BollingerBands { std, .. }, [middle, upper, lower]) => {
                                middle[t].write(mean);
                                upper[t].write(mean + std * dev);
                                lower[t].write(mean - std * dev);
                            }
                            (Indicator::StdDev { .. }, [row]) => {
                                row[t].write(dev);
                            }
                            (Indicator::Sma { .. }, [row]) => {
                                row[t].write(mean);
                            }
                            _ => unreachable!("{indicator}: output rows do not match its outputs"),
                        }
                    }
                })
            };
            indicators.iter().map(values).collect()
        }
        Family::Ema => {
            let periods: Vec<u32> = indicators.iter().map(|i| i.lookback() as u32 + 1).collect();
            let rows = run_batched(ctx, &Launch { kernel: &EMA, inputs: &[&close], bars: n32, sets: &periods })?;
            let close = data.close();
            let values = |(set, &indicator): (usize, &Indicator)| {
                let offsets = &rows[0][set * n..][..n];
                IndicatorValues::build(indicator, n, |out| {
                    for t in indicator.lookback()..n {
                        out[0][t].write(close[t] - f64::from(offsets[t]));
                    }
                })
            };
            indicators.iter().enumerate().map(values).collect()
        }
        Family::Rsi => {
            let periods: Vec<u32> = indicators.iter().map(|i| i.lookback() as u32).collect();
            let rows = run_batched(ctx, &Launch { kernel: &RSI, inputs: &[&close], bars: n32, sets: &periods })?;
            from_blocks(indicators, &rows, n, |set| set)
        }
        Family::Macd => {
            let periods: Vec<u32> = indicators
                .iter()
                .flat_map(|i| match *i {
                    Indicator::Macd { fast, slow, signal } => [fast as u32, slow as u32, signal as u32],
                    _ => [0; 3],
                })
                .collect();
            let rows = run_batched(ctx, &Launch { kernel: &MACD, inputs: &[&close], bars: n32, sets: &periods })?;
            from_blocks(indicators, &rows, n, |set| set)
        }
        Family::TrueRange | Family::Atr => {
            let high = ctx.storage_buffer("high", &f32_pairs(data.high(), reference))?;
            let low = ctx.storage_buffer("low", &f32_pairs(data.low(), reference))?;
            let inputs = [&high, &low, &close];
            if family == Family::TrueRange {
                let rows = run_batched(ctx, &Launch { kernel: &TRUE_RANGE, inputs: &inputs, bars: n32, sets: &[] })?;
                // Every true range of the batch is the same series.
                from_blocks(indicators, &rows, n, |_| 0)
            } else {
                let periods: Vec<u32> = indicators.iter().map(|i| i.lookback() as u32).collect();
                let rows = run_batched(ctx, &Launch { kernel: &ATR, inputs: &inputs, bars: n32, sets: &periods })?;
                from_blocks(indicators, &rows, n, |set| set)
            }
        }
        Family::Cci | Family::Obv | Family::Adx | Family::PlusDi | Family::MinusDi | Family::Vwap => {
            unreachable!("declined above: no GPU kernel")
        }
    };
    Ok(out)
}

/// The most loop iterations one invocation of `family`'s kernel runs on `n` bars (see
/// the kernels): a window walk per bar, or a walk of every bar per parameter set.
fn loop_steps(family: Family, indicators: &[Indicator], n: usize) -> u64 {
    let longest = |f: fn(&Indicator) -> usize| indicators.iter().map(f).max().unwrap_or(0) as u64;
    match family {
        Family::Sma | Family::StdDev | Family::BollingerBands => 2 * (longest(Indicator::lookback) + 1),
        Family::TrueRange => 0,
        Family::Ema | Family::Rsi | Family::Atr => n as u64,
        Family::Macd => n as u64 + 2 * longest(Indicator::lookback),
        Family::Cci | Family::Obv | Family::Adx | Family::PlusDi | Family::MinusDi | Family::Vwap => 0,
    }
}

/// The values of each indicator from the kernel's output blocks: output `b` of
/// `indicators[i]` is block `b` of set `set_of(i)`, from the warm-up on.
fn from_blocks(
    indicators: &[Indicator],
    blocks: &[Vec<f32>],
    n: usize,
    set_of: impl Fn(usize) -> usize,
) -> Vec<IndicatorValues> {
    let values = |(i, &indicator): (usize, &Indicator)| {
        IndicatorValues::build(indicator, n, |out| {
            let from = indicator.lookback();
            for (row, block) in out.iter_mut().zip(blocks) {
                let src = &block[set_of(i) * n..][..n];
                for (slot, &v) in row[from..].iter_mut().zip(&src[from..]) {
                    slot.write(f64::from(v));
                }
            }
        })
    };
    indicators.iter().enumerate().map(values).collect()
}

/// Runs a launch's kernel over its parameter sets in as few dispatches as the adapter's
/// binding size allows, and returns its output blocks, each `sets × bars` long.
fn run_batched(ctx: &GpuContext, launch: &Launch<'_>) -> Result<Vec<Vec<f32>>, GpuError> {
    let Launch { kernel, inputs, bars: n, sets: sets_data } = *launch;
    let IndicatorKernel { ref kernel, per_set, blocks, grain } = *kernel;
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
        let invocations = match grain {
            Grain::PerBar => count as u64 * u64::from(n),
            Grain::PerSet => count as u64,
        };
        ctx.dispatch(kernel, &bindings, ctx.grid(kernel, invocations)?)?;
        let data = ctx.read_back::<f32>(&output, len)?;
        for (b, block) in out.iter_mut().enumerate() {
            block.extend_from_slice(&data[b * count * n_us..][..count * n_us]);
        }
        done += count;
    }
    Ok(out)
}

#[cfg(test)]
mod layout {
    //! The host's `Params` is every indicator kernel's: laid out alike, byte for byte.
    use super::*;
    use std::mem::{offset_of, size_of};
    use threadx_dispatch::ShaderInfo;

    #[test]
    fn params_match_every_indicator_kernel() {
        let host = (
            size_of::<Params>() as u32,
            vec![
                ("n".to_owned(), offset_of!(Params, n) as u32),
                ("sets".to_owned(), offset_of!(Params, sets) as u32),
                ("pad".to_owned(), offset_of!(Params, pad) as u32),
            ],
        );
        for kernel in KERNELS {
            let shader = ShaderInfo::parse(kernel.source).unwrap_or_else(|e| panic!("{}: {e}", kernel.name));
            assert_eq!(shader.struct_layout("Params"), Some(host.clone()), "{}", kernel.name);
        }
    }
}
