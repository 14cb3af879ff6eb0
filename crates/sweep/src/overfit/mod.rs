//! Is the winner real? The overfitting statistics of a sweep ([`Overfitting`]): CSCV's
//! probability of backtest overfitting from the block statistics every combo recorded in
//! the same pass as its metrics, the deflated and probabilistic Sharpe ratios of the best
//! combos (their returns' skew and kurtosis from a detailed re-run on the CPU), and
//! parameter stability (the objective over each top combo's grid neighbours).
//! docs/overfitting.md says what each number means.

mod gpu;
mod kept;
pub(crate) mod options;
mod plot;
mod shards;
mod verdict;

pub(crate) use gpu::warm_up;
pub(crate) use kept::{
    blocks_bytes, blocks_path, read_blocks, read_chunk_blocks, verified_blocks, write_blocks_csv, write_chunk_blocks,
};
pub use options::{DEFAULT_SPLITS, OverfittingOptions, OverfittingRequest};
pub use plot::{logit_histogram_svg, oos_vs_is_svg};
pub use shards::shard_blocks_path;
pub(crate) use shards::{MergingBlocks, write_shard_part};
pub use verdict::{Reading, Verdict};

use crate::error::{SweepError, io_error};
use crate::leaderboard::{Leaderboard, metric_index};
use crate::rows::Row;
use crate::run_files::OutputOptions;
use crate::runner::{ChunkResult, Sweep};
use crate::search::Constraint;
use crate::summary::{
    BlocksSummary, LogitQuantiles, OverfittingSummary, PlotChecksums, SplitsSummary, TopCombo, TrialsSummary,
    params_json,
};
use std::path::PathBuf;
use std::time::Instant;
use threadx_backtest::BlockCuts;
use threadx_dispatch::{Dispatcher, thousands};
use threadx_profile_store::{Staged, write_file_staged};
use threadx_stats::SeededRng;
use threadx_stats::{BlockMatrix, PboReport, SplitSet, deflated_sharpe, moments, pbo, psr, quantile, sample_std};

/// The top combos whose DSR, PSR and stability are reported.
pub const TOP: usize = 10;

/// What the sweep kept for the statistics, in combo order: every combo's blocks and
/// per-bar Sharpe ratio ((2·S + 2)·8 bytes a combo; no equity curves).
#[derive(Debug, Clone, Default)]
pub struct SweepBlocks {
    pub combos: Vec<u64>,
    pub blocks: Vec<f64>,
    pub sharpe: Vec<f64>,
    /// How many of the combos cannot trade (their indicators need more bars than the
    /// data has): they enter CSCV flat but are no trials of the deflated Sharpe ratio.
    pub untradeable: u64,
}

impl SweepBlocks {
    /// What a chunk's rows keep (a copy: the rows stay whole).
    pub fn of(r: &ChunkResult) -> Self {
        Self { blocks: r.blocks.clone(), ..Self::without_blocks(r) }
    }

    /// What a chunk's rows keep, its blocks moved out of `r` (no second copy).
    pub fn taken_from(r: &mut ChunkResult) -> Self {
        Self { blocks: std::mem::take(&mut r.blocks), ..Self::without_blocks(r) }
    }

    fn without_blocks(r: &ChunkResult) -> Self {
        Self {
            combos: r.combos.clone(),
            blocks: Vec::new(),
            sharpe: r.metrics.iter().map(|m| m.sharpe).collect(),
            untradeable: 0,
        }
    }

    /// Appends `part` (the next combos in order).
    pub fn extend(&mut self, part: SweepBlocks) {
        self.combos.extend(part.combos);
        self.blocks.extend(part.blocks);
        self.sharpe.extend(part.sharpe);
        self.untradeable += part.untradeable;
    }

    /// Keeps the first `n` combos' (a search that stopped inside its last batch).
    pub fn truncate(&mut self, n: usize) {
        let per = self.blocks.len() / self.combos.len().max(1);
        self.combos.truncate(n);
        self.blocks.truncate(n * per);
        self.sharpe.truncate(n);
    }
}

/// A sweep's overfitting statistics.
#[derive(Debug, Clone)]
pub struct Overfitting {
    pub options: OverfittingOptions,
    pub cuts: BlockCuts,
    pub pbo: PboReport,
    /// The N that deflates the Sharpe ratios, and whether the user gave it.
    pub trials: f64,
    pub trials_given: bool,
    /// The standard deviation (ddof 1) of every evaluated combo's per-bar Sharpe ratio.
    pub sharpe_std: f64,
    pub sr0: f64,
    pub bars: usize,
    pub by: String,
    pub top: Vec<TopCombo>,
    pub seconds: f64,
    /// The checksums ([`plot_checksum`]) of the logit histogram and the out-of-sample plot,
    /// once written: a report embeds those files only while they are what the run drew.
    pub plots: Option<[String; 2]>,
}

impl Overfitting {
    /// The statistics of `sweep`'s run from what it kept (`kept`) and its best rows by
    /// `by` (the first is the winner), CSCV on the device `dispatcher` picks.
    pub fn compute(
        sweep: &Sweep,
        dispatcher: &Dispatcher,
        cuts: &BlockCuts,
        options: &OverfittingOptions,
        kept: SweepBlocks,
        best: &[Row],
        by: &str,
    ) -> Result<Self, SweepError> {
        let started = Instant::now();
        let bars = sweep.bars().0;
        let mut kept = kept;
        kept.untradeable = sweep.untradeable(&kept.combos);
        let top = || top_combos(sweep, best, by);
        Self::from_parts(Some(dispatcher), cuts, options, kept, top, bars, by, started)
    }

    /// The statistics of `rows`, all of `sweep`'s combos run in memory with their blocks,
    /// the best of them ranked by `by` (smallest first when `minimize`) among those that
    /// keep the `constraints`; None when the spec asks for none.
    pub fn of_rows(
        sweep: &Sweep,
        dispatcher: &Dispatcher,
        rows: &ChunkResult,
        (by, minimize, constraints): (&str, bool, &[Constraint]),
    ) -> Result<Option<Self>, SweepError> {
        let (Some(options), Some(cuts)) = (sweep.spec().overfitting(), sweep.blocks()) else { return Ok(None) };
        let mut leaderboard = Leaderboard::new(by, TOP)?.minimizing(minimize);
        let book = sweep.book();
        for (&combo, &metrics) in rows.combos.iter().zip(&rows.metrics) {
            if Constraint::all_hold(constraints, &metrics) {
                leaderboard.offer(Row { combo, values: book.combo_values(combo), metrics });
            }
        }
        let kept = SweepBlocks::of(rows);
        Self::compute(sweep, dispatcher, cuts, options, kept, leaderboard.rows(), by)
            .map(|o| Some(o.minimizing(minimize)))
    }

    /// The same statistics of a run that ranked its objective smallest first when
    /// `minimize`: its top combos read their neighbours that way round.
    pub fn minimizing(mut self, minimize: bool) -> Self {
        for t in &mut self.top {
            t.minimize = minimize;
        }
        self
    }

    /// The statistics from the blocks of every combo (`kept`, in combo order) and the top
    /// combos' details (`top` makes them, best first, beside CSCV: a device's waits hide
    /// their re-runs; their DSR and PSR are computed here). CSCV runs where `dispatcher`
    /// says, or on the CPU without one.
    #[allow(clippy::too_many_arguments)] // The device, the blocks and their options, the top combos, the timer.
    pub(crate) fn from_parts(
        dispatcher: Option<&Dispatcher>,
        cuts: &BlockCuts,
        options: &OverfittingOptions,
        kept: SweepBlocks,
        top: impl FnOnce() -> Result<Vec<TopCombo>, SweepError> + Send,
        bars: usize,
        by: &str,
        started: Instant,
    ) -> Result<Self, SweepError> {
        let s = cuts.count() as usize;
        let stats = |e: threadx_stats::StatsError| SweepError::Spec(format!("overfitting: {e}"));
        let SweepBlocks { combos, blocks, sharpe, untradeable } = kept;
        let matrix = BlockMatrix::new(s, cuts.bars(), blocks).map_err(stats)?;
        let mut rng = SeededRng::new(options.seed);
        let splits =
            SplitSet::for_sweep(matrix.combos(), s, options.pbo_splits, &mut || rng.next_u64()).map_err(stats)?;
        let (top, report) = rayon::join(top, || match dispatcher {
            Some(dispatcher) => gpu::cscv(dispatcher, &matrix, &splits),
            None => pbo(&matrix, &splits),
        });
        let (mut top, report) = (top?, report.map_err(stats)?);
        let sharpe_std = sample_std(&sharpe);
        let trials = options.effective_trials.unwrap_or((combos.len() as u64 - untradeable) as f64);
        let (_, sr0) = deflated_sharpe(0.0, bars as f64, 0.0, 3.0, sharpe_std, trials);
        for t in &mut top {
            t.dsr = psr(t.sharpe, bars as f64, t.skew, t.kurtosis, sr0);
            t.psr = psr(t.sharpe, bars as f64, t.skew, t.kurtosis, 0.0);
        }
        Ok(Self {
            options: *options,
            cuts: *cuts,
            pbo: report,
            trials,
            trials_given: options.effective_trials.is_some(),
            sharpe_std,
            sr0,
            bars,
            by: by.to_owned(),
            top,
            seconds: started.elapsed().as_secs_f64(),
            plots: None,
        })
    }

    /// The summary's `overfitting` section.
    pub fn summary(&self) -> OverfittingSummary {
        let mut logits = self.pbo.logits.clone();
        logits.sort_by(f64::total_cmp);
        let q = |p: f64| quantile(&logits, p);
        let best = self.top.first();
        OverfittingSummary {
            request: self.options.request(),
            pbo: self.pbo.pbo,
            splits: SplitsSummary {
                count: self.pbo.logits.len() as u64,
                exhaustive: self.pbo.exhaustive,
                seed: (!self.pbo.exhaustive).then_some(self.options.seed),
            },
            blocks: BlocksSummary {
                count: self.cuts.count() as u64,
                bars: self.cuts.bars() as u64,
                dropped: self.cuts.dropped() as u64,
            },
            prob_oos_loss: self.pbo.prob_oos_loss,
            degradation_slope: self.pbo.slope,
            degradation_intercept: self.pbo.intercept,
            logit_quantiles: LogitQuantiles { p05: q(0.05), p25: q(0.25), p50: q(0.5), p75: q(0.75), p95: q(0.95) },
            dsr: best.map(|b| b.dsr),
            psr: best.map(|b| b.psr),
            skew: best.map(|b| b.skew),
            kurtosis: best.map(|b| b.kurtosis),
            sr0: self.sr0,
            sharpe_std: self.sharpe_std,
            trials: TrialsSummary {
                n: self.trials,
                source: if self.trials_given { "--effective-trials" } else { "combos evaluated" }.into(),
            },
            bars: self.bars as u64,
            objective: self.by.clone(),
            top: self.top.clone(),
            seconds: self.seconds,
            plots: self.plots.as_ref().map(|[pbo, oos]| PlotChecksums { pbo: pbo.clone(), oos: oos.clone() }),
        }
    }

    /// The statistics in plain sentences, for the terminal.
    pub fn sentences(&self) -> Vec<String> {
        let mut out = Vec::new();
        let p = &self.pbo;
        let splits = if p.exhaustive {
            format!("{} splits (all) of {} blocks", thousands(p.logits.len() as u64), self.cuts.count())
        } else {
            format!(
                "{} random splits of {} blocks (seed {})",
                thousands(p.logits.len() as u64),
                self.cuts.count(),
                self.options.seed
            )
        };
        if p.combos < 2 {
            out.push(format!(
                "PBO: undefined with {} combo: CSCV ranks combos against each other, so it needs two or more",
                p.combos
            ));
            return out;
        }
        if p.pbo.is_nan() {
            out.push(format!(
                "PBO: undefined: in each of the {splits} all {} combos rank alike out of sample (identical \
                 combos, or no trades), so there is no ranking to overfit",
                thousands(p.combos as u64)
            ));
            return out;
        }
        let verdict = if p.pbo >= 0.5 {
            "likely overfit"
        } else if p.pbo >= 0.2 {
            "some overfitting"
        } else {
            "the ranking mostly holds out of sample"
        };
        out.push(format!(
            "PBO {:.2}: in {:.0} % of the {splits} the in-sample best ranks at or below the median out of sample: {verdict}",
            p.pbo,
            100.0 * p.pbo
        ));
        let sign = if p.slope < 0.0 { '−' } else { '+' };
        let line = if p.slope.is_nan() {
            "no line of out-of-sample on in-sample Sharpe: the in-sample bests' do not vary".to_owned()
        } else {
            format!("out-of-sample Sharpe ≈ {:.3} {sign} {:.2} × in-sample", p.intercept, p.slope.abs())
        };
        out.push(format!(
            "The in-sample best loses out of sample in {:.0} % of the splits; {line}",
            100.0 * p.prob_oos_loss
        ));
        if let Some(best) = self.top.first() {
            let n = thousands(self.trials as u64);
            let source = if self.trials_given { "given" } else { "combos evaluated" };
            let verdict = if best.dsr >= 0.95 {
                format!("after {n} trials ({source}) the best Sharpe is significant")
            } else {
                format!("after {n} trials ({source}) the best Sharpe is not significant")
            };
            let rel = if best.dsr >= 0.95 { "≥" } else { "<" };
            if best.dsr.is_nan() {
                out.push(format!(
                    "DSR: none: SR₀ needs the spread of the combos' Sharpe ratios, and the best's returns a variance (PSR against 0: {:.2})",
                    best.psr
                ));
            } else {
                out.push(format!("DSR {:.2} ({rel} 0.95): {verdict} (PSR against 0: {:.2})", best.dsr, best.psr));
            }
            if best.neighbours > 0 {
                let shape = best.shape();
                out.push(format!(
                    "Stability: the best's {} is {:.4}; its {} grid neighbours average {:.4} (least {:.4}): {shape}",
                    self.by, best.objective, best.neighbours, best.neighbour_mean, best.neighbour_min
                ));
            }
        }
        out
    }
}

/// The first [`TOP`] of `best` re-run in detail on the CPU: their returns' moments and
/// stability (their DSR and PSR NaN until [`Overfitting::from_parts`]).
pub(crate) fn top_combos(sweep: &Sweep, best: &[Row], by: &str) -> Result<Vec<TopCombo>, SweepError> {
    let index = metric_index(by)?;
    best.iter()
        .take(TOP)
        .map(|row| {
            let (skew, kurtosis) = moments(&sweep.returns(row.combo));
            let neighbours = sweep.evaluate_on_cpu(&neighbours(sweep.spec().axes(), row.combo));
            let values: Vec<f64> = neighbours.metrics.iter().map(|m| m.at(index)).filter(|v| !v.is_nan()).collect();
            Ok(TopCombo {
                combo: row.combo,
                params: params_json(sweep.spec().strategy(), &row.values),
                sharpe: row.metrics.sharpe,
                dsr: f64::NAN,
                psr: f64::NAN,
                skew,
                kurtosis,
                objective: row.metrics.at(index),
                neighbours: values.len(),
                neighbour_mean: if values.is_empty() {
                    f64::NAN
                } else {
                    values.iter().sum::<f64>() / values.len() as f64
                },
                neighbour_min: values.iter().copied().fold(f64::NAN, f64::min),
                minimize: false,
            })
        })
        .collect()
}

/// The grid numbers of `combo`'s neighbours: one step down and up each axis (the last
/// axis varies fastest).
fn neighbours(axes: &[Vec<f64>], combo: u64) -> Vec<u64> {
    let mut stride = 1u64;
    let mut out = Vec::new();
    for axis in axes.iter().rev() {
        let len = axis.len() as u64;
        let at = combo / stride % len;
        if at > 0 {
            out.push(combo - stride);
        }
        if at + 1 < len {
            out.push(combo + stride);
        }
        stride *= len;
    }
    out.sort_unstable();
    out
}

/// The overfitting statistics of a finished run from what it kept, with their plots and
/// the blocks CSV where `opts` asks for them (staged into `staged`).
#[allow(clippy::too_many_arguments)] // The run, its device, its options, what it kept, and where files go.
pub(crate) fn write_files(
    sweep: &Sweep,
    dispatcher: &Dispatcher,
    opts: &OutputOptions,
    options: &OverfittingOptions,
    cuts: &BlockCuts,
    kept: SweepBlocks,
    best: &[Row],
    staged: &mut Vec<Staged>,
) -> Result<Overfitting, SweepError> {
    if let Some(path) = &opts.blocks_out {
        staged.push(write_blocks_csv(path, &kept, cuts)?);
    }
    let mut o = Overfitting::compute(sweep, dispatcher, cuts, options, kept, best, &opts.by)?.minimizing(opts.minimize);
    if let Some(plots) = &opts.overfitting_plots {
        write_plots(&mut o, plots, sweep.spec().strategy().name(), staged)?;
    }
    Ok(o)
}

/// The logit histogram and the out-of-sample plot of `o` (a `name` sweep's), staged into
/// `staged`, their checksums kept in `o` for the summary.
pub(crate) fn write_plots(
    o: &mut Overfitting,
    (histogram, scatter): &(PathBuf, PathBuf),
    name: &str,
    staged: &mut Vec<Staged>,
) -> Result<(), SweepError> {
    let pbo = logit_histogram_svg(&o.pbo, &format!("{name}: CSCV logits (PBO {:.2})", o.pbo.pbo))?;
    let oos = oos_vs_is_svg(&o.pbo, &format!("{name}: out of sample against in sample"))?;
    staged.push(write_file_staged(histogram, pbo.as_bytes()).map_err(io_error(histogram))?);
    staged.push(write_file_staged(scatter, oos.as_bytes()).map_err(io_error(scatter))?);
    o.plots = Some([plot_checksum(pbo.as_bytes()), plot_checksum(oos.as_bytes())]);
    Ok(())
}

/// What a summary records of a plot file it wrote (`chunk_file::tagged`).
pub fn plot_checksum(bytes: &[u8]) -> String {
    crate::chunk_file::tagged(crate::chunk_file::checksum(bytes))
}

#[cfg(test)]
mod tests {
    use crate::summary::TopCombo;

    fn shape(objective: f64, neighbour_mean: f64) -> &'static str {
        top(objective, neighbour_mean, false).shape()
    }

    fn top(objective: f64, neighbour_mean: f64, minimize: bool) -> TopCombo {
        TopCombo {
            combo: 0,
            params: crate::summary::Params::new(),
            sharpe: 0.0,
            dsr: f64::NAN,
            psr: f64::NAN,
            skew: 0.0,
            kurtosis: 3.0,
            objective,
            neighbours: 2,
            neighbour_mean,
            neighbour_min: neighbour_mean,
            minimize,
        }
    }

    #[test]
    fn ranked_smallest_first_a_plateau_is_neighbours_not_much_larger() {
        // A drawdown minimised (the deepest first): neighbours at most half its size larger.
        assert_eq!(top(-0.4, -0.4, true).shape(), "a plateau");
        assert_eq!(top(-0.4, -0.2, true).shape(), "a plateau");
        assert_eq!(top(-0.4, -0.1999, true).shape(), "a spike");
        assert_eq!(top(2.0, 2.9, true).shape(), "a plateau");
        assert_eq!(top(2.0, 3.1, true).shape(), "a spike");
        // The same neighbours read the other way round when larger is better.
        assert_eq!(top(2.0, 3.1, false).shape(), "a plateau");
        assert_eq!(top(-0.4, -0.7, true).shape(), "a plateau");
        assert_eq!(top(-0.4, -0.7, false).shape(), "a spike");
    }

    #[test]
    fn a_plateau_is_equal_neighbours_whatever_the_objectives_sign() {
        // Equal neighbours: a plateau at any sign (a drawdown, a loss, zero).
        for v in [-0.1, -2.0, 0.0, 0.0031] {
            assert_eq!(shape(v, v), "a plateau", "{v}");
        }
        // Half the size away is the boundary, on either side of zero.
        assert_eq!(shape(1.0, 0.5), "a plateau");
        assert_eq!(shape(1.0, 0.4999), "a spike");
        assert_eq!(shape(-0.1, -0.15), "a plateau");
        assert_eq!(shape(-0.04, -0.11), "a spike");
        assert_eq!(shape(0.0, -1e-9), "a spike");
        assert_eq!(shape(f64::NAN, 1.0), "no comparison");
    }
}
