//! The whole-backtest WGSL kernel's host side: the signal book is uploaded once per
//! [`GpuBacktester`], then each call uploads only the combos' plans and reads back only
//! their totals. Calls are cut into dispatches that fit the adapter's binding, grid and
//! per-dispatch work limits; all are submitted before the first read-back, so the upload
//! of one piece overlaps the compute of the previous one.

use crate::book::{ComboPlan, SignalBook};
use crate::metrics::Metrics;
use crate::simulate::sharpe;
use std::sync::Arc;
use threadx_dispatch::{GpuContext, GpuError, Kernel, f32_pairs, wgpu};

pub(crate) const BACKTEST: Kernel =
    Kernel { name: "backtest", source: include_str!("../../../kernels-wgsl/backtest.wgsl"), entry: "backtest" };

const WORKGROUP: u32 = 64;

/// Bar·combos per dispatch at most, so that no single dispatch runs for long (drivers
/// reset a GPU that does not answer for a couple of seconds).
/// Resolution of the fixed-point log closes: 2^40 (log prices up to ±2^23 fit in i64).
const LOG_SCALE: f64 = (1u64 << 40) as f64;

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
    log_lo: u32,
    log_hi: u32,
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
    /// close, per-bar values, entry bits, exit bits, stop levels.
    shared: [wgpu::Buffer; 5],
}

impl std::fmt::Debug for GpuBacktester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBacktester").field("adapter", &self.ctx.report().label()).field("bars", &self.bars).finish()
    }
}

impl GpuBacktester {
    /// Uploads `book` to `ctx` (the only upload of shared data).
    pub fn new(ctx: Arc<GpuContext>, book: &SignalBook) -> Result<Self, GpuError> {
        let bars = u32::try_from(book.bars())
            .map_err(|_| GpuError::Unsupported(format!("{} bars exceed the GPU's u32 indices", book.bars())))?;
        let reference = book.close()[0];
        // Per bar: the return as f32 bits and log(close) in 64-bit fixed point.
        let bar: Vec<[u32; 4]> = book
            .ret()
            .iter()
            .zip(book.close())
            .map(|(&r, &c)| {
                let fixed = (c.ln() * LOG_SCALE).round() as i64 as u64;
                [(r as f32).to_bits(), fixed as u32, (fixed >> 32) as u32, 0]
            })
            .collect();
        // WGSL arrays cannot be empty: a book without stops gets one unused level.
        let stops = if book.stop_rows().is_empty() { &[f64::NEG_INFINITY][..] } else { book.stop_rows() };
        let shared = [
            ctx.storage_buffer("close", &f32_pairs(book.close(), reference))?,
            ctx.storage_buffer("bars", &bar)?,
            ctx.storage_buffer::<u32>("entry bits", bytemuck::cast_slice(book.entry_rows()))?,
            ctx.storage_buffer::<u32>("exit bits", bytemuck::cast_slice(book.exit_rows()))?,
            ctx.storage_buffer("stop levels", &f32_pairs(stops, reference))?,
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
            metrics.extend(outcomes.iter().map(|o| self.metrics(o, fee)));
        }
        Ok(metrics)
    }

    fn metrics(&self, o: &Outcome, fee: f64) -> Metrics {
        let n = self.bars as usize;
        let log_growth = ((u64::from(o.log_hi) << 32) | u64::from(o.log_lo)) as i64 as f64 / LOG_SCALE;
        // Every entry pays (1 + fee), every closed trade (1 − fee), as on the CPU.
        let fees = (1.0 - fee).powi(o.closed as i32) / (1.0 + fee).powi(o.trades as i32);
        Metrics {
            total_return: log_growth.exp() * fees - 1.0,
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
