//! `threadx sweep --portfolio`: every symbol of a universe traded against one account, each
//! combo one account and one row (docs/portfolios.md), through the grid's run to files
//! (checkpoints, shards, resume), on the CPU.

use crate::console::{count, progress_bar};
use crate::sweep::print_grid_run;
use crate::sweep_args::SweepArgs;
use anyhow::{Context, Result, bail};
use std::io::Write as _;
use std::sync::Arc;
use threadx_dispatch::{Dispatcher, format_bytes, thousands};
use threadx_indicators::{IndicatorBank, Ohlcv};
use threadx_sweep::{OutputOptions, Preparation, RunData, SweepPlan, SweepSpec, run_to_files};
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
    let longest = symbols.iter().map(|(_, d)| d.len()).max().unwrap_or(0);
    let plan = SweepPlan::new(spec, longest, dispatcher.policy())?;
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
    let started = std::time::Instant::now();
    let banks: Vec<IndicatorBank<'_>> = symbols.iter().map(|(_, d)| IndicatorBank::new(d, &dispatcher)).collect();
    let sweep = plan.prepare_portfolio(&banks, account).context("preparing the portfolio")?;
    let series = banks.iter().map(IndicatorBank::computations).sum();
    let indicators_s = banks.iter().flat_map(|b| b.runs()).map(|r| r.elapsed_ms).sum::<f64>() / 1e3;
    let prepare_s = started.elapsed().as_secs_f64();
    let prep = Preparation {
        series,
        indicators_s: indicators_s.min(prepare_s),
        book_s: (prepare_s - indicators_s).max(0.0),
        devices_s: 0.0,
    };
    phases.add("indicators", prep.indicators_s);
    phases.add("book", prep.book_s);
    let named: Vec<(&str, &Ohlcv)> = symbols.iter().map(|(n, d)| (n.as_str(), d.as_ref())).collect();
    let clock = sweep.portfolio().map(|p| p.books().times()).unwrap_or_default();
    let data = RunData::portfolio(origin, &named, clock, &account);
    let threads = threadx_sweep::thread_pool(spec)?;
    let mut note = |note: &str| {
        let _ = writeln!(std::io::stdout().lock(), "{}", threadx_profile_store::escape::terminal(note));
    };
    let (pool, distribute) = sweep.device_pool(spec.device(), &dispatcher, threads, &mut note)?;
    crate::on_interrupt(format!(
        "the finished chunks are kept in {}; run the same command with --resume to continue",
        threadx_sweep::checkpoint_dir(&opts.out).display()
    ));
    let bar = progress_bar(sweep.combos().len(), args.quiet, "combos");
    let report = run_to_files(
        &sweep,
        &data,
        &pool,
        &dispatcher,
        &distribute,
        opts,
        phases,
        &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        },
        None,
    );
    bar.finish_and_clear();
    let report = report?;
    print_grid_run(args, spec, by, opts, &prep, &report, None)
}
