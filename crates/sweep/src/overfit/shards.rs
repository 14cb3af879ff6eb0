//! The overfitting statistics of a sweep run in shards. Each shard keeps its combos'
//! blocks and Sharpe ratios in a file beside its results (`<name>.blocks`, checksummed,
//! in its rows' order) and the details of its best combos in its summary
//! (`overfitting_shard`); `threadx merge` joins the blocks in combo order as it joins the
//! rows ([`MergingBlocks`]) and takes the top combos' details from the shards: the whole
//! sweep's best are among the shards' bests, so the merged statistics are a whole run's.

use super::{Overfitting, OverfittingOptions, SweepBlocks, TOP, blocks_bytes, read_blocks, top_combos};
use crate::error::{SweepError, io_error};
use crate::rows::Row;
use crate::run_files::OutputOptions;
use crate::runner::Sweep;
use crate::spec::SweepSpec;
use crate::summary::TopCombo;
use crate::summary::{OverfittingShard, Summary};
use std::path::{Path, PathBuf};
use std::time::Instant;
use threadx_backtest::BlockCuts;
use threadx_profile_store::{Staged, write_file_staged};

/// The blocks file beside a shard's results (`--overfitting --shard`), which `merge` reads.
pub fn shard_blocks_path(results: &Path) -> PathBuf {
    results.with_extension("blocks")
}

/// Stages a shard's blocks beside its results (into `staged`) and returns its summary's
/// `overfitting_shard`: the blocks file, and its best rows' details by `opts.by`.
pub(crate) fn write_shard_part(
    sweep: &Sweep,
    opts: &OutputOptions,
    cuts: &BlockCuts,
    kept: SweepBlocks,
    best: &[Row],
    staged: &mut Vec<Staged>,
) -> Result<OverfittingShard, SweepError> {
    let path = shard_blocks_path(&opts.out);
    let bytes = blocks_bytes(kept.sharpe.iter().copied(), &kept.blocks, cuts);
    staged.push(write_file_staged(&path, &bytes).map_err(io_error(&path))?);
    Ok(OverfittingShard {
        blocks: path.file_name().map(|n| n.to_string_lossy().into_owned()),
        combos: kept.combos.len() as u64,
        by: opts.by.clone(),
        top: top_combos(sweep, best, &opts.by)?
            .into_iter()
            .map(|t| TopCombo { minimize: opts.minimize, ..t })
            .collect(),
    })
}

/// One shard's blocks being taken in order: its combos' Sharpe ratios and blocks, and how
/// many are taken.
#[derive(Debug)]
struct ShardBlocks {
    path: PathBuf,
    sharpe: Vec<f64>,
    blocks: Vec<f64>,
    next: usize,
}

/// The shards' blocks joined in combo order as `merge` takes their rows.
#[derive(Debug)]
pub(crate) struct MergingBlocks {
    options: OverfittingOptions,
    cuts: BlockCuts,
    bars: usize,
    by: String,
    shards: Vec<ShardBlocks>,
    tops: Vec<TopCombo>,
    kept: SweepBlocks,
    started: Instant,
}

impl MergingBlocks {
    /// The shards' blocks (`summaries` are theirs, in the same order), or `None` when
    /// their spec asks for no statistics. `bars` is the data's length.
    pub fn open(
        spec: &SweepSpec,
        shards: &[PathBuf],
        summaries: &[Summary],
        bars: usize,
    ) -> Result<Option<Self>, SweepError> {
        let Some(options) = spec.overfitting() else { return Ok(None) };
        let bad = |problem: String| SweepError::Merge(problem);
        let cuts = BlockCuts::new(bars, options.blocks).map_err(|e| bad(format!("--{e}")))?;
        let (mut by, mut tops, mut open) = (String::new(), Vec::new(), Vec::new());
        for (path, summary) in shards.iter().zip(summaries) {
            let part = summary.overfitting_shard.as_ref().ok_or_else(|| {
                bad(format!(
                    "{}: its summary has no overfitting part (a shard run with --overfitting writes one)",
                    path.display()
                ))
            })?;
            let file = shard_blocks_path(path);
            let (sharpe, blocks) = read_blocks(&file, part.combos as usize, &cuts)?;
            let top = part.top.clone();
            by.clone_from(&part.by);
            tops.extend(top);
            open.push(ShardBlocks { path: file, sharpe, blocks, next: 0 });
        }
        Ok(Some(Self {
            options: *options,
            cuts,
            bars,
            by,
            shards: open,
            tops,
            kept: SweepBlocks::default(),
            started: Instant::now(),
        }))
    }

    /// Takes the next combo of shard `i`, whose row is `row`.
    pub fn take(&mut self, i: usize, row: &Row) -> Result<(), SweepError> {
        let per = self.cuts.stats_len();
        let shard = &mut self.shards[i];
        let (Some(&sharpe), Some(blocks)) =
            (shard.sharpe.get(shard.next), shard.blocks.get(shard.next * per..(shard.next + 1) * per))
        else {
            return Err(SweepError::Merge(format!("{}: fewer combos than its rows", shard.path.display())));
        };
        shard.next += 1;
        self.kept.combos.push(row.combo);
        // A combo that cannot trade has empty metrics: no total return.
        self.kept.untradeable += u64::from(row.metrics.total_return.is_nan());
        self.kept.sharpe.push(sharpe);
        self.kept.blocks.extend_from_slice(blocks);
        Ok(())
    }

    /// The statistics over every shard's combos, `best` the merged run's best rows as one
    /// process ranks them (its top combos' details come from the shards that ran them).
    pub fn finish(self, best: &[Row]) -> Result<Overfitting, SweepError> {
        let top = best
            .iter()
            .take(TOP)
            .map(|row| {
                self.tops.iter().find(|t| t.combo == row.combo).cloned().ok_or_else(|| {
                    SweepError::Merge(format!(
                        "combo {} is among the best but no shard kept its details: the shards ranked by {}; \
                         merge with --by {}",
                        row.combo, self.by, self.by
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Overfitting::from_parts(
            None,
            &self.cuts,
            &self.options,
            self.kept,
            || Ok(top),
            self.bars,
            &self.by,
            self.started,
        )
    }
}
