//! The whole-backtest WGSL kernel's host side: the signal book and its [`BarTables`] are
//! uploaded once per [`GpuBacktester`], then each call uploads only the combos' plans and
//! reads back only their integer [`Totals`] — the CPU's bits, turned into metrics by the
//! same host function. Calls are cut into dispatches that fit the adapter's binding, grid
//! and per-dispatch work limits, and the bars into stretches of at most
//! [`GpuContext::max_loop_steps`] (fewer when many combos share a dispatch), run one after another with each combo's state kept on the device;
//! all are submitted before the first read-back, so the upload of one piece overlaps the
//! compute of the previous one.

use crate::bar_tables::BarTables;
use crate::blocks::BlockCuts;
use crate::book::{ComboPlan, SignalBook, Stop};
use crate::fixed::Totals;
use crate::simulate::BatchTotals;
use rayon::prelude::*;
use std::sync::Arc;
use threadx_dispatch::{Dispatch, GpuContext, GpuError, Kernel, PendingRead, wgpu};

pub(crate) const BACKTEST: Kernel = Kernel {
    name: "backtest",
    source: concat!(
        include_str!("../../../kernels-wgsl/exact.wgsl"),
        include_str!("../../../kernels-wgsl/backtest.wgsl")
    ),
    entry: "backtest",
};

/// Bar·combos per dispatch at most, so that no single dispatch runs for long (drivers
/// reset a GPU that does not answer for a couple of seconds).
const MAX_WORK_PER_DISPATCH: u64 = 1 << 31;

/// The f64 range in which the kernel's integer stop arithmetic sees only normal numbers
/// (prices, ATR × multiplier); books outside it run on the CPU.
const EXACT_RANGE: std::ops::RangeInclusive<f64> = 1e-270..=1e270;

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
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

/// A combo's run on the device (backtest.wgsl's `Run`): its totals, then the state the
/// kernel carries from one stretch of bars to the next, which the host never reads.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Run {
    log_equity: [u32; 2],
    drawdown: [u32; 2],
    sum: [u32; 4],
    sum_sq: [u32; 4],
    trades: u32,
    closed: u32,
    wins: u32,
    held: u32,
    state: [u32; 16],
}

impl Run {
    fn totals(&self) -> Totals {
        let i64_of = |w: [u32; 2]| (u64::from(w[0]) | u64::from(w[1]) << 32) as i64;
        Totals {
            log_equity: i64_of(self.log_equity),
            drawdown: i64_of(self.drawdown),
            sum: u128_of(&self.sum),
            sum_sq: u128_of(&self.sum_sq),
            trades: self.trades,
            closed: self.closed,
            wins: self.wins,
            held: self.held,
        }
    }
}

/// A u128 from its four u32 words, least significant first.
fn u128_of(w: &[u32]) -> u128 {
    w.iter().rev().fold(0u128, |acc, &x| acc << 32 | u128::from(x))
}

fn i64_words(x: i64) -> [u32; 2] {
    [x as u32, (x as u64 >> 32) as u32]
}

fn u128_words(x: u128) -> [u32; 4] {
    [x as u32, (x >> 32) as u32, (x >> 64) as u32, (x >> 96) as u32]
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
}

impl std::fmt::Debug for GpuBacktester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBacktester")
            .field("adapter", &self.ctx.report().label())
            .field("bars", &self.params.bars)
            .finish()
    }
}

/// The stops' tables as the kernel reads them: every stop series (the book's, then the
/// levels of its fraction stops, formed once per series and sign on the host as the CPU
/// forms them) and each stop's entry. WGSL arrays cannot be empty: a book without stops
/// gets one unused series and stop.
fn stop_tables(book: &SignalBook) -> Result<(Vec<f64>, Vec<[u32; 4]>), GpuError> {
    let mut atr: Vec<f64> = book.stop_rows().flatten().copied().collect();
    let mut series_count = book.stop_rows().len() as u32;
    // Fraction stops' levels, formed once per (series, sign).
    let mut formed: std::collections::HashMap<(u32, u64), u32> = std::collections::HashMap::new();
    let mut stops: Vec<[u32; 4]> = Vec::with_capacity(book.stops().len());
    for (index, &stop) in book.stops().iter().enumerate() {
        stops.push(match stop {
            Stop::Distance { series, mult } => {
                let [m0, m1] = i64_words(mult.to_bits() as i64);
                [series, m0, m1, 0]
            }
            Stop::Level { series } => [series, 0, 0, 1],
            // Trails only, whose books are declined above.
            Stop::Scaled { .. } => return Err(GpuError::Unsupported("the kernel does not trail stops".into())),
            Stop::Fraction { series, sign } => {
                // The CPU's levels, formed on the host: a level series of their own.
                let level_series = *formed.entry((series, sign.to_bits())).or_insert_with(|| {
                    let rule = book.stop(index as u32).expect("a stop of the book");
                    atr.extend(book.close().iter().enumerate().map(|(e, &c)| rule.level(e, c)));
                    series_count += 1;
                    series_count - 1
                });
                [level_series, 0, 0, 1]
            }
        });
    }
    if atr.is_empty() {
        atr.push(0.0);
    }
    if stops.is_empty() {
        stops.push([0; 4]);
    }
    Ok((atr, stops))
}

impl GpuBacktester {
    /// Uploads `book` and `tables` to `ctx` (the only upload of shared data). A book
    /// whose prices or stop distances leave [`EXACT_RANGE`] is
    /// [`GpuError::Unsupported`]: the CPU runs it.
    pub fn new(ctx: Arc<GpuContext>, book: &SignalBook, tables: &BarTables) -> Result<Self, GpuError> {
        let bars = u32::try_from(book.bars())
            .map_err(|_| GpuError::Unsupported(format!("{} bars exceed the GPU's u32 indices", book.bars())))?;
        if !book.is_plain() {
            return Err(GpuError::Unsupported(format!(
                "the kernel does not trade {} yet",
                book.market_features().join(", ")
            )));
        }
        check_exact_range(book)?;
        // Tables of a bar each, formed on the host's pool (millions of bars on long data).
        let bar: Vec<[u32; 4]> = book
            .close()
            .par_iter()
            .zip(&tables.log)
            .map(|(&c, &l)| {
                let [c0, c1] = i64_words(c.to_bits() as i64);
                let [l0, l1] = i64_words(l);
                [c0, c1, l0, l1]
            })
            .collect();
        let sums: Vec<[u32; 16]> = (0..book.bars())
            .into_par_iter()
            .map(|t| {
                let mut s = [0u32; 16];
                for (i, v) in [tables.ret_sum[t], tables.ret_sq_sum[t], tables.exit_sum[t], tables.exit_sq_sum[t]]
                    .into_iter()
                    .enumerate()
                {
                    s[i * 4..][..4].copy_from_slice(&u128_words(v));
                }
                s
            })
            .collect();
        // Where an exit at a level pays other costs (slippage, and stops), its exit terms
        // per bar follow the bars' own entries (one more binding would pass the 8 storage
        // buffers every adapter allows).
        let stop_sums = if tables.stop_exit_sum.is_empty() { 0 } else { bars };
        let mut bar = bar;
        if stop_sums != 0 {
            bar.par_extend((0..book.bars()).into_par_iter().flat_map_iter(|t| {
                let (exit1, exit2) = tables.exit_sums(t, true);
                [u128_words(exit1), u128_words(exit2)]
            }));
        }
        let mut bits: Vec<u64> = book.entry_rows().to_vec();
        let exit_rows = u32::try_from(bits.len() * 2)
            .map_err(|_| GpuError::Unsupported("the decision rows exceed the GPU's u32 indices".into()))?;
        bits.extend_from_slice(book.exit_rows());
        let (atr, stops) = stop_tables(book)?;
        let shared = [
            ctx.storage_buffer("bars", &bar)?,
            ctx.storage_buffer("sums", &sums)?,
            ctx.storage_buffer::<u32>("decision bits", bytemuck::cast_slice(&bits))?,
            ctx.storage_buffer::<u32>("stop series", bytemuck::cast_slice(&atr))?,
            ctx.storage_buffer("stops", &stops)?,
        ];
        ctx.pipeline(&BACKTEST)?;
        let params = Params {
            bars,
            words: (book.words() * 2) as u32,
            combos: 0,
            first: 0,
            exit_rows,
            until: 0,
            log_buy: i64_words(tables.log_buy),
            log_sell: i64_words(tables.log_sell),
            start: 0,
            blocks: tables.blocks().map_or(0, BlockCuts::count),
            entry_ret: u128_words(tables.entry_ret),
            entry_ret_sq: u128_words(tables.entry_ret_sq),
            block_first: tables.blocks().map_or(0, |b| b.dropped() as u32),
            block_len: tables.blocks().map_or(0, |b| b.bars() as u32),
            log_sell_stop: i64_words(tables.log_sell_stop),
            stop_sums,
            pad0: 0,
            pad1: 0,
            pad2: 0,
        };
        Ok(Self { ctx, params, shared, blocks: tables.blocks().copied() })
    }

    /// The GPU the book is resident on.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    /// Combos one call should hold: enough to fill the device ([`GpuContext::parallelism`])
    /// and at least `host_width` (what keeps every host thread busy with the call's rows),
    /// within what its largest buffer holds of their runs and block snapshots.
    pub fn dispatch_combos(&self, host_width: u64) -> u64 {
        let per_combo =
            (std::mem::size_of::<Run>() + 16 * self.blocks.as_ref().map_or(0, BlockCuts::snapshot_len)) as u64;
        self.ctx.parallelism().max(host_width).min(self.ctx.limits().max_buffer_size / per_combo).max(1)
    }

    /// The totals of every plan, in order (and their blocks): the same bits as the CPU's.
    pub fn run(&self, plans: &[ComboPlan]) -> Result<BatchTotals, GpuError> {
        let pending = self.submit(plans)?;
        Ok(self.collect(pending, &|| true)?.unwrap_or_default())
    }

    /// Uploads `plans`, submits their kernels and the copies of their totals, and returns
    /// without waiting: a caller that submits the next plans before [`Self::collect`]ing
    /// these overlaps that upload with this compute.
    pub fn submit(&self, plans: &[ComboPlan]) -> Result<PendingTotals, GpuError> {
        let ctx = &self.ctx;
        let max_binding = ctx.max_binding_bytes();
        // Block starts per combo, each Σr and Σr² as 4 words.
        let snaps_per_combo = self.blocks.as_ref().map_or(0, BlockCuts::snapshot_len);
        let per_combo = std::mem::size_of::<Run>().max(16 * snaps_per_combo) as u64;
        let per_piece = (max_binding / per_combo).max(1) as usize;
        let bars = self.params.bars;
        let stretch = stretch_len(ctx.max_loop_steps(), plans.len().min(per_piece) as u64);
        let stretches = stretches(bars, stretch);
        let per_dispatch = (MAX_WORK_PER_DISPATCH / u64::from(stretch)).clamp(1, u64::from(u32::MAX)) as usize;
        let mut reads = Vec::new();
        for piece in plans.chunks(per_piece) {
            let plan_buffer = ctx.storage_buffer("plans", piece)?;
            let out = ctx.output_buffer::<Run>("runs", piece.len())?;
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
            let launches = steps
                .iter()
                .zip(&bindings)
                .map(|(&(first, _), buffers)| {
                    Ok(Dispatch { kernel: &BACKTEST, buffers, workgroups: ctx.grid(&BACKTEST, combos(first) as u64)? })
                })
                .collect::<Result<Vec<_>, GpuError>>()?;
            // One submission per piece: its read-back can be left while its kernels run.
            let words = 4 * piece.len() * snaps_per_combo;
            reads.push(ctx.dispatch_and_read_back(&launches, &out, piece.len(), Some((&snaps, words)))?);
        }
        Ok(PendingTotals { reads })
    }

    /// Waits for a submitted run and returns its totals, in plan order, or `None` as soon
    /// as `wanted` says they are no longer needed (see [`GpuContext::finish_read_back`]).
    pub fn collect(&self, pending: PendingTotals, wanted: &dyn Fn() -> bool) -> Result<Option<BatchTotals>, GpuError> {
        let mut batch = BatchTotals::default();
        for read in pending.reads {
            let Some(read) = self.ctx.finish_read_back::<Run>(read, wanted)? else {
                return Ok(None);
            };
            // Decoded on the host's pool: a wide dispatch reads back hundreds of thousands.
            let first = batch.totals.len();
            batch.totals.par_extend(read.items.par_iter().map(Run::totals));
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
        Ok(Some(batch))
    }
}

/// Plans submitted by [`GpuBacktester::submit`], their totals not yet read back.
#[derive(Debug)]
pub struct PendingTotals {
    reads: Vec<PendingRead<Run>>,
}

/// Bars a stretch holds at least where the adapter allows it: fewer would mean thousands
/// of dispatches on long data.
const MIN_STRETCH: u32 = 1 << 12;

/// The bars of one stretch for dispatches of `combos` combos on an adapter whose
/// invocations may loop `loop_steps` times (every iteration of the kernel's loop advances
/// at least one bar): as long as that allows while a dispatch stays within
/// [`MAX_WORK_PER_DISPATCH`] bar·combos, and not under [`MIN_STRETCH`] (wider work is then
/// cut into several dispatches of combos instead).
fn stretch_len(loop_steps: u32, combos: u64) -> u32 {
    let by_work = MAX_WORK_PER_DISPATCH / combos.max(1);
    by_work.clamp(u64::from(MIN_STRETCH.min(loop_steps)), u64::from(loop_steps)) as u32
}

/// The stretches of `bars` that the kernel runs one dispatch each, in order, `len` bars
/// each (the last shorter). Zero bars: one empty stretch (the kernel still writes the totals).
fn stretches(bars: u32, len: u32) -> Vec<std::ops::Range<u32>> {
    (0..bars.max(1)).step_by(len as usize).map(|start| start..bars.min(start.saturating_add(len))).collect()
}

/// Refuses books whose stop arithmetic would meet subnormal or infinite values: closes
/// outside [`EXACT_RANGE`], or an ATR × multiplier product leaving it. (A level stop is
/// compared as it is, with no arithmetic.)
fn check_exact_range(book: &SignalBook) -> Result<(), GpuError> {
    let outside = |what: &str, v: f64| {
        GpuError::Unsupported(format!(
            "{what} {v:e} is outside the range of the GPU's exact stop arithmetic ({:e} to {:e})",
            EXACT_RANGE.start(),
            EXACT_RANGE.end()
        ))
    };
    let (lo, hi) = min_max(book.close().iter().copied());
    for v in [lo, hi] {
        if !EXACT_RANGE.contains(&v) {
            return Err(outside("the price", v));
        }
    }
    let distances: Vec<(u32, f64)> = book
        .stops()
        .iter()
        .filter_map(|&stop| match stop {
            Stop::Distance { series, mult } if mult > 0.0 => Some((series, mult)),
            _ => None,
        })
        .collect();
    if distances.is_empty() {
        return Ok(());
    }
    let (m_lo, m_hi) = min_max(distances.iter().map(|&(_, m)| m));
    if m_lo < f64::MIN_POSITIVE {
        return Err(outside("the multiplier", m_lo));
    }
    let mut series: Vec<u32> = distances.iter().map(|&(s, _)| s).collect();
    series.sort_unstable();
    series.dedup();
    let rows: Vec<&[f64]> = book.stop_rows().collect();
    for row in series.into_iter().map(|s| rows[s as usize]) {
        let (a_lo, a_hi) = min_max(row.iter().copied().filter(|&a| a > 0.0));
        for product in [a_lo * m_lo, a_hi * m_hi] {
            if product.is_finite() && !EXACT_RANGE.contains(&product) {
                return Err(outside("the stop distance (ATR × atr_mult)", product));
            }
        }
    }
    Ok(())
}

/// The least and greatest of `values` (NaN skipped); (∞, −∞) when there are none.
fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// The kernel of this crate, for tests that compile it on every adapter.
pub const KERNELS: [Kernel; 1] = [BACKTEST];

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
            ("pad0", offset_of!(Params, pad0)),
            ("pad1", offset_of!(Params, pad1)),
            ("pad2", offset_of!(Params, pad2)),
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
            ("sum", offset_of!(Run, sum)),
            ("sum_sq", offset_of!(Run, sum_sq)),
            ("trades", offset_of!(Run, trades)),
            ("closed", offset_of!(Run, closed)),
            ("wins", offset_of!(Run, wins)),
            ("held", offset_of!(Run, held)),
        ]);
        assert_eq!(run[..totals.len()], totals);
        assert_eq!(run[totals.len()].1 as usize, offset_of!(Run, state));
    }

    #[test]
    fn a_stretch_is_as_long_as_the_adapter_and_the_work_bound_allow() {
        use threadx_dispatch::{HARDWARE_LOOP_STEPS, MAX_LOOP_STEPS};
        // lavapipe's loop bound holds at any width.
        assert_eq!(stretch_len(MAX_LOOP_STEPS, 64), MAX_LOOP_STEPS);
        assert_eq!(stretch_len(MAX_LOOP_STEPS, 8_192), MAX_LOOP_STEPS);
        // Hardware: 64 combos walk 2^20 bars a dispatch; 10,800 a dispatch of 2^31 bar·combos.
        assert_eq!(stretch_len(HARDWARE_LOOP_STEPS, 64), HARDWARE_LOOP_STEPS);
        assert_eq!(stretch_len(HARDWARE_LOOP_STEPS, 10_800), (MAX_WORK_PER_DISPATCH / 10_800) as u32);
        // Very wide work keeps stretches of MIN_STRETCH and is cut by combos instead.
        assert_eq!(stretch_len(HARDWARE_LOOP_STEPS, 1 << 24), MIN_STRETCH);
        assert_eq!(stretch_len(1_000, 1 << 24), 1_000);
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
