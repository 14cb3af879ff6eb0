//! `threadx sweep --portfolio`: every symbol of a universe traded against one account, each
//! combo one account and one row (docs/portfolios.md), through the grid's run to files
//! (checkpoints, shards, resume), on the CPU.

use crate::console::{count, progress_bar};
use crate::sweep::print_grid_run;
use crate::sweep_args::SweepArgs;
use anyhow::{Context, Result, bail};
use std::sync::Arc;
use threadx_dispatch::{Dispatcher, format_bytes, thousands};
use threadx_indicators::Ohlcv;
use threadx_sweep::{OutputOptions, PortfolioSweep, SweepSpec, run_to_files};
use threadx_telemetry::PhaseTimer;

/// Runs the portfolio sweep of `symbols` (name and bars, in symbol order) from `origin`.
pub fn run(
    args: &SweepArgs,
    spec: &SweepSpec,
    by: &str,
    (origin, symbols): (&str, Vec<(String, Arc<Ohlcv>)>),
    dispatcher: Arc<Dispatcher>,
    opts: &OutputOptions,
    mut phases: PhaseTimer,
) -> Result<()> {
    if args.monitor || args.report.is_some() {
        bail!("--monitor and --report: a portfolio sweep's are not built yet");
    }
    let account = args.sizing.account(spec.costs())?;
    let plan = PortfolioSweep::plan(spec, &symbols, &dispatcher)?;
    outln!(
        "{} portfolio sweep over {} on {}: {}, each one account ({})",
        spec.strategy(),
        count(symbols.len() as u64, "symbol"),
        origin,
        count(plan.combos().len(), "combo"),
        crate::sizing::describe(&account),
    );
    outln!(
        "preparing {} books of {} each (about {} each)",
        thousands(symbols.len() as u64),
        plan.describe(),
        format_bytes(plan.data_bytes())
    );
    let prepared =
        PortfolioSweep::prepare(plan, (origin, &symbols), account, &dispatcher).context("preparing the portfolio")?;
    phases.add("indicators", prepared.preparation.indicators_s);
    phases.add("book", prepared.preparation.book_s);
    crate::on_interrupt(format!(
        "the finished chunks are kept in {}; run the same command with --resume to continue",
        threadx_sweep::checkpoint_dir(&opts.out).display()
    ));
    let PortfolioSweep { sweep, data, preparation, pool, distribute } = &prepared;
    let bar = progress_bar(sweep.combos().len(), args.quiet, "combos");
    let mut progress = |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let report = run_to_files(sweep, data, pool, &dispatcher, distribute, opts, phases, &mut progress, None);
    bar.finish_and_clear();
    print_grid_run(args, spec, by, opts, preparation, &report?, None)
}
