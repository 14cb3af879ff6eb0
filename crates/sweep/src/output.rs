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
use crate::combos::{ComboSet, Shard};
use crate::error::{SweepError, io_error};
use crate::overfit::{
    Overfitting, SweepBlocks, blocks_path, read_chunk_blocks, verified_blocks, write_chunk_blocks, write_files,
    write_shard_part,
};
use crate::report::{Heatmap, Leaderboard};
use crate::results_file::ResultsWriter;
use crate::rows::{Lead, Row};
use crate::runner::{ChunkResult, Sweep};
use crate::spec::SweepSpec;
use crate::spec::fnv1a;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use threadx_backtest::Strategy;
use threadx_dispatch::Dispatcher;
use threadx_indicators::{Ohlcv, format_time};
use threadx_multi_gpu::{DevicePool, DistributeOptions, RunStats};
use threadx_profile_store::{Staged, is_special_file, write_file_atomic, write_file_staged};
use threadx_telemetry::{PhaseReport, PhaseTimer};

/// How a sweep writes its results.
#[derive(Debug, Clone)]
pub struct OutputOptions {
    /// The results file: CSV, or Parquet or Arrow IPC by its extension
    /// ([`crate::TableFormat::of`]); the summary goes beside it with the extension `.json`.
    pub out: PathBuf,
    /// Continue from the checkpoint beside `out` instead of refusing to overwrite it.
    pub resume: bool,
    pub shard: Shard,
    /// Rows kept for the summary's best list.
    pub top: usize,
    /// The metric that ranks combos (largest first).
    pub by: String,
    /// Draw `by` over two parameters (None: the first two that vary) into this SVG.
    pub heatmap: Option<HeatmapOptions>,
    /// With overfitting statistics: the logit histogram's and the out-of-sample plot's SVGs.
    pub overfitting_plots: Option<(PathBuf, PathBuf)>,
    /// With overfitting statistics: the blocks as CSV.
    pub blocks_out: Option<PathBuf>,
    /// The rows' symbol, in a `symbol` column before `combo` (one symbol of a universe).
    pub symbol: Option<String>,
    /// The run's hold on its checkpoint folder, taken before any work ([`hold_outputs`]);
    /// None: the run takes it when it opens the checkpoint.
    pub hold: Option<Arc<OutputHold>>,
}

#[derive(Debug, Clone)]
pub struct HeatmapOptions {
    pub path: PathBuf,
    pub x: Option<String>,
    pub y: Option<String>,
}

/// Progress of a run: positions done (combos, skipped ones included) of `total`.
pub type ProgressFn<'a> = &'a mut dyn FnMut(u64, u64);

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

/// A data set's identity for checkpoints and shards: FNV-1a over every timestamp and
/// price bit, with the bar count.
pub fn data_fingerprint(data: &Ohlcv) -> String {
    let mut bytes = Vec::with_capacity(data.len() * 48);
    for (i, &t) in data.timestamps().iter().enumerate() {
        bytes.extend(t.to_le_bytes());
        for series in [data.open(), data.high(), data.low(), data.close(), data.volume()] {
            bytes.extend(series[i].to_bits().to_le_bytes());
        }
    }
    format!("{:016x}-{}", fnv1a(&bytes), data.len())
}

/// The summary beside `out` (`<out stem>.json`); none beside a device or FIFO such as
/// `/dev/null`, which is not a folder's file.
pub fn summary_path(out: &Path) -> Option<PathBuf> {
    (!is_special_file(out)).then(|| out.with_extension("json"))
}

/// The checkpoint folder of a run writing `out`: `<out>.parts`; for a device or FIFO, a
/// folder of this process's own in the temporary directory (such a run cannot resume).
pub fn checkpoint_dir(out: &Path) -> PathBuf {
    if is_special_file(out) {
        return std::env::temp_dir().join(format!("threadx-sweep-{}.parts", std::process::id()));
    }
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".parts");
    out.with_file_name(name)
}

/// A summary's opening fields, a grid run's and a search run's alike: the version, what
/// the run is (`identity`), the data, the shard and the results file; `whole_grid` when
/// `spec` asked more combos than its grid has.
pub(crate) fn summary_head(identity: Value, spec: &SweepSpec, data: &Ohlcv, opts: &OutputOptions) -> Value {
    let mut head = json!({
        "threadx": env!("CARGO_PKG_VERSION"),
        "identity": identity,
        "data": {"origin": data.origin(), "bars": data.len(),
                 "first": data.timestamps().first().map(|&t| format_time(t)),
                 "last": data.timestamps().last().map(|&t| format_time(t))},
        "shard": {"index": opts.shard.index, "count": opts.shard.count},
        "results": opts.out.file_name().map(|n| n.to_string_lossy().into_owned()),
    });
    if let Some(w) = spec.whole_grid() {
        head["whole_grid"] = json!({"asked": w.asked, "grid": spec.grid_len()});
    }
    head
}

/// Adds the fields of the object `more` to the object `summary`.
pub(crate) fn extend(summary: &mut Value, more: Value) {
    if let (Some(to), Value::Object(from)) = (summary.as_object_mut(), more) {
        to.extend(from);
    }
}

/// What identifies a run for resume and merge: spec, data, chunking and shard count.
pub(crate) fn identity(spec: &SweepSpec, combos: &ComboSet, data: &Ohlcv, shard: Shard) -> Value {
    json!({
        "spec": spec.to_json(),
        "data": {"origin": data.origin(), "bars": data.len(), "fingerprint": data_fingerprint(data)},
        "chunk_size": combos.chunk_size(),
        "shards": shard.count,
    })
}

/// The first field in which `before` and `now` differ, as `path: A before, B now`.
fn first_difference(before: &Value, now: &Value, path: &str) -> Option<String> {
    match (before, now) {
        (Value::Object(a), Value::Object(b)) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            keys.into_iter().find_map(|k| {
                let inner = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                first_difference(a.get(k).unwrap_or(&Value::Null), b.get(k).unwrap_or(&Value::Null), &inner)
            })
        }
        _ if before == now => None,
        _ => Some(format!("{}: {before} before, {now} now", path.strip_prefix("identity.").unwrap_or(path))),
    }
}

/// A run's hold on its outputs, taken before any work so that no second run into the
/// same `--out` can start while this one prepares: the lock of the checkpoint folder,
/// made for it when there was none (and removed again if the run ends before it began:
/// a folder without `sweep.json` holds nothing).
#[derive(Debug)]
pub struct OutputHold {
    parts: PathBuf,
    made: bool,
    _lock: CheckpointLock,
}

impl Drop for OutputHold {
    fn drop(&mut self) {
        // Only a folder still this run's own (its lock file the one held: a finished run
        // removes the folder, and another run may have made a new one since).
        if self.made && !self.parts.join(META).exists() && self._lock.is_file_at(&self.parts.join("lock")) {
            let _ = fs::remove_dir_all(&self.parts);
        }
    }
}

/// The checkpoint's description of the run that made it.
const META: &str = "sweep.json";

/// Takes the run's hold on the checkpoint folder beside `opts.out` (see [`OutputHold`]);
/// fails at once, naming the other run's pid, when a live run holds it.
pub fn hold_outputs(opts: &mut OutputOptions) -> Result<(), SweepError> {
    let parts = checkpoint_dir(&opts.out);
    let made = !parts.exists();
    if made {
        fs::create_dir(&parts).map_err(io_error(&parts))?;
    }
    match CheckpointLock::acquire(&parts) {
        Ok(lock) => {
            opts.hold = Some(Arc::new(OutputHold { parts, made, _lock: lock }));
            Ok(())
        }
        Err(e) => {
            if made {
                let _ = fs::remove_dir_all(&parts);
            }
            Err(e)
        }
    }
}

/// Whether `opts` already holds the checkpoint folder `parts`.
fn holds(opts: &OutputOptions, parts: &Path) -> bool {
    opts.hold.as_ref().is_some_and(|h| h.parts == parts)
}

/// Opens the checkpoint folder `parts` for a run described by `meta`: creates it (with
/// `sweep.json`), or, when it holds one, checks that the same run made it. The run holds
/// it until the returned lock is dropped (none when `opts` holds it from the start).
pub(crate) fn open_checkpoint(
    parts: &Path,
    meta: Value,
    opts: &OutputOptions,
) -> Result<Option<CheckpointLock>, SweepError> {
    let meta_path = parts.join(META);
    let lock = |parts: &Path| if holds(opts, parts) { Ok(None) } else { CheckpointLock::acquire(parts).map(Some) };
    if meta_path.exists() {
        let lock = lock(parts)?;
        let text = fs::read_to_string(&meta_path).map_err(io_error(&meta_path))?;
        let found: Value = serde_json::from_str(&text).map_err(|e| {
            SweepError::Results(format!("{} is not a sweep checkpoint ({e}); delete the folder", meta_path.display()))
        })?;
        if found != meta {
            let what = first_difference(&found, &meta, "").unwrap_or_default();
            return Err(SweepError::Results(format!(
                "the checkpoint in {} was made by a different sweep ({what}); run the same command as before, \
                 or delete the folder to start over",
                parts.display()
            )));
        }
        Ok(lock)
    } else {
        if !parts.exists() {
            fs::create_dir(parts).map_err(io_error(parts))?;
        }
        let lock = lock(parts)?;
        write_file_atomic(&meta_path, format!("{meta:#}\n").as_bytes()).map_err(io_error(&meta_path))?;
        Ok(lock)
    }
}

/// The exclusive hold of one run on a checkpoint folder: a lock on `<parts>/lock`, which
/// holds the holder's pid. Released when dropped or when the process dies (SIGKILL too).
#[derive(Debug)]
pub(crate) struct CheckpointLock {
    _held: fs::File,
}

impl CheckpointLock {
    fn acquire(parts: &Path) -> Result<Self, SweepError> {
        let path = parts.join("lock");
        let mut file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_error(&path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Err(held(parts, &path)),
            Err(fs::TryLockError::Error(e)) => return Err(io_error(&path)(e)),
        }
        file.set_len(0).map_err(io_error(&path))?;
        file.write_all(std::process::id().to_string().as_bytes()).map_err(io_error(&path))?;
        Ok(Self { _held: file })
    }

    /// Whether the lock file at `path` is the one this lock holds (not one made since).
    fn is_file_at(&self, path: &Path) -> bool {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            match (self._held.metadata(), fs::metadata(path)) {
                (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
                _ => false,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            false
        }
    }
}

/// The error for a checkpoint another live run holds, naming its pid.
fn held(parts: &Path, lock: &Path) -> SweepError {
    let pid = fs::read_to_string(lock).ok().filter(|p| !p.trim().is_empty()).unwrap_or_else(|| "?".into());
    SweepError::Results(format!(
        "another sweep (pid {}) is running into {}; wait for it to finish, or stop it and then --resume",
        pid.trim(),
        parts.display()
    ))
}

/// Ends a run's writing: stages `summary` beside `out` after the other staged outputs and
/// puts them all in place in that order (the summary last: it vouches for the others).
/// `staged[0]` is the results file, whose checksum a shard's summary records
/// (`results_checksum`) so that `merge` refuses a shard changed since it ran; `files` lists
/// every output of the run. Returns where the summary went (none beside a device or FIFO).
pub(crate) fn commit_with_summary(
    mut staged: Vec<Staged>,
    summary: &mut Value,
    out: &Path,
    shard: Shard,
) -> Result<Option<PathBuf>, SweepError> {
    if !shard.is_whole() {
        summary["results_checksum"] = json!(crate::chunk_file::file_checksum(staged[0].written())?);
    }
    // What belongs to this run: a file beside it that is not listed (an earlier run's
    // plot, say) is not this run's.
    summary["files"] = json!(staged.iter().map(|f| f.path().display().to_string()).collect::<Vec<_>>());
    let path = summary_path(out);
    if let Some(path) = &path {
        staged.push(write_file_staged(path, format!("{summary:#}\n").as_bytes()).map_err(io_error(path))?);
    }
    for file in staged {
        let to = file.path().to_owned();
        file.commit().map_err(io_error(&to))?;
    }
    Ok(path)
}

/// Fails before any work if `path` cannot be written.
pub fn check_writable(path: &Path) -> Result<(), SweepError> {
    threadx_profile_store::check_writable(path).map_err(SweepError::Results)
}

/// Checks the output paths before anything is computed.
pub fn check_output(opts: &OutputOptions) -> Result<(), SweepError> {
    check_writable(&opts.out)?;
    if opts.resume && is_special_file(&opts.out) {
        return Err(SweepError::Results(format!(
            "--resume needs --out to be a regular file: {} is a device or FIFO, beside which no checkpoint is kept",
            opts.out.display()
        )));
    }
    if opts.out.extension().is_some_and(|e| e == "json") {
        return Err(SweepError::Results(format!(
            "--out {}: the results are CSV, Parquet (.parquet) or Arrow (.arrow, .feather); the summary is written beside them as .json",
            opts.out.display()
        )));
    }
    if let Some(h) = &opts.heatmap {
        check_writable(&h.path)?;
    }
    let parts = checkpoint_dir(&opts.out);
    if parts.exists() && !holds(opts, &parts) {
        // Taken and let go at once: only to tell whether a live run holds it.
        drop(CheckpointLock::acquire(&parts)?);
    }
    if parts.join(META).exists() && !opts.resume {
        return Err(SweepError::Results(format!(
            "{} holds the checkpoint of an unfinished sweep; pass --resume to continue it, or delete the folder to start over",
            parts.display()
        )));
    }
    Ok(())
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
    let parts = checkpoint_dir(&opts.out);
    let identity = identity(sweep.spec(), sweep.combos(), data, opts.shard);
    let _lock = open_checkpoint(&parts, json!({"identity": identity, "shard": opts.shard.index}), opts)?;

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
        let path = form.path(&parts, c);
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
        for row in form.rows(&form.path(&parts, c), strategy, book, lead)? {
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
        let path = form.path(&parts, chunk);
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
            kept.extend(read_chunk_blocks(&blocks_path(&form.path(&parts, c)), combos, cuts)?);
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
            for row in form.rows(&form.path(&parts, c), strategy, book, lead)? {
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
                file.csv_file(&mut form.rows_file(&form.path(&parts, c))?)?;
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
    let summary_path = commit_with_summary(staged, &mut summary, &opts.out, opts.shard)?;
    fs::remove_dir_all(&parts).map_err(io_error(&parts))?;
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

/// `e`, naming the file it was found in.
pub(crate) fn in_file(path: &Path, e: SweepError) -> SweepError {
    SweepError::Results(format!("{}: {e}", path.display()))
}

/// The best rows as JSON objects: combo, params, metrics.
pub fn best_json(spec: &SweepSpec, leaderboard: &Leaderboard) -> Value {
    crate::edge::rows_json(spec.strategy(), spec.axes(), leaderboard.by(), leaderboard.rows())
}
