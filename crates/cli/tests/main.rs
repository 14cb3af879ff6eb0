//! threadx's integration tests, one module a file, linked into one binary
//! (a binary a file cost CI a link and about 100 MB of disk each).

mod all_in;
mod cli;
mod columnar;
mod common;
mod devices;
mod docs;
mod interruptions;
mod market;
mod minimize;
mod outputs;
mod overfitting;
mod portfolio;
mod portfolio_market;
mod portfolio_rows;
mod portfolio_walk;
mod report;
mod search;
mod short_data;
mod strategy;
mod summary;
mod sweep;
mod universe;
