#![allow(clippy::print_stderr)] // A check that cannot run here (mknod without root) says why.

use serde_json::json;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;
use threadx_profile_store::{Device, Profiles, RunningStats, ThresholdStore, profile_key};

const FP: &str = "test-hardware";

fn profiles(dir: &Path) -> Profiles {
    Profiles::at(dir.join("thresholds.json"), dir.join("multigpu.json"), FP)
}

const CHILD_ENV: &str = "THREADX_PROFILE_TEST_CHILD";
const CHILDREN: u64 = 6;
const UPDATES: u64 = 20;

/// The value child `c` records in its update `i`: distinct, so the merged mean and M2 can
/// be checked exactly against the full sample.
fn sample(c: u64, i: u64) -> f64 {
    (c * 1000 + i * 7) as f64 / 8.0
}

#[test]
fn concurrent_processes_lose_no_sample() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        // Child process: hammer one shared key, one's own key, half the time through the
        // one-shot API and half through a buffered store flushed every few samples.
        let (dir, c) = spec.split_once('|').unwrap();
        let c: u64 = c.parse().unwrap();
        let p = profiles(Path::new(dir));
        let shared = json!({"size": 1000});
        let mut store = p.threshold_store().unwrap();
        for i in 0..UPDATES {
            if i % 2 == 0 {
                p.update_gpu_threshold_entry("op", &shared, Some(sample(c, i)), Some(sample(c, i) / 2.0)).unwrap();
            } else {
                let key = profile_key("op", &shared);
                store.record(&key, Device::Cpu, sample(c, i)).unwrap();
                store.record(&key, Device::Gpu, sample(c, i) / 2.0).unwrap();
                store.record(&profile_key("own", &json!({"child": c})), Device::Cpu, 1.0).unwrap();
                if i % 5 == 1 {
                    store.flush().unwrap();
                }
            }
        }
        drop(store); // flushes the rest
        return;
    }

    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..CHILDREN)
        .map(|c| {
            Command::new(&exe)
                .args(["concurrent_processes_lose_no_sample", "--exact", "--test-threads=1"])
                .env(CHILD_ENV, format!("{}|{c}", dir.path().display()))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a child process failed");
    }

    let file = profiles(dir.path()).get_gpu_thresholds().unwrap();
    let shared = &file.entries[&profile_key("op", &json!({"size": 1000}))];
    let all: Vec<f64> = (0..CHILDREN).flat_map(|c| (0..UPDATES).map(move |i| sample(c, i))).collect();
    let expected = all.iter().fold(RunningStats::default(), |mut s, &x| {
        s.push(x);
        s
    });
    assert_eq!(shared.cpu.n, CHILDREN * UPDATES, "every CPU sample present");
    assert_eq!(shared.gpu.n, CHILDREN * UPDATES, "every GPU sample present");
    assert!((shared.cpu.mean - expected.mean).abs() < 1e-9);
    assert!((shared.cpu.m2 - expected.m2).abs() < 1e-6 * expected.m2);
    assert!((shared.gpu.mean - expected.mean / 2.0).abs() < 1e-9);
    for c in 0..CHILDREN {
        let own = &file.entries[&profile_key("own", &json!({"child": c}))];
        assert_eq!(own.cpu.n, UPDATES / 2);
        assert_eq!(own.gpu.n, 0);
    }
    assert_eq!(file.schema, 1);
    assert_eq!(file.fingerprint.as_deref(), Some(FP));
    // No temporary file is left behind.
    let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(names.iter().all(|n| !n.to_string_lossy().contains(".tmp")), "{names:?}");
}

#[test]
fn corrupt_file_is_moved_aside_and_a_fresh_profile_starts() {
    let dir = tempfile::tempdir().unwrap();
    let p = profiles(dir.path());
    let garbage = "{\"entries\": {\"op:{}\": {\"cpu_ms_avg\": 1.0,";
    fs::write(p.thresholds_path(), garbage).unwrap();

    let mut store = p.threshold_store().unwrap();
    assert!(store.entries().is_empty(), "a corrupt profile reads as empty");
    let aside: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("thresholds.json.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "the corrupt file is kept aside");
    assert_eq!(fs::read_to_string(&aside[0]).unwrap(), garbage, "and not altered");
    assert!(!p.thresholds_path().exists());

    store.record("op:{}", Device::Gpu, 2.5).unwrap();
    store.flush().unwrap();
    let file = p.get_gpu_thresholds().unwrap();
    assert_eq!(file.entries["op:{}"].gpu, RunningStats::of(2.5));

    // A corrupt multigpu.json is handled the same way.
    fs::write(p.multigpu_path(), "not json").unwrap();
    assert_eq!(p.multigpu_ratios("tag").unwrap(), None);
    assert!(!p.multigpu_path().exists());
}

#[test]
fn original_flat_format_is_read_and_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let p = profiles(dir.path());
    let key = r#"bollinger_bands:{"period":20,"size":10000}"#;
    let original = json!({
        key: {"cpu_ms_avg": 150.0, "gpu_ms_avg": 50.0, "samples": 3},
        "atr:{\"period\":14,\"size\":500}": {"cpu_ms_avg": 0.2, "gpu_ms_avg": null, "samples": 2},
    });
    fs::write(p.thresholds_path(), original.to_string()).unwrap();

    let file = p.get_gpu_thresholds().unwrap();
    assert_eq!(file.schema, 0);
    let e = &file.entries[key];
    assert_eq!((e.cpu.n, e.cpu.mean, e.gpu.n, e.gpu.mean), (3, 150.0, 3, 50.0));
    assert_eq!(e.fingerprint, None);
    let atr = &file.entries["atr:{\"period\":14,\"size\":500}"];
    assert_eq!((atr.cpu.n, atr.gpu.n), (2, 0));

    // Entries of unknown origin are trusted and merged with new samples.
    let store = p.threshold_store().unwrap();
    assert!(store.view(key).unwrap().trusted);
    drop(store);
    p.update_gpu_threshold_entry("bollinger_bands", &json!({"size": 10000, "period": 20}), Some(154.0), None).unwrap();
    let text = fs::read_to_string(p.thresholds_path()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["schema"], 1);
    assert_eq!(v["entries"][key]["cpu_ms_avg"], 151.0, "original fields are kept, updated");
    assert_eq!(v["entries"][key]["gpu_ms_avg"], 50.0);
    assert_eq!(v["entries"][key]["samples"], 3);
    assert_eq!(v["entries"][key]["cpu"]["n"], 4);
    assert_eq!(v["entries"][key]["fingerprint"], FP);
    assert!(v["updated_at"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn original_wrapped_format_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = profiles(dir.path());
    fs::write(
        p.thresholds_path(),
        r#"{"updated_at": "2025-01-01T00:00:00Z", "entries": {"sma:{\"size\":9}": {"cpu_ms_avg": 1.5, "gpu_ms_avg": 4.0, "samples": 5}}}"#,
    )
    .unwrap();
    let file = p.get_gpu_thresholds().unwrap();
    assert_eq!(file.entries["sma:{\"size\":9}"].samples(), 5);
    assert_eq!(file.entries["sma:{\"size\":9}"].gpu.mean, 4.0);
}

#[test]
fn entries_from_other_hardware_are_kept_but_untrusted_until_remeasured() {
    let dir = tempfile::tempdir().unwrap();
    let other = Profiles::at(dir.path().join("thresholds.json"), dir.path().join("m.json"), "other-gpu");
    other.update_gpu_threshold_entry("op", &json!({"size": 10}), Some(9.0), Some(1.0)).unwrap();
    other.update_gpu_threshold_entry("keep", &json!({"size": 10}), Some(3.0), None).unwrap();

    let here = profiles(dir.path());
    let mut store = ThresholdStore::open(here.thresholds_path(), FP).unwrap();
    let key = profile_key("op", &json!({"size": 10}));
    let view = store.view(&key).unwrap();
    assert!(!view.trusted);
    assert_eq!(view.gpu.mean, 1.0, "kept, visible");

    store.record(&key, Device::Cpu, 4.0).unwrap();
    let view = store.view(&key).unwrap();
    assert!(view.trusted);
    assert_eq!((view.cpu.n, view.gpu.n), (1, 0), "old timings are not mixed with new ones");
    store.flush().unwrap();

    let file = here.get_gpu_thresholds().unwrap();
    assert_eq!(file.entries[&key].cpu, RunningStats::of(4.0));
    assert_eq!(file.entries[&key].fingerprint.as_deref(), Some(FP));
    let kept = &file.entries[&profile_key("keep", &json!({"size": 10}))];
    assert_eq!(kept.fingerprint.as_deref(), Some("other-gpu"), "untouched entries keep their origin");
    assert_eq!(kept.cpu.mean, 3.0);
}

#[test]
fn multigpu_ratios_round_trip_and_original_form() {
    let dir = tempfile::tempdir().unwrap();
    let p = profiles(dir.path());
    // Measured shares (this pair once came back an ulp off: every float must round-trip).
    let ratios =
        BTreeMap::from([("gpu0:A".to_owned(), 0.7518688206041672), ("gpu1:B".to_owned(), 0.24813117939583282)]);
    let tput = BTreeMap::from([("gpu0:A".to_owned(), 47_492.123456789), ("gpu1:B".to_owned(), 15_673.987654321)]);
    p.update_multigpu_ratio_profile(&ratios, &tput, "bollinger_computation").unwrap();
    p.update_multigpu_ratio_profile(&BTreeMap::from([("gpu0:A".to_owned(), 1.0)]), &BTreeMap::new(), "other").unwrap();
    let got = p.multigpu_ratios("bollinger_computation").unwrap().unwrap();
    assert_eq!(got.ratios, ratios);
    assert_eq!(got.throughput, tput);
    assert!(p.multigpu_ratios("other").unwrap().is_some());
    assert!(p.multigpu_ratios("missing").unwrap().is_none());

    let bad = BTreeMap::from([("gpu0:A".to_owned(), 0.7), ("gpu1:B".to_owned(), 0.2)]);
    let err = p.update_multigpu_ratio_profile(&bad, &BTreeMap::new(), "t").unwrap_err();
    assert!(err.to_string().contains("sum to 0.900000"), "{err}");
    let nan = BTreeMap::from([("gpu0:A".to_owned(), f64::NAN)]);
    assert!(p.update_multigpu_ratio_profile(&nan, &BTreeMap::new(), "t").is_err());

    fs::write(
        p.multigpu_path(),
        r#"{"updated_at": "2025-05-01T10:00:00Z", "workload_tag": "bb", "ratios": {"gpu0:X": 0.6, "gpu1:Y": 0.4}}"#,
    )
    .unwrap();
    let got = p.multigpu_ratios("bb").unwrap().unwrap();
    assert_eq!(got.ratios["gpu0:X"], 0.6);
    assert_eq!(got.updated_at.as_deref(), Some("2025-05-01T10:00:00Z"));
}

#[test]
fn invalid_timings_are_refused_and_reset_clears() {
    let dir = tempfile::tempdir().unwrap();
    let p = profiles(dir.path());
    for bad in [f64::NAN, -1.0, f64::INFINITY] {
        let err = p.update_gpu_threshold_entry("op", &json!({}), Some(bad), None).unwrap_err();
        assert!(err.to_string().contains("invalid timing"), "{err}");
    }
    p.update_gpu_threshold_entry("op", &json!({"size": 1}), Some(1.0), Some(2.0)).unwrap();
    assert_eq!(p.get_gpu_thresholds().unwrap().entries.len(), 1);
    assert_eq!(p.reset().unwrap(), vec![p.thresholds_path().to_owned()]);
    assert!(p.get_gpu_thresholds().unwrap().entries.is_empty());
}

#[test]
fn env_paths_override_defaults() {
    const PROBE: &str = "THREADX_PROFILE_TEST_ENV_PROBE";
    if std::env::var_os(PROBE).is_some() {
        let p = Profiles::from_env(FP);
        assert_eq!(p.thresholds_path(), Path::new(&std::env::var("THREADX_GPU_THRESHOLD_PATH").unwrap()));
        assert_eq!(p.multigpu_path(), Path::new(&std::env::var("THREADX_MULTIGPU_PROFILE_PATH").unwrap()));
        return;
    }
    let p = Profiles::from_env(FP);
    if std::env::var_os("THREADX_GPU_THRESHOLD_PATH").is_none() {
        assert_eq!(p.thresholds_path(), Path::new("artifacts/profiles/thresholds.json"));
    }
    if std::env::var_os("THREADX_MULTIGPU_PROFILE_PATH").is_none() {
        assert_eq!(p.multigpu_path(), Path::new("artifacts/profiles/multigpu.json"));
    }
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["env_paths_override_defaults", "--exact", "--test-threads=1"])
        .env(PROBE, "1")
        .env("THREADX_GPU_THRESHOLD_PATH", "/somewhere/t.json")
        .env("THREADX_MULTIGPU_PROFILE_PATH", "/elsewhere/m.json")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the child saw other paths than its environment's");
}

#[cfg(unix)]
#[test]
fn atomic_writes_keep_the_mode_refuse_read_only_files_and_clean_stale_temporaries() {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use threadx_profile_store::{AtomicFile, check_writable, write_file_atomic};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.csv");
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;

    // A file's mode survives being replaced.
    fs::write(&path, "old").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    write_file_atomic(&path, b"new").unwrap();
    assert_eq!((fs::read_to_string(&path).unwrap().as_str(), mode(&path)), ("new", 0o600));

    // A read-only file is refused, before work and at write time, and left as it was.
    fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).unwrap();
    let before = check_writable(&path).unwrap_err();
    assert!(before.contains("read-only") && before.contains("results.csv"), "{before}");
    let err = write_file_atomic(&path, b"newer").unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
    assert_eq!((fs::read_to_string(&path).unwrap().as_str(), mode(&path)), ("new", 0o444));
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();

    // A temporary file left by a killed writer (nobody holds its lock) is removed by the
    // next writer; one a live writer holds is not.
    let stale = dir.path().join("results.csv.tmp-4194305");
    fs::write(&stale, "half a file").unwrap();
    let mut live = AtomicFile::create(&path).unwrap();
    live.write_all(b"live").unwrap();
    assert!(!stale.exists(), "the stale temporary file is gone");
    let live_tmp = dir.path().join(format!("results.csv.tmp-{}", std::process::id()));
    assert!(live_tmp.exists());
    // Another writer of the same path (as another process would) leaves it alone.
    let lock = fs::OpenOptions::new().write(true).open(&live_tmp).unwrap();
    assert!(lock.try_lock().is_err(), "the live writer holds its temporary file");
    drop(lock);
    live.commit().unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "live");
    assert!(!live_tmp.exists());
}

#[test]
fn a_held_folders_file_is_written_in_place_over_what_a_crash_left() {
    use threadx_profile_store::write_held_file;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chunk-000001.csv");
    // What a run killed mid-write left is replaced whole; nothing else appears beside it.
    fs::write(&path, "half a chunk that was longer than the next").unwrap();
    write_held_file(&path, b"rows").unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "rows");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    // A folder that is gone is an error, not a panic.
    let missing = dir.path().join("gone").join("chunk.csv");
    assert!(write_held_file(&missing, b"rows").is_err());
}

/// Makes a special file with a shell tool (`mknod` needs root; `None` where it fails).
#[cfg(unix)]
fn make_special(tool: &str, args: &[&str]) -> Option<()> {
    std::process::Command::new(tool).args(args).status().ok().filter(|s| s.success()).map(|_| ())
}

#[cfg(unix)]
#[test]
fn devices_and_fifos_are_written_in_place_and_links_replace_their_targets() {
    use std::os::unix::fs::FileTypeExt;
    use threadx_profile_store::{check_writable, is_special_file, write_file_atomic};
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name);
    let kind = |p: &Path| fs::symlink_metadata(p).unwrap().file_type();

    // Character devices (/dev/null's and /dev/full's numbers, made here, as root).
    let null = at("null");
    let full = at("full");
    if make_special("mknod", &[null.to_str().unwrap(), "c", "1", "3"]).is_some()
        && make_special("mknod", &[full.to_str().unwrap(), "c", "1", "7"]).is_some()
    {
        assert!(is_special_file(&null) && check_writable(&null).is_ok());
        write_file_atomic(&null, b"rows").unwrap();
        assert!(kind(&null).is_char_device(), "the device is still a device");
        let err = write_file_atomic(&full, b"rows").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(28), "the device's own error (ENOSPC): {err}");
        assert!(kind(&full).is_char_device());
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "no temporary file beside the devices: {names:?}");
    } else {
        eprintln!("mknod needs root: the character-device checks are skipped");
    }

    // A FIFO: with no reader, an error at once (not an open that waits forever); with a
    // reader, the bytes arrive.
    let fifo = at("fifo");
    make_special("mkfifo", &[fifo.to_str().unwrap()]).expect("mkfifo");
    let started = std::time::Instant::now();
    let err = write_file_atomic(&fifo, b"rows").unwrap_err();
    assert!(err.to_string().contains("no process is reading"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
    };
    // The reader opens the FIFO when its thread runs: retry until it is there.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while let Err(e) = write_file_atomic(&fifo, b"rows\n") {
        assert!(std::time::Instant::now() < deadline, "{e}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(reader.join().unwrap(), "rows\n");
    assert!(kind(&fifo).is_fifo());

    // A symbolic link: its target is replaced and the link stays a link; a dangling
    // link's target is created.
    let target = at("target.csv");
    fs::write(&target, "old").unwrap();
    let link = at("link.csv");
    std::os::unix::fs::symlink("target.csv", &link).unwrap();
    write_file_atomic(&link, b"new").unwrap();
    assert!(kind(&link).is_symlink());
    assert_eq!(fs::read_to_string(&target).unwrap(), "new");
    let dangling = at("dangling.csv");
    std::os::unix::fs::symlink("made.csv", &dangling).unwrap();
    write_file_atomic(&dangling, b"made").unwrap();
    assert!(kind(&dangling).is_symlink());
    assert_eq!(fs::read_to_string(at("made.csv")).unwrap(), "made");
}

/// `/dev/stdout` when stdout is a pipe (`threadx backtest --trades /dev/stdout | head`):
/// a link to `/proc/self/fd/1`, itself a link whose text (`pipe:[…]`) names no file. It is
/// written in place, through the link, as the kernel opens it.
#[cfg(target_os = "linux")]
#[test]
fn a_pipe_named_through_proc_self_fd_is_written_in_place() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use threadx_profile_store::{check_writable, is_special_file, write_file_atomic};
    let dir = tempfile::tempdir().unwrap();
    let (mut reader, writer) = std::io::pipe().unwrap();
    let fd = std::path::PathBuf::from(format!("/proc/self/fd/{}", writer.as_raw_fd()));
    let stdout = dir.path().join("stdout");
    std::os::unix::fs::symlink(&fd, &stdout).unwrap();
    for path in [&fd, &stdout] {
        assert!(is_special_file(path), "{}", path.display());
        check_writable(path).unwrap();
    }
    write_file_atomic(&stdout, b"rows\n").unwrap();
    write_file_atomic(&fd, b"more\n").unwrap();
    drop(writer);
    let mut text = String::new();
    reader.read_to_string(&mut text).unwrap();
    assert_eq!(text, "rows\nmore\n");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1, "nothing written beside the link");
}

#[cfg(unix)]
#[test]
fn an_output_that_is_an_input_is_refused_naming_both() {
    use threadx_profile_store::refuse_output_over_input;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.csv");
    fs::write(&data, "timestamp,open\n").unwrap();
    let hard = dir.path().join("hard.csv");
    fs::hard_link(&data, &hard).unwrap();
    let link = dir.path().join("link.csv");
    std::os::unix::fs::symlink(&data, &link).unwrap();
    let dotted = dir.path().join(".").join("data.csv");
    for output in [&data, &hard, &link, &dotted] {
        let err = refuse_output_over_input(&[output.as_path()], &[data.as_path()]).unwrap_err();
        assert!(err.contains(&output.display().to_string()) && err.contains(&data.display().to_string()), "{err}");
    }
    let other = dir.path().join("other.csv");
    fs::write(&other, "x").unwrap();
    let missing = dir.path().join("missing.csv");
    refuse_output_over_input(&[other.as_path(), missing.as_path()], &[data.as_path(), Path::new("synthetic")]).unwrap();
    // Devices are streams: reading and writing /dev/null is not overwriting data.
    refuse_output_over_input(&[Path::new("/dev/null")], &[Path::new("/dev/null")]).unwrap();
}

#[cfg(unix)]
#[test]
fn two_outputs_that_name_one_file_are_refused_before_either_exists() {
    use threadx_profile_store::refuse_colliding_outputs;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.csv");
    fs::create_dir(dir.path().join("sub")).unwrap();
    let through_sub = dir.path().join("sub").join("..").join("r.csv");
    let link = dir.path().join("link.csv");
    std::os::unix::fs::symlink(&out, &link).unwrap();
    for other in [&out, &through_sub, &link] {
        let err = refuse_colliding_outputs(&[("--out", &out), ("--report", other)]).unwrap_err();
        assert!(err.contains(&format!("--report {}", other.display())) && err.contains("--out"), "{err}");
    }
    let summary = dir.path().join("r.json");
    refuse_colliding_outputs(&[("--out", &out), ("the summary", &summary), ("--report", &dir.path().join("r.html"))])
        .unwrap();
    // Several outputs may stream to one device.
    refuse_colliding_outputs(&[("--out", Path::new("/dev/null")), ("--report", Path::new("/dev/null"))]).unwrap();
}
