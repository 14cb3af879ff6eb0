//! threadx-sweep's integration tests, one module a file, linked into one binary
//! (a binary a file cost CI a link and about 100 MB of disk each).

mod common;
mod heatmap;
mod runs;
mod search;
mod session;
mod spec;
