//! The `threadx` binary as the CLI tests run it: in a folder of the test's own, with a
//! timing profile of its own there.

#![allow(dead_code)] // Each test file uses the helpers it needs.

use std::path::Path;
use std::process::{Command, Output};

/// A small sweep: 24 bb_atr combos on 3,000 synthetic bars, quiet, on the CPU. The data
/// is at index 4 ([`small_sweep`] puts another there).
pub const SMALL: [&str; 12] = [
    "--device",
    "cpu",
    "sweep",
    "--data",
    "synthetic:bars=3000,seed=2",
    "--grid",
    "bb_period=10:30:10",
    "--grid",
    "bb_std=1.5,2.5",
    "--grid",
    "atr_mult=1:4:1",
    "--quiet",
];

/// [`SMALL`] on the data `data`.
pub fn small_sweep(data: &str) -> Vec<&str> {
    let mut args = SMALL.to_vec();
    args[4] = data;
    args
}

/// The `threadx` binary without any of the user's `THREADX_*` variables (profile paths,
/// device, adapter, log level): a test sets what it needs, and nothing else reaches it.
pub fn binary() -> Command {
    without_user_settings(Command::new(env!("CARGO_BIN_EXE_threadx")))
}

/// `cmd` without any of the user's `THREADX_*` variables.
pub fn without_user_settings(mut cmd: Command) -> Command {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("THREADX_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// `threadx ARGS` in `dir`, with its timing profile there (its multi-GPU ratios at the
/// default path under `dir`), not yet started.
pub fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = binary();
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

/// Runs `threadx ARGS` in `dir` and SIGKILLs it once its checkpoint folder `parts` holds
/// at least `files` files ending in `.ext`; how many there were when it died.
pub fn kill_once_checkpointed(dir: &Path, args: &[&str], parts: &Path, ext: &str, files: usize) -> usize {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let mut child = command(dir, args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let count = || {
        std::fs::read_dir(parts)
            .map_or(0, |d| d.filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == ext)).count())
    };
    let started = Instant::now();
    while count() < files {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be killed");
        assert!(started.elapsed() < Duration::from_secs(120));
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    count()
}

/// Runs `threadx args` with `env`, its profiles in a scratch folder: tests never write
/// the working tree's artifacts/.
pub fn threadx_in_scratch(args: &[&str], env: &[(&str, &str)]) -> Output {
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = binary();
    cmd.args(args)
        .env("THREADX_GPU_THRESHOLD_PATH", scratch.path().join("thresholds.json"))
        .env("THREADX_MULTIGPU_PROFILE_PATH", scratch.path().join("multigpu.json"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}
