//! A sweep run to files: chunk files written durably as chunks finish (the checkpoint),
//! `--resume` that runs only the missing chunks, the results CSV assembled in chunk order,
//! the JSON summary, the heatmap; and `merge`, which joins shard files.
//!
//! Layout beside `results.csv`: `results.csv.parts/` holds `sweep.json` (what the run is:
//! spec, data, shard) and a file per finished chunk (`chunk_file.rs`: the CSV's rows, or
//! binary rows when the results are Parquet or Arrow). When every chunk is there, the
//! results file is written (header + chunks in order, atomically), then `results.json`,
//! then the folder is removed. A chunk's rows depend only on its combos, so a resumed or
//! sharded-and-merged run gives the same file as one uninterrupted run.

use crate::chunk_file::ChunkForm;
use crate::error::{SweepError, io_error};
use crate::heatmap::Heatmap;
use crate::leaderboard::Leaderboard;
use crate::overfit::{
    Overfitting, OverfittingOptions, SweepBlocks, blocks_path, read_chunk_blocks, verified_blocks, write_chunk_blocks,
    write_files, write_shard_part,
};
use crate::results_file::ResultsWriter;
use crate::rows::{Lead, Row};
use crate::run_data::RunData;
use crate::run_files::{
    Checkpoint, OutputOptions, ProgressFn, check_disk_room, check_output, has_checkpoint, identity, summary_head,
};
use crate::runner::{ChunkResult, Sweep};
use crate::search::Constraint;
use crate::spec::SweepSpec;
use crate::summary::{
    BalanceSummary, Best, Chunks, Combos, Memory, OverfittingShard, Summary, Timings, TimingsSummary,
};
use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;
use threadx_backtest::{BlockCuts, Grid, GridCursor, MetricSet, SignalBook, Strategy};
use threadx_dispatch::Dispatcher;
use threadx_multi_gpu::{DevicePool, DistributeOptions, RunStats};
use threadx_profile_store::{Staged, is_special_file, write_file_staged, write_held_file};
use threadx_telemetry::{MachineSummary, PhaseReport, PhaseTimer};

/// What a finished run reports, typed; `summary` is what was written beside the results,
/// made from the same values once, telemetry included.
#[derive(Debug, Clone)]
pub struct SweepReport {
    pub summary: Summary,
    pub strategy: Strategy,
    /// Where the run's time went (the summary's `phases`); `None` for a merge.
    pub phases: Option<PhaseReport>,
    /// What each worker did (the summary's `workers`); `None` for a merge.
    pub workers: Option<RunStats>,
    /// The summary's `timings_s`; `None` for a merge.
    pub timings: Option<Timings>,
    /// The summary's `telemetry`, when the caller sampled the machine.
    pub telemetry: Option<MachineSummary>,
    /// The overfitting statistics, when the spec asked for them.
    pub overfitting: Option<Overfitting>,
    pub best: Vec<Row>,
    pub rows: u64,
    /// Combos of the run that the strategy's `require` refused: they have no row (0 for a
    /// search, whose samplers propose only combos it accepts, and for a merge).
    pub skipped: u64,
    /// With `--constraint`: the rows that kept every constraint, of `rows`.
    pub passing: Option<u64>,
    /// Where the summary was written; `None` when the results went to a device or FIFO,
    /// beside which nothing is written.
    pub summary_path: Option<PathBuf>,
    /// A universe's merge: the combos across its symbols (`<out>-by-combo`).
    pub across: Option<crate::across::AcrossReport>,
}

/// Runs `sweep` (prepared on `data`) to files as `opts` says, on the workers of `pool` as
/// `distribute` splits the work (the overfitting statistics on the device `dispatcher`
/// picks), calling `progress` as chunks finish. Chunks already in the checkpoint are read back, not run, when
/// `opts.resume` is set and the checkpoint was made by the same spec, data and sharding.
/// `phases` goes on timing (the caller's phases before, e.g. load and indicators, then
/// `backtests`, `merge` and `write`); the summary's `phases` holds its breakdown.
#[allow(clippy::too_many_arguments)] // The sweep, its data, pool and dispatcher, the options, and three hooks.
pub fn run_to_files(
    sweep: &Sweep,
    data: &RunData,
    pool: &DevicePool,
    dispatcher: &Dispatcher,
    distribute: &DistributeOptions,
    opts: &OutputOptions,
    phases: PhaseTimer,
    progress: ProgressFn<'_>,
    telemetry: Option<&mut dyn FnMut() -> MachineSummary>,
) -> Result<SweepReport, SweepError> {
    let mut no_rows = |_: &Row| Ok(());
    run_keeping(sweep, data, pool, dispatcher, distribute, opts, phases, progress, telemetry, &mut no_rows)
}

/// A row handed to a caller as the run takes it: resumed chunks' first, then the run's
/// in chunk order (so combo order when nothing was resumed).
pub(crate) type KeepFn<'a> = &'a mut dyn FnMut(&Row) -> Result<(), SweepError>;

/// [`run_to_files`], handing `keep` every row: the grid run's life, phase by phase.
#[allow(clippy::too_many_arguments)] // run_to_files's arguments, and the row hook.
pub(crate) fn run_keeping(
    sweep: &Sweep,
    data: &RunData,
    pool: &DevicePool,
    dispatcher: &Dispatcher,
    distribute: &DistributeOptions,
    opts: &OutputOptions,
    mut phases: PhaseTimer,
    progress: ProgressFn<'_>,
    telemetry: Option<&mut dyn FnMut() -> MachineSummary>,
    keep: KeepFn<'_>,
) -> Result<SweepReport, SweepError> {
    let started = Instant::now();
    check_output(opts)?;
    let blocks = sweep.spec().overfitting().zip(sweep.blocks());
    check_blocks_out(blocks.is_some(), opts)?;
    let combos = sweep.combos();
    let (chunks, total) = shard_with_room(sweep, opts)?;
    let mut taken = Taken::new(sweep, opts, keep)?;
    let identity = identity(sweep.spec(), sweep.combos(), data, opts.shard);
    let checkpoint = Checkpoint::open(opts, &identity)?;
    let files = ChunkFiles::new(sweep, opts, checkpoint.dir(), blocks.map(|(_, cuts)| cuts));
    let (resumed, to_run) = files.sort(&chunks)?;

    let resume_started = Instant::now();
    let resumed_blocks = taken.take_resumed(&files, &resumed)?;
    if !resumed.is_empty() {
        phases.add("merge", resume_started.elapsed().as_secs_f64());
    }
    let grid = sweep.spec().grid();
    let mut run = RunChunks::new(&files, &opts.out, grid, &resumed, resumed_blocks)?;
    let mut done_positions: u64 = resumed.iter().map(|&c| combos.chunk_len(c)).sum();
    progress(done_positions, total);
    let run_started = Instant::now();
    let write_chunk = |chunk: u64, r: &ChunkResult| files.write(chunk, r);
    let stats = sweep.run(pool, &to_run, distribute, &write_chunk, &mut |chunk, r: ChunkResult| {
        run.deliver(&files, grid, &mut taken, chunk, r)?;
        done_positions += combos.chunk_len(chunk);
        progress(done_positions, total);
        Ok(())
    })?;
    let run_s = run_started.elapsed().as_secs_f64();
    phases.add("backtests", run_s);

    // Every output is staged beside its place, then all are put in place at the end: a
    // failure (a full disk) before then leaves the old set whole.
    let assemble_started = Instant::now();
    let rows_run = run.rows_run;
    let (results, kept) = run.finish(&files, &chunks, &opts.out)?;
    let mut staged = vec![results];
    phases.add("merge", assemble_started.elapsed().as_secs_f64());
    if let (Some(h), Some(opts)) = (&taken.heatmap, &opts.heatmap) {
        let svg = phases
            .time("write", || write_file_staged(&opts.path, h.to_svg()?.as_bytes()).map_err(io_error(&opts.path)))?;
        staged.push(svg);
    }
    let assemble_s = assemble_started.elapsed().as_secs_f64();
    let (overfitting, shard_part) = match blocks {
        Some(blocks) => phases.time("overfitting", || {
            overfitting_outputs(sweep, dispatcher, opts, blocks, kept, taken.ranking.rows(), &mut staged)
        })?,
        None => (None, None),
    };

    let phase_report = phases.report();
    let timings = Timings {
        run: run_s,
        workers_busy: stats.workers.iter().map(|w| w.busy_s).sum::<f64>(),
        writing_chunks: *files.write_s.lock().unwrap_or_else(|e| e.into_inner()),
        assembling: assemble_s,
        total: started.elapsed().as_secs_f64(),
        // Of the combos run now (a resumed run's checkpointed rows were not run).
        combos_per_s: (!to_run.is_empty() && run_s > 0.0).then(|| rows_run as f64 / run_s),
    };
    let telemetry = telemetry.map(|sample| sample());
    let mut summary = Summary {
        combos: Some(Combos {
            grid: Some(combos.grid_len()),
            positions: Some(total),
            rows: taken.rows,
            skipped: Some(total - taken.rows),
            empty: taken.ranking.empty(),
            per_symbol: None,
        }),
        chunks: Some(Chunks {
            size: combos.chunk_size(),
            this_shard: chunks.len() as u64,
            run: to_run.len() as u64,
            resumed: resumed.len() as u64,
        }),
        workers: Some(stats.summary()),
        balance: Some(BalanceSummary { tag: distribute.tag.clone(), ratios: stats.ratios.clone() }),
        timings_s: Some(TimingsSummary::Grid(timings)),
        best: Some(taken.ranking.best(sweep.spec())),
        // Until here: writing the summary itself is the one thing not in it.
        phases: Some(phase_report.summary()),
        // The process's peak memory so far, beside the estimate printed before the work.
        memory: Some(Memory { peak_bytes: threadx_telemetry::peak_resident_bytes() }),
        overfitting: overfitting.as_ref().map(Overfitting::summary),
        overfitting_shard: shard_part,
        telemetry: telemetry.clone(),
        ..summary_head(identity, sweep.spec(), data, opts)
    };
    let summary_path = checkpoint.finish(staged, &mut summary, opts)?;
    Ok(SweepReport {
        summary,
        strategy: sweep.spec().strategy().clone(),
        phases: Some(phase_report),
        workers: Some(stats),
        timings: Some(timings),
        telemetry,
        overfitting,
        best: taken.ranking.rows().to_vec(),
        rows: taken.rows,
        skipped: total - taken.rows,
        passing: taken.ranking.passing(),
        summary_path,
        across: None,
    })
}

/// A shard that keeps blocks for `merge` writes them beside its results: not beside a
/// device or FIFO.
fn check_blocks_out(keeps_blocks: bool, opts: &OutputOptions) -> Result<(), SweepError> {
    if keeps_blocks && opts.shard.count > 1 && is_special_file(&opts.out) {
        return Err(SweepError::Spec(
            "--overfitting with --shard keeps the shard's blocks beside its results: --out must be a regular file"
                .into(),
        ));
    }
    Ok(())
}

/// The overfitting statistics' outputs from the blocks `kept`: a whole run's statistics
/// and plots, or a shard's part (its blocks kept for `merge`, which computes the
/// statistics of them all).
fn overfitting_outputs(
    sweep: &Sweep,
    dispatcher: &Dispatcher,
    opts: &OutputOptions,
    (options, cuts): (&OverfittingOptions, &BlockCuts),
    kept: SweepBlocks,
    best: &[Row],
    staged: &mut Vec<Staged>,
) -> Result<(Option<Overfitting>, Option<OverfittingShard>), SweepError> {
    Ok(match opts.shard.count {
        1 => (Some(write_files(sweep, dispatcher, opts, options, cuts, kept, best, staged)?), None),
        _ => (None, Some(write_shard_part(sweep, opts, cuts, kept, best, staged)?)),
    })
}

/// Where a grid run's rows go as it takes them (resumed chunks' first, then the run's in
/// chunk order): the leaderboard, the heatmap and the caller's hook.
struct Taken<'a> {
    ranking: Ranking,
    heatmap: Option<Heatmap>,
    keep: KeepFn<'a>,
    rows: u64,
}

impl<'a> Taken<'a> {
    fn new(sweep: &Sweep, opts: &OutputOptions, keep: KeepFn<'a>) -> Result<Self, SweepError> {
        let heatmap = opts.heatmap.as_ref().map(|h| h.heatmap(sweep.spec(), &opts.by, opts.minimize)).transpose()?;
        let ranking = Ranking::new(&opts.by, opts.top, opts.constraints.clone(), opts.minimize)?;
        Ok(Self { ranking, heatmap, keep, rows: 0 })
    }

    fn take(&mut self, row: Row) -> Result<(), SweepError> {
        if let Some(h) = self.heatmap.as_mut() {
            h.offer(&row);
        }
        (self.keep)(&row)?;
        self.rows += 1;
        self.ranking.offer(row);
        Ok(())
    }

    /// Takes the resumed chunks' rows, read again chunk by chunk (never all held at once);
    /// with blocks, each chunk's combos, for its blocks to be read when the run reaches it.
    fn take_resumed(&mut self, files: &ChunkFiles<'_>, resumed: &[u64]) -> Result<BTreeMap<u64, Vec<u64>>, SweepError> {
        let mut resumed_blocks = BTreeMap::new();
        for &c in resumed {
            let mut chunk_combos = Vec::new();
            for row in files.rows(c)? {
                chunk_combos.push(row.combo);
                self.take(row)?;
            }
            if files.cuts.is_some() {
                resumed_blocks.insert(c, chunk_combos);
            }
        }
        Ok(resumed_blocks)
    }
}

/// This shard's chunks and their positions, once a fresh run (no checkpoint yet) is found
/// to have room on `opts.out`'s disk for every row twice ([`check_disk_room`]): each of the
/// symbol (where named), the combo, the parameters and the metrics.
fn shard_with_room(sweep: &Sweep, opts: &OutputOptions) -> Result<(Vec<u64>, u64), SweepError> {
    let combos = sweep.combos();
    let chunks = combos.shard_chunks(opts.shard);
    let total: u64 = chunks.iter().map(|&c| combos.chunk_len(c)).sum();
    if !has_checkpoint(&opts.out) {
        let params = sweep.spec().strategy().schema().len();
        let columns = usize::from(opts.symbol.is_some()) + 1 + params + sweep.metric_set().count();
        check_disk_room(&opts.out, (total, total), columns)?;
    }
    Ok((chunks, total))
}

/// A grid run's chunk files in its checkpoint folder, and how their rows are read.
struct ChunkFiles<'a> {
    form: ChunkForm,
    parts: &'a Path,
    strategy: &'a Strategy,
    book: &'a SignalBook,
    lead: Lead<'a>,
    /// The metrics the rows carry (a portfolio's, or every run's).
    set: MetricSet,
    /// The blocks' cuts when the run keeps blocks for the overfitting statistics.
    cuts: Option<&'a BlockCuts>,
    /// The workers' time writing chunk files, added.
    write_s: Mutex<f64>,
}

impl<'a> ChunkFiles<'a> {
    fn new(sweep: &'a Sweep, opts: &'a OutputOptions, parts: &'a Path, cuts: Option<&'a BlockCuts>) -> Self {
        Self {
            form: ChunkForm::of(&opts.out),
            parts,
            strategy: sweep.spec().strategy(),
            book: sweep.book(),
            lead: opts.symbol.as_deref().map_or(Lead::None, Lead::Symbol),
            set: sweep.metric_set(),
            cuts,
            write_s: Mutex::new(0.0),
        }
    }

    fn path(&self, chunk: u64) -> PathBuf {
        self.form.path(self.parts, chunk)
    }

    fn rows(&self, chunk: u64) -> Result<Vec<Row>, SweepError> {
        self.form.rows(&self.path(chunk), (self.strategy, self.set), self.book, self.lead)
    }

    /// The chunks already in the checkpoint, and those to run (missing or damaged: a
    /// damaged chunk is removed and run again, never trusted).
    fn sort(&self, chunks: &[u64]) -> Result<(Vec<u64>, Vec<u64>), SweepError> {
        let (mut resumed, mut to_run) = (Vec::new(), Vec::new());
        for &c in chunks {
            let path = self.path(c);
            if !path.exists() {
                to_run.push(c);
            } else if let Err(e) = self.form.verify(&path, self.set).and_then(|()| match self.cuts {
                Some(_) => verified_blocks(&blocks_path(&path)).map(drop),
                None => Ok(()),
            }) {
                tracing::warn!("{e}; running chunk {c} again");
                fs::remove_file(&path).map_err(io_error(&path))?;
                to_run.push(c);
            } else {
                resumed.push(c);
            }
        }
        Ok((resumed, to_run))
    }

    /// Writes a finished chunk's file (and its blocks), on the worker that ran it.
    fn write(&self, chunk: u64, r: &ChunkResult) -> Result<(), SweepError> {
        let started = Instant::now();
        let bytes = self.form.encode(self.book, r, (self.lead, self.set))?;
        let path = self.path(chunk);
        if let Some(cuts) = self.cuts {
            write_chunk_blocks(&blocks_path(&path), r, cuts)?;
        }
        write_held_file(&path, &bytes).map_err(io_error(&path))?;
        *self.write_s.lock().unwrap_or_else(|e| e.into_inner()) += started.elapsed().as_secs_f64();
        Ok(())
    }
}

/// The run's chunks as they arrive, in chunk order: their rows taken, columnar results
/// written as they come (a resumed chunk's rows when the run reaches it: row groups are
/// cut by row count, and encoded while the devices work), the blocks kept in chunk order
/// (a resumed chunk's read from its file when the run reaches it, so no second copy is
/// ever held). CSV results are joined from the chunks' text at [`RunChunks::finish`].
struct RunChunks {
    columnar: Option<ResultsWriter>,
    unwritten: VecDeque<u64>,
    resumed_blocks: BTreeMap<u64, Vec<u64>>,
    kept: SweepBlocks,
    cursor: GridCursor,
    rows_run: u64,
}

impl RunChunks {
    /// The run's chunks into `out` (written now when columnar), the `resumed` chunks'
    /// rows already taken.
    fn new(
        files: &ChunkFiles<'_>,
        out: &Path,
        grid: &Grid,
        resumed: &[u64],
        resumed_blocks: BTreeMap<u64, Vec<u64>>,
    ) -> Result<Self, SweepError> {
        let columnar = match files.form {
            ChunkForm::Binary => Some(ResultsWriter::create(out, files.strategy, files.lead.kind(files.set))?),
            ChunkForm::Text => None,
        };
        Ok(Self {
            columnar,
            unwritten: resumed.iter().copied().collect(),
            resumed_blocks,
            kept: SweepBlocks::default(),
            cursor: grid.cursor(),
            rows_run: 0,
        })
    }

    /// A finished chunk, delivered in chunk order: the resumed chunks before it first.
    fn deliver(
        &mut self,
        files: &ChunkFiles<'_>,
        grid: &Grid,
        taken: &mut Taken<'_>,
        chunk: u64,
        mut r: ChunkResult,
    ) -> Result<(), SweepError> {
        if files.cuts.is_some() {
            self.keep_resumed_blocks(files, chunk)?;
            self.kept.extend(SweepBlocks::taken_from(&mut r));
        }
        self.write_resumed(files, chunk)?;
        for (&combo, &metrics) in r.combos.iter().zip(&r.metrics) {
            let row = Row { combo, values: grid.values_at(self.cursor.index(combo)), metrics };
            if let Some(file) = self.columnar.as_mut() {
                file.row(files.strategy, files.lead, &row)?;
            }
            taken.take(row)?;
        }
        self.rows_run += r.combos.len() as u64;
        Ok(())
    }

    /// The blocks of the resumed chunks before `before`, in chunk order.
    fn keep_resumed_blocks(&mut self, files: &ChunkFiles<'_>, before: u64) -> Result<(), SweepError> {
        let Some(cuts) = files.cuts else { return Ok(()) };
        while let Some(entry) = self.resumed_blocks.first_entry().filter(|e| *e.key() < before) {
            let (c, combos) = entry.remove_entry();
            self.kept.extend(read_chunk_blocks(&blocks_path(&files.path(c)), combos, cuts)?);
        }
        Ok(())
    }

    /// The rows of the resumed chunks before `before` into the columnar results file.
    fn write_resumed(&mut self, files: &ChunkFiles<'_>, before: u64) -> Result<(), SweepError> {
        let Some(file) = self.columnar.as_mut() else { return Ok(()) };
        while let Some(c) = self.unwritten.front().copied().filter(|&c| c < before) {
            self.unwritten.pop_front();
            for row in files.rows(c)? {
                file.row(files.strategy, files.lead, &row)?;
            }
        }
        Ok(())
    }

    /// The results file, staged (a CSV's joined from the `chunks`' text now), and the
    /// blocks kept, the resumed chunks' after the last one run included.
    fn finish(
        mut self,
        files: &ChunkFiles<'_>,
        chunks: &[u64],
        out: &Path,
    ) -> Result<(Staged, SweepBlocks), SweepError> {
        self.write_resumed(files, u64::MAX)?;
        self.keep_resumed_blocks(files, u64::MAX)?;
        let file = match self.columnar.take() {
            Some(file) => file,
            None => {
                let mut file = ResultsWriter::create(out, files.strategy, files.lead.kind(files.set))?;
                for &c in chunks {
                    file.csv_file(&mut files.form.rows_file(&files.path(c))?)?;
                }
                file
            }
        };
        Ok((file.stage()?, self.kept))
    }
}

/// The best rows as JSON objects: combo, params, metrics.
/// A grid's best list under its `--constraint`s: only the rows that keep every one are
/// ranked, and they are counted (the grid run and `merge` rank the same way).
pub(crate) struct Ranking {
    leaderboard: Leaderboard,
    constraints: Vec<Constraint>,
    passing: u64,
    /// Rows of combos that cannot trade (`Metrics::empty`: no ranking takes them).
    empty: u64,
}

impl Ranking {
    /// The best `top` by `by`, smallest first when `minimize`, among the rows that keep
    /// `constraints`.
    pub(crate) fn new(by: &str, top: usize, constraints: Vec<Constraint>, minimize: bool) -> Result<Self, SweepError> {
        Ok(Self { leaderboard: Leaderboard::new(by, top)?.minimizing(minimize), constraints, passing: 0, empty: 0 })
    }

    pub(crate) fn offer(&mut self, row: Row) {
        self.empty += u64::from(row.metrics.total_return.is_nan());
        if Constraint::all_hold(&self.constraints, &row.metrics) {
            self.passing += 1;
            self.leaderboard.offer(row);
        }
    }

    /// Best first.
    pub(crate) fn rows(&self) -> &[Row] {
        self.leaderboard.rows()
    }

    /// The rows of combos that cannot trade; `None` without any.
    pub(crate) fn empty(&self) -> Option<u64> {
        (self.empty > 0).then_some(self.empty)
    }

    /// The rows that kept the constraints; `None` without any.
    pub(crate) fn passing(&self) -> Option<u64> {
        (!self.constraints.is_empty()).then_some(self.passing)
    }

    /// The summary's `best`: the rows and the grid's edge; with constraints, them and how
    /// many combos kept them (`passing`).
    pub(crate) fn best(&self, spec: &SweepSpec) -> Best {
        let lb = &self.leaderboard;
        let mut best = crate::edge::best_of(spec.strategy(), spec.axes(), lb.by(), lb.rows());
        best.minimize = lb.minimizes().then_some(true);
        if !self.constraints.is_empty() {
            best.constraints = Some(self.constraints.iter().map(ToString::to_string).collect());
            best.passing = Some(self.passing);
        }
        best
    }
}
