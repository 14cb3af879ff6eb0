//! Technical indicators over OHLCV series, each with a CPU reference (f64) and a WGSL
//! kernel (f32), run through the dispatcher so that every call lands on the faster device.
//!
//! Main items so far: [`sma`] (CPU twin), [`sma_gpu`] (WGSL) and [`sma_dispatched`].
//! Values follow TA-Lib's definitions: NaN before the warm-up, first SMA at `period - 1`.
//!
//! This crate stands on threadx-dispatch; it must not depend on backtests or sweeps.

mod sma;

pub use sma::{SMA_KERNEL, sma, sma_dispatched, sma_gpu};

/// Bad indicator input, reported before any work is done.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum IndicatorError {
    #[error("{indicator}: period must be at least 1, got {period}")]
    PeriodZero { indicator: &'static str, period: usize },
    #[error("{indicator}: period {period} is longer than the data ({len} bars)")]
    PeriodTooLong { indicator: &'static str, period: usize, len: usize },
}

fn check_period(indicator: &'static str, period: usize, len: usize) -> Result<(), IndicatorError> {
    if period == 0 {
        return Err(IndicatorError::PeriodZero { indicator, period });
    }
    if period > len {
        return Err(IndicatorError::PeriodTooLong { indicator, period, len });
    }
    Ok(())
}
