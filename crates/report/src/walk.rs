//! A walk-forward's sections, from its typed summary: each window's winner and what it did
//! out of sample (with the window's DSR), and the out-of-sample equity, the test windows
//! back to back, with their totals.

use crate::charts::{Axis, Unit, bars, lines, thin};
use crate::page::{Cell, Report, facts, metric_text, note, num, pct, table};
use threadx_backtest::Metrics;
use threadx_sweep::{Summary, SweepSpec};

/// A walk-forward's test windows back to back: their bars' times and the equity carried
/// from one window to the next (start = 1), as `WalkForwardReport::out_of_sample_curve`
/// gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfSampleCurve {
    pub times: Vec<i64>,
    pub equity: Vec<f64>,
}

/// The out-of-sample metrics each window's row shows (the others are in `--out`), with
/// their short headers.
const SHOWN: [(&str, &str); 5] = [
    ("total_return", "oos return"),
    ("sharpe_annual", "oos sharpe/yr"),
    ("max_drawdown", "oos max dd"),
    ("trades", "oos trades"),
    ("win_rate", "oos win"),
];

/// Adds the walk-forward's sections when `summary` is a walk-forward's.
pub(crate) fn add_walk_forward(
    report: &mut Report,
    spec: &SweepSpec,
    summary: &Summary,
    curve: Option<&OutOfSampleCurve>,
) {
    let Some(windows) = &summary.windows else { return };
    let by = summary.by.as_deref().unwrap_or("sharpe");
    add_out_of_sample(report, summary.out_of_sample_overall.as_ref(), curve);
    let schema = spec.strategy().schema();
    let mut headers: Vec<String> = ["#", "test from", "test to", "combo"].map(String::from).to_vec();
    headers.extend(schema.iter().map(|p| p.name.clone()));
    headers.push(format!("is {by}"));
    headers.extend(SHOWN.iter().map(|(_, header)| (*header).to_owned()));
    headers.push("oos DSR".into());
    let rows: Vec<Vec<Cell>> = windows
        .iter()
        .enumerate()
        .map(|(w, window)| {
            let mut row = vec![
                Cell::number(w.to_string(), w as f64),
                Cell::text(short_time(&window.test[0])),
                Cell::text(short_time(&window.test[1])),
                Cell::number(window.best.combo.to_string(), window.best.combo as f64),
            ];
            row.extend(schema.iter().map(|p| match window.best.params.get(&p.name) {
                Some(v) => Cell::number(v.to_string(), v.as_f64().unwrap_or(f64::NAN)),
                None => Cell::text("-"),
            }));
            let in_sample = window.best.metrics.get(by).unwrap_or(f64::NAN);
            row.push(Cell::number(metric_text(by, in_sample), in_sample));
            for (m, _) in SHOWN {
                let v = window.out_of_sample.get(m).unwrap_or(f64::NAN);
                row.push(Cell::number(metric_text(m, v), v));
            }
            let dsr = window.out_of_sample_dsr.dsr;
            row.push(Cell::number(num(dsr, 3), dsr));
            row
        })
        .collect();
    let returns: Vec<f64> = windows.iter().map(|w| w.out_of_sample.total_return * 100.0).collect();
    let mut html = String::new();
    if !returns.is_empty() {
        let xs: Vec<f64> = (0..returns.len()).map(|w| w as f64).collect();
        html.push_str(&report.chart(&bars(
            "Out-of-sample return of each window's in-sample best",
            &Axis::new("window", Unit::Count),
            &Axis::new("out-of-sample return (%)", Unit::Number),
            &xs,
            &returns,
            "#31549B",
        )));
    }
    html.push_str(&table(&headers, &rows, true));
    if summary.minimize == Some(true) {
        html.push_str(&note(&format!("Each train window's winner is its smallest {by} (--minimize).")));
    }
    if let Some(rules) = &summary.constraints {
        html.push_str(&note(&format!(
            "Each train window's winner is chosen among its combos that keep {} (--constraint).",
            rules.join(" and ")
        )));
    }
    html.push_str(&note(
        "is: in sample (the train window); oos: out of sample (the test window). Each window's DSR deflates its \
         out-of-sample Sharpe ratio by the combos its train window chose among (docs/overfitting.md). Every \
         metric of every window is in the results file.",
    ));
    report.section("walk-forward", "Walk-forward windows", &html);
}

/// `2024-03-24T07:45:00Z` as `2024-03-24 07:45` (seconds and the zone only where they say
/// something).
fn short_time(time: &str) -> String {
    let trimmed = time.strip_suffix(":00Z").unwrap_or(time);
    trimmed.replacen('T', " ", 1)
}

/// The test windows back to back: their totals and, when given, their equity.
fn add_out_of_sample(report: &mut Report, overall: Option<&Metrics>, curve: Option<&OutOfSampleCurve>) {
    let mut html = String::new();
    if let Some(m) = overall {
        html.push_str(&facts(&[
            ("Total return", pct(m.total_return)),
            ("Sharpe (annual)", num(m.sharpe_annual, 2)),
            ("Max drawdown", pct(m.max_drawdown)),
            ("Trades", format!("{} ({} closed), {} won", m.trades, m.closed_trades, pct(m.win_rate))),
            ("Exposure", pct(m.exposure)),
        ]));
    }
    if let Some(curve) = curve.filter(|c| !c.equity.is_empty()) {
        let keep = thin(&curve.equity, &curve.equity);
        // Overlapping test windows (a step shorter than the test) repeat times: then bars.
        let timed = curve.times.len() == curve.equity.len() && curve.times.windows(2).all(|t| t[0] < t[1]);
        let (x, xs): (Axis, Vec<f64>) = match timed {
            true => (Axis::time("time (UTC)"), keep.iter().map(|&i| curve.times[i] as f64 / 1000.0).collect()),
            false => (Axis::new("out-of-sample bar", Unit::Count), keep.iter().map(|&i| i as f64).collect()),
        };
        html.push_str(&report.chart(&lines(
            "Out-of-sample equity",
            &x,
            &Axis::new("equity (start = 1)", Unit::Number),
            &xs,
            &[("out of sample", "#31549B", keep.iter().map(|&i| curve.equity[i]).collect())],
            None,
            280,
        )));
    }
    if html.is_empty() {
        return;
    }
    report.section("out-of-sample", "Out-of-sample equity: the test windows back to back", &html);
}
