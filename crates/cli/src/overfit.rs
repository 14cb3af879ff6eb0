//! The overfitting flags of `threadx sweep` (`--overfitting`, `--blocks`, `--blocks-out`,
//! `--pbo-splits`, `--effective-trials`) and what it prints of the statistics.

use clap::Args;
use std::path::{Path, PathBuf};
use threadx_sweep::{Overfitting, OverfittingRequest, SweepRequest, SweepSpec, Verdict};

#[derive(Debug, Args)]
pub struct OverfitArgs {
    /// Say whether the winner is luck: the probability of backtest overfitting (CSCV), the
    /// deflated Sharpe ratio of the top combos and their stability, into the summary's
    /// `overfitting` and two plots beside the results. See docs/overfitting.md.
    #[arg(long)]
    overfitting: bool,
    /// Blocks CSCV cuts the bars into: even, 2 to 64 (default 16; implies --overfitting).
    #[arg(long, value_name = "S")]
    blocks: Option<u32>,
    /// Write every combo's blocks (combo,block,bars,sum_r,sum_r2) to this file: CSV, or
    /// Parquet or Arrow by its extension (implies --overfitting).
    #[arg(long, value_name = "FILE.csv")]
    blocks_out: Option<PathBuf>,
    /// Random splits when combos × C(S, S/2) > 2·10^8 (default 1,000; implies --overfitting).
    #[arg(long, value_name = "K")]
    pbo_splits: Option<usize>,
    /// The number of independent trials that deflates the Sharpe ratio (default: the combos
    /// evaluated; implies --overfitting).
    #[arg(long, value_name = "N")]
    effective_trials: Option<f64>,
}

impl OverfitArgs {
    /// Sets the request's overfitting statistics from the flags (on top of a config's).
    pub fn apply(&self, seed: Option<u64>, request: &mut SweepRequest) {
        let any = self.overfitting
            || self.blocks.is_some()
            || self.blocks_out.is_some()
            || self.pbo_splits.is_some()
            || self.effective_trials.is_some();
        if !any {
            return;
        }
        let o = request.overfitting.get_or_insert_with(OverfittingRequest::default);
        o.blocks = self.blocks.or(o.blocks);
        o.pbo_splits = self.pbo_splits.or(o.pbo_splits);
        o.effective_trials = self.effective_trials.or(o.effective_trials);
        o.seed = seed.or(o.seed);
    }

    pub fn blocks_out(&self) -> Option<PathBuf> {
        self.blocks_out.clone()
    }
}

/// The plots' paths beside the results: `<name>-pbo.svg` and `<name>-oos.svg`.
pub fn plots(spec: &SweepSpec, out: &Path) -> Option<(PathBuf, PathBuf)> {
    (spec.overfitting().is_some() && !threadx_profile_store::is_special_file(out))
        .then(|| (crate::outputs::sibling(out, "-pbo.svg"), crate::outputs::sibling(out, "-oos.svg")))
}

/// The statistics in plain sentences, and where their files went.
pub fn print(o: &Overfitting, plots: Option<&(PathBuf, PathBuf)>, blocks_out: Option<&Path>) -> anyhow::Result<()> {
    if let Some(verdict) = Verdict::of(&o.summary()) {
        outln!("Verdict: {verdict}");
    }
    for line in o.sentences() {
        outln!("{line}");
    }
    if let Some((histogram, scatter)) = plots {
        outln!("wrote the PBO plots to {} and {}", histogram.display(), scatter.display());
    }
    if let Some(path) = blocks_out {
        outln!("wrote the blocks to {}", path.display());
    }
    Ok(())
}
