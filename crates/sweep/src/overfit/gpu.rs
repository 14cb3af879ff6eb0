//! CSCV's screen on a GPU: the host side of `kernels-wgsl/cscv.wgsl`. [`GpuScreen`] is a
//! [`ScreenDevice`] (threadx-stats' `device.rs` says what it must do), and [`cscv`] runs CSCV
//! on the device the dispatcher picks. The dispatcher times both devices, so it learns
//! where CSCV is faster. Two entry points serve the three listings: `likeliest` (a
//! workgroup per split) and `screen` (an invocation per split and [`CHUNK`] combos). Each
//! pass uploads the records of its combos once, then cuts the
//! splits and combos into dispatches that fit the adapter's binding, grid and
//! per-dispatch work limits. A dispatch that leaves more pairs open than its list holds
//! is run again with room for all of them.

use super::OverfittingOptions;
use serde_json::json;
use std::mem::size_of;
use std::sync::Arc;
use threadx_dispatch::{
    DeviceMode, Dispatch, Dispatcher, GpuContext, GpuError, Kernel, MAX_LOOP_STEPS, Operation, workgroup_size,
};
use threadx_stats::{
    BlockMatrix, DeviceScreen, Listing, OpenPair, PboError, PboReport, ScaledBlocks, ScreenDevice, ScreenPass,
    Screened, SplitSet, StatsError, pbo, pbo_on,
};

const SOURCE: &str = include_str!("../../../../kernels-wgsl/cscv.wgsl");

/// Places a pass's pairs: one invocation per split and [`CHUNK`] combos.
pub(crate) const SCREEN: Kernel = Kernel { name: "cscv_screen", source: SOURCE, entry: "screen" };

/// Finds each split's likeliest pair: one workgroup per split.
pub(crate) const LIKELIEST: Kernel = Kernel { name: "cscv_likeliest", source: SOURCE, entry: "likeliest" };

/// Combos per invocation (cscv.wgsl's `CHUNK`).
const CHUNK: usize = 128;

/// Pairs per dispatch at most, so that no single dispatch runs for long (drivers reset a
/// GPU that does not answer for a couple of seconds).
const MAX_PAIRS_PER_DISPATCH: usize = 1 << 31;

/// Open pairs a dispatch has room for at first, per pair screened (most are placed), and
/// at least.
const OPEN_SHARE: usize = 64;
const LEAST_ROOM: usize = 4096;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Params {
    splits: u32,
    split_first: u32,
    combos: u32,
    combo_first: u32,
    blocks: u32,
    listing: u32,
    capacity: u32,
    pad: u32,
}

/// CSCV of `matrix` over `splits` on the device `dispatcher` picks (the GPU screens, the
/// CPU compares what it leaves open): the same report on either.
pub(crate) fn cscv(dispatcher: &Dispatcher, matrix: &BlockMatrix, splits: &SplitSet) -> Result<PboReport, StatsError> {
    let op = Operation::new("cscv", json!({"blocks": matrix.blocks()}), matrix.combos().saturating_mul(splits.len()));
    dispatcher
        .run(
            &op,
            || pbo(matrix, splits),
            |ctx| match pbo_on(matrix, splits, &mut GpuScreen::new(ctx)) {
                Ok(report) => Ok(Ok(report)),
                Err(PboError::Input(e)) => Ok(Err(e)),
                Err(PboError::Device(e)) => Err(e),
                Err(PboError::Answer(problem)) => Err(GpuError::Validation(format!("cscv: {problem}"))),
            },
        )
        .value
}

/// Probes the adapters and compiles CSCV's kernels on a thread of its own, so that this
/// overlaps the sweep instead of opening the statistics' phase, when the statistics of
/// `combos` combos are large enough for a GPU to be considered. (In `auto` a sweep too
/// small for a GPU never probes: the probe, tens of milliseconds on a GPU machine, would
/// otherwise come with CSCV.) The dispatcher's probe is done once, whoever asks first.
pub(crate) fn warm_up(dispatcher: &Arc<Dispatcher>, combos: u64, options: &OverfittingOptions) {
    if !worth_warming(dispatcher, combos, options) {
        return;
    }
    let dispatcher = Arc::clone(dispatcher);
    std::thread::spawn(move || {
        if let Some(ctx) = dispatcher.gpu() {
            // A failure shows again, and is reported, when CSCV asks for the kernel.
            let _ = (ctx.pipeline(&SCREEN), ctx.pipeline(&LIKELIEST));
        }
    });
}

/// Whether CSCV over `combos` combos may run on a GPU: the CPU is not forced and its
/// operation (combos × splits) is not below the floor under which the CPU takes it unasked.
fn worth_warming(dispatcher: &Dispatcher, combos: u64, options: &OverfittingOptions) -> bool {
    let splits = SplitSet::count_for_sweep(combos as usize, options.blocks as usize, options.pbo_splits);
    dispatcher.mode() != DeviceMode::Cpu && (combos as usize).saturating_mul(splits) >= dispatcher.policy().min_gpu_size
}

/// The screen on one GPU.
pub(crate) struct GpuScreen<'a> {
    ctx: &'a GpuContext,
    /// Combos and pairs per dispatch at most, beyond the adapter's own limits.
    max_combos: usize,
    max_pairs: usize,
    /// Open pairs a dispatch has room for at least.
    least_room: usize,
}

impl<'a> GpuScreen<'a> {
    pub fn new(ctx: &'a GpuContext) -> Self {
        Self { ctx, max_combos: usize::MAX, max_pairs: MAX_PAIRS_PER_DISPATCH, least_room: LEAST_ROOM }
    }
}

impl ScreenDevice for GpuScreen<'_> {
    type Error = GpuError;

    fn screen(&mut self, blocks: &ScaledBlocks, pass: &ScreenPass<'_>) -> Result<Screened, GpuError> {
        let ctx = self.ctx;
        let k = pass.screens.len();
        let likeliest = pass.listing == Listing::Likeliest;
        let kernel = if likeliest { &LIKELIEST } else { &SCREEN };
        let record_bytes = blocks.stride() * size_of::<[f32; 2]>();
        let binding = usize::try_from(ctx.max_binding_bytes()).unwrap_or(usize::MAX);
        let grid = ctx.limits().max_compute_workgroups_per_dimension as usize;
        let workgroup = workgroup_size(kernel)? as usize;
        // A `likeliest` invocation loops over every WORKGROUP-th combo of its dispatch.
        let loop_bound = if likeliest { workgroup * MAX_LOOP_STEPS as usize } else { CHUNK * grid };
        let combos_per_dispatch = loop_bound.min(binding / record_bytes).min(self.max_combos).max(1);
        let splits_per_dispatch = (if likeliest { grid } else { workgroup * grid })
            .min(binding / size_of::<DeviceScreen>())
            .min(self.max_pairs / combos_per_dispatch.min(pass.combos.len()).max(1))
            .max(1);
        let mut screened = Screened { below: vec![0; k], open: Vec::new() };
        for (c, combos) in pass.combos.chunks(combos_per_dispatch).enumerate() {
            let records: Vec<[f32; 2]> = combos.iter().flat_map(|&i| blocks.record(i as usize)).copied().collect();
            let records = ctx.storage_buffer("cscv records", &records)?;
            for first in (0..k).step_by(splits_per_dispatch) {
                let len = splits_per_dispatch.min(k - first);
                let params = Params {
                    splits: len as u32,
                    split_first: first as u32,
                    combos: combos.len() as u32,
                    combo_first: (c * combos_per_dispatch) as u32,
                    blocks: blocks.blocks() as u32,
                    listing: pass.listing as u32,
                    capacity: 0,
                    pad: 0,
                };
                let masks = ctx.storage_buffer("cscv masks", &pass.masks[first..first + len])?;
                let screens = ctx.storage_buffer("cscv screens", &pass.screens[first..first + len])?;
                let workgroups = if likeliest {
                    [len as u32, 1, 1]
                } else {
                    [len.div_ceil(workgroup) as u32, combos.len().div_ceil(CHUNK) as u32, 1]
                };
                let pairs_room = len * combos.len() / OPEN_SHARE;
                let mut room = if likeliest { len } else { pairs_room.max(self.least_room) };
                room = room.min(binding / size_of::<OpenPair>()).max(1);
                let (below, open) = loop {
                    let params = ctx.uniform_buffer("cscv params", &Params { capacity: room as u32, ..params })?;
                    let counts = ctx.storage_buffer("cscv counts", &vec![0u32; 1 + len])?;
                    let open = ctx.output_buffer::<OpenPair>("cscv open", room)?;
                    let buffers = [&params, &records, &masks, &screens, &counts, &open];
                    let dispatch = Dispatch { kernel, buffers: &buffers, workgroups };
                    let pending = ctx.dispatch_and_read_back::<u32>(&[dispatch], &counts, 1 + len, None)?;
                    let counted = ctx.finish_read_back(pending, &|| true)?.map(|read| read.items).unwrap_or_default();
                    let Some((&listed, below)) = counted.split_first().filter(|(_, below)| below.len() == len) else {
                        return Err(GpuError::Readback(format!("cscv: {} counts for {len} splits", counted.len())));
                    };
                    let listed = listed as usize;
                    if listed <= room {
                        break (
                            below.to_vec(),
                            if listed > 0 { ctx.read_back::<OpenPair>(&open, listed)? } else { Vec::new() },
                        );
                    }
                    // Room for every open pair this time.
                    if listed * size_of::<OpenPair>() > binding {
                        return Err(GpuError::TooLarge {
                            what: "cscv's open pairs".into(),
                            needed: (listed * size_of::<OpenPair>()) as u64,
                            limit: binding as u64,
                        });
                    }
                    room = listed;
                };
                for (total, b) in screened.below[first..first + len].iter_mut().zip(below) {
                    *total += b;
                }
                screened.open.extend(open);
            }
        }
        if likeliest {
            screened.open = likeliest_of_dispatches(screened.open);
        }
        Ok(screened)
    }
}

/// Per split, the likeliest of the dispatches' picks (of equally likely ones, the first).
fn likeliest_of_dispatches(mut picks: Vec<OpenPair>) -> Vec<OpenPair> {
    picks.sort_unstable_by_key(|p| (p.split, p.combo));
    let mut kept: Vec<OpenPair> = Vec::with_capacity(picks.len());
    for p in picks {
        match kept.last_mut() {
            Some(last) if last.split == p.split => {
                if p.likeness() > last.likeness() {
                    *last = p;
                }
            }
            _ => kept.push(p),
        }
    }
    kept
}

#[cfg(test)]
mod warming {
    use super::*;
    use threadx_dispatch::testing::dispatcher_in;

    #[test]
    fn only_statistics_a_gpu_may_take_are_warmed_for() {
        let dir = tempfile::tempdir().unwrap();
        let options = |blocks, pbo_splits| OverfittingOptions { blocks, pbo_splits, seed: 0, effective_trials: None };
        let auto = dispatcher_in(dir.path(), DeviceMode::Auto);
        // The default job: 10,000 combos × 12,870 splits.
        assert!(worth_warming(&auto, 10_000, &options(16, 1_000)));
        // 2 blocks make 2 splits: 2,048 combos are 4,096 pairs, the floor; 2,047 are below.
        assert!(worth_warming(&auto, 2_048, &options(2, 1_000)));
        assert!(!worth_warming(&auto, 2_047, &options(2, 1_000)));
        // Where not every split is taken, the random ones count: 64 blocks, 1 split each.
        assert!(worth_warming(&auto, 4_096, &options(64, 1)));
        assert!(!worth_warming(&auto, 4_095, &options(64, 1)));
        assert!(!worth_warming(&dispatcher_in(dir.path(), DeviceMode::Cpu), 10_000, &options(16, 1_000)));
    }
}

#[cfg(test)]
mod layout {
    //! The host's struct and constants are the kernel's, byte for byte.
    use super::*;
    use std::mem::offset_of;
    use threadx_dispatch::ShaderInfo;

    #[test]
    fn params_screen_and_constants_match_cscv_wgsl() {
        let shader = ShaderInfo::parse(SOURCE).expect("cscv.wgsl parses");
        let members = |list: &[(&str, usize)]| list.iter().map(|&(n, o)| (n.to_owned(), o as u32)).collect::<Vec<_>>();
        let params = members(&[
            ("splits", offset_of!(Params, splits)),
            ("split_first", offset_of!(Params, split_first)),
            ("combos", offset_of!(Params, combos)),
            ("combo_first", offset_of!(Params, combo_first)),
            ("blocks", offset_of!(Params, blocks)),
            ("listing", offset_of!(Params, listing)),
            ("capacity", offset_of!(Params, capacity)),
            ("pad", offset_of!(Params, pad)),
        ]);
        assert_eq!(shader.struct_layout("Params"), Some((size_of::<Params>() as u32, params)));
        let screen = members(&[
            ("kind", offset_of!(DeviceScreen, kind)),
            ("mirrored", offset_of!(DeviceScreen, mirrored)),
            ("sign", offset_of!(DeviceScreen, sign)),
            ("c1_up", offset_of!(DeviceScreen, c1_up)),
            ("c2_dn", offset_of!(DeviceScreen, c2_dn)),
            ("c1_dn", offset_of!(DeviceScreen, c1_dn)),
            ("c2_up", offset_of!(DeviceScreen, c2_up)),
            ("varies", offset_of!(DeviceScreen, varies)),
        ]);
        assert_eq!(shader.struct_layout("Screen"), Some((size_of::<DeviceScreen>() as u32, screen)));
        let open = members(&[
            ("split", offset_of!(OpenPair, split)),
            ("combo", offset_of!(OpenPair, combo)),
            ("sum", offset_of!(OpenPair, sum)),
            ("sum_sq", offset_of!(OpenPair, sum_sq)),
        ]);
        assert_eq!(shader.struct_layout("Open"), Some((size_of::<OpenPair>() as u32, open)));
        assert_eq!(shader.constant_u32("CHUNK"), Some(CHUNK as u32));
        assert_eq!(shader.constant_u32("RATIO"), Some(threadx_stats::RATIO));
        assert_eq!(shader.constant_u32("NOT_NAN"), Some(threadx_stats::NOT_NAN));
        assert_eq!(shader.constant_u32("NOT_BELOW"), Some(Listing::NotBelow as u32));
    }
}

#[cfg(test)]
mod on_adapters {
    //! On every adapter the kernel gives `pbo`'s report bit for bit: on blocks like a
    //! sweep's and on blocks that press on the screen's bounds, in one dispatch or cut into
    //! many with little room for open pairs.
    use super::*;
    use threadx_dispatch::testing::adapters;
    use threadx_stats::SeededRng;

    /// Per combo, a drift and noise per block, and now and then a combo that presses on
    /// the bounds: one that never trades, a copy of the one before, one at a scale of
    /// 2^±280, one with no variance in some blocks, one with a negative Σr² (a user's own
    /// blocks may have it).
    fn blocks(combos: usize, s: usize, bars: usize, seed: u64) -> BlockMatrix {
        let mut rng = SeededRng::new(seed);
        let n = bars as f64;
        let mut values: Vec<f64> = Vec::with_capacity(combos * s * 2);
        for c in 0..combos {
            let (kind, drift) = (rng.next_u64() % 12, (rng.uniform() - 0.45) * 1e-3);
            let scale = if kind == 3 { 2f64.powi(if rng.uniform() < 0.5 { -280 } else { 280 }) } else { 1.0 };
            for b in 0..s {
                let sum = scale * (drift * n + (rng.uniform() - 0.5) * n.sqrt() * 0.01);
                let sum_sq = scale * scale * 1e-4 * n * (0.5 + rng.uniform()) + sum * sum / n;
                let (sum, sum_sq) = match kind {
                    1 => (0.0, 0.0),
                    2 if c > 0 => (values[(c - 1) * 2 * s + 2 * b], values[(c - 1) * 2 * s + 2 * b + 1]),
                    4 if b % 3 == 0 => (sum, sum * sum / n),
                    5 if b == 1 => (sum, -sum_sq),
                    _ => (sum, sum_sq),
                };
                values.extend([sum, sum_sq]);
            }
        }
        BlockMatrix::new(s, bars, values).unwrap()
    }

    /// Where no subnormal is flushed, the kernel places every pair as its CPU twin does.
    #[test]
    fn the_kernel_places_pairs_as_its_twin() {
        let (combos, s, bars) = (200, 16, 120);
        let matrix = blocks(combos, s, bars, 9);
        let scaled = ScaledBlocks::new(&matrix);
        let splits = SplitSet::all(s).unwrap();
        let n = (bars * s / 2) as f64;
        // Per split, a value near some combo's ratio over it (none: NaN, every 50th).
        let screens: Vec<DeviceScreen> = splits
            .masks()
            .iter()
            .enumerate()
            .map(|(i, &mask)| {
                let combo = matrix.combo(i % combos);
                let in_mask = (0..s).filter(|b| (mask >> b) & 1 == 1);
                let (a, q) = in_mask.fold((0.0, 0.0), |(a, q), b| (a + combo[2 * b], q + combo[2 * b + 1]));
                let t = threadx_stats::sharpe(a, q, n as usize) * (1.0 + 1e-7 * (i % 3) as f64);
                DeviceScreen::new((i % 50 != 0 && !t.is_nan()).then_some(t), n, s)
            })
            .collect();
        let masks: Vec<[u32; 2]> = splits.masks().iter().map(|&m| [m as u32, (m >> 32) as u32]).collect();
        let ids: Vec<u32> = (0..combos as u32).collect();
        for ctx in adapters() {
            let screened = |listing| {
                let pass = ScreenPass { masks: &masks, screens: &screens, combos: &ids, listing };
                let mut got = GpuScreen::new(ctx).screen(&scaled, &pass).unwrap();
                got.open.sort_unstable_by_key(|p| (p.split, p.combo));
                (got, threadx_stats::screen_on_cpu(&scaled, &pass))
            };
            let label = ctx.report().label();
            let mut not_below = Vec::new();
            for listing in [Listing::NotBelow, Listing::Undecided] {
                let (got, twin) = screened(listing);
                // Nearly every pair of a combo that trades and has sound blocks is placed
                // (listing those not below lists most of them).
                let regular = |c: usize| scaled.record(c)[s][0] >= 0.0 && matrix.combo(c).iter().any(|&v| v != 0.0);
                let open = twin.open.iter().filter(|p| regular(p.combo as usize)).count();
                let most = (0..combos).filter(|&c| regular(c)).count() * splits.len() / 100;
                assert!(listing == Listing::NotBelow || open < most, "{open}");
                assert_eq!(got, twin, "{listing:?} on {label}");
                if listing == Listing::NotBelow {
                    not_below = got.open;
                }
            }
            // Each split's likeliest pair is one not below, as likely as the twin's (their
            // square roots may round apart; equally likely pairs may be told apart).
            let (got, twin) = screened(Listing::Likeliest);
            assert_eq!(got.open.len(), twin.open.len(), "on {label}");
            for (g, w) in got.open.iter().zip(&twin.open) {
                assert_eq!(g.split, w.split);
                let listed = not_below.binary_search_by_key(&(g.split, g.combo), |p| (p.split, p.combo));
                assert!(listed.is_ok_and(|at| not_below[at] == *g), "{g:?} on {label}");
                assert!((g.likeness() - w.likeness()).abs() <= 1e-6 * w.likeness().abs(), "{g:?} {w:?} on {label}");
            }
        }
    }

    #[test]
    fn the_kernel_gives_the_cpus_report_bit_for_bit() {
        let cases = [(1, 2, 50), (40, 4, 30), (300, 8, 100), (700, 16, 219), (200, 20, 40), (60, 64, 10)];
        for ctx in adapters() {
            for (i, &(combos, s, bars)) in cases.iter().enumerate() {
                let matrix = blocks(combos, s, bars, i as u64);
                let mut rng = SeededRng::new(7);
                let splits = match s {
                    ..=16 => SplitSet::all(s).unwrap(),
                    _ => SplitSet::random(s, 300, &mut || rng.next_u64()).unwrap(),
                };
                let expected = format!("{:?}", pbo(&matrix, &splits).unwrap());
                let whole = pbo_on(&matrix, &splits, &mut GpuScreen::new(ctx)).unwrap();
                assert_eq!(format!("{whole:?}"), expected, "{combos} combos, {s} blocks on {}", ctx.report().label());
                // Many dispatches (a few dozen here), each run twice for want of room.
                if combos * splits.len() <= 100_000 {
                    let mut cut = GpuScreen { ctx, max_combos: 7, max_pairs: 2_000, least_room: 1 };
                    let cut = pbo_on(&matrix, &splits, &mut cut).unwrap();
                    let label = ctx.report().label();
                    assert_eq!(format!("{cut:?}"), expected, "{combos} combos, {s} blocks, cut, on {label}");
                }
            }
        }
    }
}
