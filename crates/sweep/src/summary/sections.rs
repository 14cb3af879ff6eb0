//! The summary's sections that a kind of run adds: the best rows, a search's, the
//! overfitting statistics (a whole run's or a shard's part), a universe's symbols and
//! by-combo table, a walk-forward's windows.

use crate::overfit::options::OverfittingRequest;
use crate::rows::Row;
use crate::search::SearchRequest;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use threadx_backtest::{Metrics, ParamCell, Strategy, null_as_nan};

/// A combo's parameters by name.
pub type Params = BTreeMap<String, ParamCell>;

/// `values` of `strategy`'s parameters, by name.
pub fn params_json(strategy: &Strategy, values: &[f64]) -> Params {
    strategy.schema().iter().zip(values).map(|(p, &v)| (p.name.clone(), p.cell(v))).collect()
}

/// The best rows by `by`, best first; where the first sits on the grid's edge; with
/// `--constraint`, the rules and how many rows kept them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Best {
    pub by: String,
    pub rows: Vec<BestRow>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<Vec<Edge>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passing: Option<u64>,
    /// `true` when the rows rank smallest first (`--minimize`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimize: Option<bool>,
}

impl Best {
    /// What ranks the rows, as the terminal and the report say it: `sharpe`, or
    /// `exposure, smallest first` with `--minimize`.
    pub fn ranking(&self) -> String {
        match self.minimize {
            Some(true) => format!("{}, smallest first", self.by),
            _ => self.by.clone(),
        }
    }
}

/// One combo's row: its number, parameters and metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BestRow {
    pub combo: u64,
    pub params: Params,
    pub metrics: Metrics,
}

impl BestRow {
    /// `row` of `strategy`'s grid.
    pub fn of(strategy: &Strategy, row: &Row) -> Self {
        Self { combo: row.combo, params: params_json(strategy, &row.values), metrics: row.metrics }
    }
}

/// A parameter of the best combo at the smallest or largest value its grid sweeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    pub param: String,
    pub value: ParamCell,
    /// `smallest` or `largest`.
    pub side: String,
}

/// A search's section: its request and pace; a whole run's (not a shard's) outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchSummary {
    pub request: SearchRequest,
    pub method: String,
    /// A run's pace (none where Python's search reports to its page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_batches: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluations_per_s: Option<f64>,
    #[serde(default, flatten)]
    pub outcome: Option<SearchOutcome>,
}

/// What a whole search found: its trials, why it stopped, its best trial and the
/// best-so-far curve (the trials where it improved, with the new value).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchOutcome {
    pub objective: SearchObjective,
    pub trials: u64,
    pub feasible: u64,
    pub stop: String,
    pub best: Option<SearchBest>,
    pub best_so_far: Vec<(u64, f64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_share: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchObjective {
    pub by: String,
    pub minimize: bool,
}

/// The best feasible trial: its row, number and objective value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchBest {
    pub combo: u64,
    pub params: Params,
    pub metrics: Metrics,
    pub trial: u64,
    pub value: Option<f64>,
}

/// The overfitting statistics of a run (docs/overfitting.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverfittingSummary {
    pub request: OverfittingRequest,
    #[serde(deserialize_with = "null_as_nan")]
    pub pbo: f64,
    pub splits: SplitsSummary,
    pub blocks: BlocksSummary,
    #[serde(deserialize_with = "null_as_nan")]
    pub prob_oos_loss: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub degradation_slope: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub degradation_intercept: f64,
    pub logit_quantiles: LogitQuantiles,
    /// The best combo's DSR, PSR, skew and kurtosis.
    pub dsr: Option<f64>,
    pub psr: Option<f64>,
    pub skew: Option<f64>,
    pub kurtosis: Option<f64>,
    #[serde(deserialize_with = "null_as_nan")]
    pub sr0: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub sharpe_std: f64,
    pub trials: TrialsSummary,
    pub bars: u64,
    pub objective: String,
    pub top: Vec<TopCombo>,
    pub seconds: f64,
    /// The plots' checksums, which the report checks before it shows them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plots: Option<PlotChecksums>,
}

/// CSCV's splits: how many, whether all, and the seed of a random draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitsSummary {
    pub count: u64,
    pub exhaustive: bool,
    pub seed: Option<u64>,
}

/// The blocks: how many, bars in each, and the bars left over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlocksSummary {
    pub count: u64,
    pub bars: u64,
    pub dropped: u64,
}

/// Quantiles of the logits λ of the best in-sample combo's out-of-sample rank.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LogitQuantiles {
    #[serde(deserialize_with = "null_as_nan")]
    pub p05: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub p25: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub p50: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub p75: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub p95: f64,
}

/// The N that deflated the Sharpe ratios, and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialsSummary {
    pub n: f64,
    pub source: String,
}

/// `xxh3-64:` checksums of the two overfitting plots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlotChecksums {
    pub pbo: String,
    pub oos: String,
}

impl PlotChecksums {
    /// The checksum of plot `name` (`pbo` or `oos`).
    pub fn of(&self, name: &str) -> Option<&str> {
        match name {
            "pbo" => Some(&self.pbo),
            "oos" => Some(&self.oos),
            _ => None,
        }
    }
}

/// A shard's part of the overfitting statistics: its blocks file and its best combos'
/// details, which `merge` completes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverfittingShard {
    pub blocks: Option<String>,
    pub combos: u64,
    pub by: String,
    pub top: Vec<TopCombo>,
}

/// A universe's sections: each symbol's entry, and the by-combo table (none for a shard).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UniverseSections {
    pub symbols: Vec<SymbolSummary>,
    pub by_combo: Option<ByCombo>,
}

/// A symbol of a universe: its data as its own run read it, its rows and best row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SymbolSummary {
    pub symbol: String,
    pub origin: String,
    pub bars: u64,
    pub first: Option<String>,
    pub last: Option<String>,
    pub fingerprint: Option<String>,
    pub rows: u64,
    pub best: Option<BestRow>,
}

/// The by-combo table across a universe's symbols: where it went, by what, its size and
/// the best combos by median.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ByCombo {
    pub file: String,
    pub by: String,
    /// `true` when the best combos have the smallest median (`--minimize`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimize: Option<bool>,
    /// The `--constraint` rules the best combos keep on every symbol; absent without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Vec<String>>,
    pub symbols: u64,
    pub combos: u64,
    pub best_by_median: Vec<ComboLine>,
}

/// One combo across the symbols (NaN statistics are null).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComboLine {
    pub combo: u64,
    pub params: Params,
    pub symbols: u64,
    pub mean: Option<f64>,
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub positive_return_share: Option<f64>,
}

/// A walk-forward window: its train and test spans (first and last times), the train's
/// best row, and what it did out of sample.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowSummary {
    pub train: [String; 2],
    pub test: [String; 2],
    pub best: BestRow,
    pub out_of_sample: Metrics,
    pub out_of_sample_dsr: OutOfSampleDsr,
}

/// One top combo's deflated Sharpe ratio and stability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopCombo {
    pub combo: u64,
    pub params: Params,
    /// Per bar (not annualised), the DSR's and PSR's. (NaN is null in JSON, both ways.)
    #[serde(deserialize_with = "null_as_nan")]
    pub sharpe: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub dsr: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub psr: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub skew: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub kurtosis: f64,
    /// The objective over the combo's grid neighbours (±1 step on each axis): how many,
    /// their mean and their least (NaN when it has none).
    #[serde(deserialize_with = "null_as_nan")]
    pub objective: f64,
    pub neighbours: usize,
    #[serde(deserialize_with = "null_as_nan")]
    pub neighbour_mean: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub neighbour_min: f64,
    /// Whether the run ranked its objective smallest first (`--minimize`): then a smaller
    /// neighbour is a better one. Absent when not.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub minimize: bool,
}

impl TopCombo {
    /// The objective's shape around the combo: "a plateau" when its grid neighbours' mean
    /// falls behind it by at most half its size (`mean ≥ objective − |objective| / 2`;
    /// larger is better for every ranking, a drawdown's shallower included, so this holds
    /// for objectives of either sign, and equal neighbours are a plateau; with
    /// `--minimize`, `mean ≤ objective + |objective| / 2`), else "a spike"; "no
    /// comparison" without them.
    pub fn shape(&self) -> &'static str {
        let half = 0.5 * self.objective.abs();
        let plateau = if self.minimize {
            self.neighbour_mean <= self.objective + half
        } else {
            self.neighbour_mean >= self.objective - half
        };
        if self.neighbours == 0 || self.neighbour_min.is_nan() || self.objective.is_nan() {
            "no comparison"
        } else if plateau {
            "a plateau"
        } else {
            "a spike"
        }
    }
}

/// A test window's Sharpe ratio (per bar) tested as docs/overfitting.md says: PSR against
/// 0, and DSR against SR₀ = the train window's combos' Sharpe ratios' standard deviation ×
/// E[max of `trials` normals], `trials` the combos it chose among; skew and kurtosis of
/// the window's bar returns.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OutOfSampleDsr {
    #[serde(deserialize_with = "null_as_nan")]
    pub sharpe: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub psr: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub dsr: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub sr0: f64,
    pub trials: usize,
    #[serde(deserialize_with = "null_as_nan")]
    pub skew: f64,
    #[serde(deserialize_with = "null_as_nan")]
    pub kurtosis: f64,
}
