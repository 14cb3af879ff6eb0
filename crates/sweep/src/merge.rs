//! `merge`: the results files of every shard of one sweep joined into the file a
//! one-process run writes, with its summary (and, for shards run with `--overfitting`,
//! the statistics of them all), after checking that the shards are complete and one
//! sweep's.

use crate::SweepSpec;
use crate::across::{Across, by_combo_path};
use crate::combos::Shard;
use crate::error::{SweepError, in_file, io_error};
use crate::output::{Ranking, SweepReport};
use crate::overfit::{MergingBlocks, write_plots};
use crate::results_file::{ReadRow, ResultsKind, ResultsReader, ResultsWriter};
use crate::rows::Row;
use crate::run_files::{HeatmapOptions, check_disk_room, check_writable, commit_with_summary, summary_path};
use crate::search::Constraint;
use crate::summary::{Best, Combos, Identity, SearchSummary, Summary, UniverseSections};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use threadx_backtest::{MetricSet, Metrics, Strategy};
use threadx_profile_store::{is_special_file, refuse_output_over_input, write_file_staged};

/// Joins the results files of every shard of one sweep into `out`, byte-identical to the
/// file a one-process run writes (shards and `out` each CSV, Parquet or Arrow, mixed as
/// they come), with a summary beside it (and, for shards run with
/// `--overfitting`, the statistics of them all and their `plots`). Each shard's summary
/// (written beside it when the shard finished) proves it complete and names its sweep;
/// missing, repeated or foreign shards are refused before anything is written.
pub fn merge(
    shards: &[PathBuf],
    out: &Path,
    top: usize,
    by: &str,
    heatmap: Option<&HeatmapOptions>,
    plots: Option<&(PathBuf, PathBuf)>,
) -> Result<SweepReport, SweepError> {
    if shards.is_empty() {
        return Err(bad("no shard files given".into()));
    }
    check_writable(out)?;
    let out_summary = check_outputs(shards, out, plots)?;
    let ShardSummaries { identity, summaries, expected_rows } = ShardSummaries::read(shards)?;
    let spec = SweepSpec::from_identity(&identity.spec)?;
    let strategy = spec.strategy();
    let bars = summaries[0].data.as_ref().map_or(0, |d| d.bars) as usize;
    let (mut ranking, minimize) = shard_ranking(&summaries[0], by, top)?;
    let mut blocks = MergingBlocks::open(&spec, shards, &summaries, bars)?;
    // A search's shards hold trials (numbered in evaluation order) instead of combos.
    let search = spec.search();
    // A universe's rows go by symbol (in the order of its list), then combo.
    let symbols: Option<Vec<String>> = identity.universe.as_ref().map(|u| u.symbols.clone());
    let mut across = match &symbols {
        Some(_) if !is_special_file(out) => Some(by_combo(out, by, universe_ranking(&summaries[0])?)?),
        _ => None,
    };
    let mut heatmap = heatmap
        .filter(|_| symbols.is_none())
        .map(|h| h.heatmap(&spec, by, minimize).map(|m| (m, h.path.clone())))
        .transpose()?;
    // A portfolio's rows carry its metrics too.
    let set = if identity.portfolio.is_some() { MetricSet::Portfolio } else { MetricSet::Run };
    crate::leaderboard::check_ranked_metrics([by], set)?;
    let kind = match (search, &symbols) {
        (Some(_), _) => ResultsKind::Trials(set),
        (None, Some(_)) => ResultsKind::Universe,
        (None, None) => ResultsKind::Grid(set),
    };
    let mut shard_rows = ShardRows::open(shards, strategy, kind, symbols.as_deref(), search.is_some())?;
    check_room(out, expected_rows, (strategy, set), symbols.is_some())?;
    let mut file = ResultsWriter::create(out, strategy, kind)?;
    let mut trials = Vec::new();
    while let Some((read, i, new_symbol)) = shard_rows.next()? {
        if let Some((a, _)) = across.as_mut() {
            if new_symbol {
                a.next_symbol()?;
            }
            a.take(&read.row)?;
        }
        // A CSV shard's line goes into a CSV as it was read; otherwise the row is written.
        file.copy(strategy, &read)?;
        let row = read.row;
        if let Some((h, _)) = heatmap.as_mut() {
            h.offer(&row);
        }
        if let Some(b) = blocks.as_mut() {
            b.take(i, &row)?;
        }
        // A search's best list comes from its trials (by the objective), not the leaderboard.
        match search {
            Some(_) => trials.push((row.combo, row.metrics)),
            None => ranking.offer(row),
        }
    }
    let rows = shard_rows.all_read(expected_rows)?;
    // Staged, then put in place together at the end (see `commit_with_summary`).
    let mut staged = vec![file.stage()?];
    let across = across.map(|(a, path)| a.finish(&path, strategy, spec.grid(), top.max(1))).transpose()?;
    if let Some((h, path)) = &heatmap {
        staged.push(write_file_staged(path, h.to_svg()?.as_bytes()).map_err(io_error(path))?);
    }
    let universe = match (&symbols, summaries[0].universe.as_ref()) {
        (Some(_), Some(u)) => Some(UniverseSections {
            symbols: u.symbols.clone(),
            by_combo: across.as_ref().map(|a| a.summary(strategy)),
        }),
        _ => None,
    };
    let (best, best_summary, searched) = merged_best(&spec, trials, top, &ranking);
    let mut overfitting = blocks.map(|b| b.finish(&best)).transpose()?;
    if let (Some(o), Some(plots)) = (&mut overfitting, plots) {
        write_plots(o, plots, strategy.name(), &mut staged)?;
    }
    let mut summary = Summary {
        identity: Some(identity),
        merged_from: Some(shards.iter().map(|p| p.display().to_string()).collect()),
        shard: Some(Shard::WHOLE),
        results: out.file_name().map(|n| n.to_string_lossy().into_owned()),
        combos: Some(Combos { rows, empty: ranking.empty(), ..Combos::default() }),
        best: Some(best_summary),
        search: searched,
        universe,
        overfitting: overfitting.as_ref().map(crate::overfit::Overfitting::summary),
        ..Summary::new()
    };
    commit_with_summary(staged, &mut summary, out, Shard::WHOLE)?;
    Ok(SweepReport {
        summary,
        strategy: strategy.clone(),
        phases: None,
        workers: None,
        timings: None,
        telemetry: None,
        overfitting,
        best,
        rows,
        skipped: 0,
        passing: ranking.passing(),
        summary_path: out_summary,
        across,
    })
}

/// Room on `out`'s disk for the merged rows ([`check_disk_room`]), each of a universe's
/// symbol, the combo, the parameters and the metrics.
fn check_room(
    out: &Path,
    rows: u64,
    (strategy, set): (&Strategy, MetricSet),
    universe: bool,
) -> Result<(), SweepError> {
    check_disk_room(out, (0, rows), usize::from(universe) + 1 + strategy.schema().len() + set.count())
}

/// The merged rows' ranking by `by`, as a shard's summary says its rows were ranked: its
/// `--constraint`s (`best.constraints`) and `--minimize` (`best.minimize`, which also picks
/// the heatmap's best: returned beside it).
fn shard_ranking(summary: &Summary, by: &str, top: usize) -> Result<(Ranking, bool), SweepError> {
    let best = summary.best.as_ref();
    let texts = best.and_then(|b| b.constraints.as_deref()).unwrap_or_default();
    let constraints = texts.iter().map(|t| t.parse()).collect::<Result<Vec<Constraint>, SweepError>>()?;
    let minimize = best.and_then(|b| b.minimize).unwrap_or(false);
    Ok((Ranking::new(by, top, constraints, minimize)?, minimize))
}

/// The merged run's best rows as one process takes them (a search's best trials by its
/// objective, else the leaderboard's), the summary's `best`, and a search's section.
fn merged_best(
    spec: &SweepSpec,
    trials: Vec<(u64, Metrics)>,
    top: usize,
    ranking: &Ranking,
) -> (Vec<Row>, Best, Option<SearchSummary>) {
    let Some(options) = spec.search() else { return (ranking.rows().to_vec(), ranking.best(spec), None) };
    let report = crate::search::SearchReport::of_trials(options, trials);
    let values = |c| spec.grid().values(c);
    let search = crate::search_run::search_summary(options, &report, spec.strategy(), values);
    let rows = report.best_rows(options, top, values);
    let best = crate::edge::best_of(spec.strategy(), spec.axes(), options.objective.metric(), &rows);
    (rows, best, Some(search))
}

/// A merged universe's by-combo table, made in its own folder beside `out`, and its path.
/// How a universe's shard ranked its best combos across the symbols: `--minimize`, and
/// its `--constraint`s (its summary's `minimize` and `constraints`).
fn universe_ranking(summary: &Summary) -> Result<(bool, Vec<Constraint>), SweepError> {
    let texts = summary.constraints.as_deref().unwrap_or_default();
    let constraints = texts.iter().map(|t| t.parse()).collect::<Result<Vec<Constraint>, SweepError>>()?;
    Ok((summary.minimize.unwrap_or(false), constraints))
}

fn by_combo(
    out: &Path,
    by: &str,
    (minimize, constraints): (bool, Vec<Constraint>),
) -> Result<(Across, PathBuf), SweepError> {
    let path = by_combo_path(out);
    check_writable(&path)?;
    let mut parts = out.as_os_str().to_owned();
    parts.push(".by-combo.parts");
    Ok((Across::new(Path::new(&parts), by, minimize, constraints)?, path))
}

fn bad(problem: String) -> SweepError {
    SweepError::Merge(problem)
}

/// Refuses outputs that are inputs: neither the merged file nor its summary or plots may
/// be a shard, a shard's summary or a shard's blocks. Returns where the summary goes.
fn check_outputs(
    shards: &[PathBuf],
    out: &Path,
    plots: Option<&(PathBuf, PathBuf)>,
) -> Result<Option<PathBuf>, SweepError> {
    let shard_summaries: Vec<PathBuf> = shards.iter().filter_map(|p| summary_path(p)).collect();
    let shard_blocks: Vec<PathBuf> = shards.iter().map(|p| crate::overfit::shard_blocks_path(p)).collect();
    let inputs: Vec<&Path> = shards.iter().chain(&shard_summaries).chain(&shard_blocks).map(PathBuf::as_path).collect();
    let out_summary = summary_path(out);
    let plot_paths = plots.into_iter().flat_map(|(h, s)| [h.as_path(), s.as_path()]);
    let outputs: Vec<&Path> = std::iter::once(out).chain(out_summary.as_deref()).chain(plot_paths).collect();
    refuse_output_over_input(&outputs, &inputs).map_err(bad)?;
    Ok(out_summary)
}

/// The shards' summaries, read and checked: each proves its shard complete (written when
/// it finished) and unchanged since (its results' checksum), and all name one sweep, one
/// data set and every shard once.
struct ShardSummaries {
    identity: Identity,
    summaries: Vec<Summary>,
    /// The rows the shards' summaries promise, added.
    expected_rows: u64,
}

impl ShardSummaries {
    fn read(shards: &[PathBuf]) -> Result<Self, SweepError> {
        let mut identity: Option<Identity> = None;
        let mut summaries: Vec<Summary> = Vec::new();
        let mut seen: BTreeMap<u64, &PathBuf> = BTreeMap::new();
        let (mut expected_rows, mut count) = (0u64, 0);
        for path in shards {
            let summary = read_summary(path)?;
            let summary_path = path.with_extension("json");
            let shard = summary.shard.ok_or_else(|| bad(format!("{}: no shard", summary_path.display())))?;
            let index = shard.index;
            count = shard.count;
            let this_identity =
                summary.identity.clone().ok_or_else(|| bad(format!("{}: no identity", summary_path.display())))?;
            match &identity {
                None => identity = Some(this_identity),
                Some(id) if *id != this_identity => {
                    return Err(bad(format!(
                        "{} belongs to a different sweep than {} (spec, data or shard count differ)",
                        path.display(),
                        shards[0].display()
                    )));
                }
                Some(_) => {}
            }
            // A universe's shards name each symbol's data, which must be the same too.
            let data = |s: &Summary| -> Vec<(String, Option<String>)> {
                s.universe.iter().flat_map(|u| &u.symbols).map(|d| (d.symbol.clone(), d.fingerprint.clone())).collect()
            };
            if summaries.first().is_some_and(|first| data(first) != data(&summary)) {
                return Err(bad(format!(
                    "{} was run on other data than {} (a symbol's bars differ)",
                    path.display(),
                    shards[0].display()
                )));
            }
            if let Some(other) = seen.insert(index, path) {
                return Err(bad(format!("{} and {} are both shard {index}/{count}", other.display(), path.display())));
            }
            check_unchanged(path, &summary)?;
            expected_rows += summary.combos.map_or(0, |c| c.rows);
            summaries.push(summary);
        }
        let missing: Vec<String> =
            (0..count).filter(|i| !seen.contains_key(i)).map(|i| format!("{i}/{count}")).collect();
        if !missing.is_empty() {
            return Err(bad(format!("missing shard(s) {}", missing.join(", "))));
        }
        let identity = identity.ok_or_else(|| bad("no shard summaries".into()))?;
        Ok(Self { identity, summaries, expected_rows })
    }
}

/// The summary written beside a shard when it finished.
fn read_summary(path: &Path) -> Result<Summary, SweepError> {
    let summary_path = path.with_extension("json");
    let text = fs::read_to_string(&summary_path).map_err(|e| {
        bad(format!(
            "{}: no summary at {} ({e}); a shard's summary is written when the shard finishes",
            path.display(),
            summary_path.display()
        ))
    })?;
    Summary::parse(&text, &summary_path).map_err(|e| match e {
        SweepError::Results(problem) => bad(problem),
        e => e,
    })
}

/// A shard's rows are the bytes it wrote (shards of an older ThreadX name no checksum).
fn check_unchanged(path: &Path, summary: &Summary) -> Result<(), SweepError> {
    if let Some(want) = summary.results_checksum.as_deref()
        && crate::chunk_file::file_checksum(path)? != want
    {
        return Err(bad(format!(
            "{} was changed after its shard ran (its checksum is not the {want} its summary recorded); \
             run the shard again",
            path.display()
        )));
    }
    Ok(())
}

/// The shards' rows in the merged file's order: by symbol (a universe's, in the order of
/// its list), then by trial (a search's) or combo, each key exactly once. Each shard's
/// next row waits in `next`, and a heap of their keys says whose leaves first.
struct ShardRows<'a> {
    shards: &'a [PathBuf],
    readers: Vec<ResultsReader>,
    next: Vec<Option<ReadRow>>,
    heads: BinaryHeap<(Reverse<(u64, u64)>, usize)>,
    /// Each symbol's place in the universe's list, found by a map: rows × symbols adds up.
    positions: HashMap<&'a str, u64>,
    symbols: Option<&'a [String]>,
    /// A search's trials are numbered 0, 1, 2, … with none missing.
    trials: bool,
    last: Option<(u64, u64)>,
    rows: u64,
}

impl<'a> ShardRows<'a> {
    fn open(
        shards: &'a [PathBuf],
        strategy: &Strategy,
        kind: ResultsKind,
        symbols: Option<&'a [String]>,
        trials: bool,
    ) -> Result<Self, SweepError> {
        let readers = shards.iter().map(|path| ResultsReader::open(path, strategy, kind)).collect::<Result<_, _>>()?;
        let positions = symbols.into_iter().flatten().enumerate().map(|(i, n)| (n.as_str(), i as u64)).collect();
        let mut rows = Self {
            shards,
            readers,
            next: vec![None; shards.len()],
            heads: BinaryHeap::new(),
            positions,
            symbols,
            trials,
            last: None,
            rows: 0,
        };
        for i in 0..shards.len() {
            rows.advance(i)?;
        }
        Ok(rows)
    }

    /// Reads shard `i`'s next row into `next[i]`, its key onto the heap.
    fn advance(&mut self, i: usize) -> Result<(), SweepError> {
        let read = self.readers[i].next_row().map_err(|e| in_file(&self.shards[i], e))?;
        if let Some(r) = &read {
            let symbol = match &r.symbol {
                Some(s) => self.positions.get(s.as_str()).copied().ok_or_else(|| {
                    in_file(
                        &self.shards[i],
                        bad(format!("a row of symbol `{s}`, which the sweep's universe does not hold")),
                    )
                })?,
                None => 0,
            };
            self.heads.push((Reverse((symbol, r.trial.unwrap_or(r.row.combo))), i));
        }
        self.next[i] = read;
        Ok(())
    }

    /// The rows read, once every shard is read: as many as the shards' summaries promise.
    fn all_read(&self, promised: u64) -> Result<u64, SweepError> {
        match self.rows == promised {
            true => Ok(self.rows),
            false => {
                Err(bad(format!("the shard files hold {} rows but their summaries promise {promised}", self.rows)))
            }
        }
    }

    /// The next row, the shard it came from, and whether it opens a new symbol.
    fn next(&mut self) -> Result<Option<(ReadRow, usize, bool)>, SweepError> {
        let Some((Reverse(key), i)) = self.heads.pop() else { return Ok(None) };
        if self.last.is_some_and(|l| key <= l) || (self.trials && key.1 != self.rows) {
            let symbol = self.symbols.map_or(String::new(), |names| format!(" of {}", names[key.0 as usize]));
            let what = if self.trials { "trial" } else { "combo" };
            return Err(bad(format!(
                "{what} {}{symbol} is missing, repeated or out of order (in {})",
                key.1,
                self.shards[i].display()
            )));
        }
        let new_symbol = self.last.is_none_or(|l| l.0 != key.0);
        self.last = Some(key);
        let read = self.next[i].take().ok_or_else(|| bad("a shard's row went missing".into()))?;
        self.rows += 1;
        self.advance(i)?;
        Ok(Some((read, i, new_symbol)))
    }
}
