//! Parameter sweeps: a [`SweepSpec`] (grids of lists and ranges, Monte-Carlo sampling,
//! walk-forward) expanded into combos in docs/strategies.md's order, run in fixed logical chunks
//! on the workers of a device pool (every GPU and the CPU, split by measured speed), with results streamed to a CSV (one row per combo,
//! in combo order), a JSON summary, the best combos and a heatmap; checkpointed so that a
//! killed run resumes, and shardable so that many machines share one sweep and `merge`
//! joins their files into the very bytes one process would have written.
//!
//! A universe of symbols ([`universe_to_files`]) runs the same grid over each symbol on
//! one device pool, its rows carrying `symbol`, with a per-combo table across them.
//!
//! Searches beyond grids (random, Sobol and Latin-hypercube designs, TPE) propose
//! batches that a [`Session`] evaluates, written in trial order by [`search_to_files`].
//!
//! Main types: [`SweepSpec`], [`Sweep`] (a spec prepared on data: indicators computed
//! once, the signal book, the [`ComboSet`]) and its [`SweepWork`] (the sweep as work for
//! threadx-multi-gpu's `DevicePool`), [`run_to_files`], [`merge`] and [`walk_forward`].
//!
//! Invariant: chunk `c` holds the same combos on every machine (its size depends only on
//! the data length), and a combo's row depends only on the spec, the data and the combo,
//! so results are byte-identical whatever the devices, threads, interruptions or shards.
//!
//! This crate stands on threadx-backtest and threadx-multi-gpu (and through them
//! indicators and dispatch); it must not depend on the CLI.

mod across;
mod chunk_file;
mod combos;
mod decimal;
mod edge;
mod error;
mod heatmap;
mod leaderboard;
mod memory_tables;
mod merge;
mod output;
mod overfit;
mod parquet_groups;
mod plan;
mod portfolio;
mod request;
mod results_file;
mod rows;
mod run_data;
mod run_files;
mod runner;
mod search;
mod search_plot;
mod search_run;
mod session;
mod spec;
mod summary;
mod sweep_data;
mod table;
mod universe;
mod walk;

pub use across::{AcrossReport, ComboAcross, across_in_memory, across_table, by_combo_path};
pub use combos::{ComboSet, Shard, chunk_size};
pub use edge::{GridEdge, best_of, edge_note, grid_edges};
pub use error::SweepError;
pub use heatmap::{Heatmap, heat_colour};
pub use leaderboard::{Leaderboard, better_higher, check_ranked_metrics, metric_index};
pub use memory_tables::{metrics_table, rows_table, universe_table, walk_forward_table};
pub use merge::merge;
pub use output::{SweepReport, run_to_files};
pub use overfit::{
    DEFAULT_SPLITS, Overfitting, OverfittingOptions, OverfittingRequest, Reading, SweepBlocks, Verdict,
    logit_histogram_svg, oos_vs_is_svg, plot_checksum, shard_blocks_path,
};
pub use plan::SweepPlan;
pub use portfolio::PortfolioSim;
pub use request::{SweepRequest, parse_size};
pub use results_file::{for_each_result, read_results};
pub use rows::{Row, header, parse_row, write_row};
pub use run_data::{RunData, data_fingerprint};
pub use run_files::{
    HeatmapOptions, OutputHold, OutputOptions, annualisation, check_output, check_writable, checkpoint_dir,
    hold_outputs, summary_path,
};
pub use runner::{ChunkResult, Sweep, SweepLane, SweepPending, SweepWork, thread_pool};
pub use search::{
    Constraint, DEFAULT_BATCH, Evaluate, Objective, Sampler, SearchMethod, SearchOptions, SearchReport, SearchRequest,
    SearchSpace, Stop, Trial, search,
};
pub use search_plot::best_so_far_svg;
pub use search_run::{
    SearchProgress, SearchRun, check_shard, search_header, search_summary, search_to_files, stop_text,
};
pub use session::{Devices, Preparation, Session};
pub use spec::{Sample, SweepSpec, WalkForward, WholeGrid, check_threads};
pub use summary::{
    Annualisation, BalanceSummary, Best, BestRow, BlocksSummary, ByCombo, Chunks, ComboLine, Combos, DataIdentity,
    DataSummary, Edge, Identity, LogitQuantiles, Memory, OutOfSampleDsr, OverfittingShard, OverfittingSummary, Params,
    PlotChecksums, PortfolioIdentity, SCHEMA, SearchBest, SearchObjective, SearchOutcome, SearchSummary, SearchTimings,
    SplitsSummary, Summary, SymbolSummary, Timings, TimingsSummary, TopCombo, TrialsSummary, UniverseIdentity,
    UniverseSections, UniverseTimings, WholeGridSummary, WindowSummary, params_json, section_json,
};
pub use sweep_data::SweepData;
pub use table::{ArrowTable, ColumnType, TableFormat, write_table};
pub use threadx_telemetry::available_memory;
pub use universe::{UniverseProgress, UniverseReport, universe_in_memory, universe_to_files};
pub use walk::{WalkForwardFiles, WalkForwardReport, WindowRanking, WindowResult, walk_forward, walk_forward_to_files};
