//! What the commands print beyond their own lines: the progress bar, counts, percentages
//! and numbers as the tables show them, the top-combos table and where the summary went.

use anyhow::Result;
use indicatif::{HumanCount, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;
use threadx_backtest::{Metrics, Strategy};
use threadx_dispatch::thousands;
use threadx_sweep::{Preparation, Row, SweepSpec, edge_note, grid_edges};

/// Writes a message the user reads: to stdout, or to stderr when an output is stdout
/// ([`crate::outputs::MESSAGES_TO_STDERR`]), so that its data stays whole.
pub fn message(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    if crate::outputs::MESSAGES_TO_STDERR.load(std::sync::atomic::Ordering::Relaxed) {
        std::io::stderr().lock().write_all(text.as_bytes())
    } else {
        std::io::stdout().lock().write_all(text.as_bytes())
    }
}

pub fn progress_bar(total: u64, quiet: bool, unit: &str) -> ProgressBar {
    let target = if quiet || !std::io::stderr().is_terminal() {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    let template = format!("{{bar:40}} {{human_pos}}/{{human_len}} {unit} · {{rate}} · ETA {{eta}}{{msg}}");
    let style = ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar()).with_key(
        "rate",
        |state: &ProgressState, w: &mut dyn std::fmt::Write| {
            let _ = write!(w, "{}/s", HumanCount(state.per_sec().round() as u64));
        },
    );
    bar.set_style(style);
    bar
}

/// `1 chunk`, `12,000 combos`.
pub fn count(n: u64, noun: &str) -> String {
    format!("{} {noun}{}", thousands(n), if n == 1 { "" } else { "s" })
}

/// A fraction as a percentage with two decimals; `-` for NaN.
pub fn pct(v: f64) -> String {
    if v.is_nan() { "-".into() } else { format!("{:.2}%", v * 100.0) }
}

pub fn num(v: f64) -> String {
    if v.is_nan() { "-".into() } else { format!("{v:.4}") }
}

/// The best rows as a table; a ranking metric that is not among its columns (`by`, or
/// `by, smallest first`) gets one more, last.
pub fn top_table(strategy: &Strategy, rows: &[Row], by: &str) -> String {
    use std::fmt::Write;
    let metric = by.split(',').next().unwrap_or(by);
    let extra = (!Metrics::HEADLINE.contains(&metric)).then_some(metric);
    let mut out = format!("top {} by {by}:\n", rows.len());
    let _ = write!(
        out,
        "  {:>4} {:>9}  {:<52} {:>10} {:>7} {:>8} {:>10} {:>10} {:>10} {:>9}",
        "rank", "combo", "parameters", "return", "trades", "win", "max dd", "sharpe/bar", "sharpe/yr", "exposure"
    );
    let _ = writeln!(out, "{}", extra.map_or(String::new(), |m| format!(" {m:>13}")));
    for (i, r) in rows.iter().enumerate() {
        let m: &Metrics = &r.metrics;
        let _ = write!(
            out,
            "  {:>4} {:>9}  {:<52} {:>10} {:>7} {:>8} {:>10} {:>10} {:>10} {:>9}",
            i + 1,
            r.combo,
            strategy.describe(&r.values),
            pct(m.total_return),
            m.trades,
            pct(m.win_rate),
            pct(m.max_drawdown),
            num(m.sharpe),
            num(m.sharpe_annual),
            pct(m.exposure)
        );
        let value = extra.and_then(|name| Some((m.get(name)?, Metrics::is_fraction(name))));
        let value = value.map(|(v, fraction)| if fraction { pct(v) } else { num(v) });
        let _ = writeln!(out, "{}", value.map_or(String::new(), |v| format!(" {v:>13}")));
    }
    out
}

/// Where the summary went, or why there is none (results sent to a device or FIFO).
pub fn print_summary_path(summary: Option<&Path>, out: &Path) -> Result<()> {
    match summary {
        Some(path) => outln!("wrote the summary to {}", path.display()),
        None => outln!("no summary: {} is not a regular file, so nothing is written beside it", out.display()),
    }
    Ok(())
}

/// The line that says the best row sits on the grid's edge, when it does.
pub fn print_edge(spec: &SweepSpec, best: &[Row]) -> Result<()> {
    if let Some(note) = best.first().and_then(|row| edge_note(&grid_edges(spec.strategy(), spec.axes(), row))) {
        outln!("{note}");
    }
    Ok(())
}

/// The start of a run's `time:` line: `load 0.05s, indicators + signal book 0.51s (50
/// indicator series)`.
pub fn preparation_time(load_s: f64, prep: &Preparation) -> String {
    format!(
        "load {load_s:.2}s, indicators + signal book {:.2}s ({} indicator series)",
        prep.indicators_s + prep.book_s,
        prep.series
    )
}
