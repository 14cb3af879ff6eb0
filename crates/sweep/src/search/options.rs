//! [`SearchRequest`]: a search as asked for (a config's `[search]`, the CLI's flags,
//! Python's keywords), and [`SearchOptions`], the same checked once.

use super::{Constraint, Objective, SearchMethod};
use crate::error::SweepError;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Combos a batch holds unless asked otherwise: enough to keep a device busy, few enough
/// for the model to learn often.
pub const DEFAULT_BATCH: usize = 64;

/// A search as asked for; what is left out takes the default its comment names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchRequest {
    /// `random`, `sobol`, `lhs` or `tpe`.
    pub method: SearchMethod,
    /// Combos to evaluate at most.
    pub trials: u64,
    /// Combos proposed and evaluated together (default [`DEFAULT_BATCH`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
    /// Seed of the proposals (default 0).
    #[serde(default)]
    pub seed: u64,
    /// Stop after this many successive trials without a better feasible value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patience: Option<u64>,
    /// Stop once the objective reaches this value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<f64>,
    /// The metric to optimise (default `sharpe`).
    #[serde(default = "default_by")]
    pub by: String,
    /// Minimise the metric instead of maximising it.
    #[serde(default)]
    pub minimize: bool,
    /// Rules such as `trades >= 30`; a combo that breaks one never wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub constraints: Vec<String>,
}

fn default_by() -> String {
    "sharpe".into()
}

impl SearchRequest {
    /// `trials` trials of `method`, everything else by default.
    pub fn new(method: SearchMethod, trials: u64) -> Self {
        Self {
            method,
            trials,
            batch: None,
            seed: 0,
            patience: None,
            target: None,
            by: default_by(),
            minimize: false,
            constraints: Vec::new(),
        }
    }

    /// Checks every field once; `grid_len` is the number of combos the grid has: more
    /// trials than that are capped to it, as samplers do (each combo runs once).
    pub fn check(&self, grid_len: u64) -> Result<SearchOptions, SweepError> {
        let bad = |problem: String| Err(SweepError::Spec(problem));
        if self.trials == 0 {
            return bad("--trials: at least 1 is needed".into());
        }

        let batch = self.batch.unwrap_or(DEFAULT_BATCH);
        if batch == 0 {
            return bad("--batch: at least 1 is needed".into());
        }
        if self.patience == Some(0) {
            return bad("--patience: at least 1 is needed".into());
        }
        if let Some(t) = self.target.filter(|t| !t.is_finite()) {
            return bad(format!("--target {t}: a finite number is needed"));
        }
        let constraints = self.constraints.iter().map(|c| c.parse::<Constraint>()).collect::<Result<_, _>>()?;
        Ok(SearchOptions {
            method: self.method,
            trials: self.trials.min(grid_len),
            batch,
            seed: self.seed,
            patience: self.patience,
            target: self.target,
            objective: Objective::new(&self.by, self.minimize, constraints)?,
        })
    }
}

/// A search, checked: what [`search`](super::search) runs.
#[derive(Debug, Clone, PartialEq)]
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

impl SearchOptions {
    /// The request these options were checked from.
    pub fn request(&self) -> SearchRequest {
        SearchRequest {
            method: self.method,
            trials: self.trials,
            batch: Some(self.batch),
            seed: self.seed,
            patience: self.patience,
            target: self.target,
            by: self.objective.metric().into(),
            minimize: self.objective.minimize(),
            constraints: self.objective.constraints().iter().map(ToString::to_string).collect(),
        }
    }

    /// The request as JSON (a summary's and a checkpoint's record of the search).
    pub fn to_json(&self) -> Value {
        json!(self.request())
    }

    /// Whether a stopping rule may end the search before its trials.
    pub fn stops_early(&self) -> bool {
        self.patience.is_some() || self.target.is_some()
    }

    /// The sizes of the batches asked for, in order: `batch` each, the last what is left.
    pub fn batch_sizes(&self) -> impl Iterator<Item = usize> + '_ {
        let batch = self.batch as u64;
        (0..self.trials.div_ceil(batch)).map(move |b| (self.trials - b * batch).min(batch) as usize)
    }
}
