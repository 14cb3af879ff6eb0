//! threadx-backtest's integration tests, one module a file, linked into one binary
//! (a binary a file cost CI a link and about 100 MB of disk each).

mod blocks;
mod common;
mod gl_context;
mod grid_cursor;
mod long_data;
mod market;
mod market_gpu;
mod oracle;
mod parity;
mod portfolio;
mod properties;
mod rule_files;
mod rule_limits;
mod rules;
mod signals;
