//! Strategies (`bb_atr`, `ma_cross`, `rsi_reversion`), trade simulation over precomputed
//! indicator series and per-combo metrics, on the CPU and in whole-backtest WGSL kernels.
//!
//! Not implemented yet: this crate is a placeholder in the layering (it stands on
//! threadx-indicators and must not depend on sweeps or the CLI). It exports nothing until
//! its issue (#4) lands.
