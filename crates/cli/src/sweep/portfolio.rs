//! `threadx sweep --portfolio`: every symbol of a universe traded against one account, each
//! combo one account and one row (docs/portfolios.md), on the CPU: the grid's run to files
//! (checkpoints, shards, resume), or a search, through the one session every sweep uses;
//! or a walk-forward over the portfolio's clock.

use crate::console::count;
use crate::sweep::{grid_to_files, print_grid_run, search, walk};
use crate::sweep_args::SweepArgs;
use anyhow::{Context, Result};
use std::path::Path;
use std::sync::Arc;
use threadx_dispatch::{Dispatcher, format_bytes, thousands};
use threadx_indicators::Ohlcv;
use threadx_sweep::{OutputOptions, Session, SweepData, SweepPlan, SweepSpec};
use threadx_telemetry::{PhaseTimer, SystemMonitor};

/// Runs the portfolio sweep (or search) of `symbols` (name and bars, in symbol order) from
/// `origin` to the files `opts` names, with the search's and the monitor's plots where
/// asked, the machine sampled by `monitor` when it runs.
pub fn run(
    args: &SweepArgs,
    spec: &SweepSpec,
    by: &str,
    (origin, symbols): (&str, Vec<(String, Arc<Ohlcv>)>),
    dispatcher: Arc<Dispatcher>,
    (opts, (search_plot, monitor_plot), monitor): (
        &OutputOptions,
        (Option<&Path>, Option<&Path>),
        Option<&mut SystemMonitor>,
    ),
    phases: PhaseTimer,
) -> Result<()> {
    let account = args.sizing.account(spec.strategy(), spec.costs())?;
    let clock = SweepData::portfolio_clock(&symbols);
    let data = SweepData::Portfolio { origin, symbols: &symbols, account: &account, clock: &clock };
    if spec.walk_forward().is_some() {
        spec.strategy().check_sizing(&account.sizing)?;
        return walk::run(data, &dispatcher, spec, (args, &opts.constraints), spec.device());
    }
    let plan = SweepPlan::for_symbols(spec, &symbols, dispatcher.policy())?;
    let what = match spec.search() {
        Some(s) => format!("{} search of up to {}", s.method, count(s.trials, "trial")),
        None => "sweep".into(),
    };
    outln!(
        "{} portfolio {what} over {} on {}: {}, each one account ({})",
        spec.strategy(),
        count(symbols.len() as u64, "symbol"),
        origin,
        count(plan.combos().len(), "combo"),
        account.describe(account.size_param.map(|p| spec.strategy().schema()[p].name.as_str())),
    );
    outln!(
        "preparing {} books of {} each (about {} each)",
        thousands(symbols.len() as u64),
        plan.describe(),
        format_bytes(plan.data_bytes())
    );
    let session = Session::portfolio(plan, (origin, &symbols), account, dispatcher.clone(), &mut |_| {})
        .context("preparing the portfolio")?;
    crate::on_interrupt(format!(
        "the finished {} are kept in {}; run the same command with --resume to continue",
        if spec.search().is_some() { "batches" } else { "chunks" },
        threadx_sweep::checkpoint_dir(&opts.out).display()
    ));
    let mode = spec.device();
    if spec.search().is_some() {
        let summary = search::run(&session, opts, search_plot, phases, args.quiet, args.profile)?;
        return crate::pages::after_sweep((args.report.as_deref(), data), &session, &summary, opts, mode);
    }
    let report = grid_to_files(&session, args, opts, phases, (monitor, monitor_plot))?;
    print_grid_run(args, spec, by, opts, &session.preparation(), &report, monitor_plot)?;
    crate::pages::after_sweep((args.report.as_deref(), data), &session, &report.summary, opts, mode)
}
