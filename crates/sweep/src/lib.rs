//! Parameter sweeps: `SweepSpec` grids, Monte-Carlo sampling, walk-forward, the
//! device-aware runner, resumable and shardable results, reports.
//!
//! Not implemented yet: this crate is a placeholder in the layering (it stands on
//! threadx-backtest and threadx-multi-gpu, and must not depend on the CLI). It exports
//! nothing until its issue (#5) lands.
