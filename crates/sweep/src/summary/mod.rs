//! The summary written beside every run's results (`<out>.json`), typed: [`Summary`], the
//! one definition of its fields, written and read back through serde. A grid's, a
//! search's, a universe's, a walk-forward's and a merge's summaries are this struct with
//! the sections their run fills; the CLI, the report and Python read its fields.
//!
//! Invariant: a summary's bytes are `serde_json`'s pretty print of the struct as a
//! `Value`, so its keys are sorted at every level; [`SCHEMA`] changes with its fields
//! (docs/sweeps.md, "The summary").

mod sections;

pub use sections::{
    Best, BestRow, BlocksSummary, ByCombo, ComboLine, Edge, LogitQuantiles, OutOfSampleDsr, OverfittingShard,
    OverfittingSummary, Params, PlotChecksums, SearchBest, SearchObjective, SearchOutcome, SearchSummary,
    SplitsSummary, SymbolSummary, TopCombo, TrialsSummary, UniverseSections, WindowSummary, params_json,
};

use crate::combos::Shard;
use crate::error::{SweepError, io_error};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use threadx_backtest::Metrics;
use threadx_multi_gpu::WorkerSummary;
use threadx_telemetry::{MachineSummary, PhasesSummary};

/// The summary's schema: 1 is the first typed one (it added `schema`; before it a summary
/// had none, read as 0).
pub const SCHEMA: u32 = 1;

/// What a run writes beside its results: what it was, what it read and wrote, its best
/// rows and statistics, and where its time went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// [`SCHEMA`] when written; 0 for a summary from before it.
    #[serde(default)]
    pub schema: u32,
    /// The ThreadX version that wrote it.
    pub threadx: String,
    /// What identifies the run for `--resume` and `merge` (a walk-forward: none, but a
    /// portfolio's, which names its symbols and account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
    /// The bars (one data set's; a universe names each symbol's in `symbols`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// The results file's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<String>,
    /// A shard's results' checksum, which `merge` checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results_checksum: Option<String>,
    /// Every file the run wrote beside it, the results first.
    #[serde(default)]
    pub files: Vec<String>,
    /// A merge's shards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged_from: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annualisation: Option<Annualisation>,
    /// When more combos were asked than the grid has (the whole grid ran instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_grid: Option<WholeGridSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub combos: Option<Combos>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Chunks>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best: Option<Best>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overfitting: Option<OverfittingSummary>,
    /// A shard's part of the overfitting statistics, which `merge` completes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overfitting_shard: Option<OverfittingShard>,
    /// A universe's symbols and by-combo table.
    #[serde(default, flatten)]
    pub universe: Option<UniverseSections>,
    /// A walk-forward's spec (the others keep theirs in `identity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Value>,
    /// A walk-forward's ranking metric, and `true` when each train window's smallest won
    /// (`--minimize`; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimize: Option<bool>,
    /// A walk-forward's or a universe's `--constraint` rules, which each train window's
    /// winner, or each best combo across the symbols, kept (absent without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Vec<WindowSummary>>,
    /// The test windows back to back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_sample_overall: Option<Metrics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<BTreeMap<String, WorkerSummary>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance: Option<BalanceSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings_s: Option<TimingsSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<PhasesSummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// `--monitor`'s samples of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<MachineSummary>,
}

impl Summary {
    /// A summary of this version of ThreadX with nothing filled in yet.
    pub fn new() -> Self {
        Self { schema: SCHEMA, threadx: env!("CARGO_PKG_VERSION").to_owned(), ..Self::default() }
    }

    /// The summary's text: its fields with their keys sorted, pretty-printed.
    pub fn to_text(&self) -> String {
        let value = serde_json::to_value(self).unwrap_or(Value::Null);
        format!("{value:#}\n")
    }

    /// A summary from its text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Self, SweepError> {
        Self::parse_if_summary(text, origin)?.ok_or_else(|| {
            SweepError::Results(format!("{}: not a ThreadX summary (no `threadx` field)", origin.display()))
        })
    }

    /// The summary in `text`; `None` when the text is no summary at all (JSON without the
    /// `threadx` field, such as `threadx backtest --json`'s object), an error when it is one
    /// this ThreadX cannot read (a newer schema, a field of the wrong type).
    pub fn parse_if_summary(text: &str, origin: &Path) -> Result<Option<Self>, SweepError> {
        #[derive(Deserialize)]
        struct Head {
            threadx: Option<Value>,
            #[serde(default)]
            schema: u32,
        }
        let unreadable =
            |e: serde_json::Error| SweepError::Results(format!("{}: unreadable summary ({e})", origin.display()));
        let head: Head = serde_json::from_str(text).map_err(unreadable)?;
        let Some(version) = head.threadx else { return Ok(None) };
        if head.schema > SCHEMA {
            return Err(SweepError::Results(format!(
                "{}: a summary of schema {} (ThreadX {version}); this ThreadX reads schema {SCHEMA} and older",
                origin.display(),
                head.schema
            )));
        }
        serde_json::from_str(text).map(Some).map_err(unreadable)
    }

    /// The summary in the file `path`.
    pub fn read(path: &Path) -> Result<Self, SweepError> {
        let text = std::fs::read_to_string(path).map_err(io_error(path))?;
        Self::parse(&text, path)
    }

    /// The first best row's parameters.
    pub fn best_params(&self) -> Option<&Params> {
        self.best.as_ref()?.rows.first().map(|r| &r.params)
    }

    /// Whether the run was a search (its rows are trials).
    pub fn is_search(&self) -> bool {
        self.search.is_some()
    }
}

/// A section of a summary as compact JSON with its keys sorted, as the summary holds it
/// (what Python's frames carry in their `attrs`).
pub fn section_json<T: Serialize>(section: &T) -> String {
    serde_json::to_value(section).map_or_else(|_| "null".to_owned(), |v| v.to_string())
}

/// What identifies a run for resume and merge: its spec, its data (one data set's, or a
/// universe's), the chunking and the shard count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    /// The spec as [`SweepSpec::to_json`](crate::SweepSpec::to_json) writes it.
    pub spec: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<DataIdentity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub universe: Option<UniverseIdentity>,
    /// A portfolio's symbols and account (its data is `data`: every symbol on one clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub portfolio: Option<PortfolioIdentity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<u64>,
    pub shards: u64,
}

/// A portfolio's identity: its symbols in order, its starting cash and how it sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortfolioIdentity {
    pub symbols: Vec<String>,
    pub init_cash: f64,
    pub size: f64,
    /// The parameter whose value is each combo's size, where a rule file sweeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_param: Option<String>,
    pub size_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lot: Option<f64>,
    pub min_size: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_positions: Option<u64>,
    /// The leverage cap, where not 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leverage: Option<f64>,
}

/// A data set's identity: where it came from, its length and its fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataIdentity {
    pub origin: String,
    pub bars: u64,
    pub fingerprint: String,
}

impl DataSummary {
    /// `data`'s origin, length, first and last times.
    pub fn of(data: &threadx_indicators::Ohlcv) -> Self {
        Self::of_times(data.origin(), data.timestamps())
    }

    /// Bars at `times` (epoch ms, ascending) read from `origin`.
    pub fn of_times(origin: &str, times: &[i64]) -> Self {
        Self {
            origin: origin.to_owned(),
            bars: times.len() as u64,
            first: times.first().map(|&t| threadx_indicators::format_time(t)),
            last: times.last().map(|&t| threadx_indicators::format_time(t)),
        }
    }
}

/// A universe's identity: its origin and its symbols in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UniverseIdentity {
    pub origin: String,
    pub symbols: Vec<String>,
}

/// The bars a run read: origin, count, first and last times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataSummary {
    pub origin: String,
    pub bars: u64,
    pub first: Option<String>,
    pub last: Option<String>,
}

/// The bars per year that annualised the figures, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Annualisation {
    pub periods_per_year: Option<f64>,
    pub basis: String,
}

/// More combos were asked (`asked`) than the grid has (`grid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WholeGridSummary {
    pub asked: u64,
    pub grid: u64,
}

/// Combos: the grid's, the run's positions, the rows written and those `require` refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Combos {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub positions: Option<u64>,
    /// A universe's combos per symbol.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_symbol: Option<u64>,
    pub rows: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<u64>,
    /// Rows of combos that cannot trade (the data is shorter than their indicators need):
    /// their metrics are empty. Absent when there are none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty: Option<u64>,
}

/// A grid run's chunks: their size, this shard's, those run now and those resumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunks {
    pub size: u64,
    pub this_shard: u64,
    pub run: u64,
    pub resumed: u64,
}

/// The ratios a grid run split its work by, under its balance tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BalanceSummary {
    pub tag: String,
    pub ratios: BTreeMap<String, f64>,
}

/// The process's peak memory, beside the estimate printed before the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    pub peak_bytes: Option<u64>,
}

/// `timings_s`: a grid run's, a universe's or a search's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TimingsSummary {
    Grid(Timings),
    Universe(UniverseTimings),
    Search(SearchTimings),
}

impl TimingsSummary {
    /// The whole run's seconds.
    pub fn total(&self) -> f64 {
        match self {
            Self::Grid(t) => t.total,
            Self::Universe(t) => t.total,
            Self::Search(t) => t.total,
        }
    }

    /// Combos per second, where the run counts them.
    pub fn combos_per_s(&self) -> Option<f64> {
        match self {
            Self::Grid(t) => t.combos_per_s,
            _ => None,
        }
    }
}

/// A universe's seconds, symbols run now and bar·combos per second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UniverseTimings {
    pub total: f64,
    pub symbols_run: u64,
    pub bar_combos_per_s: Option<f64>,
}

/// A search's seconds: the whole process's and the search's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SearchTimings {
    pub total: f64,
    pub search: f64,
}

/// Where a run's wall time went, in seconds (the summary's `timings_s`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
