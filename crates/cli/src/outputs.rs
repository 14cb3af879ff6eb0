//! What a command writes, checked before any work: each output named with what it is (a
//! flag, or a file named after `--out`), writable, its own file, and none of the inputs.
//! A command that passes here cannot lose an output to another one or to its inputs.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use threadx_indicators::MarketData;
use threadx_profile_store::{refuse_colliding_outputs, refuse_output_over_input};
use threadx_sweep::TableFormat;

/// What the checkpoint folder is called in messages (a folder: not checked as a file).
pub(crate) const CHECKPOINT: &str = "the checkpoint folder (--out + .parts)";

/// Refuses, naming it, an output that cannot be written, that another output also names,
/// or that is one of `inputs`.
pub fn check_every_output(outputs: &[(&'static str, PathBuf)], inputs: &[&Path]) -> Result<()> {
    let labelled: Vec<(&str, &Path)> = outputs.iter().map(|(what, p)| (*what, p.as_path())).collect();
    refuse_colliding_outputs(&labelled).map_err(anyhow::Error::msg)?;
    for (what, path) in labelled.iter().filter(|(what, _)| *what != CHECKPOINT) {
        check_writable(path).with_context(|| what.to_string())?;
    }
    let paths: Vec<&Path> = labelled.iter().map(|(_, p)| *p).collect();
    refuse_output_over_input(&paths, inputs).map_err(anyhow::Error::msg)
}

/// Refuses, before any work, a table output (results, trades, equity, indicators, bars)
/// named for a format tables are not written in ([`TableFormat::check_name`]).
pub fn check_table_names(what_and_paths: &[(&str, Option<&Path>)]) -> Result<()> {
    for (what, path) in what_and_paths {
        if let Some(path) = path {
            TableFormat::check_name(path).map_err(|e| anyhow::anyhow!("{what} {e}"))?;
        }
    }
    Ok(())
}

/// After `--data` is loaded, a universe's files are inputs too, each one: its folder or
/// pattern, checked with the other inputs before loading, is not a file an output can be.
pub fn check_outputs_over_universe(outputs: &[(&'static str, PathBuf)], market: &MarketData) -> Result<()> {
    match market {
        MarketData::Universe(universe) => check_every_output(outputs, &universe.files()),
        MarketData::Bars(_) => Ok(()),
    }
}

/// `dir/results.csv` + `-heatmap.svg` → `dir/results-heatmap.svg`.
pub(crate) fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!("{stem}{suffix}"))
}

/// Fails before any work when `path` cannot be written.
pub fn check_writable(path: &Path) -> Result<()> {
    threadx_profile_store::check_writable(path).map_err(anyhow::Error::msg)
}
