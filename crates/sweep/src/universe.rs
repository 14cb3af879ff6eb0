//! A universe's sweep: the same grid over every symbol of a [`Universe`], one symbol at
//! a time on one device pool. Each symbol gets its own indicator bank and signal book
//! (dropped before the next symbol's are made: memory holds one symbol's), and its rows
//! a `symbol` column; the results file is the symbols' rows in symbol order, each
//! symbol's in combo order, so it equals the single-symbol runs row for row. Beside it,
//! `<out>-by-combo` ([`crate::across`]) gives each combo's objective across the symbols.
//!
//! Layout: `<out>.parts/` holds `sweep.json` (the universe's identity), a finished
//! symbol's results and summary (`000003.csv`, `000003.json`: a single-symbol run's
//! files, made by [`run_to_files`] with its own checkpoint beside them while it runs).
//! `--resume` takes the finished symbols whose summary names the same spec, data and
//! chunking, and resumes the one in flight from its chunks; shards cut every symbol's
//! chunks alike, and `merge` joins them.

use crate::across::{Across, AcrossReport, ComboAcross, across_in_memory, by_combo_path};
use crate::error::{SweepError, io_error};
use crate::parquet_groups::ParquetJoin;
use crate::plan::SweepPlan;
use crate::results_file::{ResultsKind, ResultsReader, ResultsWriter};
use crate::run_data::RunData;
use crate::run_files::{
    Checkpoint, OutputOptions, ProgressFn, check_output, check_writable, checkpoint_dir, identity, run_head,
};
use crate::runner::ChunkResult;
use crate::search::Constraint;
use crate::session::{Devices, Session};
use crate::spec::SweepSpec;
use crate::summary::{
    Combos, Identity, Summary, SymbolSummary, TimingsSummary, UniverseIdentity, UniverseSections, UniverseTimings,
};
use crate::table::TableFormat;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use threadx_backtest::{MetricSet, Strategy};
use threadx_dispatch::Dispatcher;
use threadx_indicators::{Ohlcv, Universe};
use threadx_profile_store::{Staged, is_special_file};
use threadx_telemetry::{PhaseReport, PhaseTimer};

/// Where a universe's run stands: symbol `symbol` of `symbols` (named `name`), `done`
/// of its `total` combo positions.
#[derive(Debug, Clone, Copy)]
pub struct UniverseProgress<'a> {
    pub symbol: usize,
    pub symbols: usize,
    pub name: &'a str,
    pub done: u64,
    pub total: u64,
}

/// What a universe's run did: the summary written beside the results, with its parts typed.
#[derive(Debug, Clone)]
pub struct UniverseReport {
    pub summary: Summary,
    pub strategy: Strategy,
    /// Rows written, every symbol's.
    pub rows: u64,
    /// The per-combo table across the symbols; `None` for a shard (`merge` makes it).
    pub across: Option<AcrossReport>,
    pub phases: PhaseReport,
    /// Symbols run now (not taken from the checkpoint), and bar·combos they simulated
    /// per second of the whole run's wall time.
    pub symbols_run: usize,
    pub bar_combos_per_s: Option<f64>,
    pub summary_path: Option<PathBuf>,
}

/// What a universe's run carries from one symbol to the next: the devices, opened for the
/// first symbol run and reused; and how much it has run.
struct SymbolRuns<'a> {
    spec: &'a SweepSpec,
    opts: &'a OutputOptions,
    dispatcher: Arc<Dispatcher>,
    note: &'a mut dyn FnMut(&str),
    devices: Option<Devices>,
    /// Symbols run now (not taken from the checkpoint), and the bar·combos they simulated.
    run: usize,
    bar_combos: f64,
}

impl SymbolRuns<'_> {
    /// One symbol's grid into `out` (its own results and summary in the checkpoint), or
    /// its finished files found there: the symbol's summary, and whether its rows went to
    /// `across` as it ran (a symbol run from its start hands them over in combo order; a
    /// resumed or finished one's are read back after).
    fn symbol(
        &mut self,
        name: &str,
        data: Arc<Ohlcv>,
        out: &Path,
        across: Option<&mut Across>,
        phases: &mut PhaseTimer,
        progress: ProgressFn<'_>,
    ) -> Result<(Summary, bool), SweepError> {
        let (spec, opts) = (self.spec, self.opts);
        // What fails for one symbol (too few bars for the warm-up, …) names it.
        let of_symbol = |e: SweepError| match e {
            SweepError::Cancelled => e,
            e => SweepError::Spec(format!("symbol `{name}` ({}, {} bars): {e}", data.origin(), data.len())),
        };
        let plan = SweepPlan::new(spec, data.len(), self.dispatcher.policy()).map_err(of_symbol)?;
        // A finished symbol's summary names its data; the fingerprint is taken only then
        // (a symbol run now has its own summary hash it once).
        let finished = Summary::read(&out.with_extension("json")).ok().filter(|s| {
            out.exists() && s.identity == Some(identity(spec, plan.combos(), &RunData::of(&data), opts.shard))
        });
        if let Some(summary) = finished {
            let total = summary.combos.and_then(|c| c.positions).unwrap_or(0);
            progress(total, total);
            return Ok((summary, false));
        }
        let session = match &self.devices {
            Some(d) => Session::with_devices(plan, data.clone(), d),
            None => Session::from_plan(plan, data.clone(), self.dispatcher.clone(), self.note),
        }
        .map_err(of_symbol)?;
        // A combo must trade on every symbol to be compared across them.
        session.sweep().require_every_combo().map_err(|e| match of_symbol(e) {
            SweepError::Spec(why) => SweepError::Spec(format!(
                "{why}; every combo of a universe's sweep must trade on every symbol: leave this one out (a new universe, run from the start), or narrow the grid's largest values"
            )),
            e => e,
        })?;
        self.devices.get_or_insert_with(|| session.devices().clone());
        let symbol_opts = OutputOptions {
            out: out.to_owned(),
            resume: checkpoint_dir(out).exists(),
            shard: opts.shard,
            top: 1,
            by: opts.by.clone(),
            minimize: opts.minimize,
            constraints: opts.constraints.clone(),
            heatmap: None,
            overfitting_plots: None,
            blocks_out: None,
            symbol: Some(name.to_owned()),
            hold: None,
        };
        let mut across = across.filter(|_| !symbol_opts.resume);
        if let Some(a) = across.as_mut() {
            a.next_symbol()?;
        }
        let kept = across.is_some();
        let mut keep = |row: &crate::rows::Row| across.as_mut().map_or(Ok(()), |a| a.take(row));
        let report = session.run_keeping(&symbol_opts, PhaseTimer::start(), progress, &mut keep).map_err(of_symbol)?;
        let p = session.preparation();
        phases.add("indicators", p.indicators_s);
        phases.add("book", p.book_s + p.devices_s);
        if let Some(t) = report.timings {
            phases.add("backtests", t.run);
            phases.add("merge", t.assembling);
        }
        self.run += 1;
        let positions = report.summary.combos.and_then(|c| c.positions).unwrap_or(0);
        self.bar_combos += data.len() as f64 * positions as f64;
        Ok((report.summary, kept))
    }
}

/// A symbol's entry in the universe's summary: its data as its own summary says (origin,
/// bars, first and last times), its fingerprint, rows and best row.
fn symbol_entry(name: &str, summary: &Summary, rows: u64) -> SymbolSummary {
    let data = summary.data.clone();
    SymbolSummary {
        symbol: name.to_owned(),
        origin: data.as_ref().map(|d| d.origin.clone()).unwrap_or_default(),
        bars: data.as_ref().map_or(0, |d| d.bars),
        first: data.as_ref().and_then(|d| d.first.clone()),
        last: data.and_then(|d| d.last),
        fingerprint: summary.identity.as_ref().and_then(|i| i.data.as_ref()).map(|d| d.fingerprint.clone()),
        rows,
        best: summary.best.as_ref().and_then(|b| b.rows.first().cloned()),
    }
}

/// A symbol's rows read back from its results file `out` into `across`.
fn take_symbol_rows(across: &mut Across, out: &Path, strategy: &Strategy) -> Result<(), SweepError> {
    across.next_symbol()?;
    let mut reader = ResultsReader::open(out, strategy, ResultsKind::Universe)?;
    while let Some(read) = reader.next_row()? {
        across.take(&read.row)?;
    }
    Ok(())
}

/// The results file's extension for a symbol's own results in the checkpoint.
fn extension(out: &Path) -> &'static str {
    match TableFormat::of(out) {
        TableFormat::Csv => "csv",
        TableFormat::Parquet => "parquet",
        TableFormat::Arrow => "arrow",
    }
}

/// Runs the grid of `spec` over every symbol of `universe` into the files `opts` names
/// (`opts.symbol` must be unset: each symbol's rows carry their own), on devices opened
/// once through `dispatcher` (`note` hears of a balance measured first). `progress` hears
/// of each chunk. A search, a walk-forward or the overfitting statistics run on one
/// symbol's data and are refused here.
pub fn universe_to_files(
    universe: &Universe,
    spec: &SweepSpec,
    dispatcher: Arc<Dispatcher>,
    opts: &OutputOptions,
    mut phases: PhaseTimer,
    progress: &mut dyn FnMut(UniverseProgress<'_>),
    note: &mut dyn FnMut(&str),
) -> Result<UniverseReport, SweepError> {
    let started = Instant::now();
    refuse_single_symbol_work(spec)?;
    if opts.symbol.is_some() {
        return Err(SweepError::Spec("a universe's rows carry each symbol's own name: leave `symbol` unset".into()));
    }
    check_output(opts)?;
    let across_path = (opts.shard.is_whole() && !is_special_file(&opts.out)).then(|| by_combo_path(&opts.out));
    if let Some(path) = &across_path {
        check_writable(path)?;
    }
    let strategy = spec.strategy();
    let names: Vec<&str> = universe.names().collect();
    let universe_identity = Identity {
        spec: spec.to_json(),
        data: None,
        universe: Some(UniverseIdentity {
            origin: universe.origin().to_owned(),
            symbols: names.iter().map(|&n| n.to_owned()).collect(),
        }),
        portfolio: None,
        chunk_size: None,
        shards: opts.shard.count,
    };
    let checkpoint = Checkpoint::open(opts, &universe_identity)?;
    let parts = checkpoint.dir();
    let mut across = match across_path {
        Some(_) => Some(Across::new(&parts.join("across"), &opts.by, opts.minimize, opts.constraints.clone())?),
        None => None,
    };

    let mut runs = SymbolRuns { spec, opts, dispatcher, note, devices: None, run: 0, bar_combos: 0.0 };
    let mut rows = 0u64;
    let mut symbol_files = Vec::with_capacity(names.len());
    let mut symbols_json = Vec::with_capacity(names.len());
    let mut combos = Combos::default();
    for (i, &name) in names.iter().enumerate() {
        let data = phases.time("load", || universe.load(i)).map_err(|e| SweepError::Spec(e.to_string()))?;
        let out = parts.join(format!("{i:06}.{}", extension(&opts.out)));
        let mut symbol_progress =
            |done, total| progress(UniverseProgress { symbol: i, symbols: names.len(), name, done, total });
        let (summary, kept) = runs.symbol(name, data, &out, across.as_mut(), &mut phases, &mut symbol_progress)?;
        let symbol_combos = summary.combos.unwrap_or_default();
        let symbol_rows = symbol_combos.rows;
        rows += symbol_rows;
        combos.grid = symbol_combos.grid;
        combos.per_symbol = symbol_combos.positions;
        symbols_json.push(symbol_entry(name, &summary, symbol_rows));
        if let Some(a) = across.as_mut().filter(|_| !kept) {
            phases.time("by-combo", || take_symbol_rows(a, &out, strategy))?;
        }
        symbol_files.push(out);
    }
    let (symbols_run, bar_combos) = (runs.run, runs.bar_combos);
    // Staged, then put in place with the summary (see `commit_with_summary`).
    let results = phases.time("merge", || join(&opts.out, strategy, &symbol_files))?;
    let across = match (across, &across_path) {
        (Some(a), Some(path)) => {
            Some(phases.time("by-combo", || a.finish(path, strategy, spec.grid(), opts.top.max(1)))?)
        }
        _ => None,
    };
    let phase_report = phases.report();
    let total_s = started.elapsed().as_secs_f64();
    let bar_combos_per_s = (symbols_run > 0 && total_s > 0.0).then(|| bar_combos / total_s);
    let mut summary = Summary {
        identity: Some(universe_identity),
        universe: Some(UniverseSections {
            symbols: symbols_json,
            by_combo: across.as_ref().map(|a| a.summary(strategy)),
        }),
        combos: Some(Combos { rows, ..combos }),
        // How the best combos across the symbols rank, for a merge of shards to rank alike.
        minimize: opts.minimize.then_some(true),
        constraints: (!opts.constraints.is_empty()).then(|| opts.constraints.iter().map(ToString::to_string).collect()),
        timings_s: Some(TimingsSummary::Universe(UniverseTimings {
            total: total_s,
            symbols_run: symbols_run as u64,
            bar_combos_per_s,
        })),
        phases: Some(phase_report.summary()),
        ..run_head(opts)
    };
    let summary_path = checkpoint.finish(vec![results], &mut summary, opts)?;
    Ok(UniverseReport {
        summary,
        strategy: strategy.clone(),
        rows,
        across,
        phases: phase_report,
        symbols_run,
        bar_combos_per_s,
        summary_path,
    })
}

/// Every symbol's rows of `spec`'s grid, in memory (symbol order), on devices opened once
/// through `dispatcher`, with the by-combo lines over them by `by` (and the symbols on
/// which each keeps `constraints`): what Python's sweep of many symbols returns.
/// `progress` may stop the run between chunks.
pub fn universe_in_memory(
    universe: &Universe,
    spec: &SweepSpec,
    dispatcher: Arc<Dispatcher>,
    (by, constraints): (&str, &[Constraint]),
    progress: &mut dyn FnMut(UniverseProgress<'_>) -> Result<(), SweepError>,
    note: &mut dyn FnMut(&str),
) -> Result<(Vec<ChunkResult>, Vec<ComboAcross>), SweepError> {
    refuse_single_symbol_work(spec)?;
    // A universe's rows are single runs'.
    let names = std::iter::once(by).chain(constraints.iter().map(|c| c.metric()));
    crate::leaderboard::check_ranked_metrics(names, MetricSet::Run)?;
    let mut devices: Option<Devices> = None;
    let mut rows = Vec::with_capacity(universe.len());
    for i in 0..universe.len() {
        let data = universe.load(i).map_err(|e| SweepError::Spec(e.to_string()))?;
        let plan = SweepPlan::new(spec, data.len(), dispatcher.policy())?;
        let session = match &devices {
            Some(d) => Session::with_devices(plan, data, d)?,
            None => Session::from_plan(plan, data, dispatcher.clone(), note)?,
        };
        devices.get_or_insert_with(|| session.devices().clone());
        let (name, symbols) = (universe.name(i), universe.len());
        rows.push(
            session.run_in_memory(&mut |done, total| {
                progress(UniverseProgress { symbol: i, symbols, name, done, total })
            })?,
        );
    }
    let across = across_in_memory(&rows, spec.grid(), by, constraints)?;
    Ok((rows, across))
}

/// Refuses what runs on one symbol's data only.
fn refuse_single_symbol_work(spec: &SweepSpec) -> Result<(), SweepError> {
    if spec.search().is_some() || spec.walk_forward().is_some() || spec.overfitting().is_some() {
        return Err(SweepError::Spec(
            "a sweep over many symbols runs the grid (or --random) on each: a search, --walk-forward and \
             --overfitting run on one symbol's data; give one symbol's file"
                .into(),
        ));
    }
    Ok(())
}

/// The symbols' own results files (each with its `symbol` column) joined in order into
/// `out`, staged: CSV rows copied by the kernel, Parquet column chunks copied, Arrow rows
/// rewritten.
fn join(out: &Path, strategy: &Strategy, files: &[PathBuf]) -> Result<Staged, SweepError> {
    let kind = ResultsKind::Universe;
    match TableFormat::of(out) {
        TableFormat::Csv => {
            let header = kind.header(strategy);
            let mut file = ResultsWriter::create(out, strategy, kind)?;
            for path in files {
                let mut part = fs::File::open(path).map_err(io_error(path))?;
                let mut first = vec![0u8; header.len()];
                part.read_exact(&mut first).map_err(io_error(path))?;
                if first != header.as_bytes() {
                    return Err(SweepError::Results(format!("{}: not a {strategy} symbol's results", path.display())));
                }
                part.seek(SeekFrom::Start(header.len() as u64)).map_err(io_error(path))?;
                file.csv_file(&mut part)?;
            }
            file.stage()
        }
        TableFormat::Parquet => {
            let mut file = ParquetJoin::create(out)?;
            for path in files {
                file.append(bytes::Bytes::from(fs::read(path).map_err(io_error(path))?))?;
            }
            match file.stage()? {
                Some(file) => Ok(file),
                None => ResultsWriter::create(out, strategy, kind)?.stage(),
            }
        }
        TableFormat::Arrow => {
            let mut file = ResultsWriter::create(out, strategy, kind)?;
            for path in files {
                let mut reader = ResultsReader::open(path, strategy, kind)?;
                while let Some(read) = reader.next_row()? {
                    file.copy(strategy, &read)?;
                }
            }
            file.stage()
        }
    }
}
