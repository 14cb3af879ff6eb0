//! The overfitting statistics as asked for and as checked: the request (TOML
//! `[overfitting]`, the CLI's flags, Python's keywords) and its checked options, below the
//! spec that carries them and the statistics that read them.

use crate::error::SweepError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use threadx_backtest::{BlockCuts, DEFAULT_BLOCKS};

/// Random splits drawn when there are too many to use them all (`--pbo-splits`).
pub const DEFAULT_SPLITS: usize = 1_000;

/// The overfitting statistics as asked for (TOML `[overfitting]`, the CLI's flags,
/// Python's keywords); checked into [`OverfittingOptions`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverfittingRequest {
    /// Blocks S of CSCV: even, 2 to 64 (default 16).
    pub blocks: Option<u32>,
    /// Random splits when combos × C(S, S/2) > 2·10^8 (default 1,000).
    pub pbo_splits: Option<usize>,
    /// The seed of those splits (default 0).
    pub seed: Option<u64>,
    /// The N that deflates the Sharpe ratio (default: the combos evaluated).
    pub effective_trials: Option<f64>,
}

/// [`OverfittingRequest`], checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OverfittingOptions {
    pub blocks: u32,
    pub pbo_splits: usize,
    pub seed: u64,
    pub effective_trials: Option<f64>,
}

impl OverfittingRequest {
    pub fn check(&self) -> Result<OverfittingOptions, SweepError> {
        let blocks = self.blocks.unwrap_or(DEFAULT_BLOCKS);
        // The count alone; whether the data is long enough is checked once it is known.
        BlockCuts::new(usize::MAX / 2, blocks).map_err(|e| SweepError::Spec(format!("--{e}")))?;
        let pbo_splits = self.pbo_splits.unwrap_or(DEFAULT_SPLITS);
        if pbo_splits == 0 {
            return Err(SweepError::Spec("--pbo-splits must be at least 1".into()));
        }
        if let Some(n) = self.effective_trials.filter(|n| !(n.is_finite() && *n >= 1.0)) {
            return Err(SweepError::Spec(format!("--effective-trials {n}: must be a number of trials, at least 1")));
        }
        Ok(OverfittingOptions {
            blocks,
            pbo_splits,
            seed: self.seed.unwrap_or(0),
            effective_trials: self.effective_trials,
        })
    }
}

impl OverfittingOptions {
    pub fn request(&self) -> OverfittingRequest {
        OverfittingRequest {
            blocks: Some(self.blocks),
            pbo_splits: Some(self.pbo_splits),
            seed: Some(self.seed),
            effective_trials: self.effective_trials,
        }
    }

    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.request()).unwrap_or(Value::Null)
    }
}
