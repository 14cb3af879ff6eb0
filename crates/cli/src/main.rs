//! The `threadx` command. Thin by design: it parses arguments, calls the crates and prints;
//! nothing an embedding user would need lives here.

/// `print!` that returns the error instead of panicking, so that a closed pipe
/// (`threadx sweep | head -1`) ends the command quietly (see [`main`]).
macro_rules! out {
    ($($arg:tt)*) => {{
        let text = format!($($arg)*);
        crate::console::message(&threadx_profile_store::escape::terminal(&text))?
    }};
}

/// `println!` that returns the error instead of panicking (see [`out!`]).
macro_rules! outln {
    ($($arg:tt)*) => {{
        let text = format!($($arg)*);
        crate::console::message(&(threadx_profile_store::escape::terminal(&text) + "\n"))?
    }};
}

mod backtest;
mod balance;
mod console;
mod data;
mod devices;
mod indicators;
mod monitor;
mod outputs;
mod overfit;
mod pages;
mod portfolio;
mod profile;
mod report;
mod request;
mod sizing;
mod strategy;
mod sweep;
mod sweep_args;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use threadx_backtest::strategy_help;
use threadx_dispatch::DeviceMode;
use threadx_indicators::{INDICATOR_HELP, Indicator};

#[derive(Debug, Parser)]
#[command(
    name = "threadx",
    version,
    about = "Trading-strategy research on the fastest device: CPU or GPU, chosen from measured timings"
)]
struct Cli {
    /// Where operations run: auto (from timing profiles), cpu, gpu, or all (a sweep on every GPU and the CPU at once). Default: $THREADX_DEVICE, else auto.
    #[arg(long, global = true, value_parser = parse_mode)]
    device: Option<DeviceMode>,
    #[command(subcommand)]
    command: Command,
}

fn parse_mode(s: &str) -> Result<DeviceMode, String> {
    s.parse()
}

#[derive(Debug, Subcommand)]
// Parsed once a process and never moved in a loop: its largest variant's size is no cost.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// List GPU adapters, ranked, with the one ThreadX uses by default and why.
    Devices {
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show or reset the timing profiles that drive the CPU-vs-GPU choice.
    Profile {
        #[command(subcommand)]
        action: profile::Action,
    },
    /// Market data tools.
    Data {
        #[command(subcommand)]
        action: data::Action,
    },
    /// Compute indicators (TA-Lib's definitions) over a data set and write them as a table.
    Indicators {
        /// A CSV, Parquet or Arrow (Feather) file, or synthetic:bars=N,seed=S[,market=fx].
        #[arg(long, long_help = data_help())]
        data: String,
        /// An indicator with its parameters, repeatable, e.g. bbands:period=20,std=2 (see --help).
        #[arg(long = "ind", value_parser = parse_indicator, long_help = format!("An indicator with its parameters, repeatable. Known (with defaults): {INDICATOR_HELP}"))]
        indicators: Vec<Indicator>,
        /// Output table: timestamp, then one column per output (NaN written as empty); CSV,
        /// or Parquet (.parquet) or Arrow IPC (.arrow, .feather) by its extension.
        #[arg(long)]
        out: PathBuf,
    },
    /// Backtest one parameter set of a strategy and print its metrics.
    #[command(after_long_help = format!("Strategies and their parameters (defaults; ranges):\n{}", strategy_help()))]
    Backtest {
        /// A CSV, Parquet or Arrow (Feather) file, or synthetic:bars=N,seed=S[,market=fx].
        #[arg(long, default_value = "synthetic", long_help = data_help())]
        data: String,
        /// bb_atr, ma_cross, rsi_reversion or a rule file FILE.toml (--help lists the parameters).
        #[arg(
            long,
            default_value = "bb_atr",
            long_help = "bb_atr, ma_cross, rsi_reversion (their parameters are listed below) or your own rule \
                         file, e.g. --strategy donchian.toml (see `threadx strategy`)"
        )]
        strategy: String,
        /// A parameter, repeatable: --set bb_period=20 --set bb_std=2; others take their defaults.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Cost per side as a fraction of traded value (0.001 = 0.1%).
        #[arg(long, default_value_t = 0.001, allow_negative_numbers = true)]
        fee: f64,
        /// The fill price moved against you on every fill, a fraction (0.0005 = 0.05%).
        #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
        slippage: f64,
        /// Bars per year that annualise the Sharpe ratio (default: from the median spacing
        /// of the timestamps, a year of 365 days; e.g. 252 for daily stock bars).
        #[arg(long, value_name = "BARS", allow_negative_numbers = true)]
        periods_per_year: Option<f64>,
        /// Write the trade list to this file: CSV, or Parquet or Arrow by its extension.
        #[arg(long, value_name = "FILE.csv")]
        trades: Option<PathBuf>,
        /// Write the equity curve (equity 1 before the first bar) to this file: CSV, or
        /// Parquet or Arrow by its extension.
        #[arg(long, value_name = "FILE.csv")]
        equity: Option<PathBuf>,
        /// Print one JSON object (the metric names of docs/strategies.md) instead of a table.
        #[arg(long)]
        json: bool,
        /// Write an HTML report (metrics, equity and drawdown, trades, monthly returns) here.
        #[arg(long, value_name = "FILE.html")]
        report: Option<PathBuf>,
        /// Trade every symbol of --data (a folder, a glob such as 'dir/*.parquet' or a file
        /// with a symbol column) against one account (docs/portfolios.md).
        #[arg(long)]
        portfolio: bool,
        #[command(flatten)]
        sizing: sizing::SizingFlags,
    },
    /// Sweep a strategy's parameters (grid, --random sample or --walk-forward) and write
    /// every combo's metrics, the best ones and a heatmap.
    Sweep(Box<sweep_args::SweepArgs>),
    /// The built-in strategies, a strategy's rule file, and checking your own.
    Strategy {
        #[command(subcommand)]
        action: strategy::StrategyAction,
    },
    /// Write one HTML page of a run from its JSON: a sweep's summary (beside its --out) or
    /// `threadx backtest --json`'s object. The data is loaded again and checked unchanged.
    Report {
        /// The run's JSON.
        input: PathBuf,
        /// The page (default: INPUT with .html).
        #[arg(long, value_name = "FILE.html")]
        out: Option<PathBuf>,
    },
    /// Join the results of every shard of a sweep (--shard I/N) into one file.
    Merge(sweep::MergeArgs),
    /// Time each worker (every GPU and the CPU) on a sample of a workload and save how
    /// sweeps split it among them.
    Balance(balance::BalanceArgs),
    /// Sample CPU, memory and every NVIDIA GPU (utilization, memory, temperature, power)
    /// at an interval, print each sample, and keep the history as a table (CSV, Parquet or
    /// Arrow) and a plot.
    Monitor(monitor::MonitorArgs),
}

/// What `--data` takes, for every command's long help.
pub fn data_help() -> String {
    format!(
        "A CSV, Parquet or Arrow IPC (Feather) file, or synthetic:bars=N,seed=S[,market=fx] (default for backtest \
         and sweep: one year of synthetic BTC-like 15-minute bars). A sweep also takes many symbols: a glob \
         pattern ('data/*.parquet'), a folder of data files, or one long file whose `symbol` column holds \
         several symbols; each file's symbol is its name without the extension.\n\nColumns: {}. Header names in any case; \
         times as date-time strings or epoch seconds, milliseconds or microseconds; in Parquet and Arrow files \
         also timestamp or date columns (pandas' unnamed index is the time). A headerless Binance kline CSV is \
         read too. A file's format is told by its first bytes, not its name.",
        threadx_indicators::columns_help()
    )
}

fn parse_indicator(s: &str) -> Result<Indicator, String> {
    Indicator::parse(s).map_err(|e| e.to_string())
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            // wgpu-hal logs every adapter probe that fails (e.g. EGL without a display) as
            // an error; those are not the user's problem. THREADX_LOG overrides.
            tracing_subscriber::EnvFilter::try_from_env("THREADX_LOG").unwrap_or_else(|_| "warn,wgpu_hal=off".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .init();
    let cli = Cli::parse();
    // Ctrl-C: say what is kept and how to go on (temporary files are left locked by
    // nobody, so the next run removes them), then exit as interrupted programs do.
    // A command that registered a stop flag is asked to stop instead (a second Ctrl-C exits).
    let _ = ctrlc::set_handler(|| {
        use std::io::Write as _;
        let stop = STOP_FLAG.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if stop.is_some_and(|s| !s.swap(true, std::sync::atomic::Ordering::SeqCst)) {
            return;
        }
        let note = INTERRUPTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let _ = writeln!(std::io::stderr(), "\ninterrupted{}", note.map(|n| format!(": {n}")).unwrap_or_default());
        std::process::exit(130);
    });
    let result = match cli.command {
        Command::Devices { json } => devices::run(json, cli.device),
        Command::Profile { action } => profile::run(action, cli.device),
        Command::Data { action } => data::run(action),
        Command::Indicators { data, indicators, out } => {
            mode(cli.device).and_then(|m| indicators::run(&data, &indicators, &out, m))
        }
        Command::Backtest {
            data,
            strategy,
            set,
            fee,
            slippage,
            periods_per_year,
            trades,
            equity,
            json,
            report,
            portfolio,
            sizing,
        } => mode(cli.device).and_then(|m| {
            let request = backtest::Request {
                data,
                strategy,
                set,
                fee,
                slippage,
                periods_per_year,
                trades,
                equity,
                json,
                report,
            };
            match (portfolio, sizing.given().as_slice()) {
                (true, _) => portfolio::run(&request, &sizing, m),
                (false, []) => backtest::run(&request, m),
                (false, given) => Err(anyhow::anyhow!("{}: sizing needs --portfolio", given.join(", "))),
            }
        }),
        Command::Report { input, out } => mode(cli.device).and_then(|m| report::run(&input, out.as_deref(), m)),
        Command::Sweep(args) => sweep::run(&args, cli.device),
        Command::Merge(args) => sweep::run_merge(&args),
        Command::Strategy { action } => strategy::run(&action),
        Command::Balance(args) => balance::run(&args, cli.device),
        Command::Monitor(args) => monitor::run(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The reader went away (`| head`): stop quietly, as Unix tools do.
        Err(e) if is_broken_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// What to tell the user if Ctrl-C stops the run now.
static INTERRUPTED: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Set by a command that stops cleanly on Ctrl-C.
static STOP_FLAG: std::sync::Mutex<Option<std::sync::Arc<std::sync::atomic::AtomicBool>>> = std::sync::Mutex::new(None);

/// From now on, the first Ctrl-C sets `stop` (the command winds down and saves) instead
/// of exiting.
pub fn stop_on_interrupt(stop: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    *STOP_FLAG.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(stop);
}

/// Sets what Ctrl-C tells the user from now on.
pub fn on_interrupt(note: String) {
    *INTERRUPTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(note);
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    let broken = |io: &std::io::Error| io.kind() == std::io::ErrorKind::BrokenPipe;
    e.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(broken)
            // A sweep's output written in place to a closed pipe (`--out /dev/stdout | head`).
            || matches!(cause.downcast_ref::<threadx_sweep::SweepError>(), Some(threadx_sweep::SweepError::Io { error, .. }) if broken(error))
    })
}

/// The device mode of this run: the flag (or a sweep config's `device`), else the
/// environment.
fn mode(flag: Option<DeviceMode>) -> Result<DeviceMode> {
    match flag {
        Some(m) => Ok(m),
        None => DeviceMode::from_env().map_err(anyhow::Error::msg),
    }
}
