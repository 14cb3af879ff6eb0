//! threadx-multi-gpu's integration tests, one module a file, linked into one binary
//! (a binary a file cost CI a link and about 100 MB of disk each).

mod balance;
mod common;
mod pool;
