//! The whole-backtest WGSL kernel's host side: the signal book is uploaded once per
//! [`GpuBacktester`], then each call uploads only the combos' plans and reads back only
//! their totals. Calls are cut into dispatches that fit the adapter's binding, grid and
//! per-dispatch work limits; all are submitted before the first read-back, so the upload
//! of one piece overlaps the compute of the previous one.

use crate::book::{ComboPlan, SignalBook};
use crate::metrics::Metrics;
use crate::simulate::sharpe;
use std::sync::Arc;
use threadx_dispatch::{GpuContext, GpuError, Kernel, wgpu};

pub(crate) const BACKTEST: Kernel =
    Kernel { name: "backtest", source: include_str!("../../../kernels-wgsl/backtest.wgsl"), entry: "backtest" };

const WORKGROUP: u32 = 64;

/// Bar·combos per dispatch at most, so that no single dispatch runs for long (drivers
/// reset a GPU that does not answer for a couple of seconds).
const MAX_WORK_PER_DISPATCH: u64 = 1 << 31;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    bars: u32,
    words: u32,
    combos: u32,
    first: u32,
    buy: f32,
    sell: f32,
    c0: f32,
    pad: u32,
}

/// What the kernel writes per combo (see backtest.wgsl's `Outcome`).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Outcome {
    total_return: f32,
    trades: u32,
    closed: u32,
    wins: u32,
    max_drawdown: f32,
    sum: f32,
    sum_sq: f32,
    held: u32,
}

/// A signal book resident on one GPU, ready to run any of its combos.
pub struct GpuBacktester {
    ctx: Arc<GpuContext>,
    bars: u32,
    words: u32,
    c0: f32,
    /// close, ret, entry bits, exit bits, stop levels.
    shared: [wgpu::Buffer; 5],
}

impl std::fmt::Debug for GpuBacktester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBacktester").field("adapter", &self.ctx.report().label()).field("bars", &self.bars).finish()
    }
}

/// `x − reference` as an f32 pair whose sum is the f64 difference to about 1e-14.
fn split(x: &[f64], reference: f64) -> Vec<[f32; 2]> {
    x.iter()
        .map(|&v| {
            let d = v - reference;
            let hi = d as f32;
            [hi, (d - f64::from(hi)) as f32]
        })
        .collect()
}

impl GpuBacktester {
    /// Uploads `book` to `ctx` (the only upload of shared data).
    pub fn new(ctx: Arc<GpuContext>, book: &SignalBook) -> Result<Self, GpuError> {
        let bars = u32::try_from(book.bars())
            .map_err(|_| GpuError::Unsupported(format!("{} bars exceed the GPU's u32 indices", book.bars())))?;
        let reference = book.close()[0];
        let ret: Vec<f32> = book.ret().iter().map(|&r| r as f32).collect();
        let shared = [
            ctx.storage_buffer("close", &split(book.close(), reference))?,
            ctx.storage_buffer("ret", &ret)?,
            ctx.storage_buffer::<u32>("entry bits", bytemuck::cast_slice(book.entry_rows()))?,
            ctx.storage_buffer::<u32>("exit bits", bytemuck::cast_slice(book.exit_rows()))?,
            ctx.storage_buffer("stop levels", &split(book.stop_rows(), reference))?,
        ];
        ctx.pipeline(&BACKTEST)?;
        Ok(Self { ctx, bars, words: (book.words() * 2) as u32, c0: reference as f32, shared })
    }

    /// Metrics of every plan, in order (f32 on the GPU; counts exact).
    pub fn run(&self, plans: &[ComboPlan], fee: f64) -> Result<Vec<Metrics>, GpuError> {
        let ctx = &self.ctx;
        let max_binding = ctx.max_binding_bytes();
        let per_piece = (max_binding / std::mem::size_of::<Outcome>() as u64).max(1) as usize;
        let per_dispatch = (MAX_WORK_PER_DISPATCH / u64::from(self.bars.max(1))).clamp(1, u64::from(u32::MAX)) as usize;
        let mut pending = Vec::new();
        for piece in plans.chunks(per_piece) {
            let plan_buffer = ctx.storage_buffer("plans", piece)?;
            let out = ctx.output_buffer::<Outcome>("outcomes", piece.len())?;
            for first in (0..piece.len()).step_by(per_dispatch) {
                let combos = per_dispatch.min(piece.len() - first);
                let params = Params {
                    bars: self.bars,
                    words: self.words,
                    combos: combos as u32,
                    first: first as u32,
                    buy: (1.0 + fee) as f32,
                    sell: (1.0 - fee) as f32,
                    c0: self.c0,
                    pad: 0,
                };
                let uniform = ctx.uniform_buffer("params", &params)?;
                let [a, b, c, d, e] = &self.shared;
                ctx.dispatch(
                    &BACKTEST,
                    &[a, b, c, d, e, &plan_buffer, &out, &uniform],
                    ctx.grid(combos as u64, WORKGROUP)?,
                )?;
            }
            pending.push((out, piece.len()));
        }
        let mut metrics = Vec::with_capacity(plans.len());
        for (out, len) in pending {
            let outcomes: Vec<Outcome> = ctx.read_back(&out, len)?;
            metrics.extend(outcomes.iter().map(|o| self.metrics(o)));
        }
        Ok(metrics)
    }

    fn metrics(&self, o: &Outcome) -> Metrics {
        let n = self.bars as usize;
        Metrics {
            total_return: o.total_return.into(),
            trades: o.trades,
            closed_trades: o.closed,
            win_rate: if o.closed > 0 { f64::from(o.wins) / f64::from(o.closed) } else { f64::NAN },
            max_drawdown: o.max_drawdown.into(),
            sharpe: sharpe(o.sum.into(), o.sum_sq.into(), n),
            exposure: f64::from(o.held) / n as f64,
        }
    }
}

/// The kernel of this crate, for tests that compile it on every adapter.
pub const KERNELS: [Kernel; 1] = [BACKTEST];
