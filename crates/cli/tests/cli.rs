//! The `threadx` binary as a user runs it.

use crate::common;

use common::{binary, text, threadx_in_scratch as threadx};

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
        // A CPU-software adapter says that auto never picks it.
        let software = a["device_type"] == "CPU (software)";
        assert_eq!(a["software"], software);
        assert_eq!(a["why"].as_str().unwrap().contains("auto never picks it"), software, "{a}");
    }
    assert!(v["nvml"].is_boolean());
    let table = threadx(&["devices"], &[]);
    let table = text(&table.stdout);
    assert!(table.contains("Default adapter: #1"), "{table}");
    if adapters.iter().any(|a| a["name"].as_str().is_some_and(|n| n.contains("llvmpipe"))) {
        // Mesa's lavapipe (CI installs it) is named for what it is.
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
    // The search was limited to one backend: the warning says so, not that no driver exists.
    assert!(stderr.contains("for WGPU_BACKEND=vulkan: only that backend was searched"), "{stderr}");
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
    assert!(stdout.contains("bb (updated 2025-01-01T00:00:00Z):"), "{stdout}");
    let share = |worker: &str| stdout.lines().find(|l| l.trim_start().starts_with(worker)).unwrap_or_default();
    assert!(share("gpu0:A").ends_with("75.0 %") && share("gpu1:B").ends_with("25.0 %"), "{stdout}");

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

#[test]
fn data_synth_then_indicators_writes_the_named_columns() {
    let dir = tempfile::tempdir().unwrap();
    let bars = dir.path().join("bars.csv");
    let out = threadx(&["data", "synth", "--bars", "500", "--seed", "9", "--out", bars.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let csv = std::fs::read_to_string(&bars).unwrap();
    assert_eq!(csv.lines().count(), 501);
    assert!(csv.starts_with("timestamp,open,high,low,close,volume\n2024-01-01T00:00:00Z,42000,"), "{csv:.200}");

    let result = dir.path().join("ind.csv");
    let args = [
        "indicators",
        "--data",
        bars.to_str().unwrap(),
        "--ind",
        "bbands:period=20,std=2",
        "--ind",
        "atr:period=14",
        "--ind",
        "rsi",
        "--ind",
        "macd",
        "--device",
        "cpu",
        "--out",
        result.to_str().unwrap(),
    ];
    let out = threadx(&args, &[("THREADX_GPU_THRESHOLD_PATH", dir.path().join("t.json").to_str().unwrap())]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let written = std::fs::read_to_string(&result).unwrap();
    let mut lines = written.lines();
    assert_eq!(
        lines.next().unwrap(),
        "timestamp,bbands_20_2_middle,bbands_20_2_upper,bbands_20_2_lower,atr_14,rsi_14,\
         macd_12_26_9_macd,macd_12_26_9_signal,macd_12_26_9_hist"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 500);
    assert_eq!(rows[0][1..], ["", "", "", "", "", "", "", ""], "NaN is written as empty");
    assert!(rows[19][1].parse::<f64>().is_ok() && rows[18][1].is_empty(), "first band at bar 19");
    assert!(rows[14][4].parse::<f64>().is_ok() && rows[13][4].is_empty(), "first ATR at bar 14");
    assert!(rows[33][6].parse::<f64>().is_ok() && rows[32][6].is_empty(), "first MACD at bar 33");
    // The values are the library's, to the last digit.
    let data = threadx_indicators::Ohlcv::load(bars.to_str().unwrap()).unwrap();
    let bb =
        threadx_indicators::compute_cpu(&data, &[threadx_indicators::Indicator::parse("bbands").unwrap()]).unwrap();
    for (t, row) in rows.iter().enumerate().skip(19) {
        assert_eq!(row[2].parse::<f64>().unwrap(), bb[0].output(1)[t], "upper band at bar {t}");
    }
}

#[test]
fn indicators_refuses_bad_input_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("never.csv");
    let out = out_path.to_str().unwrap();
    let bad_csv = dir.path().join("bad.csv");
    std::fs::write(&bad_csv, "time,open,high,low,close\n1,10,11,9,10\n2,10,11,9,NaN\n").unwrap();
    let cases: [(&[&str], &str); 7] = [
        (&["--data", "synthetic:bars=100", "--ind", "bbands:period=20,std=0"], "std must be a positive number"),
        (&["--data", "synthetic:bars=100", "--ind", "macd:fast=26,slow=12"], "fast (26) must be shorter"),
        (&["--data", "synthetic:bars=100", "--ind", "kama"], "unknown indicator `kama`"),
        (&["--data", "synthetic:bars=100", "--ind", "rsi:window=3"], "unknown parameter `window`"),
        (&["--data", "synthetic:bars=10", "--ind", "sma:period=30"], "needs at least 30 bars"),
        (&["--data", "/no/such.csv", "--ind", "sma"], "cannot read /no/such.csv"),
        (&["--data", bad_csv.to_str().unwrap(), "--ind", "sma"], "line 3, column `close`: NaN is not a finite number"),
    ];
    for (args, says) in cases {
        let mut full = vec!["indicators"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["--out", out]);
        let run = threadx(&full, &[]);
        assert!(!run.status.success(), "{args:?} should fail");
        assert!(text(&run.stderr).contains(says), "{args:?}: {}", text(&run.stderr));
        assert!(!out_path.exists(), "{args:?} wrote output");
    }
    let run =
        threadx(&["indicators", "--data", "synthetic:bars=100", "--ind", "sma", "--out", "/no/such/dir/x.csv"], &[]);
    assert!(text(&run.stderr).contains("folder /no/such/dir does not exist"), "{}", text(&run.stderr));
}

#[test]
fn backtest_prints_metrics_and_writes_trades_and_equity() {
    let dir = tempfile::tempdir().unwrap();
    let (trades, equity) = (dir.path().join("trades.csv"), dir.path().join("equity.csv"));
    let profile = dir.path().join("t.json");
    let env = [("THREADX_GPU_THRESHOLD_PATH", profile.to_str().unwrap())];
    let data = "synthetic:bars=3000,seed=4";
    let set = ["--set", "bb_period=20", "--set", "bb_std=2", "--set", "atr_period=14", "--set", "atr_mult=2"];
    let mut args = vec!["backtest", "--data", data, "--strategy", "bb_atr", "--device", "cpu", "--json"];
    args.extend_from_slice(&set);
    args.extend_from_slice(&["--trades", trades.to_str().unwrap(), "--equity", equity.to_str().unwrap()]);
    let out = threadx(&args, &env);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The same run through the library gives the same numbers.
    let ohlcv = threadx_indicators::Ohlcv::load(data).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dispatcher = threadx_dispatch::testing::dispatcher_in(dir.path(), threadx_dispatch::DeviceMode::Cpu);
    let bank = threadx_indicators::IndicatorBank::new(&ohlcv, &dispatcher);
    let report = threadx_backtest::backtest(
        &bank,
        &threadx_backtest::Strategy::parse("bb_atr").unwrap(),
        &[20.0, 2.0, 14.0, 2.0],
        threadx_backtest::Costs { fee: 0.001, slippage: 0.0 },
        None,
    )
    .unwrap();
    for (name, want) in threadx_backtest::Metrics::NAMES.iter().zip(report.metrics.values()) {
        assert_eq!(v[name].as_f64().unwrap(), want, "{name}");
    }
    assert_eq!(
        (v["strategy"].as_str(), v["bars"].as_u64(), v["fee"].as_f64()),
        (Some("bb_atr"), Some(3000), Some(0.001))
    );
    // Whole-number parameters as integers, floats as floats, as in every other JSON.
    assert_eq!(v["params"].to_string(), r#"{"atr_mult":2.0,"atr_period":14,"bb_period":20,"bb_std":2.0}"#);
    let trade_rows: Vec<String> = std::fs::read_to_string(&trades).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(
        trade_rows[0],
        "trade,side,entry_bar,entry_time,entry_price,exit_bar,exit_time,exit_price,return,exit_reason"
    );
    assert_eq!(trade_rows.len() - 1, report.trades.len());
    assert!(report.trades.len() > 3, "the default strategy trades on this data");
    let first: Vec<&str> = trade_rows[1].split(',').collect();
    assert_eq!(first[1], "long");
    assert_eq!(first[2].parse::<usize>().unwrap(), report.trades[0].entry_bar);
    assert!(["signal", "stop", "end"].contains(&first[9]));
    let curve = std::fs::read_to_string(&equity).unwrap();
    assert_eq!(curve.lines().count(), 3001);
    let second = curve.lines().nth(1).unwrap();
    assert!(curve.starts_with("bar,timestamp,close,equity\n0,2024-01-01T00:00:00Z,"), "{curve:.100}");
    assert_eq!(second.rsplit(',').next(), Some("1"), "equity starts at 1");
    let last: f64 = curve.lines().last().unwrap().rsplit(',').next().unwrap().parse().unwrap();
    // The curve is the f64 simulation; the metrics are the integer totals every device
    // reports: the same equity to well within 1e-12 of it.
    assert!((last - (1.0 + report.metrics.total_return)).abs() <= 1e-12 * last, "{last} {:?}", report.metrics);

    // 15-minute bars: the Sharpe ratio annualised with √35,040; --periods-per-year sets it.
    assert_eq!(v["periods_per_year"].as_f64(), Some(35_040.0));
    assert_eq!(v["annualisation"]["basis"], "calendar days: a year of 365 days");
    assert_eq!(v["sharpe_annual"].as_f64().unwrap(), report.metrics.sharpe * 35_040f64.sqrt());
    let mut daily = args.clone();
    daily.extend(["--periods-per-year", "252"]);
    let out = threadx(&daily, &env);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["sharpe"], v["sharpe"]);
    assert_eq!(d["sharpe_annual"].as_f64().unwrap(), report.metrics.sharpe * 252f64.sqrt());
    assert_eq!(
        d["annualisation"],
        serde_json::json!({"periods_per_year": 252.0, "basis": "given (--periods-per-year)"})
    );
    for bad in ["0", "-5", "nan"] {
        let mut args = args.clone();
        args.extend(["--periods-per-year", bad]);
        let out = threadx(&args, &env);
        assert!(text(&out.stderr).contains("periods_per_year"), "{bad}: {}", text(&out.stderr));
    }

    // The table form names every metric.
    let out = threadx(&["backtest", "--data", data, "--device", "cpu"], &env);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    for name in threadx_backtest::Metrics::NAMES {
        assert!(table.contains(name), "{table}");
    }
}

#[test]
fn backtest_refuses_bad_input_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let trades_path = dir.path().join("never.csv");
    let trades = trades_path.to_str().unwrap();
    let cases: [(&[&str], &str); 9] = [
        (
            &["--strategy", "momentum"],
            "unknown strategy `momentum` (known: bb_atr, ma_cross, rsi_reversion, or a rule file such as my_strategy.toml)",
        ),
        (&["--set", "bb_len=20"], "unknown parameter `bb_len`"),
        (&["--set", "atr_mult=0"], "atr_mult=0: out of range: must be > 0"),
        (&["--set", "atr_mult=-2"], "atr_mult=-2: out of range"),
        (&["--set", "bb_period=1"], "bb_period=1: out of range: must be ≥ 2"),
        (&["--set", "bb_period"], "expected name=value"),
        (&["--fee", "1"], "fee 1 is outside [0, 1)"),
        (&["--fee", "-0.1"], "fee -0.1 is outside [0, 1)"),
        (&["--data", "synthetic:bars=30", "--set", "bb_period=40"], "needs at least 40 bars to trade; the data has 30"),
    ];
    for (args, says) in cases {
        let mut full = vec!["backtest", "--device", "cpu", "--trades", trades];
        full.extend_from_slice(args);
        let run = threadx(&full, &[]);
        assert!(!run.status.success(), "{args:?} should fail");
        assert!(text(&run.stderr).contains(says), "{args:?}: {}", text(&run.stderr));
        assert!(!trades_path.exists(), "{args:?} wrote output");
    }
    let run = threadx(&["backtest", "--trades", "/no/such/dir/t.csv"], &[]);
    assert!(text(&run.stderr).contains("folder /no/such/dir does not exist"), "{}", text(&run.stderr));
    let run = threadx(&["backtest", "--strategy", "ma_cross", "--set", "fast=60", "--set", "slow=20"], &[]);
    assert!(
        text(&run.stderr).contains("fast=60, slow=20 breaks the rule `require = \"fast < slow\"`"),
        "{}",
        text(&run.stderr)
    );
}

#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    // `threadx ... | head -1`: the reader goes away after the first line.
    for args in [
        &["--device", "cpu", "backtest", "--data", "synthetic:bars=2000,seed=1"][..],
        &["--device", "cpu", "profile", "show"][..],
    ] {
        let scratch = tempfile::tempdir().unwrap();
        let mut child = binary()
            .args(args)
            .env("THREADX_GPU_THRESHOLD_PATH", scratch.path().join("thresholds.json"))
            .env("THREADX_MULTIGPU_PROFILE_PATH", scratch.path().join("multigpu.json"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Closing our end before the command writes: every write it makes fails with EPIPE.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{args:?}: {:?} {stderr}", out.status);
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
}

#[test]
fn errors_written_to_a_pipe_carry_no_colour_codes() {
    let out = threadx(&["--device", "cpu", "backtest", "--data", "/no/such/file.csv"], &[]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("ERROR") && stderr.contains("/no/such/file.csv"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "ANSI escape in {stderr:?}");
}

#[test]
fn with_the_cpu_forced_no_gpu_stack_is_started() {
    let scratch = tempfile::tempdir().unwrap();
    let profile = scratch.path().join("t.json");
    let env = [("THREADX_GPU_THRESHOLD_PATH", profile.to_str().unwrap()), ("THREADX_LOG", "debug")];
    let run = |device: &str| {
        let args = ["--device", device, "backtest", "--data", "synthetic:bars=2000,seed=1", "--json"];
        let out = threadx(&args, &env);
        assert!(out.status.success(), "{}", text(&out.stderr));
        (text(&out.stderr), serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap())
    };
    let (forced, cpu) = run("cpu");
    assert!(!forced.contains("probing GPU adapters"), "{forced}");
    // auto does not probe for work below the GPU floor (4,096 bars): the same numbers.
    let (auto, same) = run("auto");
    assert!(!auto.contains("probing GPU adapters"), "{auto}");
    assert_eq!(cpu, same);
    // Indicators large enough for a GPU to be considered: auto probes, once.
    let out = scratch.path().join("i.csv");
    let indicators = |bars: &str| {
        let data = format!("synthetic:bars={bars},seed=1");
        let args = ["--device", "auto", "indicators", "--data", &data, "--ind", "sma", "--out", out.to_str().unwrap()];
        text(&threadx(&args, &env).stderr).matches("probing GPU adapters").count()
    };
    assert_eq!(indicators("1000"), 0);
    assert_eq!(indicators("10000"), 1);
    // Nor for the 24-combo reference sweep, which runs on the CPU before any probe.
    let sweep = [
        "--device",
        "auto",
        "sweep",
        "--data",
        "synthetic:bars=960,seed=1",
        "--grid",
        "bb_period=10,20,30,40",
        "--grid",
        "bb_std=1.5,2",
        "--grid",
        "atr_period=7,14,21",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ];
    let mut env = env.to_vec();
    let multigpu = scratch.path().join("multigpu.json");
    env.push(("THREADX_MULTIGPU_PROFILE_PATH", multigpu.to_str().unwrap()));
    let small = threadx(&sweep, &env);
    assert!(small.status.success(), "{}", text(&small.stderr));
    assert!(!text(&small.stderr).contains("probing GPU adapters"), "{}", text(&small.stderr));
}

#[test]
fn a_bad_tick_is_named_once_and_indicators_recover_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (data, out_csv) = (dir.path().join("d.csv"), dir.path().join("i.csv"));
    let synth = threadx(&["data", "synth", "--bars", "1000", "--seed", "1", "--out", data.to_str().unwrap()], &[]);
    assert!(synth.status.success(), "{}", text(&synth.stderr));
    let mut lines: Vec<String> = std::fs::read_to_string(&data).unwrap().lines().map(str::to_owned).collect();
    // Line 301 (bar 299): high and close of 1e20.
    let mut fields: Vec<String> = lines[300].split(',').map(str::to_owned).collect();
    (fields[2], fields[4]) = ("1e20".into(), "1e20".into());
    lines[300] = fields.join(",");
    std::fs::write(&data, lines.join("\n") + "\n").unwrap();
    let args = ["--device", "cpu", "indicators", "--data", data.to_str().unwrap(), "--ind", "sma:period=20"];
    let out = threadx(&[&args[..], &["--out", out_csv.to_str().unwrap()]].concat(), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.matches("more than 100 times away").count(), 1, "{stderr}");
    assert!(stderr.contains("line 301, column `high`") && stderr.contains("2 such prices"), "{stderr}");
    // 300 bars later the mean is the window's again.
    let close: Vec<f64> = lines[1..].iter().map(|l| l.split(',').nth(4).unwrap().parse().unwrap()).collect();
    let sma: Vec<String> = std::fs::read_to_string(&out_csv).unwrap().lines().skip(1).map(str::to_owned).collect();
    let t = 599;
    let want = close[t - 19..=t].iter().sum::<f64>() / 20.0;
    let got: f64 = sma[t].split(',').nth(1).unwrap().parse().unwrap();
    assert!((got - want).abs() <= 1e-11 * want, "sma[{t}] = {got}, want {want}");
}

#[test]
fn monitor_prints_samples_and_writes_its_history_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, svg) = (dir.path().join("h.csv"), dir.path().join("h.svg"));
    let args = ["monitor", "--interval", "0.2", "--duration", "0.9", "--out"];
    let out = threadx(&[&args[..], &[csv.to_str().unwrap(), "--plot", svg.to_str().unwrap()]].concat(), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("sampling every 0.2 s for 0.9 s; NVML"), "{stdout}");
    let lines: Vec<&str> = stdout.lines().filter(|l| l.contains(" s  cpu ")).collect();
    assert_eq!(lines.len(), 4, "a line per sample: {stdout}");
    assert!(lines[0].trim_start().starts_with("0.2 s  cpu") && lines[0].contains("GiB  process"), "{}", lines[0]);
    let history = threadx_telemetry::parse_history_csv(&std::fs::read_to_string(&csv).unwrap()).unwrap();
    assert_eq!(history.len(), 4);
    assert!(history.windows(2).all(|w| w[1].elapsed_s > w[0].elapsed_s));
    assert!(stdout.contains(&format!("wrote 4 samples to {}", csv.display())), "{stdout}");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("CPU, % of the machine"));

    // The history is a table as every other: Parquet by its name, the byte counts integers.
    let parquet = dir.path().join("h.parquet");
    let args = ["monitor", "--interval", "0.2", "--duration", "0.5", "--out", parquet.to_str().unwrap()];
    assert!(threadx(&args, &[]).status.success());
    let file = std::fs::File::open(&parquet).unwrap();
    let batches: Vec<_> = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let schema = batches[0].schema();
    assert_eq!(schema.field(0).name(), "elapsed_s");
    assert_eq!(schema.field_with_name("process_rss_bytes").unwrap().data_type(), &arrow::datatypes::DataType::Int64);
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 2);

    for (flags, why) in [
        (vec!["--interval", "0.05", "--duration", "1"], "at least 0.2 s"),
        (vec!["--duration=-1"], "--duration must be a positive number of seconds"),
        (vec!["--interval", "1e300"], "--interval 1e300 is more than the 1e7 seconds"),
        (vec!["--interval", "2e7"], "--interval 2e7 is more than the 1e7 seconds"),
        (vec!["--out", "/nonexistent/dir/h.csv", "--duration", "1"], "/nonexistent/dir"),
        // The plot would have replaced the history, after the whole run.
        (vec!["--out", "same.csv", "--plot", "same.csv", "--duration", "1"], "are one file"),
        (vec!["--out", "h.json", "--duration", "1"], "--out h.json: `.json` is not a table's format"),
    ] {
        let out = threadx(&[&["monitor"][..], &flags].concat(), &[]);
        assert!(!out.status.success());
        assert!(text(&out.stderr).contains(why), "{flags:?}: {}", text(&out.stderr));
    }
}

/// What a newcomer reads: families not profile keys, a chunk no larger than the sweep,
/// which speed is which, why no GPU is used, NVML's absence in words.
#[test]
fn messages_say_what_a_user_needs_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("i.csv");
    let args =
        ["--device", "cpu", "indicators", "--data", "synthetic:bars=500", "--ind", "sma", "--ind", "bbands", "--out"];
    let printed = text(&threadx(&[&args[..], &[out.to_str().unwrap()]].concat(), &[]).stdout);
    assert!(printed.contains("(sma on cpu; bollinger_bands on cpu)"), "{printed}");
    assert!(!printed.contains("\"size\""), "{printed}");

    let r = dir.path().join("r.csv");
    let sweep = [
        "--device",
        "cpu",
        "sweep",
        "--data",
        "synthetic:bars=500",
        "--grid",
        "bb_period=10,20,30",
        "--grid",
        "bb_std=2",
    ];
    let printed = text(&threadx(&[&sweep[..], &["--out", r.to_str().unwrap()]].concat(), &[]).stdout);
    assert!(printed.contains("3 combos, 1 chunk of 3"), "{printed}");
    assert!(printed.contains("combos/s of wall time") && printed.contains("combos/s while busy"), "{printed}");

    let devices = threadx(&["devices"], &[]);
    let printed = text(&devices.stdout);
    assert!(!printed.contains("libloading"), "{printed}");
    if printed.contains("NVML: not present") {
        assert!(printed.contains("no NVIDIA driver (its library libnvidia-ml.so.1 is not installed)"), "{printed}");
    }
    let found: serde_json::Value = serde_json::from_slice(&threadx(&["devices", "--json"], &[]).stdout).unwrap();
    let adapters = found["adapters"].as_array().unwrap();
    if !adapters.is_empty() && adapters.iter().all(|a| a["software"] == true) {
        let show = text(&threadx(&["--device", "auto", "profile", "show"], &[]).stdout);
        assert!(
            show.contains("GPU: none in auto mode: the adapters found (") && show.contains("--device gpu uses them"),
            "{show}"
        );
        let all = threadx(&[&["--device", "all"][..], &sweep[2..], &["--out", r.to_str().unwrap()]].concat(), &[]);
        assert!(all.status.success(), "{}", text(&all.stderr));
        assert!(text(&all.stderr).contains("--device all leaves out llvmpipe"), "{}", text(&all.stderr));
    }
}
