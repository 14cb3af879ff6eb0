//! `threadx sweep --data 'dir/*.parquet'` (or a folder, or a long file with a `symbol`
//! column): the grid over every symbol, one progress bar, and the combos that hold
//! across the symbols.

use crate::console::{count, num, pct, print_summary_path, progress_bar};
use crate::sweep_args::SweepArgs;
use anyhow::{Result, bail};
use std::sync::Arc;
use threadx_backtest::Strategy;
use threadx_dispatch::{Dispatcher, thousands};
use threadx_indicators::Universe;
use threadx_sweep::{AcrossReport, OutputOptions, SweepSpec, UniverseProgress, universe_to_files};
use threadx_telemetry::PhaseTimer;

pub fn run(
    args: &SweepArgs,
    spec: &SweepSpec,
    universe: &Universe,
    dispatcher: Arc<Dispatcher>,
    mut opts: OutputOptions,
    phases: PhaseTimer,
) -> Result<()> {
    if args.heatmap.is_some() || args.monitor {
        bail!("--heatmap and --monitor draw one symbol's sweep; this --data holds {} symbols", universe.len());
    }
    // The default heatmap is one symbol's picture: a universe has the by-combo table instead.
    opts.heatmap = None;
    let per_symbol = spec.sample().map_or(spec.grid_len(), |s| s.n);
    let names: Vec<&str> = universe.names().collect();
    let shown: Vec<&str> = names.iter().take(5).copied().collect();
    outln!(
        "{} sweep over {} ({}{}): {} each{}",
        spec.strategy(),
        count(universe.len() as u64, "symbol"),
        shown.join(", "),
        if names.len() > shown.len() { ", …" } else { "" },
        count(per_symbol, "combo"),
        if opts.shard.is_whole() { String::new() } else { format!(", shard {}", opts.shard) },
    );
    crate::on_interrupt(format!(
        "the finished symbols and chunks are kept in {}; run the same command with --resume to continue",
        threadx_sweep::checkpoint_dir(&opts.out).display()
    ));
    let bar = progress_bar(per_symbol * universe.len() as u64, args.quiet, "symbol·combos");
    let mut note = |note: &str| {
        // A closed stdout surfaces at the next `outln!`; a note is not worth failing over.
        bar.suspend(|| {
            let _ = crate::console::message(&(threadx_profile_store::escape::terminal(note) + "\n"));
        });
    };
    let report = universe_to_files(
        universe,
        spec,
        dispatcher.clone(),
        &opts,
        phases,
        &mut |p: UniverseProgress<'_>| {
            bar.set_length(p.total * p.symbols as u64);
            bar.set_position(p.total * p.symbol as u64 + p.done);
            bar.set_message(format!(" · {} ({}/{})", p.name, p.symbol + 1, p.symbols));
        },
        &mut note,
    );
    bar.finish_and_clear();
    let report = report?;
    if let Err(e) = dispatcher.flush() {
        tracing::warn!("could not save the timing profile: {e}");
    }
    if let Some(across) = &report.across {
        out!("{}", across_table(spec.strategy(), across));
    }
    let rate = report.bar_combos_per_s.map_or_else(
        || "every symbol came from the checkpoint".to_owned(),
        |r| format!("{} bar·combos/s of wall time", thousands(r.round() as u64)),
    );
    outln!(
        "time: {:.2}s for {} run now ({rate}); backtests {:.2}s, indicators + signal books {:.2}s",
        report.phases.wall_s,
        count(report.symbols_run as u64, "symbol"),
        report.phases.seconds("backtests"),
        report.phases.seconds("indicators") + report.phases.seconds("book"),
    );
    outln!("wrote {} rows ({} symbols) to {}", thousands(report.rows), universe.len(), opts.out.display());
    match &report.across {
        Some(a) => outln!("wrote the combos across the symbols to {}", a.path.display()),
        None => outln!("this shard's rows are a part: `threadx merge` joins the shards and writes the by-combo table"),
    }
    print_summary_path(report.summary_path.as_deref(), &opts.out)
}

/// The best combos by the median of the objective across the symbols.
pub fn across_table(strategy: &Strategy, a: &AcrossReport) -> String {
    use std::fmt::Write as _;
    let order = if a.minimize { ", smallest first" } else { "" };
    let keeping = match a.constraints.as_slice() {
        [] => String::new(),
        rules => format!(
            ", among combos keeping {} on every symbol",
            rules.iter().map(ToString::to_string).collect::<Vec<_>>().join(" and ")
        ),
    };
    let mut out =
        format!("top {} combos across {} symbols, by median {}{order}{keeping}:\n", a.best.len(), a.symbols, a.by);
    let _ = writeln!(
        out,
        "  {:>4} {:>9}  {:<52} {:>8} {:>10} {:>10} {:>10} {:>9}",
        "rank", "combo", "parameters", "symbols", "median", "mean", "min", "positive"
    );
    for (i, c) in a.best.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {:>4} {:>9}  {:<52} {:>8} {:>10} {:>10} {:>10} {:>9}",
            i + 1,
            c.combo,
            strategy.describe(&c.values),
            c.symbols,
            num(c.median),
            num(c.mean),
            num(c.min),
            pct(c.positive_return_share)
        );
    }
    out
}
