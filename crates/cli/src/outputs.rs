//! What a command writes, checked before any work: each output named with what it is (a
//! flag, or a file named after `--out`), writable, its own file, and none of the inputs.
//! A command that passes here cannot lose an output to another one or to its inputs.

use crate::sweep::SweepArgs;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use threadx_profile_store::{check_writable, refuse_colliding_outputs, refuse_output_over_input};
use threadx_sweep::OutputOptions;

/// What the checkpoint folder is called in messages (a folder: not checked as a file).
const CHECKPOINT: &str = "the checkpoint folder (--out + .parts)";

/// Every file a sweep writes, with what it is: the flags' paths and the names derived from
/// `--out` (`derived`: the shard's blocks, the summary, the monitor's and the search's
/// plots), the checkpoint folder included.
pub fn of_sweep(
    args: &SweepArgs,
    opts: &OutputOptions,
    [shard_blocks, summary, monitor_plot, search_plot]: [&Option<PathBuf>; 4],
) -> Vec<(&'static str, PathBuf)> {
    let named = |given: bool, flag: &'static str, derived: &'static str| if given { flag } else { derived };
    let plots = opts.overfitting_plots.as_ref();
    [
        ("--out", Some(args.out.clone())),
        (CHECKPOINT, Some(threadx_sweep::checkpoint_dir(&args.out))),
        ("the shard's blocks (beside --out)", shard_blocks.clone()),
        ("the summary (--out as .json)", summary.clone()),
        (
            named(args.heatmap.is_some(), "--heatmap", "the heatmap (beside --out)"),
            opts.heatmap.as_ref().map(|h| h.path.clone()),
        ),
        (
            named(args.monitor_plot.is_some(), "--monitor-plot", "the monitor's plot (beside --out)"),
            monitor_plot.clone(),
        ),
        (named(args.search_plot.is_some(), "--search-plot", "the search plot (beside --out)"), search_plot.clone()),
        ("--blocks-out", opts.blocks_out.clone()),
        ("the PBO plot (beside --out)", plots.map(|p| p.0.clone())),
        ("the out-of-sample plot (beside --out)", plots.map(|p| p.1.clone())),
        ("--report", args.report.clone()),
    ]
    .into_iter()
    .filter_map(|(what, path)| path.map(|p| (what, p)))
    .collect()
}

/// Refuses, naming it, an output that cannot be written, that another output also names,
/// or that is one of `inputs`.
pub fn check_every_output(outputs: &[(&'static str, PathBuf)], inputs: &[&Path]) -> Result<()> {
    let labelled: Vec<(&str, &Path)> = outputs.iter().map(|(what, p)| (*what, p.as_path())).collect();
    refuse_colliding_outputs(&labelled).map_err(anyhow::Error::msg)?;
    for (what, path) in labelled.iter().filter(|(what, _)| *what != CHECKPOINT) {
        check_writable(path).map_err(anyhow::Error::msg).with_context(|| what.to_string())?;
    }
    let paths: Vec<&Path> = labelled.iter().map(|(_, p)| *p).collect();
    refuse_output_over_input(&paths, inputs).map_err(anyhow::Error::msg)
}
