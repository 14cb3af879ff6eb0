//! threadx-indicators's integration tests, one module a file, linked into one binary
//! (a binary a file cost CI a link and about 100 MB of disk each).

mod columnar;
mod data;
mod parity;
mod talib_golden;
mod universe;
mod vwap;
