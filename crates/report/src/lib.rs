//! A report a person reads: one self-contained HTML page of a backtest, of a portfolio
//! backtest, or of a sweep with the backtest of its best combo. [`Report`] is the page
//! being built; [`BacktestRun`], [`PortfolioRun`] and [`SweepRun`] add their sections to it (the CLI and Python build the same pages here).
//! Charts are uPlot (inlined, MIT; zoom by dragging, values on hover) and SVG drawn in
//! Rust (the heatmaps, the overfitting plots); tables sort when a header is clicked.
//! It stands on the backtest, indicators and sweep crates and on nothing above them.
//!
//! Invariant: the page makes no network request: every script, style and picture is in it.

mod backtest;
mod charts;
mod page;
mod portfolio;
mod risk;
mod sweep;
mod walk;

pub use backtest::{BacktestRun, timed_backtest};
pub use page::Report;
pub use portfolio::PortfolioRun;
pub use sweep::{BestRun, SweepRows, SweepRun};
pub use walk::OutOfSampleCurve;
