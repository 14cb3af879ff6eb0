//! `threadx sweep`'s flags ([`SweepArgs`]): what the user typed, shared by the commands a
//! sweep becomes (a grid, a search, a universe, walk-forward), with the ranking they
//! imply. Every command module reads them here; none imports another command.

use crate::outputs::CHECKPOINT;
use clap::Args;
use std::path::PathBuf;
use threadx_backtest::{Metrics, strategy_help};
use threadx_sweep::{OutputOptions, SearchMethod, SweepSpec, check_threads};

const DEFAULT_OUT: &str = "artifacts/sweep/results.csv";

#[derive(Debug, Args)]
#[command(after_long_help = format!(
    "Without --grid or --config, the strategy's built-in grid runs (bb_atr: 10,000 combos).\n\
     With either, parameters not named stay at their defaults.\n\n\
     Strategies and their parameters (defaults; ranges):\n{}", strategy_help()))]
pub struct SweepArgs {
    /// A CSV, Parquet or Arrow (Feather) file, or synthetic:bars=N,seed=S[,market=fx].
    #[arg(long, default_value = "synthetic", long_help = crate::data_help())]
    pub(crate) data: String,
    /// bb_atr, ma_cross, rsi_reversion or a rule file FILE.toml (default: the config's, else bb_atr).
    #[arg(long)]
    pub(crate) strategy: Option<String>,
    /// Values of one parameter, repeatable: a list (bb_std=1.5,2,2.5) or an inclusive range (bb_period=10:50:5).
    #[arg(long = "grid", value_name = "NAME=VALUES")]
    pub(crate) grid: Vec<String>,
    /// A TOML file with strategy, fee, slippage, [grid], [random], [walk_forward] (flags override it).
    #[arg(long, value_name = "FILE.toml")]
    pub(crate) config: Option<PathBuf>,
    /// Cost per side as a fraction of traded value (default: the config's, else 0.001).
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) fee: Option<f64>,
    /// The fill price moved against you on every fill, a fraction (default: the config's,
    /// else 0; 0.0005 = 0.05%).
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) slippage: Option<f64>,
    /// Bars per year that annualise the Sharpe ratio (default: the config's, else from the
    /// median spacing of the timestamps, a year of 365 days; e.g. 252 for daily stock bars).
    #[arg(long, value_name = "BARS", allow_negative_numbers = true)]
    pub(crate) periods_per_year: Option<f64>,
    /// Run N distinct combos of the grid drawn at random: `--search random --trials N`.
    #[arg(long, value_name = "N", conflicts_with_all = ["search", "trials"])]
    pub(crate) random: Option<u64>,
    /// Search the grid instead of running all of it: random, sobol or lhs (designs fixed
    /// in advance) or tpe (Bayesian, learns from each batch). See docs/search.md.
    #[arg(long, value_name = "METHOD", value_parser = search_method_arg)]
    pub(crate) search: Option<SearchMethod>,
    /// Combos a search evaluates at most (with --search).
    #[arg(long, value_name = "N")]
    pub(crate) trials: Option<u64>,
    /// Combos a search proposes and evaluates together (default 64).
    #[arg(long, value_name = "N")]
    pub(crate) batch: Option<usize>,
    /// Seed of a search or --random (default 0): the same seed gives the same trials on every machine.
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Stop a search after K successive trials without a better --by value.
    #[arg(long, value_name = "K")]
    pub(crate) patience: Option<u64>,
    /// Stop a search once the --by value reaches this.
    #[arg(long, value_name = "VALUE", allow_hyphen_values = true)]
    pub(crate) target: Option<f64>,
    /// Rank --by smallest first (e.g. --by volatility): a grid's best list, heatmap and
    /// overfitting top combos, a universe's best combos, each walk-forward train window's
    /// winner, a search's objective.
    #[arg(long)]
    pub(crate) minimize: bool,
    /// A rule a combo must obey to rank, repeatable, e.g. "trades >= 30" (a metric, one of
    /// `>=`, `>`, `<=`, `<`, a number): a combo that breaks one never wins a search and
    /// never enters a grid's best list (its row is still written).
    #[arg(long = "constraint", value_name = "RULE")]
    pub(crate) constraints: Vec<String>,
    /// Where a search draws its best-so-far curve (default: beside --out, `-search.svg`).
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) search_plot: Option<PathBuf>,
    /// Optimize on each train window, evaluate the best combo on the next test window:
    /// train=BARS,test=BARS[,step=BARS].
    #[arg(long, value_name = "SPEC")]
    pub(crate) walk_forward: Option<String>,
    /// Results CSV (one row per combo, in combo order; .parquet or .arrow for those formats);
    /// the summary goes beside it as .json; its folder is made when missing. Over many
    /// symbols, rows carry `symbol` first and `<name>-by-combo.<ext>` gives each combo's --by
    /// metric across them.
    #[arg(long, default_value = DEFAULT_OUT)]
    pub(crate) out: PathBuf,
    /// How many of the best combos to print.
    #[arg(long, default_value_t = 10)]
    pub(crate) top: usize,
    /// The metric that ranks combos and that a search optimises, largest first (default:
    /// the config's search `by`, else sharpe; --help lists them).
    #[arg(long, long_help = metrics_help("The metric that ranks combos and that a search optimises, largest first \
        (max_drawdown: the shallowest; default: the config's search `by`, else sharpe)."))]
    pub(crate) by: Option<String>,
    /// Draw the --by metric over two parameters (best over the others) into this SVG
    /// (default: beside the results, as <name>-heatmap.svg).
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) heatmap: Option<PathBuf>,
    /// The heatmap's horizontal parameter (default: the first that varies).
    #[arg(long, value_name = "PARAM")]
    pub(crate) heatmap_x: Option<String>,
    /// The heatmap's vertical parameter (default: the next that varies).
    #[arg(long, value_name = "PARAM")]
    pub(crate) heatmap_y: Option<String>,
    /// Write an HTML report here: the sweep (best combos, heatmaps, the objective's
    /// distribution, overfitting, search, walk-forward) and the backtest of its best combo.
    #[arg(long, value_name = "FILE.html")]
    pub(crate) report: Option<PathBuf>,
    /// Trade every symbol of a universe --data against one account: each combo is one
    /// account and one row (docs/portfolios.md).
    #[arg(long)]
    pub(crate) portfolio: bool,
    #[command(flatten)]
    pub(crate) sizing: crate::sizing::SizingFlags,
    /// Continue an interrupted run from its checkpoint (same command, same data).
    #[arg(long)]
    pub(crate) resume: bool,
    /// Run only part I of N (0-based): every N-th chunk from I. Join the parts with `threadx merge`.
    #[arg(long, value_name = "I/N")]
    pub(crate) shard: Option<String>,
    /// Combos per chunk, the unit of work, checkpoint and shard (default: about 2^26
    /// bar·combos, from the data length only). A resume or merge needs the same value.
    #[arg(long, value_name = "N")]
    pub(crate) chunk_size: Option<u64>,
    /// Worker threads (default: one per CPU core).
    #[arg(long, value_name = "N", value_parser = threads_arg)]
    pub(crate) threads: Option<usize>,
    /// Refuse a sweep whose preparation (indicator series, decision rows) would need more
    /// memory than this, e.g. 8G or 500M (default: the memory available now).
    #[arg(long, value_name = "SIZE", value_parser = threadx_sweep::parse_size)]
    pub(crate) max_memory: Option<u64>,
    /// No progress bar.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Print where the time went: each phase of the run (and the unaccounted rest) and
    /// each worker's busy time (upload, kernel, readback, simulate, write, idle). The
    /// summary JSON holds it either way.
    #[arg(long)]
    pub(crate) profile: bool,
    /// Sample CPU, memory and every NVIDIA GPU during the run (every 0.2 s): their mean
    /// and max go into the summary JSON, and a plot beside the results.
    #[arg(long)]
    pub(crate) monitor: bool,
    /// Where --monitor draws its plot (default: beside --out, `-monitor.svg`).
    #[arg(long, value_name = "FILE.svg", requires = "monitor")]
    pub(crate) monitor_plot: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) overfit: crate::overfit::OverfitArgs,
}

/// The metric that ranks combos: `--by`, else the search's objective, else sharpe.
pub(crate) fn ranking(args: &SweepArgs, spec: &SweepSpec) -> String {
    match (&args.by, spec.search()) {
        (Some(by), _) => by.clone(),
        (None, Some(search)) => search.objective.metric().to_owned(),
        (None, None) => "sharpe".to_owned(),
    }
}

/// `--threads N`, refused by clap with the request's own rule.
fn threads_arg(text: &str) -> Result<usize, String> {
    check_threads(text.parse().map_err(|e| format!("{e}"))?)
}

/// Every metric with what it means, after `intro`: the long help of `--by`.
fn metrics_help(intro: &str) -> String {
    let help = Metrics::HELP.iter().chain(&Metrics::PORTFOLIO_HELP);
    let lines: String = Metrics::EVERY.iter().zip(help).map(|(name, help)| format!("\n  {name:<14} {help}")).collect();
    format!("{intro}{lines}")
}

/// `--search METHOD`, refused by clap with the method names.
pub fn search_method_arg(text: &str) -> Result<SearchMethod, String> {
    text.parse().map_err(|e: threadx_sweep::SweepError| e.to_string())
}

/// Every file a sweep writes, with what it is: the flags' paths and the names derived from
/// `--out` (`derived`: the shard's blocks, the summary, the monitor's and the search's
/// plots), the checkpoint folder included.
pub fn sweep_outputs(
    args: &SweepArgs,
    opts: &OutputOptions,
    [shard_blocks, summary, monitor_plot, search_plot]: [&Option<PathBuf>; 4],
) -> Vec<(&'static str, PathBuf)> {
    let named = |given: bool, flag: &'static str, derived: &'static str| if given { flag } else { derived };
    let plots = opts.overfitting_plots.as_ref();
    [
        ("--out", Some(args.out.clone())),
        (CHECKPOINT, Some(threadx_sweep::checkpoint_dir(&args.out))),
        ("the shard's blocks (beside --out)", shard_blocks.clone()),
        ("the summary (--out as .json)", summary.clone()),
        (
            named(args.heatmap.is_some(), "--heatmap", "the heatmap (beside --out)"),
            opts.heatmap.as_ref().map(|h| h.path.clone()),
        ),
        (
            named(args.monitor_plot.is_some(), "--monitor-plot", "the monitor's plot (beside --out)"),
            monitor_plot.clone(),
        ),
        (named(args.search_plot.is_some(), "--search-plot", "the search plot (beside --out)"), search_plot.clone()),
        ("--blocks-out", opts.blocks_out.clone()),
        ("the PBO plot (beside --out)", plots.map(|p| p.0.clone())),
        ("the out-of-sample plot (beside --out)", plots.map(|p| p.1.clone())),
        ("--report", args.report.clone()),
    ]
    .into_iter()
    .filter_map(|(what, path)| path.map(|p| (what, p)))
    .collect()
}
