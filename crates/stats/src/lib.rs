//! Statistics that say whether a sweep's winner is luck, from a few numbers per combo:
//! the probability of backtest overfitting by combinatorially symmetric cross-validation
//! (Bailey, Borwein, López de Prado & Zhu, 2015) from block statistics, and the
//! probabilistic and deflated Sharpe ratios (Bailey & López de Prado, 2014).
//!
//! Main types: [`BlockMatrix`] (per combo and block: Σr and Σr² over a fixed number of
//! bars), [`SplitSet`] (CSCV's in-sample halves), [`pbo`] and its [`PboReport`],
//! [`pbo_on`] with a [`ScreenDevice`] (what a GPU kernel above this crate must do to
//! screen CSCV's pairs), and the functions [`sharpe`], [`psr`], [`deflated_sharpe`],
//! [`expected_max`], [`moments`].
//!
//! Invariant: a set's Sharpe ratio is one fixed function of the blocks' f64 sums, so the
//! answer depends only on the blocks and the splits, never on threads, on how the work is
//! cut, on the CPU's vectors or on a device (an f32 screen only decides what it is certain
//! of). This crate knows nothing of ThreadX's data, devices or sweeps (it stands at the
//! bottom: it depends on no other ThreadX crate; a device is handed in as a `ScreenDevice`).

mod blocks;
mod bounds;
mod device;
mod device_screen;
mod dsr;
mod error;
mod lanes;
mod passes;
mod pbo;
mod ratio;
mod rng;
mod screen;
mod splits;
mod vector;

pub use blocks::BlockMatrix;
pub use device::{Listing, OpenPair, ScaledBlocks, ScreenDevice, ScreenPass, Screened, screen_on_cpu};
pub use device_screen::{DeviceScreen, NOT_NAN, NOTHING, RATIO};
pub use dsr::{EULER_GAMMA, deflated_sharpe, expected_max, moments, normal_cdf, psr};
pub use error::{PboError, StatsError};
pub use pbo::{PboReport, pbo, pbo_on, quantile};
pub use rng::SeededRng;
pub use splits::{EXHAUSTIVE_LIMIT, MAX_BLOCKS, MAX_EXHAUSTIVE_SPLITS, SplitSet, binomial};

/// mean(r) / std(r, ddof = 1) from the sums of r and r² over `n` values; NaN when the
/// standard deviation is 0 (or `n` < 2). ThreadX's one Sharpe ratio (per bar, not
/// annualised).
#[inline]
pub fn sharpe(sum: f64, sum_sq: f64, n: usize) -> f64 {
    if n < 2 {
        return f64::NAN;
    }
    sharpe_of(sum, sum_sq, n as f64, (n - 1) as f64)
}

/// The standard deviation (ddof 1) of the values that are not NaN; NaN for fewer than two.
pub fn sample_std(values: &[f64]) -> f64 {
    let finite = values.iter().filter(|v| !v.is_nan());
    let n = finite.clone().count() as f64;
    if n < 2.0 {
        return f64::NAN;
    }
    let mean = finite.clone().sum::<f64>() / n;
    (finite.map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n - 1.0)).sqrt()
}

/// [`sharpe`] with `n` and `n − 1` already as f64 (n ≥ 2): the same bits.
#[inline(always)]
pub(crate) fn sharpe_of(sum: f64, sum_sq: f64, n: f64, n_minus_1: f64) -> f64 {
    let mean = sum / n;
    let var = (sum_sq - sum * mean) / n_minus_1;
    if var > 0.0 { mean / var.sqrt() } else { f64::NAN }
}
