//! Which devices a sweep runs on, as a user meets it: `auto` never on a software adapter
//! and not on a GPU for a small sweep, the balance `--device all` saves and uses, a
//! config's device against the flag; the same bytes on every device.

use crate::common;

use common::{SMALL, command, text, threadx};
use std::path::Path;

fn adapters_found(dir: &Path) -> Vec<serde_json::Value> {
    let out = threadx(dir, &["devices", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let adapters = v["adapters"].as_array().unwrap().clone();
    assert!(
        !adapters.is_empty() || std::env::var("THREADX_REQUIRE_GPU").as_deref() != Ok("1"),
        "THREADX_REQUIRE_GPU=1 but `threadx devices` finds no adapter"
    );
    adapters
}

fn only_software_adapters(dir: &Path) -> bool {
    let adapters = adapters_found(dir);
    !adapters.is_empty() && adapters.iter().all(|a| a["software"] == true)
}

#[test]
fn auto_never_runs_a_software_adapter_and_the_gpu_gives_the_cpus_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let run = |device: &str, out: &str| {
        let mut args = SMALL.to_vec();
        args[1] = device;
        args.extend(["--out", out, "--chunk-size", "4"]);
        let result = threadx(dir.path(), &args);
        assert!(result.status.success(), "{}", text(&result.stderr));
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(out).with_extension("json")).unwrap())
                .unwrap();
        (std::fs::read(dir.path().join(out)).unwrap(), summary["workers"].clone())
    };
    let (cpu, _) = run("cpu", "cpu.csv");
    let (auto, devices) = run("auto", "auto.csv");
    assert_eq!(auto, cpu);
    if only_software_adapters(dir.path()) {
        assert_eq!(devices.as_object().unwrap().keys().collect::<Vec<_>>(), ["cpu"], "{devices}");
    }
    let (gpu, devices) = run("gpu", "gpu.csv");
    assert_eq!(gpu, cpu, "the GPU's rows are the CPU's bytes");
    if !adapters_found(dir.path()).is_empty() {
        assert!(devices.as_object().unwrap().keys().all(|k| k.starts_with("gpu0:")), "{devices}");
    }
}

#[test]
fn balance_saves_the_split_that_device_all_uses_and_profile_show_lists_it() {
    let dir = tempfile::tempdir().unwrap();
    // The original single-profile form of multigpu.json is read and kept.
    std::fs::create_dir_all(dir.path().join("artifacts/profiles")).unwrap();
    let seed = r#"{"updated_at": "2024-05-01T10:00:00Z", "workload_tag": "bollinger_computation",
                   "ratios": {"RTX3090": 0.75, "GTX1660": 0.25}}"#;
    std::fs::write(dir.path().join("artifacts/profiles/multigpu.json"), seed).unwrap();
    let show = text(&threadx(dir.path(), &["profile", "show"]).stdout);
    assert!(show.contains("bollinger_computation") && show.contains("RTX3090") && show.contains("75.0 %"), "{show}");

    // lavapipe (in CI) joins only when asked for by name: it shares the CPU's cores.
    let gpu = adapters_found(dir.path()).iter().any(|a| a["name"].as_str().is_some_and(|n| n.contains("llvmpipe")));
    let with_lavapipe = |args: &[&str]| command(dir.path(), args).env("THREADX_ADAPTER", "llvmpipe").output().unwrap();
    let data = "synthetic:bars=3000,seed=2";
    let balance = with_lavapipe(&[
        "balance",
        "--workload-tag",
        "backtest_bb_atr",
        "--sample-size",
        "200",
        "--warmup",
        "1",
        "--runs",
        "2",
        "--data",
        data,
    ]);
    let printed = text(&balance.stdout);
    assert!(balance.status.success(), "{}", text(&balance.stderr));
    assert!(printed.contains("balance of backtest_bb_atr: ") && printed.contains("cpu: "), "{printed}");
    assert_eq!(printed.contains("gpu0:llvmpipe"), gpu, "{printed}");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("artifacts/profiles/multigpu.json")).unwrap())
            .unwrap();
    let ratios = file["profiles"]["backtest_bb_atr"]["ratios"].as_object().unwrap();
    let sum: f64 = ratios.values().map(|r| r.as_f64().unwrap()).sum();
    assert!((sum - 1.0).abs() < 1e-9 && ratios.contains_key("cpu"), "{file:#}");
    assert_eq!(file["profiles"]["bollinger_computation"]["ratios"]["RTX3090"], 0.75, "the seed profile is kept");
    let show = text(&threadx(dir.path(), &["profile", "show"]).stdout);
    assert!(show.contains("backtest_bb_atr (updated ") && show.contains(" per s"), "{show}");

    // A sweep on every worker: the CPU's bytes, each worker's part in the summary.
    let run = |device: &str, out: &str| {
        let mut args = SMALL.to_vec();
        args[1] = device;
        args.extend(["--out", out, "--chunk-size", "4"]);
        let result = with_lavapipe(&args);
        assert!(result.status.success(), "{}", text(&result.stderr));
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join(out).with_extension("json")).unwrap())
                .unwrap();
        (std::fs::read(dir.path().join(out)).unwrap(), summary, text(&result.stdout))
    };
    let (cpu, _, _) = run("cpu", "cpu.csv");
    let (all, summary, printed) = run("all", "all.csv");
    assert_eq!(all, cpu, "every worker together: the CPU's bytes");
    let workers = summary["workers"].as_object().unwrap();
    assert_eq!(workers.len(), if gpu { 2 } else { 1 }, "{summary:#}");
    let chunks: u64 = workers.values().map(|w| w["chunks"].as_u64().unwrap()).sum();
    assert_eq!(chunks, 6, "{summary:#}");
    assert!(printed.contains("workers: cpu ") || printed.contains("workers: gpu0:"), "{printed}");
    if gpu {
        assert_eq!(summary["balance"]["ratios"].as_object().unwrap().len(), 2, "{summary:#}");
    }
    // A saved balance giving every worker half the work does not send a small sweep to the
    // GPU in `auto`: opening one costs more than the CPU's whole run.
    let path = dir.path().join("artifacts/profiles/multigpu.json");
    let mut file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for ratio in file["profiles"]["backtest_bb_atr"]["ratios"].as_object_mut().unwrap().values_mut() {
        *ratio = 0.5.into();
    }
    std::fs::write(&path, file.to_string()).unwrap();
    let (auto, summary, _) = run("auto", "auto.csv");
    assert_eq!(auto, cpu);
    assert_eq!(summary["workers"].as_object().unwrap().keys().collect::<Vec<_>>(), ["cpu"], "{summary:#}");

    let unknown = threadx(dir.path(), &["balance", "--workload-tag", "bollinger"]);
    assert!(!unknown.status.success());
    assert!(text(&unknown.stderr).contains("unknown workload tag `bollinger` (known: backtest_bb_atr"));
    assert!(text(&unknown.stderr).contains("a rule file's: --strategy FILE.toml"));

    // A rule file is measured by --strategy, under its own tag, the one its sweeps read.
    let rules = format!("{}/../../examples/strategies/donchian.toml", env!("CARGO_MANIFEST_DIR"));
    let sample = ["--sample-size", "20", "--warmup", "0", "--runs", "1", "--data", data];
    let mut args = vec!["--device", "cpu", "balance", "--strategy", &rules];
    args.extend(sample);
    let measured = threadx(dir.path(), &args);
    assert!(measured.status.success(), "{}", text(&measured.stderr));
    assert!(text(&measured.stdout).contains("balance of backtest_donchian: cpu 100.0 %"), "{}", text(&measured.stdout));
    let file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(file["profiles"]["backtest_donchian"]["ratios"]["cpu"], 1.0, "{file:#}");
    let other = threadx(dir.path(), &["balance", "--strategy", &rules, "--workload-tag", "backtest_bb_atr"]);
    assert!(text(&other.stderr).contains("is not --strategy") && !other.status.success());
}

#[test]
fn a_configs_device_is_the_runs_unless_the_flag_says_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let config = "strategy = \"bb_atr\"\ndevice = \"cpu\"\n[grid]\nbb_period = \"10:50:5\"\nbb_std = [1.5, 2, 2.5]\n\
                  atr_period = { start = 7, stop = 21, step = 7 }\n[random]\nn = 60\nseed = 7\n\
                  [overfitting]\nblocks = 16\n";
    std::fs::write(dir.path().join("sweep.toml"), config).unwrap();
    let run = |flag: &[&str]| {
        let mut args: Vec<&str> = flag.to_vec();
        args.extend(["sweep", "--config", "sweep.toml", "--quiet", "--out", "r.csv"]);
        command(dir.path(), &args).env("THREADX_LOG", "debug").output().unwrap()
    };
    let from_config = run(&[]);
    assert!(from_config.status.success(), "{}", text(&from_config.stderr));
    assert!(!text(&from_config.stderr).contains("probing GPU adapters"), "{}", text(&from_config.stderr));
    // The flag wins over the config: `--device gpu` looks for adapters (and runs on one, or
    // says there is none), whatever the config says.
    let flagged = run(&["--device", "gpu"]);
    assert!(text(&flagged.stderr).contains("probing GPU adapters"), "{}", text(&flagged.stderr));
}
