//! Simple moving average.

use crate::{IndicatorError, check_period};
use threadx_dispatch::{Dispatcher, GpuContext, GpuError, Kernel, Operation, Outcome};

/// The WGSL kernel of the SMA.
pub const SMA_KERNEL: Kernel =
    Kernel { name: "sma", source: include_str!("../../../kernels-wgsl/sma.wgsl"), entry: "sma" };

const WORKGROUP: usize = 256;

/// SMA as TA-Lib computes it: NaN for the first `period - 1` bars, then the mean of the
/// last `period` values, kept as a running sum (O(n)).
pub fn sma(prices: &[f64], period: usize) -> Result<Vec<f64>, IndicatorError> {
    check_period("sma", period, prices.len())?;
    Ok(sma_checked(prices, period))
}

/// [`sma`] once `period` is known to be in `1..=prices.len()`.
fn sma_checked(prices: &[f64], period: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; prices.len()];
    let p = period as f64;
    let mut sum: f64 = prices[..period].iter().sum();
    out[period - 1] = sum / p;
    for i in period..prices.len() {
        sum += prices[i] - prices[i - period];
        out[i] = sum / p;
    }
    out
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct SmaParams {
    n: u32,
    period: u32,
    pad: [u32; 2],
}

/// Workgroup grid covering `items` invocations: x up to the adapter's limit, then rows.
fn grid(ctx: &GpuContext, items: usize) -> [u32; 3] {
    let groups = items.div_ceil(WORKGROUP).max(1);
    let max_x = ctx.limits().max_compute_workgroups_per_dimension as usize;
    let x = groups.min(max_x);
    [x as u32, groups.div_ceil(x) as u32, 1]
}

/// SMA on the GPU (f32, prices centred on the first price). Same output as [`sma`].
pub fn sma_gpu(ctx: &GpuContext, prices: &[f64], period: usize) -> Result<Vec<f64>, GpuError> {
    check_period("sma", period, prices.len()).map_err(|e| GpuError::Unsupported(e.to_string()))?;
    let n = u32::try_from(prices.len())
        .map_err(|_| GpuError::Unsupported(format!("{} prices exceed the u32 index range", prices.len())))?;
    let reference = prices[0];
    let centred: Vec<f32> = prices.iter().map(|&x| (x - reference) as f32).collect();
    let outputs = prices.len() - period + 1;
    let input = ctx.storage_buffer("sma prices", &centred)?;
    let output = ctx.output_buffer::<f32>("sma out", outputs)?;
    let params = ctx.uniform_buffer("sma params", &SmaParams { n, period: period as u32, pad: [0; 2] })?;
    ctx.dispatch(&SMA_KERNEL, &[&input, &output, &params], grid(ctx, outputs))?;
    let means: Vec<f32> = ctx.read_back(&output, outputs)?;
    let mut out = vec![f64::NAN; period - 1];
    out.extend(means.into_iter().map(|m| reference + f64::from(m)));
    Ok(out)
}

/// SMA on the device the dispatcher chooses, keyed `sma:{"period":P,"size":N}`.
pub fn sma_dispatched(
    dispatcher: &Dispatcher,
    prices: &[f64],
    period: usize,
) -> Result<Outcome<Vec<f64>>, IndicatorError> {
    check_period("sma", period, prices.len())?;
    let op = Operation::new("sma", serde_json::json!({ "period": period }), prices.len());
    Ok(dispatcher.run(&op, || sma_checked(prices, period), |ctx| sma_gpu(ctx, prices, period)))
}
