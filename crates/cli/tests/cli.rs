//! The `threadx` binary as a user runs it.

use std::process::{Command, Output};

fn threadx(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_threadx"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Hides every Vulkan driver and every other backend: a machine with no GPU driver at all.
const NO_DRIVER: [(&str, &str); 3] =
    [("VK_ICD_FILENAMES", "/nonexistent.json"), ("VK_DRIVER_FILES", "/nonexistent.json"), ("WGPU_BACKEND", "vulkan")];

#[test]
fn devices_lists_adapters_with_rank_and_default() {
    let out = threadx(&["devices", "--json"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let adapters = v["adapters"].as_array().unwrap();
    if adapters.is_empty() {
        assert!(
            std::env::var("THREADX_REQUIRE_GPU").as_deref() != Ok("1"),
            "THREADX_REQUIRE_GPU=1 but `threadx devices` finds no adapter"
        );
        return;
    }
    assert_eq!(v["default"], 1);
    for (i, a) in adapters.iter().enumerate() {
        assert_eq!(a["rank"], i + 1);
        assert!(a["why"].as_str().unwrap().contains(a["device_type"].as_str().unwrap()));
        assert!(a["max_storage_buffer_binding_size"].as_u64().unwrap() > 0);
    }
    assert!(v["nvml"].is_boolean());
    let table = threadx(&["devices"], &[]);
    let table = text(&table.stdout);
    assert!(table.contains("Default adapter: #1"), "{table}");
    if std::env::var("THREADX_REQUIRE_GPU").as_deref() == Ok("1") {
        // CI installs Mesa's lavapipe: it must be found.
        assert!(table.contains("lavapipe: Mesa's Vulkan on the CPU"), "{table}");
    }
}

#[test]
fn without_any_gpu_driver_devices_says_so_and_the_cpu_path_works() {
    let out = threadx(&["devices"], &NO_DRIVER);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert!(stdout.contains("No GPU adapter found."), "{stdout}");
    assert!(stdout.contains("apt-get install mesa-vulkan-drivers"), "{stdout}");
    assert!(stdout.contains("everything runs on the CPU"), "{stdout}");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.json");
    let path = path.to_str().unwrap();
    let mut env = NO_DRIVER.to_vec();
    env.push(("THREADX_GPU_THRESHOLD_PATH", path));
    let out = threadx(&["--device", "gpu", "profile", "show"], &env);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.matches("no GPU adapter found").count(), 1, "one clear warning: {stderr}");
}

#[test]
fn profile_show_lists_entries_with_their_choice_and_reset_empties() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("thresholds.json");
    let m = dir.path().join("multigpu.json");
    std::fs::write(
        &t,
        r#"{"bollinger_bands:{\"period\":20,\"size\":10000}": {"cpu_ms_avg": 150.0, "gpu_ms_avg": 50.0, "samples": 3}}"#,
    )
    .unwrap();
    std::fs::write(
        &m,
        r#"{"updated_at": "2025-01-01T00:00:00Z", "workload_tag": "bb", "ratios": {"gpu0:A": 0.75, "gpu1:B": 0.25}}"#,
    )
    .unwrap();
    let env =
        [("THREADX_GPU_THRESHOLD_PATH", t.to_str().unwrap()), ("THREADX_MULTIGPU_PROFILE_PATH", m.to_str().unwrap())];

    let out = threadx(&["--device", "cpu", "profile", "show"], &env);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("(1 entries)"), "{stdout}");
    let row = stdout.lines().find(|l| l.starts_with("bollinger_bands:")).unwrap();
    assert!(row.contains("150.000") && row.contains("50.000") && row.contains("yes"), "{row}");
    assert!(row.ends_with("cpu (forced by the device mode)"), "{row}");
    assert!(stdout.contains("bb: gpu0:A 75.0%, gpu1:B 25.0%"), "{stdout}");

    let out = threadx(&["profile", "reset"], &env);
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("Emptied"));
    let out = threadx(&["--device", "cpu", "profile", "show"], &env);
    assert!(text(&out.stdout).contains("(0 entries)"));
}

#[test]
fn bad_device_mode_is_a_clear_error() {
    let out = threadx(&["--device", "tpu", "devices"], &[]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("unknown device mode 'tpu'"));
    let out = threadx(&["devices"], &[("THREADX_DEVICE", "fast")]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("THREADX_DEVICE: unknown device mode 'fast'"));
}
