//! The sweep request that `threadx sweep`'s flags describe, on top of a `--config` file's:
//! resolved and checked once ([`build_spec`]); a check's error about a value the config
//! gave is said at the config's line.

use crate::sweep_args::SweepArgs;
use anyhow::{Context, Result, bail};
use std::path::Path;
use threadx_backtest::{Axis, Strategy};
use threadx_dispatch::DeviceMode;
use threadx_sweep::{SearchMethod, SearchRequest, SweepRequest, SweepSpec, WalkForward};

/// `--grid NAME=VALUES` flags as (name, values) pairs.
pub fn grid_pairs(flags: &[String]) -> Result<Vec<(String, String)>> {
    flags.iter().map(|flag| split_assignment(flag).map_err(anyhow::Error::msg)).collect()
}

/// The request the flags describe (on top of `--config`'s), checked once.
pub fn build_spec(args: &SweepArgs, device_flag: Option<DeviceMode>) -> Result<SweepSpec> {
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
    search_request(args, &mut request)?;
    request.chunk_size = args.chunk_size.or(request.chunk_size);
    if let Some(text) = &args.walk_forward {
        request.walk_forward = Some(WalkForward::parse(text)?);
    }
    args.overfit.apply(args.seed, &mut request);
    request.threads = args.threads.or(request.threads);
    request.max_memory = args.max_memory.or(request.max_memory);
    // `--device`, else the config's `device`, else THREADX_DEVICE (or auto).
    request.device = Some(crate::mode(device_flag.or(request.device))?);
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

/// `name=value` into its two halves.
pub fn split_assignment(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() && !value.trim().is_empty() => {
            Ok((name.trim().to_owned(), value.trim().to_owned()))
        }
        _ => Err(format!("expected name=value, e.g. bb_period=20 (got `{s}`)")),
    }
}

/// The search the flags ask for, on top of the config's `[search]` (a config's `[random]`
/// and `--random N` are `random` searches).
pub fn search_request(args: &SweepArgs, request: &mut SweepRequest) -> Result<()> {
    if let Some(sample) = request.random.take() {
        if request.search.is_some() {
            bail!(
                "the config has both [random] and [search]; [random] n = N is [search] method = \"random\", trials = N"
            );
        }
        request.search =
            Some(SearchRequest { seed: sample.seed, ..SearchRequest::new(SearchMethod::Random, sample.n) });
    }
    if args.random == Some(0) {
        bail!("--random 0: at least 1 combo is needed");
    }
    let method = args.search.or(args.random.map(|_| SearchMethod::Random));
    let trials = args.trials.or(args.random);
    if let Some(search) = request.search.as_mut() {
        search.method = method.unwrap_or(search.method);
        search.trials = trials.unwrap_or(search.trials);
    } else if let Some(method) = method {
        let Some(trials) = trials else {
            bail!("--search {method} needs --trials N: how many combos to evaluate at most");
        };
        request.search = Some(SearchRequest::new(method, trials));
    } else {
        let flags = [
            (args.trials.is_some(), "--trials"),
            (args.batch.is_some(), "--batch"),
            (args.seed.is_some(), "--seed"),
            (args.patience.is_some(), "--patience"),
            (args.target.is_some(), "--target"),
            (args.search_plot.is_some(), "--search-plot"),
        ];
        if let Some((_, flag)) = flags.iter().find(|(given, _)| *given) {
            bail!("{flag} applies to a search; pass --search METHOD --trials N (or --random N) too");
        }
        return Ok(());
    }
    let search = request.search.as_mut().expect("a search was set above");
    search.batch = args.batch.or(search.batch);
    search.seed = args.seed.unwrap_or(search.seed);
    search.patience = args.patience.or(search.patience);
    search.target = args.target.or(search.target);
    search.minimize |= args.minimize;
    search.constraints.extend(args.constraints.iter().cloned());
    if let Some(by) = &args.by {
        search.by = by.clone();
    }
    Ok(())
}
