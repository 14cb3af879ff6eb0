//! `threadx balance`: measure how a workload splits across this machine's workers.

use anyhow::{Context, Result, bail};
use clap::Args;
use threadx_backtest::Strategy;
use threadx_dispatch::{DeviceMode, Dispatcher, thousands};
use threadx_indicators::{IndicatorBank, Ohlcv};
use threadx_multi_gpu::{BalanceOptions, DevicePool};
use threadx_profile_store::Profiles;
use threadx_sweep::{SweepPlan, SweepRequest};

#[derive(Debug, Args)]
pub struct BalanceArgs {
    /// The workload to measure: backtest_<strategy> (backtest_bb_atr, backtest_ma_cross or
    /// backtest_rsi_reversion), the tag sweeps of that strategy split their work by.
    #[arg(long, value_name = "TAG", required_unless_present = "strategy")]
    workload_tag: Option<String>,
    /// The strategy to measure instead, a built-in or a rule file (FILE.toml): its tag is
    /// backtest_<its name>, the one its sweeps split their work by.
    #[arg(long, value_name = "NAME|FILE.toml")]
    strategy: Option<String>,
    /// Combos each timed run backtests (the first ones of the strategy's default grid).
    #[arg(long, default_value_t = BalanceOptions::default().sample_size, value_name = "N")]
    sample_size: u64,
    /// Untimed runs first (compiling kernels, uploading data, warming caches).
    #[arg(long, default_value_t = BalanceOptions::default().warmup)]
    warmup: usize,
    /// Timed runs per worker.
    #[arg(long, default_value_t = BalanceOptions::default().runs)]
    runs: usize,
    /// The data the sample runs on.
    #[arg(long, default_value = "synthetic", long_help = crate::data_help())]
    data: String,
}

/// The strategy and workload tag to measure: `--strategy`'s (its tag, which a
/// `--workload-tag` given too must be) or the built-in a tag names.
fn strategy_of(args: &BalanceArgs) -> Result<(Strategy, String)> {
    let tag_of = |strategy: &Strategy| format!("backtest_{}", strategy.name());
    if let Some(name) = &args.strategy {
        let strategy = Strategy::load(name)?;
        let tag = tag_of(&strategy);
        match &args.workload_tag {
            Some(given) if *given != tag => {
                bail!("--workload-tag {given} is not --strategy {name}'s tag, {tag}: give one of them")
            }
            _ => return Ok((strategy, tag)),
        }
    }
    let tag = args.workload_tag.clone().unwrap_or_default();
    let known = || Strategy::builtins().iter().map(tag_of).collect::<Vec<_>>().join(", ");
    match tag.strip_prefix("backtest_").map(Strategy::parse) {
        Some(Ok(strategy)) => Ok((strategy, tag)),
        _ => bail!("unknown workload tag `{tag}` (known: {}; a rule file's: --strategy FILE.toml)", known()),
    }
}

/// Every worker of the pool (`--device cpu` or `gpu` narrow it) timed alone on a sample.
pub fn run(args: &BalanceArgs, device: Option<DeviceMode>) -> Result<()> {
    let (strategy, tag) = strategy_of(args)?;
    if args.sample_size == 0 || args.runs == 0 {
        bail!("--sample-size and --runs must be at least 1");
    }
    let mode = match device {
        Some(DeviceMode::Auto) | None => DeviceMode::All,
        Some(m) => m,
    };
    let data = Ohlcv::load(&args.data).with_context(|| format!("loading --data {}", args.data))?;
    let dispatcher = Dispatcher::from_env(Some(mode)).map_err(anyhow::Error::msg)?;
    let request =
        SweepRequest { strategy: Some(strategy.locator().to_owned()), device: Some(mode), ..Default::default() };
    let spec = request.check()?;
    let sweep =
        SweepPlan::new(&spec, data.len(), dispatcher.policy())?.prepare(&IndicatorBank::new(&data, &dispatcher))?;
    let pool = DevicePool::for_mode(mode, &dispatcher, None)?;
    let sample = args.sample_size.min(sweep.combos().len());
    outln!(
        "timing {} on {} ({} bars): {} combos per run, {} warm-up and {} timed runs on each of {}",
        tag,
        data.origin(),
        thousands(data.len() as u64),
        thousands(sample),
        args.warmup,
        args.runs,
        pool.names().join(", ")
    );
    let profiles = Profiles::from_env(dispatcher.fingerprint());
    let options = BalanceOptions { sample_size: sample, warmup: args.warmup, runs: args.runs };
    let balance = pool.profile_auto_balance(&sweep.workload(), &options, &tag, Some(&profiles))?;
    outln!("{balance}");
    outln!("saved to {}", profiles.multigpu_path().display());
    Ok(())
}
