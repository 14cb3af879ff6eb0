//! What a sweep reports besides its rows: the best combos by a metric ([`Leaderboard`])
//! and a metric over two parameters ([`Heatmap`], drawn as SVG with plotters). Both take
//! rows one at a time in bounded memory, and give the same result whatever order the
//! rows come in (ties go to the lower combo number).

use crate::SweepError;
use crate::rows::Row;
use plotters::prelude::*;
use std::cmp::Ordering;
use std::collections::HashMap;
use threadx_backtest::{Metrics, ParamSpec, Strategy};

/// The position of metric `name` in [`Metrics::NAMES`], or a clear error.
pub fn metric_index(name: &str) -> Result<usize, SweepError> {
    Metrics::NAMES
        .iter()
        .position(|n| *n == name)
        .ok_or_else(|| SweepError::Spec(format!("unknown metric `{name}` (known: {})", Metrics::NAMES.join(", "))))
}

/// Larger first, NaN last, then the lower combo first.
fn rank(a: (f64, u64), b: (f64, u64)) -> Ordering {
    match (a.0.is_nan(), b.0.is_nan()) {
        (false, false) => b.0.total_cmp(&a.0),
        (x, y) => x.cmp(&y),
    }
    .then(a.1.cmp(&b.1))
}

/// The `k` best rows by one metric (largest first; for max_drawdown, the shallowest).
#[derive(Debug, Clone)]
pub struct Leaderboard {
    by: usize,
    k: usize,
    rows: Vec<Row>,
}

impl Leaderboard {
    pub fn new(by: &str, k: usize) -> Result<Self, SweepError> {
        Ok(Self { by: metric_index(by)?, k, rows: Vec::with_capacity(k + 1) })
    }

    pub fn by(&self) -> &'static str {
        Metrics::NAMES[self.by]
    }

    fn key(&self, row: &Row) -> (f64, u64) {
        (row.metrics.values()[self.by], row.combo)
    }

    pub fn offer(&mut self, row: Row) {
        let key = self.key(&row);
        if self.rows.len() == self.k && self.rows.last().is_none_or(|worst| rank(key, self.key(worst)).is_ge()) {
            return;
        }
        let at = self.rows.partition_point(|r| rank(self.key(r), key).is_lt());
        self.rows.insert(at, row);
        self.rows.truncate(self.k);
    }

    /// Best first.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }
}

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
    x_index: HashMap<u64, usize>,
    y_index: HashMap<u64, usize>,
    cells: Vec<(f64, u64)>,
}

impl Heatmap {
    /// A heatmap of metric `by` over parameters `x` and `y` (names; `None` picks the first
    /// two parameters that take more than one value).
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
        let index = |values: &[f64]| values.iter().enumerate().map(|(i, v)| (v.to_bits(), i)).collect();
        Ok(Self {
            strategy,
            x,
            y,
            by: metric_index(by)?,
            x_index: index(&axes[x]),
            y_index: index(&axes[y]),
            cells: vec![(f64::NAN, u64::MAX); axes[x].len() * axes[y].len()],
            x_values: axes[x].clone(),
            y_values: axes[y].clone(),
        })
    }

    pub fn offer(&mut self, row: &Row) {
        let (Some(&i), Some(&j)) =
            (self.x_index.get(&row.values[self.x].to_bits()), self.y_index.get(&row.values[self.y].to_bits()))
        else {
            return;
        };
        let cell = &mut self.cells[j * self.x_values.len() + i];
        let key = (row.metrics.values()[self.by], row.combo);
        if rank(key, *cell).is_lt() {
            *cell = key;
        }
    }

    /// The best value of cell (x position, y position); NaN where no combo had one.
    pub fn cell(&self, i: usize, j: usize) -> f64 {
        self.cells[j * self.x_values.len() + i].0
    }

    /// The heatmap as an SVG document.
    pub fn to_svg(&self) -> Result<String, SweepError> {
        let schema = self.strategy.schema();
        let (px, py): (&ParamSpec, &ParamSpec) = (&schema[self.x], &schema[self.y]);
        let metric = Metrics::NAMES[self.by];
        let (nx, ny) = (self.x_values.len(), self.y_values.len());
        let finite = self.cells.iter().map(|c| c.0).filter(|v| v.is_finite());
        let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (960, 720)).into_drawing_area();
            let draw = |e: DrawingAreaErrorKind<_>| SweepError::Results(format!("drawing the heatmap: {e}"));
            root.fill(&WHITE).map_err(draw)?;
            let (plot, legend) = root.split_horizontally(860);
            let title = format!("{} {metric}: best over the other parameters", self.strategy);
            let mut chart = ChartBuilder::on(&plot)
                .caption(title, ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(48)
                .y_label_area_size(64)
                .build_cartesian_2d(0.0..nx as f64, 0.0..ny as f64)
                .map_err(draw)?;
            let label = |values: &[f64], spec: &ParamSpec, v: f64| {
                let i = v.floor() as usize;
                if (v - v.floor() - 0.5).abs() < 1e-9 && i < values.len() {
                    spec.format(values[i])
                } else {
                    String::new()
                }
            };
            chart
                .configure_mesh()
                .disable_mesh()
                .x_desc(px.name)
                .y_desc(py.name)
                .x_labels(nx.min(20) * 2 + 1)
                .y_labels(ny.min(20) * 2 + 1)
                .x_label_formatter(&|v| label(&self.x_values, px, *v))
                .y_label_formatter(&|v| label(&self.y_values, py, *v))
                .draw()
                .map_err(draw)?;
            chart
                .draw_series((0..nx).flat_map(|i| (0..ny).map(move |j| (i, j))).map(|(i, j)| {
                    let color = colour(self.cell(i, j), lo, hi);
                    Rectangle::new([(i as f64, j as f64), (i as f64 + 1.0, j as f64 + 1.0)], color.filled())
                }))
                .map_err(draw)?;
            // Legend: a vertical colour bar from lo (bottom) to hi (top).
            let steps = 50;
            let bar = legend.margin(60, 60, 10, 40);
            let (w, h) = bar.dim_in_pixel();
            for s in 0..steps {
                let v = lo + (hi - lo) * (s as f64 + 0.5) / steps as f64;
                let y0 = h as i32 - ((s + 1) * h as usize / steps) as i32;
                let y1 = h as i32 - (s * h as usize / steps) as i32;
                bar.draw(&Rectangle::new([(0, y0), (w as i32 / 2, y1)], colour(v, lo, hi).filled())).map_err(draw)?;
            }
            let text = |v: f64| if v.is_finite() { format!("{v:.4}") } else { "-".into() };
            let style = ("sans-serif", 12).into_font().color(&BLACK);
            legend.draw(&Text::new(text(hi), (4, 40), style.clone())).map_err(draw)?;
            legend.draw(&Text::new(text(lo), (4, 720 - 50), style)).map_err(draw)?;
            root.present().map_err(draw)?;
        }
        Ok(svg)
    }
}

/// Blue (low) through white to red (high); grey where there is no value.
fn colour(v: f64, lo: f64, hi: f64) -> RGBColor {
    if !v.is_finite() {
        return RGBColor(200, 200, 200);
    }
    let t = if hi > lo { ((v - lo) / (hi - lo)).clamp(0.0, 1.0) } else { 0.5 };
    let mix = |a: f64, b: f64, f: f64| (a + (b - a) * f).round() as u8;
    if t < 0.5 {
        let f = t / 0.5;
        RGBColor(mix(49.0, 247.0, f), mix(84.0, 247.0, f), mix(155.0, 247.0, f))
    } else {
        let f = (t - 0.5) / 0.5;
        RGBColor(mix(247.0, 178.0, f), mix(247.0, 24.0, f), mix(247.0, 43.0, f))
    }
}
