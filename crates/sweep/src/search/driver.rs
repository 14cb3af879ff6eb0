//! [`search`]: ask a batch, evaluate it, tell the scores, until the trials are done, the
//! objective stops improving for `patience` trials, or it reaches the target.

use super::{SearchOptions, SearchSpace};
use crate::error::SweepError;
use crate::rows::Row;
use std::time::Instant;
use threadx_backtest::Metrics;

/// What evaluates a batch: each combo's metrics, in order.
pub type Evaluate<'a> = dyn FnMut(&[u64]) -> Result<Vec<Metrics>, SweepError> + 'a;

/// One evaluated combo.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub combo: u64,
    pub metrics: Metrics,
    /// The objective's value; `None`: infeasible.
    pub value: Option<f64>,
}

/// Why a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Trials,
    Patience,
    Target,
    /// The space had no more combos.
    Exhausted,
}

impl Stop {
    /// The reason in words, for summaries.
    pub fn name(self) -> &'static str {
        match self {
            Stop::Trials => "trials",
            Stop::Patience => "patience",
            Stop::Target => "target",
            Stop::Exhausted => "exhausted",
        }
    }
}

/// Every trial in evaluation order, the best, and the best-so-far curve.
#[derive(Debug, Clone)]
pub struct SearchReport {
    pub trials: Vec<Trial>,
    /// The index in `trials` of the best feasible trial (the first of equals).
    pub best: Option<usize>,
    /// Per trial, the best feasible value so far (NaN before the first).
    pub best_so_far: Vec<f64>,
    pub stop: Stop,
    /// Seconds in all, and seconds the sampler spent proposing and learning.
    pub seconds: f64,
    pub search_seconds: f64,
}

impl SearchReport {
    fn new() -> Self {
        Self {
            trials: Vec::new(),
            best: None,
            best_so_far: Vec::new(),
            stop: Stop::Trials,
            seconds: 0.0,
            search_seconds: 0.0,
        }
    }

    /// The `top` best feasible trials' rows, best first by the objective (the earlier of
    /// equals first): an infeasible trial never ranks.
    pub(crate) fn best_rows(
        &self,
        options: &SearchOptions,
        top: usize,
        values: impl Fn(u64) -> threadx_backtest::ParamValues,
    ) -> Vec<Row> {
        let objective = &options.objective;
        let mut feasible: Vec<(f64, usize)> = self
            .trials
            .iter()
            .enumerate()
            .filter_map(|(t, trial)| Some((objective.oriented(trial.value?), t)))
            .collect();
        feasible.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        feasible
            .iter()
            .take(top)
            .map(|&(_, t)| {
                let trial = &self.trials[t];
                Row { combo: trial.combo, values: values(trial.combo), metrics: trial.metrics }
            })
            .collect()
    }

    /// The report of trials already evaluated, in order (a merge of shards): the best and
    /// the curve as the search would have kept them.
    pub fn of_trials(options: &SearchOptions, trials: impl IntoIterator<Item = (u64, Metrics)>) -> Self {
        let mut tally = Tally::new(options);
        for (combo, metrics) in trials {
            tally.push(combo, metrics);
        }
        if (tally.report.trials.len() as u64) < options.trials {
            tally.report.stop = Stop::Exhausted;
        }
        tally.report
    }

    /// The best feasible trial.
    pub fn best_trial(&self) -> Option<&Trial> {
        self.best.map(|b| &self.trials[b])
    }

    /// Trials per second of the whole search.
    pub fn trials_per_s(&self) -> f64 {
        self.trials.len() as f64 / self.seconds.max(1e-9)
    }
}

/// The running record of a search: each trial in order, the best, the curve, and which
/// stopping rule (if any) the last trial met.
struct Tally<'a> {
    options: &'a SearchOptions,
    report: SearchReport,
    best_score: Option<f64>,
    since_better: u64,
}

impl<'a> Tally<'a> {
    fn new(options: &'a SearchOptions) -> Self {
        Self { options, report: SearchReport::new(), best_score: None, since_better: 0 }
    }

    /// Records the next trial; the stopping rule it meets, if any.
    fn push(&mut self, combo: u64, metrics: Metrics) -> Option<Stop> {
        let objective = &self.options.objective;
        let value = objective.value(&metrics);
        let score = value.map(|v| objective.oriented(v));
        let report = &mut self.report;
        report.trials.push(Trial { combo, metrics, value });
        if score.is_some_and(|s| self.best_score.is_none_or(|b| s > b)) {
            self.best_score = score;
            report.best = Some(report.trials.len() - 1);
            self.since_better = 0;
        } else {
            self.since_better += 1;
        }
        report.best_so_far.push(report.best.and_then(|b| report.trials[b].value).unwrap_or(f64::NAN));
        if let (Some(target), Some(v)) = (self.options.target, value)
            && objective.reaches(v, target)
        {
            return Some(Stop::Target);
        }
        self.options.patience.filter(|&k| self.since_better >= k).map(|_| Stop::Patience)
    }
}

/// Runs a search over `space`: batches from the method's sampler go to `evaluate`, which
/// gives each combo's metrics in order (samplers propose only combos the rules allow).
/// `progress` hears the report after each batch.
pub fn search(
    space: SearchSpace,
    options: &SearchOptions,
    evaluate: &mut Evaluate<'_>,
    progress: &mut dyn FnMut(&SearchReport) -> Result<(), SweepError>,
) -> Result<SearchReport, SweepError> {
    if options.trials == 0 || options.batch == 0 {
        return Err(SweepError::Spec("a search needs at least 1 trial and batches of at least 1".into()));
    }
    let started = Instant::now();
    let mut sampler = options.method.sampler(space, options.seed, options.trials);
    let mut tally = Tally::new(options);
    'batches: for want in options.batch_sizes() {
        let asked = Instant::now();
        let combos = sampler.ask(want);
        tally.report.search_seconds += asked.elapsed().as_secs_f64();
        if combos.is_empty() {
            tally.report.stop = Stop::Exhausted;
            break;
        }
        let metrics = evaluate(&combos)?;
        let told = Instant::now();
        let scores: Vec<Option<f64>> = metrics.iter().map(|m| options.objective.score(m)).collect();
        sampler.tell(&combos, &scores);
        tally.report.search_seconds += told.elapsed().as_secs_f64();
        for (&combo, metrics) in combos.iter().zip(metrics) {
            if let Some(stop) = tally.push(combo, metrics) {
                tally.report.stop = stop;
                break 'batches;
            }
        }
        tally.report.seconds = started.elapsed().as_secs_f64();
        progress(&tally.report)?;
    }
    // A last batch cut short by the space (fewer combos the rules allow than trials asked)
    // ends the search as an empty one would.
    if tally.report.stop == Stop::Trials && (tally.report.trials.len() as u64) < options.trials {
        tally.report.stop = Stop::Exhausted;
    }
    tally.report.seconds = started.elapsed().as_secs_f64();
    Ok(tally.report)
}
