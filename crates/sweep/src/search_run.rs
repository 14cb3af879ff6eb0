//! A search run to files: each batch's rows written durably as it finishes (the
//! checkpoint), `--resume` that replays them through the same deterministic sampler,
//! shards of a design, the results CSV in trial order (a `trial` column first), the
//! summary with the best and the best-so-far curve, and its plot.
//!
//! Layout beside `results.csv`: `results.csv.parts/` holds `sweep.json` (what the run
//! is) and `chunk-NNNNNNNN.csv` per finished batch (`trial,` then the sweep's row). A
//! batch's rows depend only on its combos, and the sampler's proposals only on the
//! request and the rows told, so a resumed run gives the bytes of an uninterrupted one.

use crate::chunk_file::{chunk_path, read_chunk, text_chunk};
use crate::combos::Shard;
use crate::edge::best_of;
use crate::error::{SweepError, in_file, io_error};
use crate::output::SweepReport;
use crate::overfit::{SweepBlocks, blocks_path, read_chunk_blocks, write_chunk_blocks};
use crate::results_file::{ResultsKind, ResultsWriter};
use crate::rows::{Lead, Row, parse_row, write_row};
use crate::run_files::{Checkpoint, OutputOptions, check_output, identity, summary_head};
use crate::search::{SearchOptions, SearchReport, SearchSpace, Stop};
use crate::search_plot::best_so_far_svg;
use crate::session::Session;
use crate::summary::{
    Combos, Memory, SearchBest, SearchObjective, SearchOutcome, SearchSummary, SearchTimings, Summary, TimingsSummary,
    params_json,
};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;
use threadx_backtest::{BlockCuts, MetricSet, Metrics, Strategy};
use threadx_dispatch::thousands;
use threadx_profile_store::{Staged, write_file_staged, write_held_file};
use threadx_telemetry::PhaseTimer;

/// How far a search has come: trials done of at most `total`, and the best value so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchProgress {
    pub done: u64,
    pub total: u64,
    pub best: Option<f64>,
}

/// What a search run to files reports: the files' report, and the search itself (`None`
/// for a shard, which holds only part of the trials).
#[derive(Debug, Clone)]
pub struct SearchRun {
    pub files: SweepReport,
    pub search: Option<SearchReport>,
}

/// The results CSV's header of a search: `trial`, then the sweep's columns (with `set`'s
/// metrics).
pub fn search_header(strategy: &Strategy, set: MetricSet) -> String {
    ResultsKind::Trials(set).header(strategy)
}

/// A search results row read back: its trial and the sweep's row.
pub(crate) fn parse_trial(row: (&Strategy, MetricSet), line: &str) -> Result<(u64, Row), SweepError> {
    let bad = || SweepError::Results(format!("malformed search row `{line}`"));
    let (trial, rest) = line.split_once(',').ok_or_else(bad)?;
    Ok((trial.parse().map_err(|_| bad())?, parse_row(row, rest)?))
}

/// A batch read back from the checkpoint: its trials, and their blocks when the run keeps
/// them for the overfitting statistics.
type SavedBatch = (Vec<(u64, Row)>, Option<SweepBlocks>);

/// The rows of the checkpoint's batches, in order, up to the first missing or damaged
/// one (which runs again); with `cuts`, a batch whose blocks are missing or damaged runs
/// again too. `batches` names the batch numbers this run evaluates.
fn saved_batches(
    parts: &Path,
    strategy: (&Strategy, MetricSet),
    cuts: Option<&BlockCuts>,
    batches: impl Iterator<Item = u64>,
) -> Result<Vec<SavedBatch>, SweepError> {
    let mut saved = Vec::new();
    for b in batches {
        let path = chunk_path(parts, b);
        if !path.exists() {
            break;
        }
        let rows = match read_chunk(&path) {
            Ok(text) => text.lines().map(|l| parse_trial(strategy, l)).collect::<Result<Vec<_>, _>>(),
            Err(e) => {
                tracing::warn!("{e}; running batch {b} again");
                break;
            }
        };
        let rows = rows.map_err(|e| in_file(&path, e))?;
        let blocks = match cuts {
            Some(cuts) => {
                match read_chunk_blocks(&blocks_path(&path), rows.iter().map(|(_, r)| r.combo).collect(), cuts) {
                    Ok(blocks) => Some(blocks),
                    Err(e) => {
                        tracing::warn!("{e}; running batch {b} again");
                        break;
                    }
                }
            }
            None => None,
        };
        saved.push((rows, blocks));
    }
    Ok(saved)
}

/// Refuses a shard of a search that needs every trial in one process: an adaptive
/// method, or a stopping rule.
pub fn check_shard(options: &SearchOptions, shard: Shard) -> Result<(), SweepError> {
    if shard.is_whole() {
        return Ok(());
    }
    if options.method.is_adaptive() {
        return Err(SweepError::Spec(format!(
            "--shard: a {} search learns from every trial before it, so it runs in one process; \
             the designs (random, sobol, lhs) may be sharded",
            options.method
        )));
    }
    if options.stops_early() {
        return Err(SweepError::Spec(
            "--shard: --patience and --target stop on the trials in order, so they need one process".into(),
        ));
    }
    Ok(())
}

/// Runs the session's search (its spec's [`SearchOptions`]) to files as `opts` says. A
/// whole run writes every trial in evaluation order; a shard of a design (`opts.shard`)
/// writes its batches' trials, which `merge` joins. `plot`, if given, receives the
/// best-so-far curve as SVG.
pub fn search_to_files(
    session: &Session,
    opts: &OutputOptions,
    plot: Option<&Path>,
    mut phases: PhaseTimer,
    progress: &mut dyn FnMut(SearchProgress),
) -> Result<SearchRun, SweepError> {
    let started = Instant::now();
    let spec = session.spec();
    let options = spec.search().ok_or_else(|| SweepError::Spec("the session's request has no search".into()))?;
    check_shard(options, opts.shard)?;
    let blocks = spec.overfitting().zip(session.sweep().blocks());
    if blocks.is_some() && !opts.shard.is_whole() {
        return Err(SweepError::Spec(
            "--overfitting needs every trial in one run; it cannot be combined with --shard".into(),
        ));
    }
    check_output(opts)?;
    let p = session.preparation();
    phases.add("indicators", p.indicators_s);
    phases.add("book", p.book_s);
    phases.add("devices", p.devices_s);
    let data = session.run_data();
    let identity = identity(spec, session.sweep().combos(), &data, opts.shard);
    let checkpoint = Checkpoint::open(opts, &identity)?;
    let mine = move |b: u64| b % opts.shard.count == opts.shard.index;
    let cuts = blocks.map(|(_, cuts)| cuts);
    let batch_count = options.batch_sizes().count() as u64;
    let row = (spec.strategy(), session.sweep().metric_set());
    let saved = saved_batches(checkpoint.dir(), row, cuts, (0..batch_count).filter(|&b| mine(b)))?;
    let resumed = saved.len();
    let mut batches =
        Batches { session, parts: checkpoint.dir(), cuts, saved: saved.into_iter(), kept: Default::default() };

    let search_started = Instant::now();
    let (trials, report) = if opts.shard.is_whole() {
        let report = batches.search(options, progress)?;
        let trials = report.trials.iter().enumerate().map(|(t, trial)| (t as u64, trial.combo, trial.metrics));
        (trials.collect(), Some(report))
    } else {
        (batches.design_shard(options, mine, progress)?, None)
    };
    phases.add("search", search_started.elapsed().as_secs_f64());

    let write_started = Instant::now();
    let mut staged = write_trials(session, opts, &trials)?;
    if let (Some(report), Some(path)) = (&report, plot) {
        let svg = best_so_far_svg(report, options, &format!("{} {} search", spec.strategy(), options.method))?;
        staged.push(write_file_staged(path, svg.as_bytes()).map_err(io_error(path))?);
    }
    phases.add("write", write_started.elapsed().as_secs_f64());

    let book = session.sweep().book();
    let search = search_object(options, report.as_ref(), session, resumed, trials.len(), &phases);
    // The best feasible trials by the objective; a shard ranks its own.
    let best = match &report {
        Some(r) => r.best_rows(options, opts.top, |c| book.combo_values(c)),
        None => {
            let own = SearchReport::of_trials(options, trials.iter().map(|&(_, combo, m)| (combo, m)));
            own.best_rows(options, opts.top, |c| book.combo_values(c))
        }
    };
    // The statistics are of the trials: a stopping rule ends them inside a batch.
    let mut kept = batches.kept;
    kept.truncate(trials.len());
    let overfitting = match blocks {
        Some((o, cuts)) => Some(phases.time("overfitting", || {
            let (sweep, dispatcher) = (session.sweep(), session.dispatcher());
            crate::overfit::write_files(sweep, dispatcher, opts, o, cuts, kept, &best, &mut staged)
        })?),
        None => None,
    };
    let phase_report = phases.report();
    let mut summary = Summary {
        combos: Some(Combos { grid: Some(spec.grid_len()), rows: trials.len() as u64, ..Combos::default() }),
        search: Some(search),
        best: Some(best_of(spec.strategy(), spec.axes(), options.objective.metric(), &best)),
        // The whole run, load and preparation included, as a grid's.
        timings_s: Some(TimingsSummary::Search(SearchTimings {
            total: phase_report.wall_s,
            search: started.elapsed().as_secs_f64(),
        })),
        phases: Some(phase_report.summary()),
        // The process's peak memory so far, beside the estimate printed before the work.
        memory: Some(Memory { peak_bytes: threadx_telemetry::peak_resident_bytes() }),
        overfitting: overfitting.as_ref().map(crate::overfit::Overfitting::summary),
        ..summary_head(identity, spec, &data, opts)
    };
    let summary_path = checkpoint.finish(staged, &mut summary, opts)?;
    Ok(SearchRun {
        files: SweepReport {
            summary,
            strategy: spec.strategy().clone(),
            phases: Some(phase_report),
            workers: None,
            timings: None,
            telemetry: None,
            overfitting,
            best,
            rows: trials.len() as u64,
            skipped: 0,
            // A search's constraints are its objective's (the summary's `search`).
            passing: None,
            summary_path,
            across: None,
        },
        search: report,
    })
}

/// A trial of a run: its number, its combo and its metrics.
type RunTrial = (u64, u64, Metrics);

/// A search run's batches, evaluated one after another: from the checkpoint while it lasts
/// (the proposals must be the saved combos), then on the session's pool, each written to
/// the checkpoint as it ends.
struct Batches<'a> {
    session: &'a Session,
    parts: &'a Path,
    cuts: Option<&'a BlockCuts>,
    saved: std::vec::IntoIter<SavedBatch>,
    /// The trials' blocks for the overfitting statistics, in trial order.
    kept: SweepBlocks,
}

impl Batches<'_> {
    /// The metrics of batch `b`, whose first trial is `first_trial`.
    fn evaluate(&mut self, b: u64, first_trial: u64, combos: &[u64]) -> Result<Vec<Metrics>, SweepError> {
        if let Some((rows, blocks)) = self.saved.next() {
            let same = rows.len() == combos.len()
                && rows
                    .iter()
                    .zip(combos)
                    .enumerate()
                    .all(|(i, ((t, r), &c))| r.combo == c && *t == first_trial + i as u64);
            if !same {
                return Err(SweepError::Results(format!(
                    "{}: batch {b} of the checkpoint is not what this search proposes; delete the folder to start over",
                    self.parts.display()
                )));
            }
            if let Some(blocks) = blocks {
                self.kept.extend(blocks);
            }
            return Ok(rows.into_iter().map(|(_, r)| r.metrics).collect());
        }
        let mut result = self.session.evaluate(combos)?;
        if result.combos != combos {
            return Err(SweepError::Spec("a search proposed a combo the strategy's rules refuse".into()));
        }
        let path = chunk_path(self.parts, b);
        if let Some(cuts) = self.cuts {
            // Before the rows: a batch with rows has its blocks.
            write_chunk_blocks(&blocks_path(&path), &result, cuts)?;
            self.kept.extend(SweepBlocks::taken_from(&mut result));
        }
        let (strategy, book) = (self.session.spec().strategy(), self.session.sweep().book());
        let set = self.session.sweep().metric_set();
        let file = text_chunk(combos.len() * 128, |text| {
            for (i, (&combo, m)) in combos.iter().zip(&result.metrics).enumerate() {
                let _ = write!(text, "{},", first_trial + i as u64);
                write_row(text, (strategy, set), combo, &book.combo_values(combo), m);
            }
        });
        write_held_file(&path, &file).map_err(io_error(&path))?;
        Ok(result.metrics)
    }

    /// The whole search, batch after batch.
    fn search(
        &mut self,
        options: &SearchOptions,
        progress: &mut dyn FnMut(SearchProgress),
    ) -> Result<SearchReport, SweepError> {
        let (mut b, mut first) = (0u64, 0u64);
        crate::search::search(
            SearchSpace::new(self.session.spec().grid()),
            options,
            &mut |combos| {
                let metrics = self.evaluate(b, first, combos)?;
                b += 1;
                first += combos.len() as u64;
                Ok(metrics)
            },
            &mut |r| {
                progress(SearchProgress { done: r.trials.len() as u64, total: options.trials, best: best_value(r) });
                Ok(())
            },
        )
    }

    /// A shard of a design: every batch proposed, the `mine` ones evaluated.
    fn design_shard(
        &mut self,
        options: &SearchOptions,
        mine: impl Fn(u64) -> bool,
        progress: &mut dyn FnMut(SearchProgress),
    ) -> Result<Vec<RunTrial>, SweepError> {
        let space = SearchSpace::new(self.session.spec().grid());
        let mut sampler = options.method.sampler(space, options.seed, options.trials);
        let (mut trials, mut first) = (Vec::new(), 0u64);
        for (b, want) in options.batch_sizes().enumerate() {
            let combos = sampler.ask(want);
            if combos.is_empty() {
                break;
            }
            if mine(b as u64) {
                let metrics = self.evaluate(b as u64, first, &combos)?;
                trials.extend(combos.iter().zip(metrics).enumerate().map(|(i, (&c, m))| (first + i as u64, c, m)));
                progress(SearchProgress { done: trials.len() as u64, total: options.trials, best: None });
            }
            first += combos.len() as u64;
        }
        Ok(trials)
    }
}

/// The trials' results file and heatmap, staged (put in place together at the end: see
/// `commit_with_summary`).
fn write_trials(session: &Session, opts: &OutputOptions, trials: &[RunTrial]) -> Result<Vec<Staged>, SweepError> {
    let (spec, book) = (session.spec(), session.sweep().book());
    let strategy = spec.strategy();
    let mut heatmap = opts.heatmap.as_ref().map(|h| h.heatmap(spec, &opts.by, opts.minimize)).transpose()?;
    let mut file = ResultsWriter::create(&opts.out, strategy, ResultsKind::Trials(session.sweep().metric_set()))?;
    for &(trial, combo, metrics) in trials {
        let row = Row { combo, values: book.combo_values(combo), metrics };
        file.row(strategy, Lead::Trial(trial), &row)?;
        if let Some(h) = heatmap.as_mut() {
            h.offer(&row);
        }
    }
    let mut staged = vec![file.stage()?];
    if let (Some(h), Some(o)) = (&heatmap, &opts.heatmap) {
        staged.push(write_file_staged(&o.path, h.to_svg()?.as_bytes()).map_err(io_error(&o.path))?);
    }
    Ok(staged)
}

/// The summary's `search` section: the search's report (a whole run's) or its request (a
/// shard's), with its pace.
fn search_object(
    options: &SearchOptions,
    report: Option<&SearchReport>,
    session: &Session,
    resumed: usize,
    trials: usize,
    phases: &PhaseTimer,
) -> SearchSummary {
    let (strategy, book) = (session.spec().strategy(), session.sweep().book());
    let mut search = match report {
        Some(r) => search_summary(options, r, strategy, |c| book.combo_values(c)),
        None => requested(options),
    };
    let searched_s = phases.report().seconds("search");
    search.resumed_batches = Some(resumed as u64);
    search.evaluations_per_s = Some(trials as f64 / searched_s.max(1e-9));
    if let (Some(r), Some(outcome)) = (report, search.outcome.as_mut()) {
        outcome.search_s = Some(r.search_seconds);
        outcome.search_share = Some(r.search_seconds / r.seconds.max(1e-9));
    }
    search
}

/// The best feasible value so far.
fn best_value(report: &SearchReport) -> Option<f64> {
    report.best_trial().and_then(|t| t.value)
}

/// The summary's `search` section: the request, the trials, why it stopped, the best
/// trial and the best-so-far curve (the trials where it improved, with the new value).
pub fn search_summary(
    options: &SearchOptions,
    report: &SearchReport,
    strategy: &Strategy,
    values: impl Fn(u64) -> threadx_backtest::ParamValues,
) -> SearchSummary {
    let best = report.best.map(|b| {
        let t = &report.trials[b];
        SearchBest {
            combo: t.combo,
            params: params_json(strategy, &values(t.combo)),
            metrics: t.metrics,
            trial: b as u64,
            value: t.value,
        }
    });
    let best_so_far = report
        .best_so_far
        .iter()
        .enumerate()
        .filter(|&(t, v)| !v.is_nan() && (t == 0 || report.best_so_far[t - 1].to_bits() != v.to_bits()))
        .map(|(t, &v)| (t as u64, v))
        .collect();
    SearchSummary {
        outcome: Some(SearchOutcome {
            objective: SearchObjective {
                by: options.objective.metric().to_owned(),
                minimize: options.objective.minimize(),
            },
            trials: report.trials.len() as u64,
            feasible: report.trials.iter().filter(|t| t.value.is_some()).count() as u64,
            stop: report.stop.name().into(),
            best,
            best_so_far,
            search_s: None,
            search_share: None,
        }),
        ..requested(options)
    }
}

/// A search's section with its request alone (a shard's, before its pace is added).
fn requested(options: &SearchOptions) -> SearchSummary {
    SearchSummary {
        request: options.request(),
        method: options.method.name().into(),
        resumed_batches: None,
        evaluations_per_s: None,
        outcome: None,
    }
}

/// Whether the search stopped early, in words for the terminal.
pub fn stop_text(stop: Stop, options: &SearchOptions) -> String {
    match stop {
        Stop::Trials => format!("after its {} trials", thousands(options.trials)),
        Stop::Patience => {
            format!("after {} trials without improvement (--patience)", options.patience.unwrap_or_default())
        }
        Stop::Target => format!("on reaching the target {} (--target)", options.target.unwrap_or_default()),
        Stop::Exhausted => "when the grid had no combo left to propose".into(),
    }
}
