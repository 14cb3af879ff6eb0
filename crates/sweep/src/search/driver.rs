//! [`search`]: ask a batch, evaluate it, tell the scores, until the trials are done, the
//! objective stops improving for `patience` trials, or it reaches the target.

use super::{Objective, SearchMethod, SearchSpace};
use crate::error::SweepError;
use std::time::Instant;
use threadx_backtest::Metrics;

/// What a search is asked to do.
#[derive(Debug, Clone)]
pub struct SearchOptions {
    pub method: SearchMethod,
    /// Combos to evaluate at most.
    pub trials: u64,
    /// Combos proposed and evaluated together.
    pub batch: usize,
    pub seed: u64,
    /// Stop after this many successive trials without a better feasible score.
    pub patience: Option<u64>,
    /// Stop once the objective's value reaches this.
    pub target: Option<f64>,
    pub objective: Objective,
}

/// Combos a batch holds unless asked otherwise: enough to keep a device busy, few enough
/// for the model to learn often.
pub const DEFAULT_BATCH: usize = 64;

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

/// Runs a search over `space`: batches from the method's sampler go to `evaluate`, which
/// gives each combo's metrics in order (samplers propose only combos the rules allow).
/// `progress` hears the report after each batch.
pub fn search(
    space: SearchSpace,
    options: &SearchOptions,
    evaluate: &mut Evaluate<'_>,
    progress: &mut dyn FnMut(&SearchReport) -> Result<(), SweepError>,
) -> Result<SearchReport, SweepError> {
    if options.trials == 0 {
        return Err(SweepError::Spec("--trials: at least 1 is needed".into()));
    }
    if options.batch == 0 {
        return Err(SweepError::Spec("--batch: at least 1 is needed".into()));
    }
    let started = Instant::now();
    let mut sampler = options.method.sampler(space, options.seed, options.trials);
    let mut report = SearchReport {
        trials: Vec::new(),
        best: None,
        best_so_far: Vec::new(),
        stop: Stop::Trials,
        seconds: 0.0,
        search_seconds: 0.0,
    };
    let mut since_better = 0u64;
    let mut best_score: Option<f64> = None;
    'batches: while (report.trials.len() as u64) < options.trials {
        let want = (options.trials - report.trials.len() as u64).min(options.batch as u64) as usize;
        let asked = Instant::now();
        let combos = sampler.ask(want);
        report.search_seconds += asked.elapsed().as_secs_f64();
        if combos.is_empty() {
            report.stop = Stop::Exhausted;
            break;
        }
        let metrics = evaluate(&combos)?;
        let told = Instant::now();
        let values: Vec<Option<f64>> = metrics.iter().map(|m| options.objective.value(m)).collect();
        let scores: Vec<Option<f64>> = values.iter().map(|v| v.map(|v| options.objective.oriented(v))).collect();
        sampler.tell(&combos, &scores);
        report.search_seconds += told.elapsed().as_secs_f64();
        for ((&combo, metrics), (value, score)) in combos.iter().zip(metrics).zip(values.into_iter().zip(scores)) {
            let better = score.is_some_and(|s| best_score.is_none_or(|b| s > b));
            report.trials.push(Trial { combo, metrics, value });
            if better {
                best_score = score;
                report.best = Some(report.trials.len() - 1);
                since_better = 0;
            } else {
                since_better += 1;
            }
            report.best_so_far.push(report.best.and_then(|b| report.trials[b].value).unwrap_or(f64::NAN));
            if let (Some(target), Some(v)) = (options.target, value)
                && options.objective.reaches(v, target)
            {
                report.stop = Stop::Target;
                break 'batches;
            }
            if options.patience.is_some_and(|k| since_better >= k) {
                report.stop = Stop::Patience;
                break 'batches;
            }
        }
        report.seconds = started.elapsed().as_secs_f64();
        progress(&report)?;
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}
