//! The backtest kernels' host side: the signal book and its [`BarTables`] are uploaded
//! once per [`GpuBacktester`], then each call uploads only the combos' plans and reads
//! back only their integer [`Totals`] — the CPU's bits, turned into metrics by the same
//! host function. A plain book ([`SignalBook::is_plain`]) runs the whole-backtest kernel
//! (backtest.wgsl); any other, the market kernel (market.wgsl, [`crate::gpu_market`]).
//! Calls are cut into dispatches that fit the adapter's binding, grid and per-dispatch
//! work limits, and the bars into stretches of at most
//! [`GpuContext::max_loop_steps`] (fewer when many combos share a dispatch), run one after another with each combo's state kept on the device;
//! all are submitted before the first read-back, so the upload of one piece overlaps the
//! compute of the previous one.

use crate::bar_tables::BarTables;
use crate::blocks::BlockCuts;
use crate::book::{ComboPlan, SignalBook};
use crate::fixed::Totals;
use crate::gpu_market::{self, MARKET, MarketRun};
use crate::gpu_sums::RunSums;
use crate::gpu_tables::{KernelTables, i64_words, u128_of, u128_words};
use crate::simulate::BatchTotals;
use rayon::prelude::*;
use std::sync::Arc;
use threadx_dispatch::{Dispatch, GpuContext, GpuError, Kernel, PendingRead, wgpu};

pub(crate) const BACKTEST: Kernel = Kernel {
    name: "backtest",
    source: concat!(
        include_str!("../../../kernels-wgsl/exact.wgsl"),
        include_str!("../../../kernels-wgsl/backtest_common.wgsl"),
        include_str!("../../../kernels-wgsl/backtest.wgsl")
    ),
    entry: "backtest",
};

/// Bar·combos per dispatch at most, so that no single dispatch runs for long (drivers
/// reset a GPU that does not answer for a couple of seconds).
const MAX_WORK_PER_DISPATCH: u64 = 1 << 31;

/// The same for the market kernel, whose bar costs tens of times a plain bar (its f64
/// arithmetic is done in integers).
const MAX_MARKET_WORK_PER_DISPATCH: u64 = 1 << 26;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    bars: u32,
    words: u32,
    combos: u32,
    first: u32,
    exit_rows: u32,
    until: u32,
    log_buy: [u32; 2],
    log_sell: [u32; 2],
    start: u32,
    blocks: u32,
    entry_ret: [u32; 4],
    entry_ret_sq: [u32; 4],
    block_first: u32,
    block_len: u32,
    log_sell_stop: [u32; 2],
    stop_sums: u32,
    fills: u32,
    buy_factor: [u32; 2],
    sell_factor: [u32; 2],
    fee_up: [u32; 2],
    fee_down: [u32; 2],
    slip_down: [u32; 2],
    gain_at: u32,
    gain_at_level: u32,
    /// WGSL rounds a uniform struct up to 16 bytes.
    pad: [u32; 2],
}

/// A combo's run on the device (backtest.wgsl's `Run`): its totals, then the state the
/// kernel carries from one stretch of bars to the next, which the host never reads.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Run {
    log_equity: [u32; 2],
    drawdown: [u32; 2],
    sums: RunSums,
    state: [u32; 16],
}

impl Run {
    const WORDS: usize = std::mem::size_of::<Run>() / 4;

    fn totals(&self) -> Totals {
        let i64_of = |w: [u32; 2]| (u64::from(w[0]) | u64::from(w[1]) << 32) as i64;
        self.sums.totals(i64_of(self.log_equity), i64_of(self.drawdown))
    }
}

/// A signal book and its tables resident on one GPU, ready to run any of its combos.
pub struct GpuBacktester {
    ctx: Arc<GpuContext>,
    /// The book's part of every dispatch's parameters.
    params: Params,
    /// bars, sums, decision bits, stop series, stops.
    shared: [wgpu::Buffer; 5],
    /// The blocks whose starts each run records, if any.
    blocks: Option<BlockCuts>,
    /// Whether the book runs on the market kernel (it is not plain), not the whole-backtest one.
    market: bool,
}

impl std::fmt::Debug for GpuBacktester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBacktester")
            .field("adapter", &self.ctx.report().label())
            .field("bars", &self.params.bars)
            .finish()
    }
}

impl GpuBacktester {
    /// Uploads `book` and `tables` to `ctx` (the only upload of shared data). A plain book
    /// whose prices or stop distances leave the whole-backtest kernel's exact range is
    /// [`GpuError::Unsupported`]: the CPU runs it.
    pub fn new(ctx: Arc<GpuContext>, book: &SignalBook, tables: &BarTables) -> Result<Self, GpuError> {
        let bars = u32::try_from(book.bars())
            .map_err(|_| GpuError::Unsupported(format!("{} bars exceed the GPU's u32 indices", book.bars())))?;
        // Tables of a bar each, formed on the host's pool (millions of bars on long data).
        let market = !book.is_plain();
        let t = if market { KernelTables::market(book, tables)? } else { KernelTables::plain(book, tables)? };
        let shared = [
            ctx.storage_buffer("bars", &t.bars)?,
            ctx.storage_buffer("sums", &t.sums)?,
            ctx.storage_buffer::<u32>("decision bits", bytemuck::cast_slice(&t.bits))?,
            ctx.storage_buffer::<u32>("stop series", bytemuck::cast_slice(&t.series))?,
            ctx.storage_buffer("stops", &t.stops)?,
        ];
        let fills = book.fills();
        let factor = |x: f64| i64_words(x.to_bits() as i64);
        let params = Params {
            bars,
            words: (book.words() * 2) as u32,
            combos: 0,
            first: 0,
            exit_rows: t.exit_rows,
            until: 0,
            log_buy: i64_words(tables.log_buy),
            log_sell: i64_words(tables.log_sell),
            start: 0,
            blocks: tables.blocks().map_or(0, BlockCuts::count),
            entry_ret: u128_words(tables.entry[0]),
            entry_ret_sq: u128_words(tables.entry[1]),
            block_first: tables.blocks().map_or(0, |b| b.dropped() as u32),
            block_len: tables.blocks().map_or(0, |b| b.bars() as u32),
            log_sell_stop: i64_words(tables.log_sell_stop),
            stop_sums: t.stop_sums,
            fills: gpu_market::fill_bits(fills),
            // market_position.rs's factors, formed as it forms them.
            buy_factor: factor(1.0 + tables.buy),
            sell_factor: factor(1.0 - tables.sell),
            fee_up: factor(1.0 + tables.fee),
            fee_down: factor(1.0 - tables.fee),
            slip_down: factor(1.0 - tables.slippage),
            gain_at: t.gain_at,
            gain_at_level: t.gain_at_level,
            pad: [0; 2],
        };
        let gpu = Self { ctx, params, shared, blocks: tables.blocks().copied(), market };
        gpu.ctx.pipeline(gpu.kernel())?;
        Ok(gpu)
    }

    /// The GPU the book is resident on.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    /// Combos one call should hold: enough to fill the device ([`GpuContext::parallelism`])
    /// and at least `host_width` (what keeps every host thread busy with the call's rows),
    /// within what its largest buffer holds of their runs and block snapshots.
    pub fn dispatch_combos(&self, host_width: u64) -> u64 {
        let per_combo = (4 * self.run_words() + 16 * self.blocks.as_ref().map_or(0, BlockCuts::snapshot_len)) as u64;
        self.ctx.parallelism().max(host_width).min(self.ctx.limits().max_buffer_size / per_combo).max(1)
    }

    /// u32 words of one combo's run on the device.
    fn run_words(&self) -> usize {
        if self.market { MarketRun::WORDS } else { Run::WORDS }
    }

    /// The kernel the book runs on.
    fn kernel(&self) -> &'static Kernel {
        if self.market { &MARKET } else { &BACKTEST }
    }

    /// The totals of every plan of `book` (the book this was made from, with its
    /// `tables`), in order, and their blocks: the same bits as the CPU's.
    pub fn run(&self, book: &SignalBook, tables: &BarTables, plans: &[ComboPlan]) -> Result<BatchTotals, GpuError> {
        let pending = self.submit(plans)?;
        Ok(self.collect(pending, (book, tables), &|| true)?.unwrap_or_default())
    }

    /// Uploads `plans`, submits their kernels and the copies of their totals, and returns
    /// without waiting: a caller that submits the next plans before [`Self::collect`]ing
    /// these overlaps that upload with this compute.
    pub fn submit(&self, plans: &[ComboPlan]) -> Result<PendingTotals, GpuError> {
        let ctx = &self.ctx;
        let max_binding = ctx.max_binding_bytes();
        // Block starts per combo, each Σr and Σr² as 4 words.
        let snaps_per_combo = self.blocks.as_ref().map_or(0, BlockCuts::snapshot_len);
        let run_words = self.run_words();
        let per_combo = (4 * run_words).max(16 * snaps_per_combo) as u64;
        let per_piece = (max_binding / per_combo).max(1) as usize;
        let bars = self.params.bars;
        let max_work =
            ctx.max_dispatch_work(if self.market { MAX_MARKET_WORK_PER_DISPATCH } else { MAX_WORK_PER_DISPATCH });
        let stretch = stretch_len(ctx.max_loop_steps(), plans.len().min(per_piece) as u64, max_work);
        let stretches = stretches(bars, stretch);
        let per_dispatch = (max_work / u64::from(stretch)).clamp(1, u64::from(u32::MAX)) as usize;
        let mut reads = Vec::new();
        for piece in plans.chunks(per_piece) {
            let plan_buffer = ctx.storage_buffer("plans", piece)?;
            let out = ctx.output_buffer::<u32>("runs", piece.len() * run_words)?;
            // WGSL arrays cannot be empty: one unused entry without blocks.
            let snaps = ctx.output_buffer::<[u32; 4]>("block starts", (piece.len() * snaps_per_combo).max(1))?;
            let firsts: Vec<usize> = (0..piece.len()).step_by(per_dispatch).collect();
            let combos = |first: usize| per_dispatch.min(piece.len() - first);
            // Each group of combos runs its stretches in order; a dispatch sees the runs
            // the one before it wrote (each is its own pass).
            let steps: Vec<(usize, &std::ops::Range<u32>)> =
                firsts.iter().flat_map(|&first| stretches.iter().map(move |s| (first, s))).collect();
            let uniforms = steps
                .iter()
                .map(|&(first, stretch)| {
                    let params = Params {
                        combos: combos(first) as u32,
                        first: first as u32,
                        start: stretch.start,
                        until: stretch.end,
                        ..self.params
                    };
                    ctx.uniform_buffer("params", &params)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let [a, b, c, d, e] = &self.shared;
            let bindings: Vec<[&wgpu::Buffer; 9]> =
                uniforms.iter().map(|uniform| [a, b, c, d, e, &plan_buffer, &out, uniform, &snaps]).collect();
            let kernel = self.kernel();
            let launches = steps
                .iter()
                .zip(&bindings)
                .map(|(&(first, _), buffers)| {
                    Ok(Dispatch { kernel, buffers, workgroups: ctx.grid(kernel, combos(first) as u64)? })
                })
                .collect::<Result<Vec<_>, GpuError>>()?;
            // One submission per piece: its read-back can be left while its kernels run.
            let words = 4 * piece.len() * snaps_per_combo;
            reads.push(ctx.dispatch_and_read_back(&launches, &out, piece.len() * run_words, Some((&snaps, words)))?);
        }
        let plans = if self.market { plans.to_vec() } else { Vec::new() };
        Ok(PendingTotals { reads, plans })
    }

    /// Waits for a submitted run and returns its totals, in plan order, or `None` as soon
    /// as `wanted` says they are no longer needed (see [`GpuContext::finish_read_back`]).
    /// `twin` is the book and tables this was made from: the CPU runs there any combo the
    /// market kernel's arithmetic could not hold ([`gpu_market::redo_on_cpu`]).
    pub fn collect(
        &self,
        pending: PendingTotals,
        twin: (&SignalBook, &BarTables),
        wanted: &dyn Fn() -> bool,
    ) -> Result<Option<BatchTotals>, GpuError> {
        let mut batch = BatchTotals::default();
        let mut out_of_range = Vec::new();
        for read in pending.reads {
            let Some(read) = self.ctx.finish_read_back::<u32>(read, wanted)? else {
                return Ok(None);
            };
            // Decoded on the host's pool: a wide dispatch reads back hundreds of thousands.
            let first = batch.totals.len();
            if self.market {
                let runs: &[MarketRun] = bytemuck::cast_slice(&read.items);
                batch.totals.par_extend(runs.par_iter().map(MarketRun::totals));
                out_of_range.extend(runs.iter().enumerate().filter(|(_, r)| r.out_of_range()).map(|(i, _)| first + i));
            } else {
                let runs: &[Run] = bytemuck::cast_slice(&read.items);
                batch.totals.par_extend(runs.par_iter().map(Run::totals));
            }
            if let Some(cuts) = &self.blocks {
                let (per, len) = (cuts.snapshot_len(), cuts.stats_len());
                let snapshots: Vec<u128> = read.words.par_chunks_exact(4).map(u128_of).collect();
                batch.blocks.resize(batch.totals.len() * len, 0.0);
                batch.blocks[first * len..]
                    .par_chunks_mut(len)
                    .zip(snapshots.par_chunks_exact(per))
                    .zip(&batch.totals[first..])
                    .for_each(|((out, snaps), totals)| cuts.stats(snaps, totals, out));
            }
        }
        gpu_market::redo_on_cpu(&mut batch, &out_of_range, &pending.plans, twin);
        Ok(Some(batch))
    }
}

/// Plans submitted by [`GpuBacktester::submit`], their totals not yet read back (and, for
/// the market kernel, the plans, for any combo the CPU must run).
#[derive(Debug)]
pub struct PendingTotals {
    reads: Vec<PendingRead<u32>>,
    plans: Vec<ComboPlan>,
}

/// Bars a stretch holds at least where the adapter allows it: fewer would mean thousands
/// of dispatches on long data.
const MIN_STRETCH: u32 = 1 << 12;

/// The bars of one stretch for dispatches of `combos` combos on an adapter whose
/// invocations may loop `loop_steps` times (every iteration of the kernel's loop advances
/// at least one bar): as long as that allows while a dispatch stays within
/// `max_work` bar·combos, and not under [`MIN_STRETCH`] (wider work is then
/// cut into several dispatches of combos instead).
fn stretch_len(loop_steps: u32, combos: u64, max_work: u64) -> u32 {
    let by_work = max_work / combos.max(1);
    by_work.clamp(u64::from(MIN_STRETCH.min(loop_steps)), u64::from(loop_steps)) as u32
}

/// The stretches of `bars` that the kernel runs one dispatch each, in order, `len` bars
/// each (the last shorter). Zero bars: one empty stretch (the kernel still writes the totals).
fn stretches(bars: u32, len: u32) -> Vec<std::ops::Range<u32>> {
    (0..bars.max(1)).step_by(len as usize).map(|start| start..bars.min(start.saturating_add(len))).collect()
}

/// The kernels of this crate, for tests that compile them on every adapter.
pub const KERNELS: [Kernel; 2] = [BACKTEST, MARKET];

#[cfg(test)]
mod layout {
    //! The host's structs and constants are the kernel's: laid out alike, byte for byte.
    use super::*;
    use std::mem::{offset_of, size_of};
    use threadx_dispatch::ShaderInfo;

    fn shader() -> ShaderInfo {
        ShaderInfo::parse(BACKTEST.source).expect("backtest.wgsl parses")
    }

    /// The WGSL struct `name`'s size and member offsets.
    fn wgsl(name: &str) -> (u32, Vec<(String, u32)>) {
        shader().struct_layout(name).unwrap_or_else(|| panic!("no struct {name} in backtest.wgsl"))
    }

    fn members(list: &[(&str, usize)]) -> Vec<(String, u32)> {
        list.iter().map(|&(n, o)| (n.to_owned(), o as u32)).collect()
    }

    #[test]
    fn params_plan_and_run_match_backtest_wgsl() {
        let params = members(&[
            ("bars", offset_of!(Params, bars)),
            ("words", offset_of!(Params, words)),
            ("combos", offset_of!(Params, combos)),
            ("first", offset_of!(Params, first)),
            ("exit_rows", offset_of!(Params, exit_rows)),
            ("until", offset_of!(Params, until)),
            ("log_buy", offset_of!(Params, log_buy)),
            ("log_sell", offset_of!(Params, log_sell)),
            ("start", offset_of!(Params, start)),
            ("blocks", offset_of!(Params, blocks)),
            ("entry_ret", offset_of!(Params, entry_ret)),
            ("entry_ret_sq", offset_of!(Params, entry_ret_sq)),
            ("block_first", offset_of!(Params, block_first)),
            ("block_len", offset_of!(Params, block_len)),
            ("log_sell_stop", offset_of!(Params, log_sell_stop)),
            ("stop_sums", offset_of!(Params, stop_sums)),
            ("fills", offset_of!(Params, fills)),
            ("buy_factor", offset_of!(Params, buy_factor)),
            ("sell_factor", offset_of!(Params, sell_factor)),
            ("fee_up", offset_of!(Params, fee_up)),
            ("fee_down", offset_of!(Params, fee_down)),
            ("slip_down", offset_of!(Params, slip_down)),
            ("gain_at", offset_of!(Params, gain_at)),
            ("gain_at_level", offset_of!(Params, gain_at_level)),
        ]);
        assert_eq!(wgsl("Params"), (size_of::<Params>() as u32, params));
        let plan = members(&[
            ("entry", offset_of!(ComboPlan, entry)),
            ("exit", offset_of!(ComboPlan, exit)),
            ("stop", offset_of!(ComboPlan, stop)),
            ("warmup", offset_of!(ComboPlan, warmup)),
            ("take_profit", offset_of!(ComboPlan, take_profit)),
            ("max_bars", offset_of!(ComboPlan, max_bars)),
            ("short_entry", offset_of!(ComboPlan, short_entry)),
            ("short_exit", offset_of!(ComboPlan, short_exit)),
            ("short_stop", offset_of!(ComboPlan, short_stop)),
            ("short_take_profit", offset_of!(ComboPlan, short_take_profit)),
            ("trail", offset_of!(ComboPlan, trail)),
            ("pad", offset_of!(ComboPlan, pad)),
        ]);
        assert_eq!(wgsl("Plan"), (size_of::<ComboPlan>() as u32, plan));
        // The host reads a run's totals; the state after them is the kernel's alone.
        let (size, run) = wgsl("Run");
        assert_eq!(size as usize, size_of::<Run>());
        let totals = members(&[
            ("log_equity", offset_of!(Run, log_equity)),
            ("drawdown", offset_of!(Run, drawdown)),
            ("sums", offset_of!(Run, sums)),
        ]);
        assert_eq!(run[..totals.len()], totals);
        assert_eq!(run[totals.len()].1 as usize, offset_of!(Run, state));
    }

    #[test]
    fn a_stretch_is_as_long_as_the_adapter_and_the_work_bound_allow() {
        use threadx_dispatch::{HARDWARE_LOOP_STEPS, MAX_LOOP_STEPS};
        // lavapipe's loop bound holds at any width.
        assert_eq!(stretch_len(MAX_LOOP_STEPS, 64, MAX_WORK_PER_DISPATCH), MAX_LOOP_STEPS);
        assert_eq!(stretch_len(MAX_LOOP_STEPS, 8_192, MAX_WORK_PER_DISPATCH), MAX_LOOP_STEPS);
        // Hardware: 64 combos walk 2^20 bars a dispatch; 10,800 a dispatch of 2^31 bar·combos.
        assert_eq!(stretch_len(HARDWARE_LOOP_STEPS, 64, MAX_WORK_PER_DISPATCH), HARDWARE_LOOP_STEPS);
        assert_eq!(
            stretch_len(HARDWARE_LOOP_STEPS, 10_800, MAX_WORK_PER_DISPATCH),
            (MAX_WORK_PER_DISPATCH / 10_800) as u32
        );
        // Very wide work keeps stretches of MIN_STRETCH and is cut by combos instead.
        assert_eq!(stretch_len(HARDWARE_LOOP_STEPS, 1 << 24, MAX_WORK_PER_DISPATCH), MIN_STRETCH);
        assert_eq!(stretch_len(1_000, 1 << 24, MAX_WORK_PER_DISPATCH), 1_000);
        assert_eq!(stretches(10, 4), [0..4, 4..8, 8..10]);
        assert_eq!(stretches(0, 4), vec![0..0; 1]);
        assert_eq!(
            stretches(u32::MAX, HARDWARE_LOOP_STEPS).last(),
            Some(&(u32::MAX - (u32::MAX % HARDWARE_LOOP_STEPS)..u32::MAX))
        );
    }

    #[test]
    fn constants_match_backtest_wgsl() {
        let shader = shader();
        assert_eq!(shader.constant_u32("NO_STOP"), Some(ComboPlan::NO_STOP));
        // The kernel indexes by the size it declares; the host dispatches by the same.
        assert_eq!(shader.constant_u32("WORKGROUP"), Some(threadx_dispatch::workgroup_size(&BACKTEST).unwrap()));
    }
}
