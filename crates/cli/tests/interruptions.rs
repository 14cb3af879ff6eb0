//! A sweep interrupted, resumed and held as a user meets it: a SIGKILL resumed to the same
//! bytes, Ctrl-C's message and what the next run cleans, one run at a time into an `--out`,
//! and a results file's permissions.

use crate::common;

use common::{SMALL, command, kill_once_checkpointed, text, threadx};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_sigkilled_sweep_resumes_to_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let args = |out: &'static str| {
        let mut a = SMALL.to_vec();
        a.extend(["--grid", "atr_period=5:100:1", "--chunk-size", "4", "--threads", "1", "--out", out]);
        a
    };
    let whole = threadx(dir.path(), &args("whole.csv"));
    assert!(whole.status.success(), "{}", text(&whole.stderr));
    let whole = std::fs::read(dir.path().join("whole.csv")).unwrap();
    assert_eq!(text(&whole).lines().count(), 1 + 3 * 2 * 96 * 4);

    let parts = dir.path().join("r.csv.parts");
    let done = kill_once_checkpointed(dir.path(), &args("r.csv"), &parts, "csv", 3);
    assert!(!dir.path().join("r.csv").exists(), "a killed sweep leaves no results file");
    assert!((3..576).contains(&done), "{done} chunks were checkpointed");

    let again = threadx(dir.path(), &args("r.csv"));
    assert!(text(&again.stderr).contains("pass --resume to continue it"), "{}", text(&again.stderr));
    // One digit of a checkpointed chunk edited on disk: the chunk is run again, not taken.
    let first = parts.join("chunk-00000000.csv");
    let mut chunk = std::fs::read_to_string(&first).unwrap().into_bytes();
    let digit = chunk.iter().rposition(u8::is_ascii_digit).unwrap();
    chunk[digit] = if chunk[digit] == b'7' { b'8' } else { b'7' };
    std::fs::write(&first, chunk).unwrap();
    let mut resume = args("r.csv");
    resume.push("--resume");
    let resumed = threadx(dir.path(), &resume);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert!(
        text(&resumed.stderr).contains("rows do not match their checksum")
            && text(&resumed.stderr).contains("running chunk 0 again"),
        "{}",
        text(&resumed.stderr)
    );
    assert_eq!(std::fs::read(dir.path().join("r.csv")).unwrap(), whole, "resumed results differ");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    // Every checkpointed chunk is taken but the edited one and, at most, the one the kill
    // cut short (checkpoints are written in place and checked by their checksum; one
    // worker writes one at a time).
    assert!(summary["chunks"]["resumed"].as_u64().unwrap() + 2 >= done as u64);
    assert_eq!(summary["chunks"]["run"].as_u64().unwrap() + summary["chunks"]["resumed"].as_u64().unwrap(), 576);
}

/// A sweep of many small chunks (one worker), long enough to be caught running.
fn slow_args(out: &'static str) -> Vec<&'static str> {
    let mut a = SMALL.to_vec();
    a.extend(["--grid", "atr_period=5:100:1", "--chunk-size", "4", "--threads", "1", "--out", out]);
    a
}

fn chunk_files(parts: &Path) -> usize {
    std::fs::read_dir(parts)
        .map_or(0, |d| d.filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("chunk-")).count())
}

#[test]
fn ctrl_c_says_what_is_kept_and_the_next_run_leaves_no_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    // A temporary file of a killed earlier run, and a results file the user made private.
    std::fs::write(dir.path().join("r.csv.tmp-4194305"), "half a file").unwrap();
    let mut child =
        command(dir.path(), &slow_args("r.csv")).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let parts = dir.path().join("r.csv.parts");
    let started = Instant::now();
    while chunk_files(&parts) < 2 {
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended before it could be interrupted");
        assert!(started.elapsed() < Duration::from_secs(120));
        std::thread::sleep(Duration::from_millis(1));
    }
    // A second run into the same checkpoint is refused, naming the first one's pid.
    let mut again = slow_args("r.csv");
    again.push("--resume");
    let second = threadx(dir.path(), &again);
    assert!(!second.status.success());
    let stderr = text(&second.stderr);
    assert!(stderr.contains(&format!("another sweep (pid {}) is running into", child.id())), "{stderr}");

    let kill = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("interrupted: the finished chunks are kept in r.csv.parts"), "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");

    let resumed = threadx(dir.path(), &again);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
    assert_eq!(std::fs::read_to_string(dir.path().join("r.csv")).unwrap().lines().count(), 1 + 3 * 2 * 96 * 4);
}

#[cfg(unix)]
#[test]
fn a_read_only_results_file_is_refused_and_a_private_one_stays_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.csv");
    let mut args = SMALL.to_vec();
    args.extend(["--out", "r.csv"]);
    std::fs::write(&path, "mine").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = threadx(dir.path(), &args);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("cannot write r.csv: the file is read-only"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = threadx(dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
}

#[test]
fn a_second_sweep_into_one_out_is_refused_before_any_work_while_the_first_prepares() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let big = ["--data", "synthetic:bars=200000,seed=1", "--grid", "bb_period=10:30:1", "--grid", "bb_std=1:3:0.25"];
    let mut first =
        command(dir.path(), &[&["--device", "cpu", "sweep", "--out", "r.csv", "--quiet"][..], &big].concat())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
    // The first run's hold comes before it loads or prepares anything.
    let lock = dir.path().join("r.csv.parts").join("lock");
    let started = std::time::Instant::now();
    while !lock.exists() && started.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let second = threadx(dir.path(), &["--device", "cpu", "sweep", "--grid", "bb_period=10:20:1", "--out", "r.csv"]);
    let (said, stderr) = (text(&second.stdout), text(&second.stderr));
    assert!(!second.status.success() && stderr.contains("another sweep (pid "), "{stderr}");
    assert!(!said.contains("preparing") && !said.contains("wrote"), "refused before any work: {said}");
    assert!(first.wait().unwrap().success());
    let rows = std::fs::read_to_string(dir.path().join("r.csv")).unwrap().lines().count();
    assert_eq!(rows, 1 + 21 * 9, "the first run's results, whole");
    // A run that fails while loading leaves no checkpoint folder behind.
    let failed = threadx(dir.path(), &["--device", "cpu", "sweep", "--data", "nope.csv", "--out", "z.csv"]);
    assert!(!failed.status.success() && !dir.path().join("z.csv.parts").exists());
}
