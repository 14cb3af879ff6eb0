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
use crate::overfit::{
    Overfitting, SweepBlocks, blocks_path, read_chunk_blocks, verified_blocks, write_chunk_blocks, write_files,
    write_shard_part,
};
use crate::report::{Heatmap, Leaderboard};
use crate::results_file::ResultsWriter;
use crate::rows::{Lead, Row};
use crate::run_files::{Checkpoint, OutputOptions, ProgressFn, check_output, extend, identity, summary_head};
use crate::runner::{ChunkResult, Sweep};
use crate::spec::SweepSpec;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::path::PathBuf;
use std::time::Instant;
use threadx_backtest::Strategy;
use threadx_dispatch::Dispatcher;
use threadx_indicators::Ohlcv;
use threadx_multi_gpu::{DevicePool, DistributeOptions, RunStats};
use threadx_profile_store::{is_special_file, write_file_atomic, write_file_staged};
use threadx_telemetry::{PhaseReport, PhaseTimer};

/// What a finished run reports, typed; `summary` is the JSON written beside the results,
/// made from the same values once, telemetry included.
#[derive(Debug, Clone)]
pub struct SweepReport {
    pub summary: Value,
    pub strategy: Strategy,
    /// Where the run's time went (the summary's `phases`); `None` for a merge.
    pub phases: Option<PhaseReport>,
    /// What each worker did (the summary's `workers`); `None` for a merge.
    pub workers: Option<RunStats>,
    /// The summary's `timings_s`; `None` for a merge.
    pub timings: Option<Timings>,
    /// The summary's `telemetry`, when the caller sampled the machine.
    pub telemetry: Option<Value>,
    /// The overfitting statistics, when the spec asked for them.
    pub overfitting: Option<Overfitting>,
    pub best: Vec<Row>,
    pub rows: u64,
    /// Where the summary was written; `None` when the results went to a device or FIFO,
    /// beside which nothing is written.
    pub summary_path: Option<PathBuf>,
    /// A universe's merge: the combos across its symbols (`<out>-by-combo`).
    pub across: Option<crate::across::AcrossReport>,
}

/// Where a run's wall time went, in seconds (the summary's `timings_s`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Timings {
    /// Running the chunks on the pool.
    pub run: f64,
    /// Every worker's busy time, added.
    pub workers_busy: f64,
    /// Writing the checkpoint's chunk files (inside `run`, on the workers).
    pub writing_chunks: f64,
    /// Joining the chunks into the results file and drawing the heatmap.
    pub assembling: f64,
    pub total: f64,
    /// Combos run now per second of `run`; `None` when every chunk came from the checkpoint.
    pub combos_per_s: Option<f64>,
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
    data: &Ohlcv,
    pool: &DevicePool,
    dispatcher: &Dispatcher,
    distribute: &DistributeOptions,
    opts: &OutputOptions,
    phases: PhaseTimer,
    progress: ProgressFn<'_>,
    telemetry: Option<&mut dyn FnMut() -> Value>,
) -> Result<SweepReport, SweepError> {
    let mut no_rows = |_: &Row| Ok(());
    run_keeping(sweep, data, pool, dispatcher, distribute, opts, phases, progress, telemetry, &mut no_rows)
}

/// A row handed to a caller as the run takes it: resumed chunks' first, then the run's
/// in chunk order (so combo order when nothing was resumed).
pub(crate) type KeepFn<'a> = &'a mut dyn FnMut(&Row) -> Result<(), SweepError>;

/// [`run_to_files`], handing `keep` every row.
#[allow(clippy::too_many_arguments)] // run_to_files's arguments, and the row hook.
pub(crate) fn run_keeping(
    sweep: &Sweep,
    data: &Ohlcv,
    pool: &DevicePool,
    dispatcher: &Dispatcher,
    distribute: &DistributeOptions,
    opts: &OutputOptions,
    mut phases: PhaseTimer,
    progress: ProgressFn<'_>,
    telemetry: Option<&mut dyn FnMut() -> Value>,
    keep: KeepFn<'_>,
) -> Result<SweepReport, SweepError> {
    let started = Instant::now();
    check_output(opts)?;
    let strategy = sweep.spec().strategy();
    let mut leaderboard = Leaderboard::new(&opts.by, opts.top)?;
    let mut heatmap = match &opts.heatmap {
        Some(h) => Some(Heatmap::new(strategy.clone(), sweep.spec().axes(), h.x.as_deref(), h.y.as_deref(), &opts.by)?),
        None => None,
    };

    let blocks = sweep.spec().overfitting().zip(sweep.blocks());
    if blocks.is_some() && opts.shard.count > 1 && is_special_file(&opts.out) {
        return Err(SweepError::Spec(
            "--overfitting with --shard keeps the shard's blocks beside its results: --out must be a regular file"
                .into(),
        ));
    }
    let identity = identity(sweep.spec(), sweep.combos(), data, opts.shard);
    let checkpoint = Checkpoint::open(opts, &identity)?;
    let parts = checkpoint.dir();

    let combos = sweep.combos();
    let chunks = combos.shard_chunks(opts.shard);
    let total: u64 = chunks.iter().map(|&c| combos.chunk_len(c)).sum();
    let mut done_positions = 0u64;
    let mut rows = 0u64;
    let (mut resumed, mut to_run) = (Vec::new(), Vec::new());
    let form = ChunkForm::of(&opts.out);
    let book = sweep.book();
    let lead = opts.symbol.as_deref().map_or(Lead::None, Lead::Symbol);
    let kind = lead.kind();
    for &c in &chunks {
        let path = form.path(parts, c);
        if !path.exists() {
            to_run.push(c);
        } else if let Err(e) = form.verify(&path).and_then(|()| match blocks {
            Some(_) => verified_blocks(&blocks_path(&path)).map(drop),
            None => Ok(()),
        }) {
            // A damaged chunk is run again, never trusted.
            tracing::warn!("{e}; running chunk {c} again");
            fs::remove_file(&path).map_err(io_error(&path))?;
            to_run.push(c);
        } else {
            resumed.push(c);
        }
    }
    let mut take = |row: Row, leaderboard: &mut Leaderboard, heatmap: &mut Option<Heatmap>| {
        if let Some(h) = heatmap.as_mut() {
            h.offer(&row);
        }
        keep(&row)?;
        leaderboard.offer(row);
        Ok::<(), SweepError>(())
    };
    let resume_started = Instant::now();
    // The blocks kept, joined in chunk order as the run goes: a resumed chunk's are read
    // from its file when the run reaches it, so no second copy is ever held.
    let mut kept = SweepBlocks::default();
    let mut resumed_blocks: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for &c in &resumed {
        let mut chunk_combos = Vec::new();
        // Read again chunk by chunk: the resumed rows are never all held at once.
        for row in form.rows(&form.path(parts, c), strategy, book, lead)? {
            chunk_combos.push(row.combo);
            take(row, &mut leaderboard, &mut heatmap)?;
            rows += 1;
        }
        if blocks.is_some() {
            resumed_blocks.insert(c, chunk_combos);
        }
        done_positions += combos.chunk_len(c);
    }
    if !resumed.is_empty() {
        phases.add("merge", resume_started.elapsed().as_secs_f64());
    }
    progress(done_positions, total);

    let run_started = Instant::now();
    let grid = sweep.spec().grid();
    let mut cursor = grid.cursor();
    let write_s = std::sync::Mutex::new(0.0f64);
    let mut rows_run = 0u64;
    let write_chunk = |chunk: u64, r: &ChunkResult| -> Result<(), SweepError> {
        let t = Instant::now();
        let bytes = form.encode(book, r, lead)?;
        let path = form.path(parts, chunk);
        if let Some((_, cuts)) = blocks {
            write_chunk_blocks(&blocks_path(&path), r, cuts)?;
        }
        write_file_atomic(&path, &bytes).map_err(io_error(&path))?;
        *write_s.lock().unwrap_or_else(|e| e.into_inner()) += t.elapsed().as_secs_f64();
        Ok(())
    };
    let mut keep_resumed = |before: u64, kept: &mut SweepBlocks| -> Result<(), SweepError> {
        let Some((_, cuts)) = blocks else { return Ok(()) };
        while let Some(entry) = resumed_blocks.first_entry().filter(|e| *e.key() < before) {
            let (c, combos) = entry.remove_entry();
            kept.extend(read_chunk_blocks(&blocks_path(&form.path(parts, c)), combos, cuts)?);
        }
        Ok(())
    };
    // Columnar results are written as the chunks come, in chunk order (a resumed chunk's
    // rows read when the run reaches it): their row groups are cut by row count, and
    // encoded while the devices work. CSV results are joined from the chunks' text after.
    let mut columnar = match form {
        ChunkForm::Binary => Some(ResultsWriter::create(&opts.out, strategy, kind)?),
        ChunkForm::Text => None,
    };
    let mut unwritten: VecDeque<u64> = resumed.iter().copied().collect();
    let mut write_resumed = |before: u64, file: &mut ResultsWriter| -> Result<(), SweepError> {
        while let Some(c) = unwritten.front().copied().filter(|&c| c < before) {
            unwritten.pop_front();
            for row in form.rows(&form.path(parts, c), strategy, book, lead)? {
                file.row(strategy, lead, &row)?;
            }
        }
        Ok(())
    };
    let stats = sweep.run(pool, &to_run, distribute, &write_chunk, &mut |chunk, mut r: ChunkResult| {
        if blocks.is_some() {
            keep_resumed(chunk, &mut kept)?;
            kept.extend(SweepBlocks::taken_from(&mut r));
        }
        if let Some(file) = columnar.as_mut() {
            write_resumed(chunk, file)?;
        }
        for (&combo, &metrics) in r.combos.iter().zip(&r.metrics) {
            let row = Row { combo, values: grid.values_at(cursor.index(combo)), metrics };
            if let Some(file) = columnar.as_mut() {
                file.row(strategy, lead, &row)?;
            }
            take(row, &mut leaderboard, &mut heatmap)?;
        }
        rows += r.combos.len() as u64;
        rows_run += r.combos.len() as u64;
        done_positions += combos.chunk_len(chunk);
        progress(done_positions, total);
        Ok(())
    })?;
    let run_s = run_started.elapsed().as_secs_f64();
    phases.add("backtests", run_s);

    // Every output is staged beside its place, then all are put in place at the end: a
    // failure (a full disk) before then leaves the old set whole.
    let mut staged = Vec::new();
    let assemble_started = Instant::now();
    let file = match columnar {
        Some(mut file) => {
            write_resumed(u64::MAX, &mut file)?;
            file
        }
        None => {
            let mut file = ResultsWriter::create(&opts.out, strategy, kind)?;
            for &c in &chunks {
                file.csv_file(&mut form.rows_file(&form.path(parts, c))?)?;
            }
            file
        }
    };
    staged.push(file.stage()?);
    phases.add("merge", assemble_started.elapsed().as_secs_f64());
    if let (Some(h), Some(opts)) = (&heatmap, &opts.heatmap) {
        let svg = phases
            .time("write", || write_file_staged(&opts.path, h.to_svg()?.as_bytes()).map_err(io_error(&opts.path)))?;
        staged.push(svg);
    }
    let assemble_s = assemble_started.elapsed().as_secs_f64();
    let write_s = write_s.into_inner().unwrap_or_else(|e| e.into_inner());
    // Resumed chunks after the last one run.
    keep_resumed(u64::MAX, &mut kept)?;
    // A shard keeps its blocks for `merge`, which computes the statistics of them all.
    let (mut overfitting, mut shard_part) = (None, None);
    if let Some((options, cuts)) = blocks {
        let kept = std::mem::take(&mut kept);
        phases.time("overfitting", || -> Result<(), SweepError> {
            match opts.shard.count {
                1 => {
                    let o = write_files(sweep, dispatcher, opts, options, cuts, kept, leaderboard.rows(), &mut staged)?;
                    overfitting = Some(o);
                }
                _ => shard_part = Some(write_shard_part(sweep, opts, cuts, kept, leaderboard.rows(), &mut staged)?),
            }
            Ok(())
        })?;
    }

    let phase_report = phases.report();
    let timings = Timings {
        run: run_s,
        workers_busy: stats.workers.iter().map(|w| w.busy_s).sum::<f64>(),
        writing_chunks: write_s,
        assembling: assemble_s,
        total: started.elapsed().as_secs_f64(),
        // Of the combos run now (a resumed run's checkpointed rows were not run).
        combos_per_s: (!to_run.is_empty() && run_s > 0.0).then(|| rows_run as f64 / run_s),
    };
    let mut summary = summary_head(identity, sweep.spec(), data, opts);
    extend(
        &mut summary,
        json!({
            "combos": {"grid": combos.grid_len(), "positions": total, "rows": rows, "skipped": total - rows},
            "chunks": {"size": combos.chunk_size(), "this_shard": chunks.len(), "run": to_run.len(), "resumed": resumed.len()},
            "workers": stats.to_json("combos"),
            "balance": {"tag": distribute.tag, "ratios": stats.ratios},
            "timings_s": timings,
            "best": best_json(sweep.spec(), &leaderboard),
            // Until here: writing the summary itself is the one thing not in it.
            "phases": phase_report.to_json(),
            // The process's peak memory so far, beside the estimate printed before the work.
            "memory": {"peak_bytes": threadx_telemetry::peak_resident_bytes()},
        }),
    );
    if let Some(o) = &overfitting {
        summary["overfitting"] = o.to_json();
    }
    if let Some(part) = shard_part {
        summary["overfitting_shard"] = part;
    }
    let telemetry = telemetry.map(|sample| sample());
    if let Some(t) = &telemetry {
        summary["telemetry"] = t.clone();
    }
    let summary_path = checkpoint.finish(staged, &mut summary, opts)?;
    Ok(SweepReport {
        summary,
        strategy: strategy.clone(),
        phases: Some(phase_report),
        workers: Some(stats),
        timings: Some(timings),
        telemetry,
        overfitting,
        best: leaderboard.rows().to_vec(),
        rows,
        summary_path,
        across: None,
    })
}

/// The best rows as JSON objects: combo, params, metrics.
pub fn best_json(spec: &SweepSpec, leaderboard: &Leaderboard) -> Value {
    crate::edge::rows_json(spec.strategy(), spec.axes(), leaderboard.by(), leaderboard.rows())
}
