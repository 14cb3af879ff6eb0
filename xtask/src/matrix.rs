//! `cargo xtask matrix [--quick]`: every indicator family over bars (10^3 … 10^6) and the
//! bb_atr sweep over combos (10 … 10^6) and over bars, each size on the CPU, on the GPU
//! and in `auto`, through the dispatcher as a user's call goes. For each operation: the
//! CPU/GPU crossover and auto's regret (auto's time / the best fixed device's time, with
//! auto's profile warm). Writes `artifacts/bench/matrix.json`, `matrix.md` and a plot
//! per operation (`artifacts/bench/matrix/<operation>.svg`). `--quick` stops at smaller
//! sizes and times fewer runs: under two minutes.
//!
//! `auto` here may choose a CPU-software adapter (lavapipe), which `threadx` itself never
//! opens in `auto`: on a machine without a GPU that is the only way to exercise the
//! decision between two devices at all.

use crate::bench::{self, MODES, median, rate, seconds};
use anyhow::{Result, bail};
use plotters::prelude::*;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::sync::Arc;
use threadx_backtest::Backtester;
use threadx_dispatch::{DeviceMode, Dispatcher, GpuContext, Operation, thousands};
use threadx_indicators::{Indicator, IndicatorBank, Ohlcv};
use threadx_sweep::{Sweep, SweepSpec};

/// Auto's goal: at most 5 % slower than the best fixed device.
const REGRET_GOAL: f64 = 1.05;
const INDICATORS: [&str; 8] = [
    "sma:period=20",
    "ema:period=20",
    "stddev:period=20",
    "bbands:period=20,std=2",
    "trange",
    "atr:period=14",
    "rsi:period=14",
    "macd",
];
/// Bars of the combos axis of sweeps.
const SWEEP_BARS: usize = 2_000;
/// Combos of the bars axis of sweeps: 10 bb_period × 10 atr_mult.
const SWEEP_COMBOS_GRID: [(&str, &str); 2] = [("bb_period", "10:19:1"), ("atr_mult", "0.5:5:0.5")];

struct Plan {
    runs: usize,
    min_s: f64,
}

/// One operation at one size: what a call does, given the dispatcher; it returns the
/// profile key the dispatcher decided on.
type Call<'a> = Box<dyn FnMut(&Dispatcher) -> Result<String> + 'a>;

pub fn run(args: &[String]) -> Result<()> {
    let quick = bench::quick_flag("matrix", args)?;
    // Even a quick matrix is about speed: always a release build.
    if bench::rerun_in_release("matrix", args, false)? {
        return Ok(());
    }
    let plan = if quick { Plan { runs: 3, min_s: 0.02 } } else { Plan { runs: 5, min_s: 0.1 } };
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir()?;
    let (gpu, adapter) = bench::open_gpu();
    println!("matrix: {} build; adapter: {adapter}", bench::build_profile());
    let bars: &[usize] = if quick { &[1_000, 10_000, 100_000] } else { &[1_000, 10_000, 100_000, 1_000_000] };
    let combos: &[u64] = if quick { &[10, 100, 1_000, 10_000] } else { &[10, 100, 1_000, 10_000, 100_000, 1_000_000] };

    let mut operations = Vec::new();
    for spec in INDICATORS {
        let indicator = Indicator::parse(spec)?;
        let mut points = Vec::new();
        for &n in bars {
            let data = Ohlcv::load(&format!("synthetic:bars={n},seed=1"))?;
            let call: Call<'_> = Box::new(|d: &Dispatcher| {
                let bank = IndicatorBank::new(&data, d);
                std::hint::black_box(bank.get(&indicator)?);
                Ok(bank.runs().pop().map(|r| r.key).unwrap_or_default())
            });
            points.push(measure(&plan, &gpu, &dir.path().join(format!("{spec}-{n}.json")), n as f64, n as f64, call)?);
        }
        operations.push(operation(&indicator.label(), "bars", "bars/s", points));
    }
    let sweep_data = Ohlcv::load(&format!("synthetic:bars={SWEEP_BARS},seed=1"))?;
    let mut points = Vec::new();
    for &n in combos {
        let spec = sweep_spec(n)?;
        let call = sweep_call(&sweep_data, spec);
        let profile = dir.path().join(format!("sweep-{n}.json"));
        points.push(measure(&plan, &gpu, &profile, n as f64, n as f64, call)?);
    }
    operations.push(operation(&format!("sweep bb_atr, {SWEEP_BARS} bars"), "combos", "combos/s", points));
    let mut points = Vec::new();
    for &n in bars {
        let data = Ohlcv::load(&format!("synthetic:bars={n},seed=1"))?;
        let spec = crate::bb_atr_spec(&SWEEP_COMBOS_GRID)?;
        let combos = spec.grid_len() as f64;
        let call = sweep_call(&data, spec);
        let profile = dir.path().join(format!("sweep-bars-{n}.json"));
        points.push(measure(&plan, &gpu, &profile, n as f64, n as f64 * combos, call)?);
    }
    operations.push(operation("sweep bb_atr, 100 combos", "bars", "bar·combos/s", points));

    let report = json!({
        "machine": threadx_profile_store::host_cpu(),
        "adapter": adapter,
        "build": bench::build_profile(),
        "command": if quick { "cargo xtask matrix --quick" } else { "cargo xtask matrix" },
        "runs": plan.runs,
        "min_run_s": plan.min_s,
        "regret_goal": REGRET_GOAL,
        "operations": operations,
        "wall_s": started.elapsed().as_secs_f64(),
    });
    for op in report["operations"].as_array().into_iter().flatten() {
        let name = op["operation"].as_str().unwrap_or("");
        bench::write_report(&format!("matrix/{}.svg", file_name(name)), plot(op)?.as_bytes())?;
    }
    bench::write_report("matrix.json", serde_json::to_string_pretty(&report)?.as_bytes())?;
    let md = markdown(&report);
    bench::write_report("matrix.md", md.as_bytes())?;
    println!("\n{md}");
    Ok(())
}

/// A spec of `n` combos (10^k, k = 1…6) on bb_atr's four axes.
fn sweep_spec(n: u64) -> Result<SweepSpec> {
    let grid: &[(&str, &str)] = match n {
        10 => &[("bb_period", "10:19:1")],
        100 => &[("bb_period", "10:19:1"), ("atr_mult", "0.5:5:0.5")],
        1_000 => &[("bb_period", "10:19:1"), ("bb_std", "1:3.25:0.25"), ("atr_mult", "0.5:5:0.5")],
        10_000 => {
            &[("bb_period", "10:19:1"), ("bb_std", "1:3.25:0.25"), ("atr_period", "5:50:5"), ("atr_mult", "0.5:5:0.5")]
        }
        100_000 => {
            &[("bb_period", "10:109:1"), ("bb_std", "1:3.25:0.25"), ("atr_period", "5:50:5"), ("atr_mult", "0.5:5:0.5")]
        }
        _ => &[
            ("bb_period", "10:109:1"),
            ("bb_std", "1:3.25:0.25"),
            ("atr_period", "5:50:5"),
            ("atr_mult", "0.1:10:0.1"),
        ],
    };
    let spec = crate::bb_atr_spec(grid)?;
    if spec.grid_len() != n {
        bail!("matrix: the grid for {n} combos has {}", spec.grid_len());
    }
    Ok(spec)
}

/// A whole in-memory sweep (bank, book, backtests); the backtests go where the
/// dispatcher says (the bank's decision values are the CPU's f64 ones whatever it says).
fn sweep_call(data: &Ohlcv, spec: SweepSpec) -> Call<'_> {
    Box::new(move |d: &Dispatcher| {
        let bank = IndicatorBank::new(data, d);
        let sweep = Sweep::prepare(&bank, &spec)?;
        std::hint::black_box(sweep.run_all(d)?.metrics);
        let key = Backtester::new(sweep.book(), spec.costs()).operation(sweep.combos().len() as usize).key().to_owned();
        Ok(key)
    })
}

/// Times `call` at one size in each mode. Each mode gets a dispatcher of its own on a
/// fresh profile; `auto`'s is warmed first (it explores each device until it trusts
/// both), then timed as a user's repeated call would be, re-checks included.
fn measure(
    plan: &Plan,
    gpu: &Option<Arc<GpuContext>>,
    profile: &std::path::Path,
    size: f64,
    work: f64,
    mut call: Call<'_>,
) -> Result<Value> {
    let mut point = json!({ "size": size, "work": work });
    let modes: Vec<DeviceMode> = MODES.into_iter().filter(|&m| m != DeviceMode::Gpu || gpu.is_some()).collect();
    let mut lanes = Vec::new();
    for &mode in &modes {
        let dispatcher = bench::dispatcher(mode, gpu.clone(), profile)?;
        let mut key = String::new();
        for _ in 0..if mode == DeviceMode::Auto { 8 } else { 1 } {
            key = call(&dispatcher)?;
        }
        lanes.push((mode, dispatcher, key, Vec::new()));
    }
    // Runs interleaved across modes, so that a drift of the machine (another process,
    // the clock) falls on every mode alike.
    for _ in 0..plan.runs {
        for (_, dispatcher, _, runs) in &mut lanes {
            runs.extend(bench::time_runs(1, plan.min_s, || call(dispatcher).map(drop))?);
        }
    }
    for (mode, dispatcher, key, runs) in lanes {
        let s = median(&runs);
        point[mode.to_string()] = json!({ "s": s, "runs_s": runs, "throughput": work / s });
        if mode == DeviceMode::Auto {
            // What auto would pick now (asked once more, after the timed calls).
            let decision = Operation::from_key(&key).map(|op| dispatcher.decide(&op));
            point["auto"]["choice"] = json!(decision.map(|d| format!("{} ({})", d.device, d.reason)));
        }
    }
    let time = |p: &Value, m: &str| p[m]["s"].as_f64();
    let best = match (time(&point, "cpu"), time(&point, "gpu")) {
        (Some(c), Some(g)) => c.min(g),
        (Some(c), None) => c,
        _ => f64::NAN,
    };
    point["regret"] = json!(time(&point, "auto").map(|a| a / best));
    let time = |m: &str| time(&point, m);
    println!(
        "  size {:>9}: cpu {} gpu {} auto {} (regret {:.3})",
        thousands(size as u64),
        time("cpu").map_or("–".into(), seconds),
        time("gpu").map_or("–".into(), seconds),
        time("auto").map_or("–".into(), seconds),
        point["regret"].as_f64().unwrap_or(f64::NAN),
    );
    Ok(point)
}

/// An operation's points with its crossover and worst regret.
fn operation(name: &str, size_unit: &str, throughput_unit: &str, points: Vec<Value>) -> Value {
    println!("{name}: done");
    let crossover = crossover(&points);
    let worst = points.iter().filter_map(|p| p["regret"].as_f64()).fold(f64::NAN, f64::max);
    json!({
        "operation": name, "size_unit": size_unit, "throughput_unit": throughput_unit,
        "crossover": crossover, "max_regret": worst, "points": points,
    })
}

/// Where the GPU starts to beat the CPU: the size at which their time ratio crosses 1
/// (interpolated in log-log space between the two measured sizes around it).
fn crossover(points: &[Value]) -> Value {
    let ratio = |p: &Value| Some(p["gpu"]["s"].as_f64()? / p["cpu"]["s"].as_f64()?);
    let measured: Vec<(f64, f64)> = points.iter().filter_map(|p| Some((p["size"].as_f64()?, ratio(p)?))).collect();
    if measured.is_empty() {
        return json!({ "at": null, "text": "no GPU measured" });
    }
    if measured[0].1 < 1.0 {
        return json!({ "at": measured[0].0, "text": "the GPU is faster from the smallest size" });
    }
    for w in measured.windows(2) {
        let ((s0, r0), (s1, r1)) = (w[0], w[1]);
        if r0 >= 1.0 && r1 < 1.0 {
            let t = r0.ln() / (r0.ln() - r1.ln());
            let at = (s0.ln() + t * (s1.ln() - s0.ln())).exp();
            return json!({ "at": at, "text": format!("the GPU is faster from about {}", thousands(at as u64)) });
        }
    }
    let last = measured.last().expect("not empty").1;
    json!({ "at": null, "text": format!("the CPU is faster at every size (GPU/CPU time at the largest: {last:.1}×)") })
}

fn file_name(operation: &str) -> String {
    let mut name: String =
        operation.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    while name.contains("--") {
        name = name.replace("--", "-");
    }
    name.trim_matches('-').to_owned()
}

/// Throughput against size, log-log, a line per device mode, the crossover marked.
fn plot(op: &Value) -> Result<String> {
    let points = op["points"].as_array().cloned().unwrap_or_default();
    let series = |mode: &str| -> Vec<(f64, f64)> {
        points.iter().filter_map(|p| Some((p["size"].as_f64()?, p[mode]["throughput"].as_f64()?))).collect()
    };
    let all: Vec<(f64, f64)> = MODES.iter().flat_map(|m| series(&m.to_string())).collect();
    let (x0, x1) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (y0, y1) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    if all.is_empty() {
        bail!("nothing to plot for {}", op["operation"]);
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 440)).into_drawing_area();
        let err = |e: DrawingAreaErrorKind<_>| anyhow::anyhow!("plot: {e}");
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(op["operation"].as_str().unwrap_or(""), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((x0 / 1.5..x1 * 1.5).log_scale(), (y0 / 2.0..y1 * 2.0).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc(op["size_unit"].as_str().unwrap_or(""))
            .y_desc(op["throughput_unit"].as_str().unwrap_or(""))
            .x_label_formatter(&|x| format!("{x:.0e}"))
            .y_label_formatter(&|y| format!("{y:.0e}"))
            .draw()
            .map_err(err)?;
        for (k, mode) in MODES.iter().enumerate() {
            let points = series(&mode.to_string());
            if points.is_empty() {
                continue;
            }
            let colour = Palette99::pick(k).to_rgba();
            chart
                .draw_series(LineSeries::new(points.iter().copied(), colour.stroke_width(2)))
                .map_err(err)?
                .label(mode.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2)));
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled()))).map_err(err)?;
        }
        if let Some(at) = op["crossover"]["at"].as_f64() {
            chart
                .draw_series(LineSeries::new([(at, y0 / 2.0), (at, y1 * 2.0)], BLACK.stroke_width(1)))
                .map_err(err)?
                .label("crossover")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(1)));
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

fn markdown(r: &Value) -> String {
    let num = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let mut md = format!(
        "# Bench matrix\n\nMachine: {}; adapter: {}; {} build. Command: `{}` ({:.0} s). Each time is the \
         median of {} runs, each the mean of as many calls as fill {} s. `auto` is timed after 8 warm-up \
         calls on a fresh profile, re-checks of the slower device included; regret = auto / the faster \
         of cpu and gpu (goal ≤ {REGRET_GOAL}).\n\n\
         | operation | crossover | worst regret |\n|---|---|---|\n",
        r["machine"].as_str().unwrap_or(""),
        r["adapter"].as_str().unwrap_or(""),
        r["build"].as_str().unwrap_or(""),
        r["command"].as_str().unwrap_or(""),
        num(&r["wall_s"]),
        r["runs"],
        r["min_run_s"],
    );
    let ops = r["operations"].as_array().cloned().unwrap_or_default();
    for op in &ops {
        let name = op["operation"].as_str().unwrap_or("");
        let _ = writeln!(
            md,
            "| [{name}](matrix/{}.svg) | {} | {:.3} |",
            file_name(name),
            op["crossover"]["text"].as_str().unwrap_or(""),
            num(&op["max_regret"])
        );
    }
    for op in &ops {
        let _ = write!(
            md,
            "\n## {}\n\n| {} | cpu | gpu | auto | regret | auto's choice | cpu {} | gpu {} |\n|---|---|---|---|---|---|---|---|\n",
            op["operation"].as_str().unwrap_or(""),
            op["size_unit"].as_str().unwrap_or(""),
            op["throughput_unit"].as_str().unwrap_or(""),
            op["throughput_unit"].as_str().unwrap_or(""),
        );
        for p in op["points"].as_array().into_iter().flatten() {
            let time = |m: &str| p[m]["s"].as_f64().map_or("–".into(), seconds);
            let regret = num(&p["regret"]);
            let regret = if regret > REGRET_GOAL { format!("**{regret:.3}**") } else { format!("{regret:.3}") };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                thousands(num(&p["size"]) as u64),
                time("cpu"),
                time("gpu"),
                time("auto"),
                regret,
                p["auto"]["choice"].as_str().unwrap_or("–"),
                rate(num(&p["cpu"]["throughput"])),
                rate(num(&p["gpu"]["throughput"])),
            );
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(size: f64, cpu: f64, gpu: f64) -> Value {
        json!({ "size": size, "cpu": { "s": cpu }, "gpu": { "s": gpu } })
    }

    #[test]
    fn the_crossover_is_where_the_time_ratio_crosses_one_in_log_log() {
        // GPU/CPU time 2 at 10^3 and 0.5 at 10^4: the ratio's log crosses 0 half-way, at 10^3.5.
        let c = crossover(&[point(1e3, 1.0, 2.0), point(1e4, 2.0, 1.0), point(1e5, 4.0, 1.0)]);
        assert!((c["at"].as_f64().unwrap() - 10f64.powf(3.5)).abs() < 1e-6, "{c}");
        let none = crossover(&[point(1e3, 1.0, 30.0), point(1e4, 1.0, 3.0)]);
        assert_eq!(none["at"], Value::Null);
        assert!(none["text"].as_str().unwrap().contains("3.0×"), "{none}");
        let first = crossover(&[point(1e3, 2.0, 1.0), point(1e4, 2.0, 1.0)]);
        assert_eq!(first["at"].as_f64(), Some(1e3));
        assert_eq!(crossover(&[json!({ "size": 1e3, "cpu": { "s": 1.0 } })])["at"], Value::Null);
    }

    #[test]
    fn plots_are_named_after_their_operation() {
        assert_eq!(file_name("sweep bb_atr, 2000 bars"), "sweep-bb-atr-2000-bars");
        assert_eq!(file_name("macd_12_26_9"), "macd-12-26-9");
    }
}
