//! What a command writes, checked before any work: each output named with what it is (a
//! flag, or a file named after `--out`), writable, its own file, and none of the inputs.
//! A command that passes here cannot lose an output to another one or to its inputs.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
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

/// Whether the command's messages go to stderr: one of its outputs is stdout itself
/// (`--out /dev/stdout`), whose data they must not interleave ([`check_names`] sets it).
pub static MESSAGES_TO_STDERR: AtomicBool = AtomicBool::new(false);

/// What a command writes to a path: a table, an SVG drawing or an HTML page.
#[derive(Clone, Copy)]
pub enum Written {
    Table,
    Drawing,
    Page,
}

/// Image formats a drawing (SVG) is not, and document formats a report (HTML) is not.
const NOT_DRAWINGS: [&str; 13] =
    ["png", "jpg", "jpeg", "gif", "webp", "bmp", "tif", "tiff", "pdf", "eps", "ps", "html", "htm"];
const NOT_PAGES: [&str; 9] = ["pdf", "png", "jpg", "jpeg", "svg", "md", "doc", "docx", "xlsx"];

/// Refuses, before any work, an output named for a format it is not written in: a table
/// ([`TableFormat::check_name`]), a drawing named as an image of another kind (`.png`,
/// `.pdf`), a page named as a document of another kind: each would get SVG or HTML text
/// under that name. Any other name is taken as it is. An output that is stdout sends the
/// command's messages to stderr ([`MESSAGES_TO_STDERR`]).
pub fn check_names(outputs: &[(&str, Option<&Path>, Written)]) -> Result<()> {
    for &(flag, path, written) in outputs {
        let Some(path) = path else { continue };
        if threadx_profile_store::is_standard_output(path) {
            MESSAGES_TO_STDERR.store(true, Ordering::Relaxed);
        }
        let ext = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        let (not, what, hint) = match written {
            Written::Table => {
                TableFormat::check_name(path).map_err(|e| anyhow::anyhow!("{flag} {e}"))?;
                continue;
            }
            Written::Drawing => {
                (&NOT_DRAWINGS[..], "the drawing is SVG", "svg (a browser or rsvg-convert makes an image of it)")
            }
            Written::Page => (&NOT_PAGES[..], "the report is one HTML page", "html (a browser prints it to PDF)"),
        };
        if not.contains(&ext.as_str()) {
            anyhow::bail!("{flag} {}: {what}, not `.{ext}`: name it .{hint}", path.display());
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
