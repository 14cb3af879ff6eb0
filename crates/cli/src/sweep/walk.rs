//! `threadx sweep --walk-forward`: runs the windows (of one data set, or of a portfolio's
//! clock), writes them, and prints each window's winner with its out-of-sample metrics
//! and deflated Sharpe ratio.

use crate::console::{num, pct, print_summary_path, progress_bar};
use crate::outputs::sibling;
use crate::sweep_args::SweepArgs;
use anyhow::Result;
use threadx_dispatch::{DeviceMode, Dispatcher};
use threadx_sweep::{
    Constraint, SweepData, SweepSpec, WalkForwardFiles, WindowRanking, WindowResult, walk_forward_to_files,
};

/// Runs `spec`'s walk-forward (winners by `args`' ranking among the combos that keep
/// `constraints`, parsed once with the other flags) on `spec`'s threads, writes the
/// windows to `args.out` (and the report where asked) and prints each with its
/// out-of-sample DSR.
pub fn run(
    data: SweepData<'_>,
    dispatcher: &Dispatcher,
    spec: &SweepSpec,
    (args, constraints): (&SweepArgs, &[Constraint]),
    mode: DeviceMode,
) -> Result<()> {
    let (out, quiet, ranking) = (args.out.as_path(), args.quiet, &crate::sweep_args::ranking(args, spec));
    let bars = data.times().len();
    let windows = spec.walk_forward().map_or(0, |w| w.windows(bars).len()) as u64;
    let bar = progress_bar(windows, quiet, "windows");
    let window_ranking = WindowRanking { by: ranking, minimize: args.minimize, constraints };
    let walk = || {
        walk_forward_to_files(data, dispatcher, spec, window_ranking, out, &mut |done, _| {
            bar.set_position(done as u64);
        })
    };
    let files = match threadx_sweep::thread_pool(spec)? {
        Some(pool) => pool.install(walk),
        None => walk(),
    };
    bar.finish_and_clear();
    let WalkForwardFiles { report, summary: json, summary_path: summary, .. } = files?;
    if let Some(path) = &args.report {
        let page = crate::pages::SweepPage {
            spec,
            data,
            summary: &json,
            results: None,
            overfitting_plots: None,
            out_of_sample: Some({
                let (times, equity) = report.out_of_sample_curve(data.times());
                threadx_report::OutOfSampleCurve { times, equity }
            }),
        };
        crate::pages::write_sweep(&page, dispatcher, mode, path)?;
        outln!("wrote the report to {}", path.display());
    }
    // A heatmap beside these results drew the grid sweep they replace: it goes with them.
    let stale = sibling(out, "-heatmap.svg");
    if stale.is_file() && std::fs::remove_file(&stale).is_ok() {
        outln!("removed {}: it drew the sweep whose results these windows replace", stale.display());
    }
    let keeping = match constraints {
        [] => String::new(),
        rules => {
            format!(" among combos keeping {}", rules.iter().map(ToString::to_string).collect::<Vec<_>>().join(" and "))
        }
    };
    let on = match data {
        SweepData::One(bars) => format!("{} ({} bars)", bars.origin(), bars.len()),
        SweepData::Portfolio { origin, symbols, .. } => {
            format!("{origin} ({} symbols as one account, {bars} bars on their clock)", symbols.len())
        }
    };
    outln!(
        "{} walk-forward on {on}, best by {}{}{keeping} in each train window:",
        spec.strategy(),
        ranking,
        if args.minimize { ", smallest first" } else { "" }
    );
    outln!(
        "  {:>3}  {:<52} {:>12} {:>13} {:>7} {:>10} {:>7}",
        "win",
        "best in sample",
        "oos return",
        "oos sharpe/yr",
        "trades",
        "oos max dd",
        "oos dsr"
    );
    for (w, r) in report.windows.iter().enumerate() {
        let m = &r.test_report.metrics;
        outln!(
            "  {w:>3}  {:<52} {:>12} {:>13} {:>7} {:>10} {:>7}",
            spec.strategy().describe(&r.best.values),
            pct(m.total_return),
            num(m.sharpe_annual),
            m.trades,
            pct(m.max_drawdown),
            dsr(r.deflated.dsr)
        );
    }
    let m = &report.overall;
    outln!(
        "  out of sample overall: return {}, sharpe {} per bar ({} annualised), {} trades, max drawdown {}, exposure {}",
        pct(m.total_return),
        num(m.sharpe),
        num(m.sharpe_annual),
        m.trades,
        pct(m.max_drawdown),
        pct(m.exposure)
    );
    outln!("{}", dsr_sentence(&report.windows));
    outln!("wrote {} windows to {}", report.windows.len(), out.display());
    print_summary_path(summary.as_deref(), out)
}

/// A DSR for the table: two decimals, "-" when there is none (no trades, no variance).
fn dsr(v: f64) -> String {
    if v.is_finite() { format!("{v:.2}") } else { "-".into() }
}

/// What the windows' DSRs say: how many out-of-sample Sharpe ratios survive the deflation
/// for the selection in their train windows.
fn dsr_sentence(windows: &[WindowResult]) -> String {
    let significant = windows.iter().filter(|w| w.deflated.dsr >= 0.95).count();
    let n = windows.len();
    let verdict = if significant * 2 > n {
        "most of the out-of-sample results are more than the luck of choosing the best"
    } else {
        "the out-of-sample results are not more than the luck of choosing the best in most windows"
    };
    format!(
        "  DSR ≥ 0.95 in {significant} of {n} windows (each window's out-of-sample Sharpe ratio deflated for the {} combos its train window chose among): {verdict}",
        windows.first().map_or(0, |w| w.deflated.trials)
    )
}
