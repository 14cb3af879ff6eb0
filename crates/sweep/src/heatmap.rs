//! A metric over two parameters ([`Heatmap`], drawn as SVG with plotters): rows taken one
//! at a time in bounded memory, each cell the best of its combos by the leaderboard's
//! order (the same whatever order the rows come in).

use crate::error::SweepError;
use crate::leaderboard::{better_higher, metric_index, rank};
use crate::rows::Row;
use plotters::prelude::*;
use std::fmt::Write as _;
use threadx_backtest::{GridCursor, Metrics, ParamSpec, Strategy};
use threadx_profile_store::escape::markup;

/// A metric over two parameters: each cell holds the best value over every other
/// parameter, and the combo that reached it.
#[derive(Debug, Clone)]
pub struct Heatmap {
    strategy: Strategy,
    x: usize,
    y: usize,
    by: usize,
    x_values: Vec<f64>,
    y_values: Vec<f64>,
    /// The other parameters that take several values: each cell is the best over them.
    best_over: Vec<String>,
    /// Axis positions of the combos offered (a grid's over `axes`).
    cursor: GridCursor,
    /// Each cell's best (value × `sign`, combo): larger is better in this order.
    cells: Vec<(f64, u64)>,
    /// −1 when the run ranks smallest first (`--minimize`), else 1: the cells keep and the
    /// colours show the value times it, so the best is the largest and blue either way.
    sign: f64,
}

impl Heatmap {
    /// The most cells a heatmap draws (a 1,000 × 1,000 grid): beyond it no cell is visible
    /// and the memory would grow with the grid, not with the combos run.
    pub const MAX_CELLS: usize = 1_000_000;

    /// A heatmap of metric `by` over parameters `x` and `y` (names; `None` picks the first
    /// two parameters that take more than one value). Refused past [`Self::MAX_CELLS`].
    pub fn new(
        strategy: Strategy,
        axes: &[Vec<f64>],
        x: Option<&str>,
        y: Option<&str>,
        by: &str,
    ) -> Result<Self, SweepError> {
        let varying: Vec<usize> = (0..axes.len()).filter(|&i| axes[i].len() > 1).collect();
        let pick = |name: Option<&str>, fallback: Option<&usize>| -> Result<usize, SweepError> {
            match name {
                Some(name) => Ok(strategy.param_index(name)?),
                None => fallback
                    .copied()
                    .ok_or_else(|| SweepError::Spec("a heatmap needs two parameters that take several values".into())),
            }
        };
        let x = pick(x, varying.first())?;
        let y = pick(y, varying.iter().find(|&&i| i != x))?;
        if x == y {
            return Err(SweepError::Spec("the heatmap's two parameters must differ".into()));
        }
        let cells = axes[x].len().saturating_mul(axes[y].len());
        if cells > Self::MAX_CELLS {
            let schema = strategy.schema();
            return Err(SweepError::Spec(format!(
                "a heatmap of {} × {} would have {} × {} cells, more than the {} one picture shows; \
                 pick two parameters with fewer values (--heatmap-x, --heatmap-y)",
                schema[x].name,
                schema[y].name,
                axes[x].len(),
                axes[y].len(),
                Self::MAX_CELLS
            )));
        }
        let best_over = (0..axes.len())
            .filter(|&i| i != x && i != y && axes[i].len() > 1)
            .map(|i| strategy.schema()[i].name.clone())
            .collect();
        Ok(Self {
            strategy,
            best_over,
            x,
            y,
            by: metric_index(by)?,
            cursor: GridCursor::new(axes.iter().map(Vec::len)),
            cells: vec![(f64::NAN, u64::MAX); axes[x].len() * axes[y].len()],
            x_values: axes[x].clone(),
            y_values: axes[y].clone(),
            sign: 1.0,
        })
    }

    /// The heatmap of a run that ranks its metric smallest first when `minimize`.
    pub fn minimizing(self, minimize: bool) -> Self {
        Self { sign: if minimize { -1.0 } else { 1.0 }, ..self }
    }

    /// A kept value as the metric has it (−0 shown as 0).
    fn shown(&self, kept: f64) -> f64 {
        self.sign * kept + 0.0
    }

    /// Whether the metric has a better side here: a larger value's, or the smaller with
    /// `--minimize`.
    fn has_better(&self, metric: &str) -> bool {
        self.sign < 0.0 || better_higher(metric)
    }

    /// Takes a row of combo number `row.combo` of the grid over the heatmap's axes.
    pub fn offer(&mut self, row: &Row) {
        let index = self.cursor.index(row.combo);
        let (i, j) = (index[self.x], index[self.y]);
        let cell = &mut self.cells[j * self.x_values.len() + i];
        let key = (self.sign * row.metrics.at(self.by), row.combo);
        if rank(key, *cell).is_lt() {
            *cell = key;
        }
    }

    /// The legend: a vertical colour bar from the lowest value (bottom) to the highest
    /// (top), its ends (and 0 on a diverging scale) labelled, then the colour of cells
    /// without a value (and of cells not run, on a sampled sweep).
    fn draw_legend<DB: DrawingBackend>(
        &self,
        legend: &DrawingArea<DB, plotters::coord::Shift>,
        metric: &str,
        scale: &Scale,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let Scale { lo, hi } = *scale;
        let style = ("sans-serif", 12).into_font().color(&BLACK);
        legend.draw(&Text::new(metric_label(metric), (10, 14), style.clone()))?;
        if self.has_better(metric) {
            legend.draw(&Text::new("better: blue", (10, 28), style.clone()))?;
        }
        let (top, bottom) = (56, 600);
        let steps = 50;
        let at = |v: f64| bottom - ((v - lo) / (hi - lo) * f64::from(bottom - top)).round() as i32;
        for s in 0..steps {
            let v = lo + (hi - lo) * (s as f64 + 0.5) / steps as f64;
            let y0 = bottom - (s + 1) * (bottom - top) / steps;
            let y1 = bottom - s * (bottom - top) / steps;
            legend.draw(&Rectangle::new([(10, y0), (40, y1)], scale.colour(v).filled()))?;
        }
        let text = |v: f64| if v.is_finite() { format!("{:.4}", self.shown(v)) } else { "-".into() };
        let mut ticks = vec![(hi, top), (lo, bottom)];
        if scale.diverging() {
            ticks.push((0.0, at(0.0)));
        }
        for (v, y) in ticks {
            legend.draw(&Text::new(text(v), (46, y - 6), style.clone()))?;
        }
        legend.draw(&Rectangle::new([(10, bottom + 30), (40, bottom + 50)], scale.colour(f64::NAN).filled()))?;
        legend.draw(&Text::new("no value", (46, bottom + 34), style.clone()))?;
        legend.draw(&Text::new("(no trades)", (46, bottom + 48), style.clone()))?;
        if self.cells.iter().any(|c| c.1 == u64::MAX) {
            // A sampled sweep: cells no sampled combo fell in.
            legend.draw(&Rectangle::new([(10, bottom + 60), (40, bottom + 80)], NOT_RUN.filled()))?;
            legend.draw(&Rectangle::new([(10, bottom + 60), (40, bottom + 80)], BLACK.mix(0.3)))?;
            legend.draw(&Text::new("not run", (46, bottom + 64), style.clone()))?;
            legend.draw(&Text::new("(not sampled)", (46, bottom + 78), style))?;
        }
        Ok(())
    }

    /// How much the pair matters: the largest cell's value less the smallest's (0 without
    /// two cells with values). The report opens the pairs that matter most.
    pub fn spread(&self) -> f64 {
        let (lo, hi) = self.kept_range();
        if hi > lo { hi - lo } else { 0.0 }
    }

    /// The least and greatest kept cell values (∞ and −∞ without any).
    fn kept_range(&self) -> (f64, f64) {
        let finite = self.cells.iter().map(|c| c.0).filter(|v| v.is_finite());
        finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
    }

    /// The names of its two parameters, x then y.
    pub fn axes_names(&self) -> (&str, &str) {
        let schema = self.strategy.schema();
        (&schema[self.x].name, &schema[self.y].name)
    }

    /// The best value of cell (x position, y position); NaN where no combo had one.
    pub fn cell(&self, i: usize, j: usize) -> f64 {
        self.shown(self.cells[j * self.x_values.len() + i].0)
    }

    /// The heatmap as an SVG document: labelled axes (every k-th value on large grids),
    /// a colour bar (diverging around zero when the metric changes sign), and a legend
    /// entry for cells without a value.
    pub fn to_svg(&self) -> Result<String, SweepError> {
        let schema = self.strategy.schema();
        let (px, py): (&ParamSpec, &ParamSpec) = (&schema[self.x], &schema[self.y]);
        let metric = Metrics::EVERY[self.by];
        let (nx, ny) = (self.x_values.len(), self.y_values.len());
        let (lo, hi) = self.kept_range();
        let scale = Scale { lo, hi };
        let title = if self.best_over.is_empty() {
            format!("{} {metric} by {} and {}", self.strategy, px.name, py.name)
        } else {
            format!("{} {metric}: the best over {} in each cell", self.strategy, self.best_over.join(", "))
        };
        let (mut svg, mut cells) = (String::new(), String::new());
        {
            let root = SVGBackend::with_string(&mut svg, (960, 720)).into_drawing_area();
            let draw = |e: DrawingAreaErrorKind<_>| SweepError::Results(format!("drawing the heatmap: {e}"));
            root.fill(&WHITE).map_err(draw)?;
            let (plot, legend) = root.split_horizontally(840);
            let mut chart = ChartBuilder::on(&plot)
                .caption(title, ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(48)
                .y_label_area_size(64)
                // A discrete range a..b has the values a..=b: one segment per value.
                .build_cartesian_2d((0..nx as i32 - 1).into_segmented(), (0..ny as i32 - 1).into_segmented())
                .map_err(draw)?;
            // Segment centres are the labels: plotters picks every k-th so that at most
            // 20 fit, whatever the grid size.
            let label = |values: &[f64], spec: &ParamSpec, v: &SegmentValue<i32>| match v {
                SegmentValue::CenterOf(i) => values.get(*i as usize).map(|&v| spec.format(v)).unwrap_or_default(),
                _ => String::new(),
            };
            chart
                .configure_mesh()
                .disable_mesh()
                .x_desc(px.name.as_str())
                .y_desc(py.name.as_str())
                .x_labels(nx.min(20))
                .y_labels(ny.min(20))
                .x_label_formatter(&|v| label(&self.x_values, px, v))
                .y_label_formatter(&|v| label(&self.y_values, py, v))
                .draw()
                .map_err(draw)?;
            // The cells are written after plotters' drawing ([`Self::cell_rects`]). Where
            // some cells did not run (a sample, a search), one rectangle under the rest
            // says so for all of them: the picture grows with what ran, not the grid.
            let sampled = self.cells.iter().any(|c| c.1 == u64::MAX);
            if sampled {
                let (x0, y0) = chart.backend_coord(&(SegmentValue::Exact(0), SegmentValue::Exact(ny as i32)));
                let (x1, y1) = chart.backend_coord(&(SegmentValue::Exact(nx as i32), SegmentValue::Exact(0)));
                let RGBColor(r, g, b) = NOT_RUN;
                let _ = writeln!(
                    cells,
                    "<rect x=\"{x0}\" y=\"{y0}\" width=\"{}\" height=\"{}\" fill=\"#{r:02X}{g:02X}{b:02X}\">\
                     <title>not run (not sampled)</title></rect>",
                    x1 - x0,
                    y1 - y0
                );
            }
            let corners = |i: i32, j: i32| {
                let (x0, y0) = chart.backend_coord(&(SegmentValue::Exact(i), SegmentValue::Exact(j + 1)));
                let (x1, y1) = chart.backend_coord(&(SegmentValue::Exact(i + 1), SegmentValue::Exact(j)));
                (x0, y0, x1 - x0, y1 - y0)
            };
            cells.push_str(&self.cell_rects(&corners, &scale, sampled));
            self.draw_legend(&legend, metric, &scale).map_err(draw)?;
            root.present().map_err(draw)?;
        }
        let end = svg.rfind("</svg>").ok_or_else(|| SweepError::Results("drawing the heatmap: no SVG".into()))?;
        svg.insert_str(end, &cells);
        Ok(svg)
    }
}

impl Heatmap {
    /// Every cell as a rectangle at `corners(i, j)` (x, y, width, height) with a `<title>` a
    /// browser shows on hover: its two parameters, the value and the combo. The names and
    /// values are a rule file's text: escaped. Then the best cell outlined (a metric with a
    /// better side only), drawn last so that no neighbour covers its outline; it has no
    /// title of its own (the cell under it has).
    fn cell_rects(&self, corners: &dyn Fn(i32, i32) -> (i32, i32, i32, i32), scale: &Scale, sampled: bool) -> String {
        let schema = self.strategy.schema();
        let (px, py) = (&schema[self.x], &schema[self.y]);
        let metric = Metrics::EVERY[self.by];
        let nx = self.x_values.len();
        let mut rects = String::new();
        for (k, &(value, combo)) in self.cells.iter().enumerate() {
            let (i, j) = (k % nx, k / nx);
            if sampled && combo == u64::MAX {
                continue;
            }
            let (x, y, w, h) = corners(i as i32, j as i32);
            let RGBColor(r, g, b) = if combo == u64::MAX { NOT_RUN } else { scale.colour(value) };
            let what = match combo {
                u64::MAX => "not run".to_owned(),
                _ if value.is_nan() => format!("no value (combo {combo})"),
                _ => format!("{:.4} (combo {combo})", self.shown(value)),
            };
            let _ = writeln!(
                rects,
                "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" fill=\"#{r:02X}{g:02X}{b:02X}\">\
                 <title>{} {}, {} {}: {metric} {what}</title></rect>",
                markup(&px.name),
                markup(&px.format(self.x_values[i])),
                markup(&py.name),
                markup(&py.format(self.y_values[j])),
            );
        }
        let best = self.has_better(metric).then(|| {
            (0..self.cells.len())
                .filter(|&k| self.cells[k].1 != u64::MAX && self.cells[k].0.is_finite())
                .min_by(|&a, &b| rank(self.cells[a], self.cells[b]))
        });
        if let Some(k) = best.flatten() {
            let (x, y, w, h) = corners((k % nx) as i32, (k / nx) as i32);
            let _ = writeln!(
                rects,
                "<rect class=\"best\" x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" fill=\"none\" \
                 stroke=\"#111111\" stroke-width=\"3\" pointer-events=\"none\"/>"
            );
        }
        rects
    }
}

/// The colour of a cell that no combo of the run fell in (a sampled sweep).
const NOT_RUN: RGBColor = RGBColor(236, 236, 236);

/// The legend's title: the metric, with its unit where the name does not say it.
fn metric_label(metric: &str) -> String {
    match metric {
        "sharpe" => "sharpe (per bar)".to_owned(),
        "sharpe_annual" => "sharpe (annualised)".to_owned(),
        "sortino" => "sortino (annualised)".to_owned(),
        "cagr" | "volatility" => format!("{metric} (annual)"),
        other => other.to_owned(),
    }
}

/// A metric's colour scale over [lo, hi]: diverging (red below zero, white at zero, blue
/// above: losses red, gains blue, readable without telling red from green) when the
/// metric changes sign, each side spanning its own extreme so that the best cell is full
/// blue and the worst full red however lopsided the range; else from white at the end
/// nearest zero to blue (positive values) or red (negative ones); grey where there is no
/// value.
#[derive(Debug, Clone, Copy)]
struct Scale {
    lo: f64,
    hi: f64,
}

impl Scale {
    fn diverging(self) -> bool {
        self.lo < 0.0 && self.hi > 0.0
    }

    fn colour(self, v: f64) -> RGBColor {
        if !v.is_finite() {
            return RGBColor(200, 200, 200);
        }
        let (lo, hi) = (self.lo, self.hi);
        let span = |a: f64, b: f64| if b > a { ((v - a) / (b - a)).clamp(0.0, 1.0) } else { 1.0 };
        // t in [0, 1]: 0 blue, 0.5 white, 1 red.
        let t = if self.diverging() {
            if v >= 0.0 { 0.5 + 0.5 * (v / hi).min(1.0) } else { 0.5 - 0.5 * (v / lo).min(1.0) }
        } else if lo >= 0.0 {
            0.5 + 0.5 * span(lo, hi)
        } else {
            0.5 * span(lo, hi)
        };
        colour(t)
    }
}

/// The heat scale's colour at `t` in [0, 1] as (red, green, blue): red (t = 0, the worst)
/// through white (0.5) to blue (1, the best), as the heatmaps draw it.
pub fn heat_colour(t: f64) -> (u8, u8, u8) {
    let RGBColor(r, g, b) = colour(t);
    (r, g, b)
}

/// Red (t = 0, the worst) through white (0.5) to blue (1, the best).
fn colour(t: f64) -> RGBColor {
    let mix = |a: f64, b: f64, f: f64| (a + (b - a) * f).round() as u8;
    if t < 0.5 {
        let f = t / 0.5;
        RGBColor(mix(178.0, 247.0, f), mix(24.0, 247.0, f), mix(43.0, 247.0, f))
    } else {
        let f = (t - 0.5) / 0.5;
        RGBColor(mix(247.0, 49.0, f), mix(247.0, 84.0, f), mix(247.0, 155.0, f))
    }
}
