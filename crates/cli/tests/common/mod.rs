//! The `threadx` binary as the CLI tests run it: in a folder of the test's own, with a
//! timing profile of its own there.

#![allow(dead_code)] // Each test file uses the helpers it needs.

use std::path::Path;
use std::process::{Command, Output};

/// `threadx ARGS` in `dir`, not yet started.
pub fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_threadx"));
    cmd.current_dir(dir).args(args).env("THREADX_GPU_THRESHOLD_PATH", dir.join("profile.json"));
    cmd
}

/// `threadx ARGS` in `dir`, run to its end.
pub fn threadx(dir: &Path, args: &[&str]) -> Output {
    command(dir, args).output().unwrap()
}

/// Bytes a command printed, as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
