//! Walk-forward: optimize on each train window, evaluate the winner on the test window
//! that follows, and join the test windows into one out-of-sample record.
//!
//! A train window is swept on its own bars. A test window is simulated on all bars up to
//! its end with no entry before its first bar, so its indicators have their full history
//! (every indicator is causal) and its metrics count only its own bars. A portfolio's
//! windows are cut from its clock, each symbol's bars at their times ([`SweepData`]).

use crate::combos::Shard;
use crate::error::SweepError;
use crate::leaderboard::Leaderboard;
use crate::rows::Row;
use crate::run_files::commit_with_summary;
use crate::search::Constraint;
use crate::spec::SweepSpec;
use crate::summary::{BestRow, OutOfSampleDsr, Summary, WindowSummary};
use crate::sweep_data::SweepData;
use crate::table::{ColumnType, stage_table};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use threadx_backtest::{BacktestError, BacktestReport, Metrics, ParamKind};
use threadx_dispatch::Dispatcher;
use threadx_indicators::format_time;
use threadx_stats::{deflated_sharpe, moments, psr, sample_std};

/// One window: the best combo in sample and what it did out of sample.
#[derive(Debug, Clone)]
pub struct WindowResult {
    pub train: std::ops::Range<usize>,
    pub test: std::ops::Range<usize>,
    /// The winner, with its in-sample metrics.
    pub best: Row,
    pub test_report: BacktestReport,
    /// Its out-of-sample Sharpe ratio deflated by the train window's selection.
    pub deflated: OutOfSampleDsr,
}

impl OutOfSampleDsr {
    fn of(report: &BacktestReport, train_sharpes: &[f64]) -> Self {
        let (skew, kurtosis) = moments(&report.returns());
        let (bars, sharpe) = (report.equity.len() as f64, report.metrics.sharpe);
        let trials = train_sharpes.len();
        let (dsr, sr0) = deflated_sharpe(sharpe, bars, skew, kurtosis, sample_std(train_sharpes), trials as f64);
        Self { sharpe, psr: psr(sharpe, bars, skew, kurtosis, 0.0), dsr, sr0, trials, skew, kurtosis }
    }
}

#[derive(Debug, Clone)]
pub struct WalkForwardReport {
    pub windows: Vec<WindowResult>,
    /// The test windows back to back, equity carried from one to the next.
    pub overall: Metrics,
    pub by: &'static str,
    /// Whether each train window's smallest `by` won.
    pub minimize: bool,
    /// The rules each train window's winner kept (`--constraint`).
    pub constraints: Vec<Constraint>,
}

/// How each train window picks its winner: the best `by` (the smallest when `minimize`)
/// among its combos that keep every one of `constraints`.
#[derive(Debug, Clone, Copy)]
pub struct WindowRanking<'a> {
    pub by: &'a str,
    pub minimize: bool,
    pub constraints: &'a [Constraint],
}

impl<'a> WindowRanking<'a> {
    /// The largest `by` wins, no constraint.
    pub fn by(by: &'a str) -> Self {
        Self { by, minimize: false, constraints: &[] }
    }
}

/// A walk-forward's files: the report, its windows as CSV text, and the summary written
/// beside them (`None` where: beside a device or FIFO).
#[derive(Debug, Clone)]
pub struct WalkForwardFiles {
    pub report: WalkForwardReport,
    pub csv: String,
    pub summary: Summary,
    pub summary_path: Option<PathBuf>,
}

/// Runs the walk-forward of `spec` ([`walk_forward`]) and writes its windows to `out`
/// (CSV, Parquet or Arrow) with the summary beside them, put in place together and the
/// summary last, as every run's files are.
pub fn walk_forward_to_files(
    data: SweepData<'_>,
    dispatcher: &Dispatcher,
    spec: &SweepSpec,
    ranking: WindowRanking<'_>,
    out: &Path,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<WalkForwardFiles, SweepError> {
    let report = walk_forward(data, dispatcher, spec, ranking, progress)?;
    let csv = report.to_csv(data.times(), spec);
    let table = stage_table(out, &csv, &report.column_types(spec))?;
    let mut summary = report.summary(data, spec);
    let summary_path = commit_with_summary(vec![table], &mut summary, out, Shard::WHOLE)?;
    Ok(WalkForwardFiles { report, csv, summary, summary_path })
}

/// Runs the walk-forward of `spec` (which must have `walk_forward` set), each train
/// window's winner picked by `ranking`, on the dispatcher's devices, calling
/// `progress(window, windows)` after each window. A train window none of whose combos
/// keeps the constraints is refused, naming it.
pub fn walk_forward(
    data: SweepData<'_>,
    dispatcher: &Dispatcher,
    spec: &SweepSpec,
    ranking: WindowRanking<'_>,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<WalkForwardReport, SweepError> {
    let WindowRanking { by, minimize, constraints } = ranking;
    let wf = spec.walk_forward().ok_or_else(|| SweepError::Spec("no walk-forward windows were asked for".into()))?;
    let bars = data.times().len();
    let windows = wf.windows(bars);
    if windows.is_empty() {
        return Err(SweepError::Spec(format!(
            "--walk-forward train={},test={}: the data has {} bars, fewer than one train and one test window",
            wf.train, wf.test, bars
        )));
    }
    // Every window's Sharpe is annualised like the whole data's.
    let per_year = spec.periods_per_year().unwrap_or_else(|| data.bars_per_year());
    let train_spec = spec.for_training(per_year)?;
    let mut results = Vec::with_capacity(windows.len());
    for (w, &(train_start, test_start, test_end)) in windows.iter().enumerate() {
        // Every combo must be able to trade in a train window, or its winner would be
        // chosen among the faster ones only.
        let sweep = data
            .train(train_start..test_start, dispatcher, &train_spec)
            .and_then(|sweep| sweep.require_every_combo().map(|()| sweep))
            .map_err(|e| match e {
                SweepError::Backtest(BacktestError::TooShort { strategy, params, needed, len }) => {
                    SweepError::Spec(format!(
                        "--walk-forward train={}: a train window of {len} bars is too short for {strategy} with \
                         {params}, which needs at least {needed}; use train={needed} or more",
                        wf.train
                    ))
                }
                e => SweepError::Spec(format!("walk-forward window {w} (train bars {train_start}..{test_start}): {e}")),
            })?;
        let result = sweep.run_all(dispatcher)?;
        let mut leaderboard = Leaderboard::new(by, 1)?.minimizing(minimize);
        for (&combo, &metrics) in result.combos.iter().zip(&result.metrics) {
            if Constraint::all_hold(constraints, &metrics) {
                leaderboard.offer(Row { combo, values: sweep.book().combo_values(combo), metrics });
            }
        }
        let Some(&best) = leaderboard.rows().first() else {
            let rules: Vec<String> = constraints.iter().map(ToString::to_string).collect();
            return Err(SweepError::Spec(format!(
                "walk-forward window {w} (train bars {train_start}..{test_start}): none of its {} combos keeps {}; \
                 loosen the constraint or lengthen the train windows",
                result.combos.len(),
                rules.join(" and ")
            )));
        };

        let test_report = data.test(&best.values, test_start..test_end, dispatcher, (spec, per_year))?;
        let train_sharpes: Vec<f64> = result.metrics.iter().map(|m| m.sharpe).collect();
        let deflated = OutOfSampleDsr::of(&test_report, &train_sharpes);
        results.push(WindowResult {
            train: train_start..test_start,
            test: test_start..test_end,
            best,
            test_report,
            deflated,
        });
        progress(w + 1, windows.len());
    }
    let tests: Vec<BacktestReport> = results.iter().map(|r| r.test_report.clone()).collect();
    let overall = BacktestReport::chain(&tests).metrics;
    Ok(WalkForwardReport {
        windows: results,
        overall,
        by: crate::leaderboard::metric_index(by).map(|i| Metrics::EVERY[i])?,
        minimize,
        constraints: constraints.to_vec(),
    })
}

impl WalkForwardReport {
    /// One row per window: its bars and times, the winner and its parameters, its
    /// in-sample score, then its out-of-sample metrics.
    pub fn to_csv(&self, times: &[i64], spec: &SweepSpec) -> String {
        let schema = spec.strategy().schema();
        let mut csv = String::from("window,train_start,train_end,test_start,test_end,combo");
        for p in schema {
            let _ = write!(csv, ",{}", p.name);
        }
        let _ = write!(csv, ",in_sample_{}", self.by);
        for m in Metrics::NAMES {
            let _ = write!(csv, ",{m}");
        }
        csv.push('\n');
        let time = |bar: usize| format_time(times[bar]);
        let num = |v: f64| if v.is_nan() { String::new() } else { v.to_string() };
        for (w, r) in self.windows.iter().enumerate() {
            let _ = write!(
                csv,
                "{w},{},{},{},{},{}",
                time(r.train.start),
                time(r.train.end - 1),
                time(r.test.start),
                time(r.test.end - 1),
                r.best.combo
            );
            for (p, &v) in schema.iter().zip(r.best.values.iter()) {
                let _ = write!(csv, ",{}", p.format(v));
            }
            let _ = write!(csv, ",{}", num(r.best.metrics.get(self.by).unwrap_or(f64::NAN)));
            for v in r.test_report.metrics.values() {
                let _ = write!(csv, ",{}", num(v));
            }
            csv.push('\n');
        }
        csv
    }

    /// The types of [`WalkForwardReport::to_csv`]'s columns, for its columnar forms.
    pub fn column_types(&self, spec: &SweepSpec) -> Vec<ColumnType> {
        use ColumnType::{Float, Int, Key, Text, Time};
        let params = spec.strategy().schema().iter().map(|p| match p.kind {
            ParamKind::Int => Int,
            ParamKind::Float => Float,
            ParamKind::Choice(_) => Text,
        });
        let metrics = Metrics::NAMES.iter().map(|m| if matches!(*m, "trades" | "closed_trades") { Int } else { Float });
        [Key, Time, Time, Time, Time, Key].into_iter().chain(params).chain([Float]).chain(metrics).collect()
    }

    /// The test windows back to back (equity carried from one to the next, start = 1), at
    /// their bars' times: the curve whose metrics are `overall`.
    pub fn out_of_sample_curve(&self, times: &[i64]) -> (Vec<i64>, Vec<f64>) {
        let tests: Vec<BacktestReport> = self.windows.iter().map(|r| r.test_report.clone()).collect();
        let times = self.windows.iter().flat_map(|r| times[r.test.clone()].iter().copied()).collect();
        (times, BacktestReport::chain(&tests).equity)
    }

    /// The walk-forward's summary: its spec, data (a portfolio's symbols and account in
    /// `identity`), ranking metric, windows and the test windows' metrics back to back.
    pub fn summary(&self, data: SweepData<'_>, spec: &SweepSpec) -> Summary {
        let times = data.times();
        let span = |r: &std::ops::Range<usize>| [format_time(times[r.start]), format_time(times[r.end - 1])];
        let windows = self
            .windows
            .iter()
            .map(|r| WindowSummary {
                train: span(&r.train),
                test: span(&r.test),
                best: BestRow::of(spec.strategy(), &r.best),
                out_of_sample: r.test_report.metrics,
                out_of_sample_dsr: r.deflated,
            })
            .collect();
        Summary {
            identity: data.identity(spec),
            spec: Some(spec.to_json()),
            data: Some(data.summary()),
            by: Some(self.by.to_owned()),
            minimize: self.minimize.then_some(true),
            constraints: (!self.constraints.is_empty())
                .then(|| self.constraints.iter().map(ToString::to_string).collect()),
            windows: Some(windows),
            out_of_sample_overall: Some(self.overall),
            ..Summary::new()
        }
    }
}
