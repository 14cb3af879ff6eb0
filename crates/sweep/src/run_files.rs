//! What every run does with its files, whatever it computes: the options
//! ([`OutputOptions`]), the outputs checked before any work, the checkpoint folder
//! (`<out>.parts`: its `sweep.json` identity, its lock, [`OutputHold`]), the summary's
//! opening fields, and the commit that puts every output in place, the summary last.
//! A grid's, a search's and a universe's runs and `merge` all go through here.

use crate::combos::{ComboSet, Shard};
use crate::error::{SweepError, io_error};
use crate::heatmap::Heatmap;
use crate::run_data::{RunData, annualised};
use crate::search::Constraint;
use crate::spec::SweepSpec;
use crate::summary::{Annualisation, Identity, Summary, WholeGridSummary};
use serde_json::{Value, json};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use threadx_indicators::Ohlcv;
use threadx_profile_store::{Staged, is_special_file, write_file_atomic, write_file_staged};

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
    /// Rank `by` smallest first instead (`--minimize` on a grid).
    pub minimize: bool,
    /// Rules a combo must keep to rank (`--constraint`): every row is written, and only the
    /// combos that keep them all enter the best list.
    pub constraints: Vec<Constraint>,
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

impl HeatmapOptions {
    /// The empty heatmap of `by` (its best the smallest when `minimize`) over this choice
    /// of axes of `spec`'s grid, or why the choice cannot be drawn.
    pub fn heatmap(&self, spec: &SweepSpec, by: &str, minimize: bool) -> Result<Heatmap, SweepError> {
        Ok(Heatmap::new(spec.strategy().clone(), spec.axes(), self.x.as_deref(), self.y.as_deref(), by)?
            .minimizing(minimize))
    }
}

/// Progress of a run: positions done (combos, skipped ones included) of `total`.
pub type ProgressFn<'a> = &'a mut dyn FnMut(u64, u64);

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
pub(crate) fn summary_head(identity: Identity, spec: &SweepSpec, data: &RunData, opts: &OutputOptions) -> Summary {
    Summary {
        identity: Some(identity),
        data: Some(data.summary.clone()),
        annualisation: Some(data.annualisation(spec.periods_per_year())),
        whole_grid: spec.whole_grid().map(|w| WholeGridSummary { asked: w.asked, grid: spec.grid_len() }),
        ..run_head(opts)
    }
}

/// The fields every run's summary opens with: the version, the shard and the results file.
pub(crate) fn run_head(opts: &OutputOptions) -> Summary {
    Summary {
        shard: Some(opts.shard),
        results: opts.out.file_name().map(|n| n.to_string_lossy().into_owned()),
        ..Summary::new()
    }
}

/// The bars per year that annualised a run's figures and why, as summaries and
/// `backtest --json` give it: `given`, `--periods-per-year`'s, or the calendar the bars
/// keep ([`Calendar`](threadx_indicators::Calendar)).
pub fn annualisation(given: Option<f64>, data: &Ohlcv) -> Annualisation {
    let calendar = data.calendar();
    annualised(given, calendar.bars_per_year(data.timestamps()), calendar.describe())
}

/// What identifies a run for resume and merge: spec, data, chunking and shard count.
pub(crate) fn identity(spec: &SweepSpec, combos: &ComboSet, data: &RunData, shard: Shard) -> Identity {
    Identity {
        spec: spec.to_json(),
        data: Some(data.identity.clone()),
        universe: None,
        portfolio: data.portfolio.clone(),
        chunk_size: Some(combos.chunk_size()),
        shards: shard.count,
    }
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
/// a folder without `sweep.json` holds nothing; a device's or FIFO's scratch folder is
/// removed however the run ends, since nothing can resume it).
#[derive(Debug)]
pub struct OutputHold {
    parts: PathBuf,
    made: bool,
    scratch: bool,
    _lock: CheckpointLock,
}

impl Drop for OutputHold {
    fn drop(&mut self) {
        // Only a folder still this run's own (its lock file the one held: a finished run
        // removes the folder, and another run may have made a new one since).
        let resumable = !self.scratch && self.parts.join(META).exists();
        if self.made && !resumable && self._lock.is_file_at(&self.parts.join("lock")) {
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
    let scratch = is_special_file(&opts.out);
    if scratch && parts.exists() {
        remove_stale_scratch(&parts)?;
    }
    let made = !parts.exists();
    if made {
        fs::create_dir(&parts).map_err(io_error(&parts))?;
    }
    match CheckpointLock::acquire(&parts) {
        Ok(lock) => {
            opts.hold = Some(Arc::new(OutputHold { parts, made, scratch, _lock: lock }));
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

/// Removes the scratch folder `parts` of a device's or FIFO's run that a dead process with
/// this pid left (it killed, or failed late): nothing can resume it. Refused while a live
/// run holds it.
fn remove_stale_scratch(parts: &Path) -> Result<(), SweepError> {
    let lock = CheckpointLock::acquire(parts)?;
    fs::remove_dir_all(parts).map_err(io_error(parts))?;
    drop(lock);
    Ok(())
}

/// Whether `opts` already holds the checkpoint folder `parts`.
fn holds(opts: &OutputOptions, parts: &Path) -> bool {
    opts.hold.as_ref().is_some_and(|h| h.parts == parts)
}

/// Opens the checkpoint folder `parts` for a run described by `meta`: creates it (with
/// `sweep.json`), or, when it holds one, checks that the same run made it. The run holds
/// it until the returned lock is dropped (none when `opts` holds it from the start).
fn open_checkpoint(parts: &Path, meta: Value, opts: &OutputOptions) -> Result<Option<CheckpointLock>, SweepError> {
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

/// A run's checkpoint folder, open for the run its identity names: made for it, or the
/// same run's found again (`--resume`), held until the run ends. Every run (grid, search,
/// universe) opens, holds and removes its checkpoint here and nowhere else. A device's or
/// FIFO's scratch folder is removed however the run ends: nothing can resume it.
#[derive(Debug)]
pub(crate) struct Checkpoint {
    parts: PathBuf,
    scratch: bool,
    lock: Option<CheckpointLock>,
}

impl Checkpoint {
    /// Opens the checkpoint beside `opts.out` for the run `identity` names (see
    /// [`open_checkpoint`]).
    pub(crate) fn open(opts: &OutputOptions, identity: &Identity) -> Result<Self, SweepError> {
        let parts = checkpoint_dir(&opts.out);
        let lock = open_checkpoint(&parts, json!({"identity": identity, "shard": opts.shard.index}), opts)?;
        Ok(Self { parts, scratch: is_special_file(&opts.out), lock })
    }

    /// The folder, for the run's own files in it.
    pub(crate) fn dir(&self) -> &Path {
        &self.parts
    }

    /// Ends the run: its staged outputs and then `summary` put in place
    /// ([`commit_with_summary`]), then the folder removed while still held, so that no
    /// other run finds it half gone. Returns where the summary went.
    pub(crate) fn finish(
        self,
        staged: Vec<Staged>,
        summary: &mut Summary,
        opts: &OutputOptions,
    ) -> Result<Option<PathBuf>, SweepError> {
        let summary_path = commit_with_summary(staged, summary, &opts.out, opts.shard)?;
        fs::remove_dir_all(&self.parts).map_err(io_error(&self.parts))?;
        Ok(summary_path)
    }
}

impl Drop for Checkpoint {
    fn drop(&mut self) {
        // Still held here (the lock is dropped after this), so no other run finds it half
        // gone; a run that holds it through `OutputOptions::hold` removes it there.
        if self.scratch && self.lock.is_some() {
            let _ = fs::remove_dir_all(&self.parts);
        }
    }
}

/// The exclusive hold of one run on a checkpoint folder: a lock on `<parts>/lock`, which
/// holds the holder's pid. Released when dropped or when the process dies (SIGKILL too).
#[derive(Debug)]
struct CheckpointLock {
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
    summary: &mut Summary,
    out: &Path,
    shard: Shard,
) -> Result<Option<PathBuf>, SweepError> {
    if !shard.is_whole() {
        summary.results_checksum = Some(crate::chunk_file::file_checksum(staged[0].written())?);
    }
    // What belongs to this run: a file beside it that is not listed (an earlier run's
    // plot, say) is not this run's.
    summary.files = staged.iter().map(|f| f.path().display().to_string()).collect();
    let path = summary_path(out);
    if let Some(path) = &path {
        staged.push(write_file_staged(path, summary.to_text().as_bytes()).map_err(io_error(path))?);
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

/// Refuses, before any chunk runs (or any row is merged), results that cannot fit on the
/// disk of `out`: `rows` new rows of `columns` values into the checkpoint, and `total`
/// rows into the results file made from it (both on that disk at the end), at least 2 bytes a value in CSV (a
/// digit and a comma) and 1 in Parquet or Arrow, against the space free there. A lower
/// bound: a run it passes may still fill the disk (its chunks stay, for `--resume`); one
/// it refuses could not have finished. A device or FIFO, or a disk that tells nothing,
/// is not checked.
pub fn check_disk_room(out: &Path, (rows, total): (u64, u64), columns: usize) -> Result<(), SweepError> {
    if is_special_file(out) {
        return Ok(());
    }
    let Some(free) = threadx_profile_store::free_bytes(out) else { return Ok(()) };
    let per_value = if crate::TableFormat::of(out).is_columnar() { 1 } else { 2 };
    let least = (u128::from(rows) + u128::from(total)) * columns as u128 * per_value;
    if least <= u128::from(free) {
        return Ok(());
    }
    let (files, advice) = match rows {
        0 => ("the results file", "write to a larger disk, or to Parquet (.parquet)"),
        _ => (
            "the checkpoint's chunks and the results file",
            "sample the grid with --random N or --search, or write to a larger disk",
        ),
    };
    Err(SweepError::Results(format!(
        "{}: {} rows of {columns} columns need at least {} on its disk ({files}), more than the {} free there; {advice}",
        out.display(),
        threadx_dispatch::thousands(total),
        threadx_dispatch::format_bytes(u64::try_from(least).unwrap_or(u64::MAX)),
        threadx_dispatch::format_bytes(free),
    )))
}

/// Whether `out` has a checkpoint of a run to resume (not only the folder a run holds).
pub(crate) fn has_checkpoint(out: &Path) -> bool {
    checkpoint_dir(out).join(META).exists()
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
        if is_special_file(&opts.out) {
            remove_stale_scratch(&parts)?;
        } else {
            drop(CheckpointLock::acquire(&parts)?);
        }
    }
    if parts.join(META).exists() && !opts.resume {
        return Err(SweepError::Results(format!(
            "{} holds the checkpoint of an unfinished sweep; pass --resume to continue it, or delete the folder to start over",
            parts.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_disk_room;

    /// Rows that no disk holds are refused with the figures; a small run passes, and so do
    /// a device (nothing is kept beside it).
    #[test]
    fn results_that_cannot_fit_on_the_disk_are_refused_before_any_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.csv");
        let huge = 1_000_000_000_000_000;
        let err = check_disk_room(&out, (huge, huge), 20).unwrap_err().to_string();
        assert!(err.contains("r.csv: 1,000,000,000,000,000 rows of 20 columns need at least 72759.6 TiB"), "{err}");
        assert!(err.contains("sample the grid with --random N or --search"), "{err}");
        assert!(check_disk_room(&out, (10_000, 10_000), 20).is_ok());
        assert!(check_disk_room(std::path::Path::new("/dev/null"), (huge, huge), 20).is_ok());
        // A merge writes the file alone: its rows once, and other advice.
        assert!(check_disk_room(&out, (0, 10_000), 20).is_ok());
        let merged = check_disk_room(&out, (0, huge), 20).unwrap_err().to_string();
        assert!(merged.contains("36379.8 TiB on its disk (the results file)"), "{merged}");
        assert!(merged.ends_with("write to a larger disk, or to Parquet (.parquet)"), "{merged}");
    }
}
