//! A monitor's history in the forms a person reads: CSV (written and read back exactly),
//! the summary's numbers (mean and max per metric and GPU), a one-line sample and the plot.

use crate::error::MonitorError;
use crate::monitor::{GpuReading, Sample};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

const GIB: f64 = (1u64 << 30) as f64;

const MACHINE_COLUMNS: [&str; 6] =
    ["elapsed_s", "cpu_percent", "memory_used_bytes", "memory_total_bytes", "process_cpu_percent", "process_rss_bytes"];
const GPU_COLUMNS: [&str; 4] = ["utilization_percent", "memory_used_percent", "temperature_c", "power_w"];

/// The history as CSV: the machine's columns, then `gpu<i>_<metric>` for each GPU (empty
/// where the driver gave nothing). Floats are written so that they read back exactly.
pub fn history_csv(history: &[Sample]) -> String {
    let gpus = history.iter().map(|s| s.gpus.len()).max().unwrap_or(0);
    let mut out = MACHINE_COLUMNS.join(",");
    for g in 0..gpus {
        for c in GPU_COLUMNS {
            let _ = write!(out, ",gpu{g}_{c}");
        }
    }
    out.push('\n');
    for s in history {
        let _ = write!(
            out,
            "{:?},{:?},{},{},{:?},{}",
            s.elapsed_s,
            s.cpu_percent,
            s.memory_used_bytes,
            s.memory_total_bytes,
            s.process_cpu_percent,
            s.process_rss_bytes
        );
        for g in 0..gpus {
            let r = s.gpus.get(g);
            for v in [
                r.and_then(|r| r.utilization_percent),
                r.and_then(|r| r.memory_used_percent),
                r.and_then(|r| r.temperature_c),
                r.and_then(|r| r.power_w),
            ] {
                out.push(',');
                if let Some(v) = v {
                    let _ = write!(out, "{v:?}");
                }
            }
        }
        out.push('\n');
    }
    out
}

/// Reads what [`history_csv`] wrote.
pub fn parse_history_csv(text: &str) -> Result<Vec<Sample>, MonitorError> {
    let mut lines = text.lines().enumerate();
    let bad = |line: usize, reason: String| MonitorError::Csv { line: line + 1, reason };
    let Some((_, header)) = lines.next() else { return Err(bad(0, "the file is empty".into())) };
    let columns: Vec<&str> = header.split(',').collect();
    let gpus = columns.len().saturating_sub(MACHINE_COLUMNS.len()) / GPU_COLUMNS.len();
    let expected: Vec<String> = MACHINE_COLUMNS
        .iter()
        .map(|c| (*c).to_owned())
        .chain((0..gpus).flat_map(|g| GPU_COLUMNS.iter().map(move |c| format!("gpu{g}_{c}"))))
        .collect();
    if columns != expected {
        return Err(bad(0, format!("expected the columns {}", expected.join(","))));
    }
    lines
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, line)| {
            let fields: Vec<&str> = line.split(',').collect();
            if fields.len() != columns.len() {
                return Err(bad(i, format!("{} fields, expected {}", fields.len(), columns.len())));
            }
            let float = |k: usize| fields[k].parse::<f64>().map_err(|e| bad(i, format!("{}: {e}", columns[k])));
            let int = |k: usize| fields[k].parse::<u64>().map_err(|e| bad(i, format!("{}: {e}", columns[k])));
            let optional = |k: usize| if fields[k].is_empty() { Ok(None) } else { float(k).map(Some) };
            let gpus = (0..gpus)
                .map(|g| {
                    let k = MACHINE_COLUMNS.len() + g * GPU_COLUMNS.len();
                    Ok(GpuReading {
                        utilization_percent: optional(k)?,
                        memory_used_percent: optional(k + 1)?,
                        temperature_c: optional(k + 2)?,
                        power_w: optional(k + 3)?,
                    })
                })
                .collect::<Result<Vec<_>, MonitorError>>()?;
            Ok(Sample {
                elapsed_s: float(0)?,
                cpu_percent: float(1)?,
                memory_used_bytes: int(2)?,
                memory_total_bytes: int(3)?,
                process_cpu_percent: float(4)?,
                process_rss_bytes: int(5)?,
                gpus,
            })
        })
        .collect()
}

/// Mean and max of each metric of a history (per GPU for the GPUs' ones), as a summary
/// holds them (serde, both ways); a metric without a sample is null.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineSummary {
    pub samples: u64,
    pub duration_s: f64,
    /// Whether NVML saw GPUs, in words.
    pub gpu_status: String,
    pub cpu_percent: Option<MeanMax>,
    pub memory_used_bytes: Option<MeanMax>,
    pub process_cpu_percent: Option<MeanMax>,
    pub process_rss_bytes: Option<MeanMax>,
    /// By `gpu0`, `gpu1`, ….
    pub gpus: BTreeMap<String, GpuSummary>,
}

/// One GPU's name and metrics over a history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSummary {
    pub name: String,
    pub utilization_percent: Option<MeanMax>,
    pub memory_used_percent: Option<MeanMax>,
    pub temperature_c: Option<MeanMax>,
    pub power_w: Option<MeanMax>,
}

/// A metric's mean and max over the samples that have it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanMax {
    pub mean: f64,
    pub max: f64,
}

impl MeanMax {
    fn of(values: &[f64]) -> Option<Self> {
        (!values.is_empty()).then(|| Self {
            mean: values.iter().sum::<f64>() / values.len() as f64,
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// The [`MachineSummary`] of `history`, its GPUs named by `gpu_names`.
pub fn machine_summary(history: &[Sample], gpu_names: &[String], gpu_status: &str) -> MachineSummary {
    let of = |f: &dyn Fn(&Sample) -> f64| MeanMax::of(&history.iter().map(f).collect::<Vec<_>>());
    let gpus = history.iter().map(|s| s.gpus.len()).max().unwrap_or(0);
    let gpus = (0..gpus)
        .map(|g| {
            let of = |f: &dyn Fn(&GpuReading) -> Option<f64>| {
                MeanMax::of(&history.iter().filter_map(|s| s.gpus.get(g).and_then(f)).collect::<Vec<_>>())
            };
            let summary = GpuSummary {
                name: gpu_names.get(g).cloned().unwrap_or_else(|| "unknown".into()),
                utilization_percent: of(&|r| r.utilization_percent),
                memory_used_percent: of(&|r| r.memory_used_percent),
                temperature_c: of(&|r| r.temperature_c),
                power_w: of(&|r| r.power_w),
            };
            (format!("gpu{g}"), summary)
        })
        .collect();
    MachineSummary {
        samples: history.len() as u64,
        duration_s: history.last().map_or(0.0, |s| s.elapsed_s),
        gpu_status: gpu_status.to_owned(),
        cpu_percent: of(&|s| s.cpu_percent),
        memory_used_bytes: of(&|s| s.memory_used_bytes as f64),
        process_cpu_percent: of(&|s| s.process_cpu_percent),
        process_rss_bytes: of(&|s| s.process_rss_bytes as f64),
        gpus,
    }
}

/// One line per sample for a terminal: `12.5 s  cpu 48.0 %  mem 5.1/23.4 GiB  process
/// 97.0 % of a core, 120 MB  gpu0 87 % busy, 41 % mem, 63 °C, 250 W`.
pub fn sample_line(s: &Sample) -> String {
    let mut line = format!(
        "{:7.1} s  cpu {:5.1} %  mem {:.1}/{:.1} GiB  process {:5.1} % of a core, {} MB",
        s.elapsed_s,
        s.cpu_percent,
        s.memory_used_bytes as f64 / GIB,
        s.memory_total_bytes as f64 / GIB,
        s.process_cpu_percent,
        s.process_rss_bytes / 1_000_000
    );
    let show = |v: Option<f64>, unit: &str| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}{unit}"));
    for (g, r) in s.gpus.iter().enumerate() {
        let _ = write!(
            line,
            "  gpu{g} {} busy, {} mem, {}, {}",
            show(r.utilization_percent, " %"),
            show(r.memory_used_percent, " %"),
            show(r.temperature_c, " °C"),
            show(r.power_w, " W")
        );
    }
    line
}

/// Each metric over time as an SVG: one panel per family (CPU %, memory; with GPUs also
/// their utilization %, memory %, temperature and power), `cores` scaling this process's
/// CPU to a share of the machine.
pub fn plot_svg(history: &[Sample], gpu_names: &[String], cores: usize, title: &str) -> Result<String, MonitorError> {
    type Series = (String, Vec<(f64, f64)>);
    let gpus = history.iter().map(|s| s.gpus.len()).max().unwrap_or(0);
    let machine =
        |f: &dyn Fn(&Sample) -> f64| -> Vec<(f64, f64)> { history.iter().map(|s| (s.elapsed_s, f(s))).collect() };
    let per_gpu = |f: &dyn Fn(&GpuReading) -> Option<f64>| -> Vec<Series> {
        (0..gpus)
            .map(|g| {
                let name = gpu_names.get(g).map_or_else(|| format!("gpu{g}"), |n| format!("gpu{g} {n}"));
                (name, history.iter().filter_map(|s| s.gpus.get(g).and_then(f).map(|v| (s.elapsed_s, v))).collect())
            })
            .collect()
    };
    let mut panels: Vec<(&str, Vec<Series>)> = vec![
        (
            "CPU, % of the machine",
            vec![
                ("machine".into(), machine(&|s| s.cpu_percent)),
                ("this process".into(), machine(&|s| s.process_cpu_percent / cores.max(1) as f64)),
            ],
        ),
        (
            "memory, GiB",
            vec![
                ("machine used".into(), machine(&|s| s.memory_used_bytes as f64 / GIB)),
                ("this process (RSS)".into(), machine(&|s| s.process_rss_bytes as f64 / GIB)),
            ],
        ),
    ];
    if gpus > 0 {
        panels.push(("GPU utilization, %", per_gpu(&|r| r.utilization_percent)));
        panels.push(("GPU memory used, %", per_gpu(&|r| r.memory_used_percent)));
        panels.push(("GPU temperature, °C", per_gpu(&|r| r.temperature_c)));
        panels.push(("GPU power, W", per_gpu(&|r| r.power_w)));
    }
    let end = history.last().map_or(1.0, |s| s.elapsed_s).max(1e-3);
    let mut svg = String::new();
    {
        let height = 60 + 220 * panels.len() as u32;
        let root = SVGBackend::with_string(&mut svg, (960, height)).into_drawing_area();
        let draw = |e: DrawingAreaErrorKind<_>| MonitorError::Plot(e.to_string());
        root.fill(&WHITE).map_err(draw)?;
        let root = root.titled(title, ("sans-serif", 20)).map_err(draw)?;
        let areas = root.split_evenly((panels.len(), 1));
        for ((caption, series), area) in panels.iter().zip(&areas) {
            let top = series.iter().flat_map(|(_, p)| p.iter().map(|&(_, v)| v)).fold(0.0f64, f64::max);
            let top = if caption.contains('%') { top.max(100.0) } else { (top * 1.1).max(1e-3) };
            let mut chart = ChartBuilder::on(area)
                .caption(*caption, ("sans-serif", 15))
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(56)
                .build_cartesian_2d(0.0..end, 0.0..top)
                .map_err(draw)?;
            chart.configure_mesh().x_desc("seconds").max_light_lines(2).draw().map_err(draw)?;
            for (k, (name, points)) in series.iter().enumerate() {
                let colour = Palette99::pick(k).to_rgba();
                chart
                    .draw_series(LineSeries::new(points.iter().copied(), colour.stroke_width(2)))
                    .map_err(draw)?
                    .label(name.as_str())
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour.stroke_width(2)));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(draw)?;
        }
        root.present().map_err(draw)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, gpus: usize) -> Sample {
        Sample {
            elapsed_s: t,
            cpu_percent: 12.345_678_9 + t,
            memory_used_bytes: 5_000_000_000 + t as u64,
            memory_total_bytes: 25_000_000_000,
            process_cpu_percent: 0.1 + t / 3.0,
            process_rss_bytes: 40_000_000,
            gpus: (0..gpus)
                .map(|g| GpuReading {
                    utilization_percent: Some(87.0 + g as f64),
                    memory_used_percent: Some(1.0 / 3.0),
                    temperature_c: (g == 0).then_some(63.0),
                    power_w: Some(251.375),
                })
                .collect(),
        }
    }

    #[test]
    fn csv_round_trips_exactly_with_and_without_gpus() {
        for gpus in [0, 2] {
            let history: Vec<Sample> = (1..=5).map(|k| sample(k as f64 * 0.1, gpus)).collect();
            let text = history_csv(&history);
            assert_eq!(parse_history_csv(&text).unwrap(), history, "{text}");
            assert_eq!(text.lines().count(), 6);
        }
        let header = history_csv(&[sample(0.5, 1)]).lines().next().unwrap().to_owned();
        assert!(header.ends_with("gpu0_utilization_percent,gpu0_memory_used_percent,gpu0_temperature_c,gpu0_power_w"));
        let err = parse_history_csv("elapsed_s,cpu\n1,2\n").unwrap_err();
        assert!(err.to_string().contains("line 1: expected the columns elapsed_s,cpu_percent"), "{err}");
        let err = parse_history_csv(&format!("{}\n0.5,x,1,2,3,4\n", MACHINE_COLUMNS.join(","))).unwrap_err();
        assert!(err.to_string().contains("line 2: cpu_percent"), "{err}");
    }

    #[test]
    fn summary_has_mean_and_max_per_metric_and_gpu() {
        let history: Vec<Sample> = (1..=4).map(|k| sample(k as f64, 1)).collect();
        let s = machine_summary(&history, &["NVIDIA H100".into()], "NVML: 1 GPU");
        assert_eq!(s.samples, 4);
        assert_eq!(s.cpu_percent.unwrap().mean, 12.345_678_9 + 2.5);
        assert_eq!(s.cpu_percent.unwrap().max, 12.345_678_9 + 4.0);
        assert_eq!(s.gpus["gpu0"].name, "NVIDIA H100");
        assert_eq!(s.gpus["gpu0"].power_w.unwrap().max, 251.375);
        let json = serde_json::to_value(machine_summary(&[], &[], "none")).unwrap();
        assert!(json["cpu_percent"].is_null() && json["gpus"].as_object().unwrap().is_empty());
    }

    #[test]
    fn the_plot_has_a_panel_per_family() {
        let svg = plot_svg(&(1..=6).map(|k| sample(k as f64, 0)).collect::<Vec<_>>(), &[], 2, "t").unwrap();
        assert!(svg.contains("CPU, % of the machine") && svg.contains("memory, GiB"));
        assert!(!svg.contains("GPU power"));
        let svg = plot_svg(&(1..=6).map(|k| sample(k as f64, 2)).collect::<Vec<_>>(), &["A".into()], 2, "t").unwrap();
        for panel in ["GPU utilization, %", "GPU memory used, %", "GPU temperature, °C", "GPU power, W", "gpu0 A"] {
            assert!(svg.contains(panel), "{panel}");
        }
    }
}
