//! `threadx sweep`'s flags resolved once ([`SweepFlags`], ripgrep's `HiArgs`): the spec,
//! the ranking, the shard and every output path, each derived in one place and checked
//! (writable, its own file, none of the inputs, no other run holding `--out`) before any
//! data is read. The grid, search, universe and walk-forward runs read this value; none
//! derives a path again.

use crate::outputs::sibling;
use crate::sweep_args::{SweepArgs, ranking};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use threadx_backtest::MetricSet;
use threadx_dispatch::DeviceMode;
use threadx_profile_store::is_special_file;
use threadx_sweep::{
    Constraint, HeatmapOptions, OutputOptions, Shard, SweepError, SweepSpec, check_output, check_ranked_metrics,
    check_writable, metric_index, shard_blocks_path, summary_path,
};

/// A `threadx sweep` command, resolved: immutable once made.
pub struct SweepFlags {
    pub spec: SweepSpec,
    /// The metric that ranks the combos.
    pub by: String,
    pub shard: Shard,
    /// Where the results, summary, heatmap, plots and blocks go; holding `--out` from
    /// before any work (but for a walk-forward, whose windows hold their own).
    pub opts: OutputOptions,
    pub monitor_plot: Option<PathBuf>,
    pub search_plot: Option<PathBuf>,
    /// Every output, named as the user knows it, for the checks that need the data.
    pub outputs: Vec<(&'static str, PathBuf)>,
}

impl SweepFlags {
    /// Resolves and checks everything the user typed, before data is read or anything
    /// computed.
    pub fn resolve(args: &SweepArgs, device_flag: Option<DeviceMode>) -> Result<Self> {
        let spec = crate::request::build_spec(args, device_flag)?;
        let by = ranking(args, &spec);
        metric_index(&by)?;
        let set = if args.portfolio { MetricSet::Portfolio } else { MetricSet::Run };
        let shard = args.shard.as_deref().map(Shard::parse).transpose()?.unwrap_or(Shard::WHOLE);
        if let Some(search) = spec.search() {
            threadx_sweep::check_shard(search, shard)?;
        }
        if spec.walk_forward().is_some() && (args.resume || !shard.is_whole()) {
            bail!("--walk-forward runs in one process: --resume and --shard do not apply to it");
        }
        // A search's constraints are its objective's; a grid's rank its best list.
        let constraints: Vec<Constraint> = match spec.search() {
            Some(_) => Vec::new(),
            None => args.constraints.iter().map(|c| c.parse()).collect::<Result<_, SweepError>>()?,
        };
        check_ranked_metrics(std::iter::once(by.as_str()).chain(constraints.iter().map(|c| c.metric())), set)?;
        // --out's folder is made when missing (the default artifacts/sweep/ as any other).
        if let Some(folder) = args.out.parent().filter(|f| !f.as_os_str().is_empty() && !f.exists()) {
            std::fs::create_dir_all(folder).with_context(|| format!("creating --out's folder {}", folder.display()))?;
        }
        let mut opts = output_options(args, &spec, shard, &by, constraints);
        let monitor_plot =
            args.monitor.then(|| args.monitor_plot.clone().unwrap_or_else(|| sibling(&args.out, "-monitor.svg")));
        if let Some(plot) = &monitor_plot {
            if spec.walk_forward().is_some() || spec.search().is_some() {
                bail!("--monitor applies to a grid sweep, not to --walk-forward or a search");
            }
            check_writable(plot)?;
        }
        let search_plot = match (spec.search(), &args.search_plot) {
            (Some(_), Some(path)) => Some(path.clone()),
            (Some(_), None) if !is_special_file(&args.out) && shard.is_whole() => {
                Some(sibling(&args.out, "-search.svg"))
            }
            _ => None,
        };
        if let Some(plot) = &search_plot {
            check_writable(plot)?;
        }
        // Every output is writable, its own file and none of the inputs, before any work.
        let summary = summary_path(&args.out);
        let shard_blocks = (spec.overfitting().is_some() && !shard.is_whole()).then(|| shard_blocks_path(&args.out));
        let outputs =
            crate::sweep_args::sweep_outputs(args, &opts, [&shard_blocks, &summary, &monitor_plot, &search_plot]);
        let inputs: Vec<&Path> =
            [Some(Path::new(&args.data)), args.strategy.as_deref().map(Path::new), args.config.as_deref()]
                .into_iter()
                .flatten()
                .collect();
        crate::outputs::check_every_output(&outputs, &inputs)?;
        use crate::outputs::Written::{Drawing, Page, Table};
        crate::outputs::check_names(&[
            ("--out", Some(&args.out), Table),
            ("--blocks-out", opts.blocks_out.as_deref(), Table),
            ("--heatmap", args.heatmap.as_deref(), Drawing),
            ("--monitor-plot", args.monitor_plot.as_deref(), Drawing),
            ("--search-plot", args.search_plot.as_deref(), Drawing),
            ("--report", args.report.as_deref(), Page),
        ])?;
        check_outputs(args, &spec, &mut opts)?;
        if let Some(path) = &args.report {
            crate::pages::check_sweep_report(path, &args.out, shard)?;
        }
        // No second run into this --out may start while this one loads and prepares.
        if spec.walk_forward().is_none() {
            threadx_sweep::hold_outputs(&mut opts)?;
        }
        Ok(Self { spec, by, shard, opts, monitor_plot, search_plot, outputs })
    }
}

/// Where the results, summary and heatmap go.
fn output_options(
    args: &SweepArgs,
    spec: &SweepSpec,
    shard: Shard,
    by: &str,
    constraints: Vec<Constraint>,
) -> OutputOptions {
    let varying = spec.axes().iter().filter(|a| a.len() > 1).count();
    let heatmap = match (&args.heatmap, varying >= 2 || args.heatmap_x.is_some()) {
        (Some(path), _) => Some(path.clone()),
        (None, true) if spec.walk_forward().is_none() && !is_special_file(&args.out) => {
            Some(sibling(&args.out, "-heatmap.svg"))
        }
        _ => None,
    };
    OutputOptions {
        out: args.out.clone(),
        resume: args.resume,
        shard,
        top: args.top,
        by: by.to_owned(),
        // A search's objective may minimise (its flag or its [search] table).
        minimize: args.minimize || spec.search().is_some_and(|s| s.objective.minimize()),
        constraints,
        heatmap: heatmap.map(|path| HeatmapOptions { path, x: args.heatmap_x.clone(), y: args.heatmap_y.clone() }),
        overfitting_plots: crate::overfit::plots(spec, &args.out),
        blocks_out: args.overfit.blocks_out(),
        symbol: None,
        hold: None,
    }
}

/// Checks the outputs before any work. The default heatmap is left out (with a note)
/// when it cannot be drawn; one asked for by name fails.
fn check_outputs(args: &SweepArgs, spec: &SweepSpec, opts: &mut OutputOptions) -> Result<()> {
    if spec.walk_forward().is_some() {
        check_writable(&args.out)?;
        return Ok(());
    }
    check_output(opts)?;
    if let Some(h) = &opts.heatmap {
        match h.heatmap(spec, &opts.by, opts.minimize) {
            // Asked for by name: the user must choose; the default one is left out.
            Err(e) if args.heatmap.is_some() || args.heatmap_x.is_some() || args.heatmap_y.is_some() => {
                return Err(e.into());
            }
            Err(e) => {
                outln!("no heatmap: {e}");
                opts.heatmap = None;
            }
            Ok(_) => {}
        }
    }
    Ok(())
}
