//! The best-so-far plot of a search: every feasible trial's value as a dot, and the best
//! value found by each trial as a step line.

use crate::error::SweepError;
use crate::search::{SearchOptions, SearchReport};
use plotters::coord::Shift;
use plotters::prelude::*;

/// The dots of the trials and the best-so-far line.
const TRIAL: RGBColor = RGBColor(170, 170, 170);
const BEST: RGBColor = RGBColor(31, 119, 180);

/// The plot as an SVG document, titled `title`.
pub fn best_so_far_svg(report: &SearchReport, options: &SearchOptions, title: &str) -> Result<String, SweepError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 540)).into_drawing_area();
        draw(&root, report, options, title)
            .map_err(|e| SweepError::Results(format!("drawing the best-so-far plot: {e}")))?;
        root.present().map_err(|e| SweepError::Results(format!("drawing the best-so-far plot: {e}")))?;
    }
    Ok(svg)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    report: &SearchReport,
    options: &SearchOptions,
    title: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let values: Vec<(f64, f64)> =
        report.trials.iter().enumerate().filter_map(|(t, trial)| trial.value.map(|v| ((t + 1) as f64, v))).collect();
    let (lo, hi) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &(_, v)| (lo.min(v), hi.max(v)));
    let (lo, hi) = match (lo.is_finite(), lo < hi) {
        (false, _) => (0.0, 1.0),
        (true, false) => (lo - 0.5, hi + 0.5),
        (true, true) => (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo)),
    };
    let trials = report.trials.len().max(1) as f64;
    let objective = &options.objective;
    let direction = if objective.minimize() { "minimised" } else { "maximised" };
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..trials + 1.0, lo..hi)?;
    chart.configure_mesh().x_desc("trial").y_desc(format!("{} ({direction})", objective.metric())).draw()?;
    chart
        .draw_series(values.iter().map(|&(t, v)| Circle::new((t, v), 2, TRIAL.filled())))?
        .label("a trial (feasible)")
        .legend(|(x, y)| Circle::new((x + 10, y), 3, TRIAL.filled()));
    // A step line: the best holds until the trial that beats it.
    let mut steps: Vec<(f64, f64)> = Vec::new();
    for (t, &best) in report.best_so_far.iter().enumerate().filter(|(_, v)| !v.is_nan()) {
        if let Some(&(_, previous)) = steps.last() {
            steps.push(((t + 1) as f64, previous));
        }
        steps.push(((t + 1) as f64, best));
    }
    chart
        .draw_series(LineSeries::new(steps, BEST.stroke_width(2)))?
        .label("best so far")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BEST.stroke_width(2)));
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    Ok(())
}
