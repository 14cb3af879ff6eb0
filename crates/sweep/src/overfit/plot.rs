//! The two plots of the overfitting statistics (plotters, SVG): the histogram of CSCV's
//! logits, and each split's in-sample best's out-of-sample against in-sample Sharpe ratio
//! with the least-squares line.

use crate::error::SweepError;
use plotters::coord::Shift;
use plotters::prelude::*;
use threadx_stats::PboReport;

const BAR: RGBColor = RGBColor(31, 119, 180);
const OVERFIT: RGBColor = RGBColor(214, 39, 40);
const DOT: RGBColor = RGBColor(90, 90, 90);

fn svg(
    what: &str,
    draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), DrawingAreaErrorKind<std::io::Error>>,
) -> Result<String, SweepError> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (960, 540)).into_drawing_area();
        draw(&root).map_err(|e| SweepError::Results(format!("drawing the {what}: {e}")))?;
        root.present().map_err(|e| SweepError::Results(format!("drawing the {what}: {e}")))?;
    }
    Ok(text)
}

/// The range of `values` (finite ones), padded; (−1, 1) when there are none.
fn span(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) =
        values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    if !lo.is_finite() {
        (-1.0, 1.0)
    } else if lo == hi {
        (lo - 0.5, hi + 0.5)
    } else {
        (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    }
}

/// The logits' histogram: bars at or below 0 (the IS best at or below the OOS median)
/// drawn in red, above in blue.
pub fn logit_histogram_svg(report: &PboReport, title: &str) -> Result<String, SweepError> {
    let (lo, hi) = span(report.logits.iter().copied().chain([0.0]));
    let bins = 40usize;
    let width = (hi - lo) / bins as f64;
    let mut counts = vec![0usize; bins];
    for &l in &report.logits {
        counts[(((l - lo) / width) as usize).min(bins - 1)] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(1).max(1) as f64 * 1.1;
    svg("logit histogram", |root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(60)
            .build_cartesian_2d(lo..hi, 0.0..top)?;
        chart
            .configure_mesh()
            .x_desc("logit of the in-sample best's out-of-sample rank (≤ 0: at or below the median)")
            .y_desc("splits")
            .draw()?;
        chart.draw_series(counts.iter().enumerate().map(|(i, &c)| {
            let x0 = lo + i as f64 * width;
            let colour = if x0 + width / 2.0 <= 0.0 { OVERFIT } else { BAR };
            Rectangle::new([(x0, 0.0), (x0 + width, c as f64)], colour.mix(0.8).filled())
        }))?;
        chart.draw_series(LineSeries::new([(0.0, 0.0), (0.0, top)], BLACK.stroke_width(1)))?;
        Ok(())
    })
}

/// Out-of-sample against in-sample Sharpe ratio (per bar) of each split's in-sample best,
/// with the least-squares line.
pub fn oos_vs_is_svg(report: &PboReport, title: &str) -> Result<String, SweepError> {
    let (x0, x1) = span(report.is_sharpe.iter().copied());
    let (y0, y1) = span(report.oos_sharpe.iter().copied().chain([0.0]));
    svg("out-of-sample plot", |root| {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(x0..x1, y0..y1)?;
        chart
            .configure_mesh()
            .x_desc("in-sample Sharpe ratio of the split's best (per bar)")
            .y_desc("its out-of-sample Sharpe ratio (per bar)")
            .draw()?;
        let points = report.is_sharpe.iter().zip(&report.oos_sharpe).filter(|(a, b)| a.is_finite() && b.is_finite());
        chart
            .draw_series(points.map(|(&a, &b)| Circle::new((a, b), 2, DOT.mix(0.5).filled())))?
            .label("a split's in-sample best")
            .legend(|(x, y)| Circle::new((x + 10, y), 3, DOT.filled()));
        if report.slope.is_finite() {
            let line = [(x0, report.intercept + report.slope * x0), (x1, report.intercept + report.slope * x1)];
            chart
                .draw_series(LineSeries::new(line, OVERFIT.stroke_width(2)))?
                .label(format!("least squares: slope {:.2}", report.slope))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], OVERFIT.stroke_width(2)));
        }
        chart.draw_series(LineSeries::new([(x0, 0.0), (x1, 0.0)], BLACK.stroke_width(1)))?;
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        Ok(())
    })
}
