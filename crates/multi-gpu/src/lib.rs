//! Splits large work across several GPUs: a `DevicePool` of workers (GPUs weighted by
//! measured throughput, the CPU as a worker too), auto-balancing from the ratios kept in
//! `multigpu.json`, a merge by chunk index that makes results bit-identical whatever the
//! split, and GPU telemetry.
//!
//! Not implemented yet: this crate is a placeholder in the layering (it stands on
//! threadx-profile-store and threadx-dispatch, and must not depend on indicators,
//! backtests or sweeps). It exports nothing until its issue lands.
