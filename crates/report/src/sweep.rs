//! A sweep's sections: what ran, the best combos, the parameter heatmaps and the
//! distribution of the objective (both from one pass over the results file), the
//! overfitting statistics, a search's best-so-far curve, the walk-forward windows; then
//! the backtest of the best combo.

use crate::backtest::BacktestRun;
use crate::charts::{Axis, Unit, bars, bins_for, histogram, lines};
use crate::page::{Cell, Report, escape, facts, figure, metric_text, note, num, pct, table};
use crate::portfolio::PortfolioRun;
use crate::walk::OutOfSampleCurve;
use std::path::Path;
use threadx_backtest::{Metrics, ParamCell, Strategy};
use threadx_sweep::{Best, Heatmap, Row, Summary, SweepError, SweepSpec, Verdict, for_each_result, metric_index};

/// Heatmap cells a page holds at most, over all its heatmaps (each cell is an SVG
/// rectangle with its hover text: about 100 bytes).
const MAX_HEATMAP_CELLS: usize = 16_000;

/// The largest SVG picture a page takes (a scatter of very many splits is left out).
const MAX_FIGURE_BYTES: usize = 1_500_000;

/// A sweep as the report shows it.
#[derive(Debug, Clone)]
pub struct SweepRun<'a> {
    pub spec: &'a SweepSpec,
    /// The run's summary (what `threadx sweep` writes beside its results).
    pub summary: &'a Summary,
    /// Every row, for the heatmaps and the distribution.
    pub rows: Option<SweepRows<'a>>,
    /// The objective the run ranked by.
    pub by: &'a str,
    /// Pictures of the overfitting statistics the run drew: (caption, SVG).
    pub overfitting_figures: Vec<(String, String)>,
    /// A walk-forward's test windows back to back, drawn as its out-of-sample equity.
    pub out_of_sample: Option<OutOfSampleCurve>,
    /// The backtest of the best combo.
    pub best: Option<BestRun<'a>>,
}

/// The best combo run again in full: one data set's backtest, or a portfolio's account.
#[derive(Debug, Clone)]
pub enum BestRun<'a> {
    Backtest(BacktestRun<'a>),
    Portfolio(PortfolioRun<'a>),
}

/// Where a sweep's rows are.
#[derive(Debug, Clone, Copy)]
pub enum SweepRows<'a> {
    /// A results file (a grid's rows, or with `trials` a search's), read once.
    File { path: &'a Path, trials: bool },
    /// Rows in memory (Python's).
    Memory(&'a [Row]),
}

impl SweepRows<'_> {
    /// Hands `each` every row in turn.
    fn each(self, strategy: &Strategy, each: &mut dyn FnMut(&Row) -> Result<(), SweepError>) -> Result<(), SweepError> {
        match self {
            Self::File { path, trials } => for_each_result(path, strategy, trials, each),
            Self::Memory(rows) => rows.iter().try_for_each(each),
        }
    }
}

impl SweepRun<'_> {
    /// The page of this sweep.
    pub fn report(&self) -> Result<Report, SweepError> {
        let strategy = self.spec.strategy();
        let origin = self.summary.data.as_ref().map_or("the data", |d| d.origin.as_str());
        let kind = match (self.summary.is_search(), &self.summary.windows) {
            (true, _) => "search",
            (false, Some(_)) => "walk-forward",
            (false, None) => "sweep",
        };
        let mut report = Report::new(&format!("{strategy} {kind}"), &format!("{} on {origin}", self.grid_text()));
        self.add_header(&mut report);
        self.add_best(&mut report);
        if let Some(rows) = self.rows {
            self.add_from_rows(&mut report, rows)?;
        }
        self.add_overfitting(&mut report);
        self.add_search(&mut report);
        crate::walk::add_walk_forward(&mut report, self.spec, self.summary, self.out_of_sample.as_ref());
        match &self.best {
            Some(BestRun::Backtest(best)) => best.add_sections(&mut report, "Best combo: "),
            Some(BestRun::Portfolio(best)) => best.add_sections(&mut report, "Best combo: "),
            None => {}
        }
        Ok(report)
    }

    /// Each parameter's values, briefly.
    fn grid_text(&self) -> String {
        let schema = self.spec.strategy().schema();
        let axes: Vec<String> = schema
            .iter()
            .zip(self.spec.axes())
            .map(|(p, axis)| match axis.as_slice() {
                [one] => format!("{}={}", p.name, p.format(*one)),
                [first, .., last] => format!("{} {}..{} ({})", p.name, p.format(*first), p.format(*last), axis.len()),
                [] => p.name.clone(),
            })
            .collect();
        axes.join(", ")
    }

    /// The ranking metric, and the constraints a combo kept to rank, with how many did.
    fn ranked_by(&self) -> String {
        let best = self.summary.best.as_ref();
        let by = best.map_or_else(|| self.by.to_owned(), Best::ranking);
        let rules: Vec<&str> = best
            .and_then(|b| b.constraints.as_ref())
            .map(|a| a.iter().map(String::as_str).collect())
            .unwrap_or_default();
        match (rules.is_empty(), best.and_then(|b| b.passing), self.summary.combos.map(|c| c.rows)) {
            (false, Some(passing), Some(rows)) => {
                format!("{by}, among the {passing} of {rows} combos that keep {}", rules.join(" and "))
            }
            _ => by,
        }
    }

    fn add_header(&self, report: &mut Report) {
        let s = self.summary;
        let data = match &s.data {
            Some(d) => format!(
                "{}, {} bars, {} to {}",
                d.origin,
                d.bars,
                d.first.as_deref().unwrap_or("-"),
                d.last.as_deref().unwrap_or("-")
            ),
            None => "-".to_owned(),
        };
        let mut lines = vec![
            ("Data", data),
            ("Strategy", self.spec.strategy().to_string()),
            ("Grid", format!("{} ({} combos)", self.grid_text(), self.spec.grid_len())),
            ("Costs", format!("fee {} per side", self.spec.costs().fee)),
            ("Ranked by", self.ranked_by()),
        ];
        if let Some(a) = &s.annualisation {
            let per_year = a.periods_per_year.map_or("-".to_owned(), |p| format!("{p:.0}"));
            lines.push(("Annualised", format!("over {per_year} bars a year ({})", a.basis)));
        }
        if let Some(combos) = s.combos {
            lines.push(("Rows", combos.rows.to_string()));
        }
        if let Some(workers) = &s.workers {
            let text: Vec<String> = workers
                .iter()
                .map(|(name, w)| format!("{name} {}, {:.0} combos/s", pct(w.share), w.combos_per_s))
                .collect();
            lines.push(("Devices", text.join("; ")));
        }
        if let Some(t) = &s.timings_s {
            let rate = t.combos_per_s().map_or(String::new(), |v| format!(", {v:.0} combos/s"));
            lines.push(("Time", format!("{:.3} s{rate}", t.total())));
        }
        report.section("run", "What ran", &facts(&lines));
    }

    fn add_best(&self, report: &mut Report) {
        let Some(best) = &self.summary.best else { return };
        let rows = &best.rows;
        let schema = self.spec.strategy().schema();
        let mut headers = vec!["rank".to_owned(), "combo".to_owned()];
        headers.extend(schema.iter().map(|p| p.name.clone()));
        // The headline metrics, and the ranking one where it is another.
        let mut shown = Metrics::HEADLINE.to_vec();
        if !shown.contains(&self.by) && Metrics::NAMES.contains(&self.by) {
            shown.push(self.by);
        }
        headers.extend(shown.iter().map(|&m| m.to_owned()));
        let cells: Vec<Vec<Cell>> = rows
            .iter()
            .enumerate()
            .map(|(rank, row)| {
                let mut cells = vec![Cell::number((rank + 1).to_string(), (rank + 1) as f64)];
                cells.push(Cell::number(row.combo.to_string(), row.combo as f64));
                for p in schema {
                    cells.push(match row.params.get(&p.name) {
                        Some(ParamCell::Choice(name)) => Cell::text(name.as_str()),
                        Some(v) => Cell::number(v.to_string(), v.as_f64().unwrap_or(f64::NAN)),
                        None => Cell::text("-"),
                    });
                }
                for &m in &shown {
                    let v = row.metrics.get(m).unwrap_or(f64::NAN);
                    cells.push(Cell::number(metric_text(m, v), v));
                }
                cells
            })
            .collect();
        let mut html = table(&headers, &cells, true);
        // The first row's parameters at an end of their axis (the summary's `best.edge`).
        let edges: Vec<String> = best
            .edge
            .iter()
            .flatten()
            .filter_map(|e| {
                let p = schema.iter().find(|p| p.name == e.param)?;
                Some(format!("{}={} is the {} value swept", p.name, p.format(e.value.as_f64()?), e.side))
            })
            .collect();
        if !edges.is_empty() {
            html.push_str(&note(&format!(
                "The best combo sits on the edge of the grid: {}; the optimum may lie beyond it.",
                edges.join(", ")
            )));
        }
        report.section("best", &format!("The best {} combos by {}", rows.len(), self.by), &html);
    }

    /// The heatmaps and the distribution of the objective, from one pass over the rows.
    fn add_from_rows(&self, report: &mut Report, rows: SweepRows<'_>) -> Result<(), SweepError> {
        let strategy = self.spec.strategy();
        let axes = self.spec.axes();
        let varying: Vec<usize> = (0..axes.len()).filter(|&i| axes[i].len() > 1).collect();
        let mut maps = Vec::new();
        let (mut cells, mut left_out) = (0, Vec::new());
        let minimize = self.summary.best.as_ref().and_then(|b| b.minimize).unwrap_or(false);
        for (k, &x) in varying.iter().enumerate() {
            for &y in &varying[k + 1..] {
                let (px, py) = (&strategy.schema()[x].name, &strategy.schema()[y].name);
                let n = axes[x].len() * axes[y].len();
                if cells + n > MAX_HEATMAP_CELLS {
                    left_out.push(format!("{px} × {py}"));
                    continue;
                }
                cells += n;
                maps.push(Heatmap::new(strategy.clone(), axes, Some(px), Some(py), self.by)?.minimizing(minimize));
            }
        }
        let by = metric_index(self.by)?;
        let grid = self.spec.grid();
        let mut values = Vec::new();
        rows.each(strategy, &mut |row| {
            // Rows of another run (a bigger grid, other values) would be drawn as this one's.
            if row.combo >= grid.len() || grid.values(row.combo) != row.values {
                return Err(SweepError::Results(format!(
                    "the results do not belong to this summary: their combo {} is {} in its {}-combo grid \
                     (the results were written by another run; sweep again, or report that run's own summary)",
                    row.combo,
                    if row.combo >= grid.len() { "beyond the last".to_owned() } else { "another parameter set".into() },
                    grid.len()
                )));
            }
            for map in &mut maps {
                map.offer(row);
            }
            values.push(row.metrics.at(by));
            Ok(())
        })?;
        let mut html = heatmap_figures(&mut maps, self.by)?;
        if maps.is_empty() {
            html.push_str(&note("Fewer than two parameters take several values: no heatmap."));
        }
        if !left_out.is_empty() {
            html.push_str(&note(&format!(
                "Left out to keep the page small (more than {MAX_HEATMAP_CELLS} cells in all): {}; \
                 `threadx sweep --heatmap FILE.svg --heatmap-x X --heatmap-y Y` draws any of them.",
                left_out.join(", ")
            )));
        }
        report.section("heatmaps", &format!("Heatmaps of {} across the parameters", self.by), &html);
        let (centres, counts) = histogram(values.iter().copied(), bins_for(values.len()));
        let unit = match self.by {
            m if Metrics::is_fraction(m) => "%",
            "sharpe" => "per bar",
            "sharpe_annual" | "sortino" => "annualised",
            "calmar" | "profit_factor" | "sqn" => "ratio",
            _ => "count",
        };
        let scale = if Metrics::is_fraction(self.by) { 100.0 } else { 1.0 };
        let centres: Vec<f64> = centres.iter().map(|c| c * scale).collect();
        let html = if counts.is_empty() {
            note(&format!("No combo has a {}.", self.by))
        } else {
            let chart = bars(
                &format!("{} of {} combos", self.by, values.len()),
                &Axis::new(&format!("{} ({unit})", self.by), Unit::Number),
                &Axis::new("combos", Unit::Count),
                &centres,
                &counts,
                "#31549B",
            );
            let missing = values.iter().filter(|v| !v.is_finite()).count();
            let mut html = report.chart(&chart);
            if missing > 0 {
                html.push_str(&note(&format!("{missing} combos have no {} (no trades) and are not counted.", self.by)));
            }
            html
        };
        report.section("distribution", &format!("Distribution of {} across combos", self.by), &html);
        Ok(())
    }

    fn add_overfitting(&self, report: &mut Report) {
        let Some(o) = &self.summary.overfitting else { return };
        let q = &o.logit_quantiles;
        let verdict = Verdict::of(o).map_or_else(|| "none: PBO is undefined".to_owned(), |v| v.to_string());
        let lines = [
            ("Verdict", verdict),
            (
                "PBO",
                match o.pbo {
                    p if p.is_nan() => "undefined: fewer than two combos, or in every split all combos rank alike \
                                        out of sample (identical combos, or no trades)"
                        .to_owned(),
                    p => format!(
                        "{} (the share of splits where the in-sample best ranks below the out-of-sample median)",
                        num(p, 3)
                    ),
                },
            ),
            (
                "Out-of-sample loss",
                format!("{} of splits: the in-sample best lost out of sample", pct(o.prob_oos_loss)),
            ),
            (
                "Degradation",
                match o.degradation_slope {
                    slope if slope.is_nan() => "no line: the in-sample bests' Sharpe ratios do not vary".to_owned(),
                    slope => {
                        format!("out of sample = {} × in sample + {}", num(slope, 3), num(o.degradation_intercept, 4))
                    }
                },
            ),
            ("Logits", format!("p05 {}, median {}, p95 {}", num(q.p05, 2), num(q.p50, 2), num(q.p95, 2))),
            (
                "Deflated Sharpe (DSR)",
                format!(
                    "{} (the probability that the best's Sharpe beats the best of {} trials with no edge)",
                    num(o.dsr.unwrap_or(f64::NAN), 3),
                    num(o.trials.n, 0)
                ),
            ),
            ("Probabilistic Sharpe (PSR)", num(o.psr.unwrap_or(f64::NAN), 3)),
            ("Expected best Sharpe with no edge (SR0)", format!("{} per bar", num(o.sr0, 4))),
        ];
        let mut html = facts(&lines);
        let top = &o.top;
        if !top.is_empty() {
            let objective = o.objective.as_str();
            let headers: Vec<String> =
                ["combo", "parameters", objective, "DSR", "PSR", "neighbours", "their mean", "their least", "shape"]
                    .map(String::from)
                    .to_vec();
            let schema = self.spec.strategy().schema();
            let rows: Vec<Vec<Cell>> = top
                .iter()
                .map(|t| {
                    let params: Vec<String> = schema
                        .iter()
                        .filter_map(|p| t.params.get(&p.name).map(|v| format!("{}={v}", p.name)))
                        .collect();
                    vec![
                        Cell::number(t.combo.to_string(), t.combo as f64),
                        Cell::text(params.join(", ").replace('"', "")),
                        Cell::number(num(t.objective, 4), t.objective),
                        Cell::number(num(t.dsr, 3), t.dsr),
                        Cell::number(num(t.psr, 3), t.psr),
                        Cell::number(t.neighbours.to_string(), t.neighbours as f64),
                        Cell::number(num(t.neighbour_mean, 4), t.neighbour_mean),
                        Cell::number(num(t.neighbour_min, 4), t.neighbour_min),
                        Cell::text(t.shape()),
                    ]
                })
                .collect();
            html.push_str(&note(
                "Parameter stability: each top combo's objective against its grid neighbours (one step on each \
                 axis). A plateau keeps its value nearby; a spike is the luck of one cell.",
            ));
            html.push_str(&table(&headers, &rows, true));
        }
        for (caption, svg) in &self.overfitting_figures {
            if svg.len() > MAX_FIGURE_BYTES {
                let mb = svg.len() as f64 / 1e6;
                html.push_str(&note(&format!(
                    "{caption}: left out, {mb:.1} MB of SVG (its file is beside the results)."
                )));
            } else {
                html.push_str(&figure(svg, caption));
            }
        }
        report.section("overfitting", "Is the winner real? Overfitting", &html);
    }

    fn add_search(&self, report: &mut Report) {
        let Some(s) = &self.summary.search else { return };
        let Some(outcome) = &s.outcome else { return };
        let (mut xs, mut ys): (Vec<f64>, Vec<f64>) = outcome.best_so_far.iter().map(|&(t, v)| (t as f64, v)).unzip();
        let trials = outcome.trials as f64;
        if let (Some(&last), Some(&v)) = (xs.last(), ys.last())
            && trials - 1.0 > last
        {
            xs.push(trials - 1.0);
            ys.push(v);
        }
        let by = outcome.objective.by.as_str();
        let lines_html = facts(&[
            ("Method", s.method.clone()),
            ("Trials", format!("{} ({} feasible)", outcome.trials, outcome.feasible)),
            ("Stopped", outcome.stop.clone()),
        ]);
        let mut chart = lines(
            &format!("Best {by} so far"),
            &Axis::new("trial", Unit::Count),
            &Axis::new(by, Unit::Number),
            &xs,
            &[("best so far", "#31549B", ys)],
            None,
            260,
        );
        // The best so far holds until the next improvement: steps, not slopes.
        chart["step"] = serde_json::Value::Bool(true);
        let html = format!("{lines_html}{}", report.chart(&chart));
        report.section("search", "Search: the best so far", &html);
    }
}

/// Heatmaps a page shows open: the pairs whose cells spread most; the others are one click
/// away, each under its name and spread.
const OPEN_HEATMAPS: usize = 2;

/// The heatmaps, the pairs that matter most first (the widest spread of their cells'
/// values; ties keep the grid's order), the first [`OPEN_HEATMAPS`] open.
fn heatmap_figures(maps: &mut [Heatmap], by: &str) -> Result<String, SweepError> {
    maps.sort_by(|a, b| b.spread().total_cmp(&a.spread()));
    let caption = "Hover over a cell for its parameters, value and combo.";
    let mut html = String::new();
    for (k, map) in maps.iter().enumerate() {
        let svg = figure(&map.to_svg()?, caption);
        if k < OPEN_HEATMAPS {
            html.push_str(&svg);
            continue;
        }
        let (x, y) = map.axes_names();
        html.push_str(&format!(
            "<details class=\"heatmap\"><summary>{} × {}: {by} spreads {} across its cells</summary>{svg}</details>\n",
            escape(x),
            escape(y),
            num(map.spread(), 4)
        ));
    }
    if maps.len() > OPEN_HEATMAPS {
        html.push_str(&note(&format!(
            "The {OPEN_HEATMAPS} pairs whose best values spread most are open; click a pair above to draw it."
        )));
    }
    Ok(html)
}
