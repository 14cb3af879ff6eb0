//! `threadx sweep` and `threadx merge`: the flags resolved once (`flags.rs`), a session,
//! the run, the console's lines. A sweep becomes one of its modes here: a grid (this
//! file), a search (`search.rs`), a universe (`universe.rs`) or a walk-forward
//! (`walk.rs`); no other command's module is imported.

mod flags;
mod portfolio;
mod search;
mod universe;
mod walk;

use crate::console::{count, preparation_time, print_edge, print_summary_path, progress_bar, top_table};
use crate::outputs::sibling;
use crate::sweep_args::SweepArgs;
use anyhow::{Context, Result, bail};
use clap::Args;
use flags::SweepFlags;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use threadx_dispatch::{DeviceMode, Dispatcher, format_bytes, thousands};
use threadx_indicators::{MarketData, Ohlcv};
use threadx_multi_gpu::{RunStats, WorkerStats};
use threadx_profile_store::{is_special_file, write_file_atomic};
use threadx_sweep::{
    Best, HeatmapOptions, OutputOptions, Preparation, Session, Shard, SweepData, SweepPlan, SweepReport, SweepSpec,
    checkpoint_dir, merge, metric_index,
};
use threadx_telemetry::{
    MIN_INTERVAL, MachineSummary, MeanMax, MonitorOptions, PhaseTimer, SystemMonitor, machine_summary, plot_svg,
};

/// Runs `threadx sweep`; `device_flag` is `--device` when given (else the config's
/// `device`, else the environment, decides).
pub fn run(args: &SweepArgs, device_flag: Option<DeviceMode>) -> Result<()> {
    let phases = PhaseTimer::start();
    let SweepFlags { spec, by, shard, opts, monitor_plot, search_plot, outputs } =
        SweepFlags::resolve(args, device_flag)?;
    let mode = spec.device();

    let mut monitor = match args.monitor {
        true => Some(SystemMonitor::start(&MonitorOptions { interval: MIN_INTERVAL, ..MonitorOptions::default() })?),
        false => None,
    };
    let mut phases = phases;
    let (data, dispatcher) = phases.time("load", || -> Result<_> {
        let data = MarketData::load(&args.data).with_context(|| format!("loading --data {}", args.data))?;
        Ok((data, Arc::new(Dispatcher::from_env(Some(mode)).map_err(anyhow::Error::msg)?)))
    })?;
    if args.portfolio {
        crate::outputs::check_outputs_over_universe(&outputs, &data)?;
        let origin = args.data.as_str();
        let symbols = crate::portfolio::symbols_of(data, origin)?;
        let plots = (search_plot.as_deref(), monitor_plot.as_deref());
        return portfolio::run(
            args,
            &spec,
            &by,
            (origin, symbols),
            dispatcher,
            (&opts, plots, monitor.as_mut()),
            phases,
        );
    }
    if let Some(given) = args.sizing.given().first() {
        bail!("{given}: sizing needs --portfolio");
    }
    let data = match data {
        MarketData::Bars(bars) => Arc::new(bars),
        MarketData::Universe(universe) => {
            let mut outputs = outputs;
            outputs.push(("the combos across the symbols (beside --out)", threadx_sweep::by_combo_path(&args.out)));
            crate::outputs::check_every_output(&outputs, &universe.files())?;
            if args.report.is_some() {
                bail!("--report draws one data set's sweep: sweep one symbol for its report");
            }
            return universe::run(args, &spec, &universe, dispatcher, opts, phases);
        }
    };
    if spec.walk_forward().is_some() {
        return walk::run(SweepData::One(&data), &dispatcher, &spec, (args, &opts.constraints), mode);
    }
    let plan = SweepPlan::new(&spec, data.len(), dispatcher.policy())?;
    print_header(&spec, &data, &plan, shard)?;
    outln!("preparing {} (about {})", plan.describe(), format_bytes(plan.bytes()));
    // A closed stdout surfaces at the next `outln!`; a note is not worth failing over.
    let mut note = |note: &str| {
        let _ = crate::console::message(&(threadx_profile_store::escape::terminal(note) + "\n"));
    };
    let session = Session::from_plan(plan, data.clone(), dispatcher.clone(), &mut note)?;
    crate::on_interrupt(format!(
        "the finished {} are kept in {}; run the same command with --resume to continue",
        if spec.search().is_some() { "batches" } else { "chunks" },
        checkpoint_dir(&opts.out).display()
    ));
    if spec.search().is_some() {
        let summary = search::run(&session, &opts, search_plot.as_deref(), phases, args.quiet, args.profile)?;
        return crate::pages::after_sweep(
            (args.report.as_deref(), SweepData::One(&data)),
            &session,
            &summary,
            &opts,
            mode,
        );
    }
    let report = grid_to_files(&session, args, &opts, phases, (monitor.as_mut(), monitor_plot.as_deref()))?;
    print_grid_run(args, &spec, &by, &opts, &session.preparation(), &report, monitor_plot.as_deref())?;
    crate::pages::after_sweep((args.report.as_deref(), SweepData::One(&data)), &session, &report.summary, &opts, mode)
}

/// A session's whole plan run to files as `opts` says, with a progress bar; the machine
/// sampled into the summary when `monitor` runs, its plot written to `monitor_plot`; the
/// timing profile saved.
pub(crate) fn grid_to_files(
    session: &Session,
    args: &SweepArgs,
    opts: &OutputOptions,
    phases: PhaseTimer,
    (mut monitor, monitor_plot): (Option<&mut SystemMonitor>, Option<&Path>),
) -> Result<SweepReport> {
    let bar = progress_bar(session.sweep().combos().len(), args.quiet, "combos");
    // After the last chunk, the statistics still take a while (seconds at 10^6 combos).
    let last_step =
        if session.spec().overfitting().is_some() { " · computing the overfitting statistics" } else { "" };
    let report = {
        let mut sample_machine = || {
            let monitor = monitor.as_mut().expect("sampled only with --monitor");
            monitor.stop();
            machine_summary(&monitor.history(), monitor.gpu_names(), monitor.gpu_status())
        };
        let telemetry: Option<&mut dyn FnMut() -> MachineSummary> =
            if args.monitor { Some(&mut sample_machine) } else { None };
        let mut progress = |done, total| {
            bar.set_length(total);
            bar.set_position(done);
            if done == total {
                bar.set_message(last_step);
            }
        };
        session.run_to_files(opts, phases, &mut progress, telemetry)
    };
    bar.finish_and_clear();
    let report = report?;
    if let (Some(monitor), Some(plot)) = (monitor.as_ref(), monitor_plot) {
        let title = format!("threadx sweep {}", opts.out.display());
        let svg = plot_svg(&monitor.history(), monitor.gpu_names(), monitor.cores(), &title)?;
        write_file_atomic(plot, svg.as_bytes()).with_context(|| format!("writing {}", plot.display()))?;
    }
    if let Err(e) = session.flush() {
        tracing::warn!("could not save the timing profile: {e}");
    }
    Ok(report)
}

/// The run's first lines: what runs on which data, in how many combos or trials.
fn print_header(spec: &SweepSpec, data: &Ohlcv, plan: &SweepPlan, shard: Shard) -> Result<()> {
    let combos = plan.combos();
    if let Some(search) = spec.search() {
        outln!(
            "{} {} search on {} ({} bars): up to {} of {} combos, in batches of {}, seed {}{}",
            spec.strategy(),
            search.method,
            data.origin(),
            thousands(data.len() as u64),
            count(search.trials, "trial"),
            thousands(combos.grid_len()),
            search.batch,
            search.seed,
            if shard.is_whole() { String::new() } else { format!(", shard {shard}") },
        );
    } else {
        outln!(
            "{} sweep on {} ({} bars): {}, {} of {}{}",
            spec.strategy(),
            data.origin(),
            thousands(data.len() as u64),
            count(combos.len(), "combo"),
            count(combos.chunks(), "chunk"),
            thousands(combos.chunk_size().min(combos.len())),
            if shard.is_whole() { String::new() } else { format!(", shard {shard}") },
        );
    }
    if let Some(whole) = spec.whole_grid() {
        outln!("{}", whole.note(combos.grid_len()));
    }
    Ok(())
}

/// What a grid run did: the best combos, the grid's edge, where the time went, the
/// workers, and every file written.
pub(crate) fn print_grid_run(
    args: &SweepArgs,
    spec: &SweepSpec,
    by: &str,
    opts: &OutputOptions,
    prep: &Preparation,
    report: &SweepReport,
    monitor_plot: Option<&Path>,
) -> Result<()> {
    let ranked = report.summary.best.as_ref().map_or_else(|| by.to_owned(), Best::ranking);
    out!("{}", top_table(spec.strategy(), &report.best, &ranked));
    if let Some(passing) = report.passing {
        let rules: Vec<String> = opts.constraints.iter().map(ToString::to_string).collect();
        outln!(
            "ranked: the {} of {} rows that keep {}",
            thousands(passing),
            thousands(report.rows),
            rules.join(" and ")
        );
    }
    print_edge(spec, &report.best)?;
    let backtests = match report.timings.and_then(|t| t.combos_per_s.map(|rate| (t.run, rate))) {
        Some((run, rate)) => format!("{run:.2}s ({} combos/s of wall time)", thousands(rate.round() as u64)),
        None => "none (every chunk came from the checkpoint)".into(),
    };
    let statistics = report.overfitting.as_ref().map_or(String::new(), |o| {
        format!(
            ", overfitting statistics {:.2}s",
            report.phases.as_ref().map_or(o.seconds, |p| p.seconds("overfitting"))
        )
    });
    outln!(
        "time: {}, backtests {backtests}, writing {:.2}s{statistics}",
        preparation_time(report.phases.as_ref().map_or(0.0, |p| p.seconds("load")), prep),
        report.timings.map_or(0.0, |t| t.assembling),
    );
    if let Some(workers) = report.workers.as_ref().filter(|w| !w.workers.is_empty()) {
        outln!("workers: {}", workers_line(workers));
    }
    if let (true, Some(phases), Some(workers)) = (args.profile, &report.phases, &report.workers) {
        out!("where the time went (wall):\n{}", phases.table());
        out!("{}", worker_table(workers));
    }
    if let (Some(telemetry), Some(plot)) = (&report.telemetry, &monitor_plot) {
        outln!("{}", telemetry_line(telemetry));
        outln!("wrote the monitor plot to {}", plot.display());
    }
    let refused = match report.skipped {
        0 => String::new(),
        n => format!(" ({} refused by the strategy's `require` rule: no row)", count(n, "combo")),
    };
    outln!("wrote {} rows to {}{refused}", report.rows, opts.out.display());
    if let Some(empty) = report.summary.combos.and_then(|c| c.empty) {
        outln!(
            "{} need more bars than the data has ({}) for their indicators: they cannot trade and their metrics are empty",
            count(empty, "combo"),
            report.summary.data.as_ref().map_or(0, |d| d.bars)
        );
    }
    print_summary_path(report.summary_path.as_deref(), &opts.out)?;
    if let Some(h) = &opts.heatmap {
        outln!("wrote the {by} heatmap to {}", h.path.display());
    }
    if let Some(o) = &report.overfitting {
        crate::overfit::print(o, opts.overfitting_plots.as_ref(), opts.blocks_out.as_deref())?;
    }
    if let Some(kept) = report.summary.overfitting_shard.as_ref().and_then(|o| o.blocks.as_deref()) {
        outln!("kept this shard's blocks in {kept}: `threadx merge` computes the statistics of all the shards");
    }
    Ok(())
}

/// Each worker's lane time by phase.
fn worker_table(stats: &RunStats) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let workers = sorted_workers(stats);
    if workers.is_empty() {
        return out;
    }
    const COLUMNS: [&str; 6] = ["upload", "kernel", "readback", "simulate", "write", "idle"];
    let _ = writeln!(out, "each worker's lane time during the backtests (s; kernel is device time, inside readback):");
    let width = workers.iter().map(|w| w.name.len()).max().unwrap_or(6).max(6);
    let _ = write!(out, "  {:<width$}", "worker");
    for c in COLUMNS {
        let _ = write!(out, "{c:>10}");
    }
    out.push('\n');
    for w in &workers {
        let _ = write!(out, "  {:<width$}", w.name);
        for c in COLUMNS {
            let seconds = match c {
                "idle" => Some(w.idle_s()),
                "kernel" => w.kernel_s,
                _ => w.phases.iter().filter(|p| p.0 == c).map(|p| p.1).reduce(|a, b| a + b),
            };
            let cell = match (c, seconds) {
                ("kernel", None) if w.on_gpu => "n/a".to_owned(),
                (_, None) => "-".to_owned(),
                (_, Some(s)) => format!("{s:.4}"),
            };
            let _ = write!(out, "{cell:>10}");
        }
        out.push('\n');
    }
    if workers.iter().any(|w| w.on_gpu && w.kernel_s.is_none()) {
        let _ = writeln!(out, "  (n/a: the adapter has no timestamp queries)");
    }
    out
}

/// The workers by name, as the summary lists them.
fn sorted_workers(stats: &RunStats) -> Vec<&WorkerStats> {
    let mut workers: Vec<&WorkerStats> = stats.workers.iter().collect();
    workers.sort_by(|a, b| a.name.cmp(&b.name));
    workers
}

/// `telemetry: 4 samples; cpu mean 61.2 % max 98.0 %; rss max 120 MB; gpu0 …`.
fn telemetry_line(t: &MachineSummary) -> String {
    let stat = |v: Option<MeanMax>, scale: f64, unit: &str| match v {
        Some(v) => format!("mean {:.1}{unit} max {:.1}{unit}", v.mean * scale, v.max * scale),
        None => "no samples".into(),
    };
    let mut line = format!(
        "telemetry: {} samples; machine cpu {}; process cpu {} (of a core); process rss {}",
        t.samples,
        stat(t.cpu_percent, 1.0, " %"),
        stat(t.process_cpu_percent, 1.0, " %"),
        stat(t.process_rss_bytes, 1e-6, " MB"),
    );
    for (name, g) in &t.gpus {
        line += &format!(
            "; {name} ({}) busy {}, power {}",
            g.name,
            stat(g.utilization_percent, 1.0, " %"),
            stat(g.power_w, 1.0, " W")
        );
    }
    if t.gpus.is_empty() {
        line += &format!("; {}", t.gpu_status);
    }
    line
}

/// `gpu0:NVIDIA H100 81.0 % (12 chunks, 5,204,122 combos/s), cpu 19.0 % (…)`.
fn workers_line(stats: &RunStats) -> String {
    let parts: Vec<String> = sorted_workers(stats)
        .iter()
        .map(|w| {
            let failed = w.failed.as_ref().map(|f| format!(", failed: {f}")).unwrap_or_default();
            format!(
                "{} {:.1} % ({}, {} combos/s while busy{failed})",
                w.name,
                w.share * 100.0,
                count(w.chunks, "chunk"),
                thousands(w.items_per_s.round() as u64)
            )
        })
        .collect();
    parts.join(", ")
}

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The results CSVs of every shard (each with its .json summary beside it).
    #[arg(required = true, value_name = "SHARD.csv")]
    shards: Vec<PathBuf>,
    /// The joined results CSV (byte-identical to a one-process run's); a summary goes beside it.
    #[arg(long)]
    out: PathBuf,
    /// How many of the best combos to print.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// The metric that ranks combos.
    #[arg(long, default_value = "sharpe")]
    by: String,
}

pub fn run_merge(args: &MergeArgs) -> Result<()> {
    metric_index(&args.by)?;
    crate::outputs::check_names(&[("--out", Some(&args.out), crate::outputs::Written::Table)])?;
    // The heatmap a one-process run would have drawn beside its results.
    let mut heatmap = (!is_special_file(&args.out)).then(|| HeatmapOptions {
        path: sibling(&args.out, "-heatmap.svg"),
        x: None,
        y: None,
    });
    // The statistics' plots, where the shards kept their blocks (`--overfitting`).
    let plots = (!is_special_file(&args.out)).then(|| (sibling(&args.out, "-pbo.svg"), sibling(&args.out, "-oos.svg")));
    let report = match merge(&args.shards, &args.out, args.top, &args.by, heatmap.as_ref(), plots.as_ref()) {
        // Fewer than two parameters vary, or too many cells: merged without a heatmap.
        Err(threadx_sweep::SweepError::Spec(why)) if heatmap.is_some() => {
            outln!("no heatmap: {why}");
            heatmap = None;
            merge(&args.shards, &args.out, args.top, &args.by, None, plots.as_ref())?
        }
        other => other?,
    };
    match &report.across {
        Some(across) => out!("{}", universe::across_table(&report.strategy, across)),
        None => {
            let ranked = report.summary.best.as_ref().map_or_else(|| args.by.clone(), Best::ranking);
            out!("{}", top_table(&report.strategy, &report.best, &ranked));
        }
    }
    outln!("merged {} shards, {} rows, into {}", args.shards.len(), report.rows, args.out.display());
    if let Some(across) = &report.across {
        outln!("wrote the combos across the symbols to {}", across.path.display());
    }
    if let Some(h) = heatmap.filter(|_| report.across.is_none()) {
        outln!("wrote the {} heatmap to {}", args.by, h.path.display());
    }
    print_summary_path(report.summary_path.as_deref(), &args.out)?;
    if let Some(o) = &report.overfitting {
        crate::overfit::print(o, plots.as_ref(), None)?;
    }
    Ok(())
}
