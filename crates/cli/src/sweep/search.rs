//! `threadx sweep --search`: a prepared session
//! searched to files, with a progress bar that shows the best value so far, then the best
//! combos and the search's figures.

use crate::console::{count, num, preparation_time, print_edge, print_summary_path, progress_bar, top_table};
use anyhow::Result;
use std::path::Path;
use threadx_dispatch::thousands;
use threadx_sweep::{OutputOptions, SearchProgress, Session, search_to_files, stop_text};
use threadx_telemetry::PhaseTimer;

/// Runs the session's search to files as `opts` says and prints what it found.
pub fn run(
    session: &Session,
    opts: &OutputOptions,
    plot: Option<&Path>,
    phases: PhaseTimer,
    quiet: bool,
    profile: bool,
) -> Result<threadx_sweep::Summary> {
    let spec = session.spec();
    let options = spec.search().expect("called for a search");
    let metric = options.objective.metric();
    let bar = progress_bar(options.trials, quiet, "trials");
    let run = search_to_files(session, opts, plot, phases, &mut |p: SearchProgress| {
        bar.set_length(p.total);
        bar.set_position(p.done);
        if let Some(best) = p.best {
            bar.set_message(format!(" · best {metric} {}", num(best)));
        }
    });
    bar.finish_and_clear();
    let run = run?;
    if let Err(e) = session.flush() {
        tracing::warn!("could not save the timing profile: {e}");
    }
    out!("{}", top_table(spec.strategy(), &run.files.best, &opts.by));
    print_edge(spec, &run.files.best)?;
    let rate = run.files.summary.search.as_ref().and_then(|s| s.evaluations_per_s).unwrap_or(0.0);
    match &run.search {
        Some(report) => {
            outln!(
                "{} search: {} evaluated, stopped {}; {} trials/s while searching; proposing and learning took {:.3}s ({:.1} % of the search)",
                options.method,
                count(report.trials.len() as u64, "trial"),
                stop_text(report.stop, options),
                thousands(rate.round() as u64),
                report.search_seconds,
                100.0 * report.search_seconds / report.seconds.max(1e-9),
            );
            match report.best_trial() {
                Some(best) => outln!(
                    "best: trial {} (combo {}): {}, {metric} {}",
                    report.best.unwrap_or_default(),
                    best.combo,
                    spec.strategy().describe(&session.sweep().book().combo_values(best.combo)),
                    num(best.value.unwrap_or(f64::NAN)),
                ),
                None => outln!("best: none: no trial was feasible (every one broke a constraint or had no {metric})"),
            }
        }
        None => outln!(
            "{} search, shard {}: {} evaluated; {} trials/s while searching (join the shards with `threadx merge`)",
            options.method,
            opts.shard,
            count(run.files.rows, "trial"),
            thousands(rate.round() as u64)
        ),
    }
    if let Some(phases) = &run.files.phases {
        outln!(
            "time: {}, search {:.2}s, writing {:.2}s; {:.2}s in all",
            preparation_time(phases.seconds("load"), &session.preparation()),
            phases.seconds("search"),
            phases.seconds("write"),
            phases.wall_s
        );
        if profile {
            out!("where the time went (wall):\n{}", phases.table());
        }
    }
    outln!("wrote {} trials to {}", thousands(run.files.rows), opts.out.display());
    if let (Some(path), Some(_)) = (plot, &run.search) {
        outln!("wrote the best-so-far plot to {}", path.display());
    }
    if let Some(h) = &opts.heatmap {
        outln!("wrote the {} heatmap to {}", opts.by, h.path.display());
    }
    print_summary_path(run.files.summary_path.as_deref(), &opts.out)?;
    if let Some(o) = &run.files.overfitting {
        crate::overfit::print(o, opts.overfitting_plots.as_ref(), opts.blocks_out.as_deref())?;
    }
    Ok(run.files.summary)
}
