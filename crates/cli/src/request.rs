//! The sweep request that `threadx sweep`'s flags describe, on top of a `--config` file's:
//! resolved and checked once ([`build_spec`]); a check's error about a value the config
//! gave is said at the config's line.

use crate::backtest::split_assignment;
use crate::sweep_args::SweepArgs;
use anyhow::{Context, Result, bail};
use std::path::Path;
use threadx_backtest::{Axis, Strategy};
use threadx_dispatch::DeviceMode;
use threadx_sweep::{SweepRequest, SweepSpec, WalkForward};

/// `--grid NAME=VALUES` flags as (name, values) pairs.
pub fn grid_pairs(flags: &[String]) -> Result<Vec<(String, String)>> {
    flags.iter().map(|flag| split_assignment(flag).map_err(anyhow::Error::msg)).collect()
}

/// The request the flags describe (on top of `--config`'s), checked once.
pub fn build_spec(args: &SweepArgs, mode: DeviceMode) -> Result<SweepSpec> {
    let config = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading --config {}", path.display()))?;
            Some((path.as_path(), text))
        }
        None => None,
    };
    let mut request = match &config {
        Some((path, text)) => SweepRequest::from_toml(text).with_context(|| format!("in {}", path.display()))?,
        None => SweepRequest::default(),
    };
    if let Some(flag) = &args.strategy {
        match &request.strategy {
            Some(config) if args.config.is_some() && Strategy::load(flag)? != Strategy::load(config)? => {
                bail!("--strategy {flag} differs from the config's strategy {config}");
            }
            _ => request.strategy = Some(flag.clone()),
        }
    }
    // Flags override the config's axes one by one; a flag given twice is refused (by
    // the check, which names both).
    let mut from_config: Vec<String> = request.grid.iter().flatten().map(|(name, _)| name.clone()).collect();
    for (name, values) in grid_pairs(&args.grid)? {
        match from_config.iter().position(|n| *n == name) {
            Some(i) => {
                from_config.remove(i);
                request.set_axis(&name, Axis::Text(values));
            }
            None => request.grid.get_or_insert_with(Vec::new).push((name, Axis::Text(values))),
        }
    }
    request.fee = args.fee.or(request.fee);
    request.slippage = args.slippage.or(request.slippage);
    request.periods_per_year = args.periods_per_year.or(request.periods_per_year);
    crate::search::search_request(args, &mut request)?;
    request.chunk_size = args.chunk_size.or(request.chunk_size);
    if let Some(text) = &args.walk_forward {
        request.walk_forward = Some(WalkForward::parse(text)?);
    }
    args.overfit.apply(args.seed, &mut request);
    request.threads = args.threads.or(request.threads);
    request.max_memory = args.max_memory.or(request.max_memory);
    request.device = Some(mode);
    request.check().map_err(|e| in_config(e, config.as_ref().map(|(p, t)| (*p, t.as_str()))))
}

/// A check's error about a value the config file gave (the message names its flag, which
/// was not typed): said at the file's line, with the key as written there.
fn in_config(e: threadx_sweep::SweepError, config: Option<(&Path, &str)>) -> anyhow::Error {
    let text = e.to_string();
    let flag = text.strip_prefix("--").and_then(|r| r.split(|c: char| !(c.is_ascii_lowercase() || c == '-')).next());
    let (Some((path, toml)), Some(flag)) = (config, flag) else { return e.into() };
    let typed = std::env::args().any(|a| a == format!("--{flag}") || a.starts_with(&format!("--{flag}=")));
    let key = flag.replace('-', "_");
    let line =
        toml.lines().position(|l| l.trim_start().strip_prefix(&key).is_some_and(|r| r.trim_start().starts_with('=')));
    match line.filter(|_| !typed) {
        Some(i) => anyhow::anyhow!(
            "{}, line {}: {} (`{}`)",
            path.display(),
            i + 1,
            text.replacen(&format!("--{flag}"), &key, 1),
            toml.lines().nth(i).unwrap_or_default().trim()
        ),
        None => e.into(),
    }
}
