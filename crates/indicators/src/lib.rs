//! Market data and technical indicators: the struct-of-arrays [`Ohlcv`] with its loader
//! and synthetic generator, a [`Universe`] of many symbols' bars, the indicators of TA-Lib's definitions ([`Indicator`]) with a
//! CPU reference in f64 and WGSL kernels in f32, batched over many parameter sets, and
//! the [`IndicatorBank`] that computes each unique indicator of a data set once, on the
//! device the dispatcher picks.
//!
//! Values follow TA-Lib: the same warm-up (NaN before [`Indicator::lookback`]), seeding
//! and results to about 1e-14 on the CPU; the GPU agrees with the CPU to about 1e-6
//! (tests/parity.rs). Entry points: [`compute_cpu`], [`compute_gpu`], [`IndicatorBank`].
//!
//! This crate stands on threadx-dispatch (and profile-store's key builder); it must not
//! depend on backtests, strategies or sweeps.

mod bank;
mod bar_columns;
mod calendar;
mod columnar;
mod compute;
mod cpu;
mod csv_input;
mod error;
mod gpu;
mod indicator;
mod load;
mod ohlcv;
mod read_bars;
mod synthetic;
mod universe;

pub use bank::IndicatorBank;
pub use bar_columns::{columns_help, epoch_to_ms, format_time};
pub use calendar::{Calendar, TRADING_DAYS};
pub use columnar::Columnar;
pub use compute::{FamilyRun, compute_cpu, compute_gpu, compute_on_series, reads_one_series};
pub use error::{DataError, IndicatorError};
pub use gpu::KERNELS;
pub use indicator::{INDICATOR_HELP, Indicator, IndicatorId, IndicatorValues};
pub use ohlcv::{Ohlcv, PRICE_RANGE};
pub use read_bars::find_columns;
pub use synthetic::{MAX_BARS, Market, SyntheticSpec};
/// What [`IndicatorBank::new`] needs, so an embedding user need not name threadx-dispatch.
pub use threadx_dispatch::{DeviceMode, Dispatcher};
pub use universe::{MarketData, Universe};
