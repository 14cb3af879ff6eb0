//! The two plots of the overfitting statistics (plotters, SVG): the histogram of CSCV's
//! logits, and each split's in-sample best's out-of-sample against in-sample Sharpe ratio
//! with the least-squares line.
//!
//! The second plot's dots (one per split: 12,870 on the default job) are written here, in
//! one group, where plotters leaves a marker: plotters formats each circle's attributes one
//! by one, which cost 6 ms of the default job's `--overfitting` (docs/performance.md).

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

/// The plots' tick labels and axis names in plotters' points (about 14 px): as large as the
/// report's own charts' (the SVG is drawn at 960 px and shown about that wide).
const LABELS: (&str, u32) = ("sans-serif", 17);
const AXIS_NAMES: (&str, u32) = ("sans-serif", 18);

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
            .label_style(LABELS)
            .axis_desc_style(AXIS_NAMES)
            .x_label_formatter(&|v| format!("{v:.2}"))
            // Counts are whole: `1400`, not plotters' `1400.0`.
            .y_label_formatter(&|v| format!("{v:.0}"))
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
    // About 36 bytes a dot.
    let mut dots = String::with_capacity(40 * report.is_sharpe.len());
    let svg = svg("out-of-sample plot", |root| {
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
            .label_style(LABELS)
            .axis_desc_style(AXIS_NAMES)
            .x_label_formatter(&|v| format!("{v:.3}"))
            .y_label_formatter(&|v| format!("{v:.3}"))
            .draw()?;
        let points = report.is_sharpe.iter().zip(&report.oos_sharpe).filter(|(a, b)| a.is_finite() && b.is_finite());
        let mut number = itoa::Buffer::new();
        for (&a, &b) in points {
            let (x, y) = chart.backend_coord(&(a, b));
            dots.push_str("<circle cx=\"");
            dots.push_str(number.format(x));
            dots.push_str("\" cy=\"");
            dots.push_str(number.format(y));
            dots.push_str(DOT_END);
        }
        // Above the mesh, below the line and the legend.
        root.draw(&Text::new(DOTS_MARKER, (0, 0), ("sans-serif", 1)))?;
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
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
        chart
            .configure_series_labels()
            .label_font(LABELS)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    })?;
    let group = format!("<g fill=\"{}\" fill-opacity=\"{DOT_OPACITY}\">\n{dots}</g>\n", hex(DOT));
    replace_marker(&svg, &group)
}

/// The text plotters draws where the dots go, and the dots' look (each as plotters drew
/// it: a filled circle of 2 pixels at half opacity, one over another).
const DOTS_MARKER: &str = "threadx-dots";
const DOT_END: &str = "\" r=\"2\"/>\n";
const DOT_OPACITY: f64 = 0.5;

fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// `svg` with the text element that holds [`DOTS_MARKER`] replaced by `group`: the last
/// one, since only the title (escaped, and drawn before it) holds a user's words.
fn replace_marker(svg: &str, group: &str) -> Result<String, SweepError> {
    let missing = || SweepError::Results("drawing the out-of-sample plot: plotters left no place for the dots".into());
    let tail = format!("\n{DOTS_MARKER}\n</text>\n");
    let at = svg.rfind(&tail).ok_or_else(missing)?;
    let start = svg[..at].rfind("<text").ok_or_else(missing)?;
    // Joined, not `replace_range`, which copies its bytes one at a time.
    Ok([&svg[..start], group, &svg[at + tail.len()..]].concat())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(is_sharpe: Vec<f64>, oos_sharpe: Vec<f64>) -> PboReport {
        let k = is_sharpe.len();
        PboReport {
            pbo: 0.5,
            prob_oos_loss: 0.25,
            slope: -0.5,
            intercept: 0.01,
            logits: (0..k).map(|i| i as f64 - 2.0).collect(),
            best: vec![0; k],
            is_sharpe,
            oos_sharpe,
            exhaustive: true,
            combos: 10,
        }
    }

    /// The (cx, cy) of every r = 2 dot, in order.
    fn dots(svg: &str) -> Vec<(i32, i32)> {
        let number = |s: &str, key: &str| {
            let from = s.find(key).unwrap() + key.len();
            s[from..].split('"').next().unwrap().parse().unwrap()
        };
        svg.lines()
            .filter(|l| l.starts_with("<circle") && l.contains("r=\"2\""))
            .map(|l| (number(l, "cx=\""), number(l, "cy=\"")))
            .collect()
    }

    #[test]
    fn each_split_with_numbers_is_one_dot_where_its_sharpe_ratios_put_it() {
        let is = vec![0.01, 0.03, f64::NAN, 0.02, 0.03, 0.05];
        let oos = vec![0.0, -0.01, 0.02, f64::NAN, 0.01, 0.04];
        // A title that holds the marker stays as it is.
        let svg = oos_vs_is_svg(&report(is, oos), &format!("{DOTS_MARKER}\n</text>\n")).unwrap();
        assert_eq!(svg.matches(DOTS_MARKER).count(), 1, "{svg}");
        assert!(svg.contains(&format!("\n{DOTS_MARKER}\n&lt;/text&gt;\n")), "{svg}");
        assert!(svg.contains("<g fill=\"#5A5A5A\" fill-opacity=\"0.5\">"), "{svg}");
        // The legend's dot and line are still drawn.
        assert!(svg.contains("in-sample best") && svg.contains("least squares: slope -0.50"));
        let got = dots(&svg);
        assert_eq!(got.len(), 4, "the two splits with a NaN have no dot");
        let [(x0, y0), (x1, y1), (x4, y4), (x5, y5)] = got[..] else { unreachable!() };
        // Right with the in-sample ratio, up with the out-of-sample one.
        assert!(x0 < x1 && x1 == x4 && x4 < x5, "{got:?}");
        assert!(y1 > y0 && y0 > y4 && y4 > y5, "{got:?}");
        // Inside the 960 × 540 picture, above the mesh (whose lines come first) and below
        // the least-squares line.
        assert!(got.iter().all(|&(x, y)| (0..960).contains(&x) && (0..540).contains(&y)));
        let (group, line) = (svg.find("<g fill").unwrap(), svg.find("stroke=\"#D62728\"").unwrap());
        assert!(svg.find("<line").unwrap() < group && group < line);
    }

    #[test]
    fn a_report_with_no_numbers_draws_no_dots() {
        let svg = oos_vs_is_svg(&report(vec![f64::NAN; 3], vec![0.1, f64::NAN, 0.2]), "t").unwrap();
        assert!(dots(&svg).is_empty() && !svg.contains(DOTS_MARKER));
    }
}
