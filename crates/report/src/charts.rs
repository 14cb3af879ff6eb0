//! Chart data as `assets/report.js` draws it with uPlot: lines thinned to what a screen
//! shows (each bucket's extremes kept, so no spike or drawdown is lost) and histograms.

use crate::page::{Report, note};
use serde_json::{Value, json};

/// Points a line chart keeps at most: about three per pixel of a wide screen.
pub(crate) const MAX_POINTS: usize = 6000;

/// The positions of `primary` worth drawing: all of them when there are at most
/// `MAX_POINTS`, else per bucket of consecutive points the first, the lowest and the
/// highest of `primary` and the lowest of `secondary`, in order.
pub(crate) fn thin(primary: &[f64], secondary: &[f64]) -> Vec<usize> {
    let n = primary.len();
    if n <= MAX_POINTS {
        return (0..n).collect();
    }
    let buckets = MAX_POINTS / 4;
    let mut keep = Vec::with_capacity(MAX_POINTS);
    for b in 0..buckets {
        let (start, end) = (b * n / buckets, ((b + 1) * n / buckets).min(n));
        if start >= end {
            continue;
        }
        let arg = |values: &[f64], better: fn(f64, f64) -> bool| {
            (start..end).fold(start, |best, i| if better(values[i], values[best]) { i } else { best })
        };
        let mut picks = [start, arg(primary, |a, b| a < b), arg(primary, |a, b| a > b), arg(secondary, |a, b| a < b)];
        picks.sort_unstable();
        for p in picks {
            if keep.last() != Some(&p) {
                keep.push(p);
            }
        }
    }
    if keep.last() != Some(&(n - 1)) {
        keep.push(n - 1);
    }
    keep
}

/// Counts of the finite `values` in `bins` equal bins over their range: the bins'
/// centres and counts (empty when no value is finite).
pub(crate) fn histogram(values: impl Iterator<Item = f64> + Clone, bins: usize) -> (Vec<f64>, Vec<f64>) {
    let finite = values.filter(|v| v.is_finite());
    let (lo, hi) = finite.clone().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return (Vec::new(), Vec::new());
    }
    if lo == hi {
        return (vec![lo], vec![finite.count() as f64]);
    }
    let width = (hi - lo) / bins as f64;
    let mut counts = vec![0.0; bins];
    for v in finite {
        let b = (((v - lo) / width) as usize).min(bins - 1);
        counts[b] += 1.0;
    }
    let centres = (0..bins).map(|b| lo + (b as f64 + 0.5) * width).collect();
    (centres, counts)
}

/// Bins for `n` values: about √n, from 10 to 60.
pub(crate) fn bins_for(n: usize) -> usize {
    ((n as f64).sqrt().round() as usize).clamp(10, 60)
}

/// How a chart's axis shows its values (`assets/report.js` formats them).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Unit {
    /// A fraction shown as a percentage.
    Percent,
    /// A plain number.
    Number,
    /// A count of things.
    Count,
}

impl Unit {
    fn name(self) -> &'static str {
        match self {
            Self::Percent => "pct",
            Self::Number => "num",
            Self::Count => "count",
        }
    }
}

/// An axis: its label (with its unit) and how its values show.
#[derive(Debug, Clone)]
pub(crate) struct Axis {
    pub label: String,
    pub unit: Unit,
    /// Epoch seconds, shown as dates.
    pub time: bool,
}

impl Axis {
    pub(crate) fn new(label: &str, unit: Unit) -> Self {
        Self { label: label.to_owned(), unit, time: false }
    }

    pub(crate) fn time(label: &str) -> Self {
        Self { label: label.to_owned(), unit: Unit::Number, time: true }
    }

    fn json(&self) -> Value {
        json!({"label": self.label, "unit": self.unit.name(), "time": self.time})
    }
}

/// A line chart of `series` (label, colour, values) over `x`; charts with the same `sync`
/// share their cursor and zoom.
pub(crate) fn lines(
    title: &str,
    x: &Axis,
    y: &Axis,
    xs: &[f64],
    series: &[(&str, &str, Vec<f64>)],
    sync: Option<&str>,
    height: u32,
) -> Value {
    let mut data = vec![json!(xs)];
    data.extend(series.iter().map(|(_, _, v)| json!(v)));
    json!({
        "kind": "line", "title": title, "height": height, "x": x.json(), "y": y.json(), "sync": sync,
        "series": series.iter().map(|(label, colour, _)| json!({"label": label, "color": colour})).collect::<Vec<_>>(),
        "data": data,
    })
}

/// Lines of `lines_drawn` (label, colour, values) with `markers` over them: each a series
/// drawn as dots at its values (NaN: none), such as a trade's entries and exits over the
/// price and the levels its rules compare it with.
pub(crate) fn line_with_markers(
    title: &str,
    x: &Axis,
    y: &Axis,
    xs: &[f64],
    lines_drawn: Vec<(&str, &str, Vec<f64>)>,
    markers: Vec<(&str, &str, Vec<f64>)>,
    sync: Option<&str>,
) -> Value {
    let (drawn, count) = (lines_drawn.len(), markers.len());
    let series: Vec<(&str, &str, Vec<f64>)> = lines_drawn.into_iter().chain(markers).collect();
    let mut chart = lines(title, x, y, xs, &series, sync, 300);
    for k in 0..count {
        chart["series"][drawn + k]["marker"] = Value::Bool(true);
    }
    chart
}

/// A line to draw: its label, colour and values.
pub(crate) type Drawn<'a> = (&'a str, &'a str, &'a [f64]);

/// The x axis of the bars kept: the axis and each bar's position on it.
pub(crate) type XAxisOf<'a> = dyn Fn(&[usize]) -> (Axis, Vec<f64>) + 'a;

/// An equity curve's charts: `equity` (and `others` beside it: label, colour, values) over
/// its drawdown (%), on the x axis `x_of` gives the bars kept, both on the cursor and
/// zoom of `sync`; with a note when the bars are thinned.
pub(crate) fn equity_and_drawdown(
    report: &mut Report,
    (equity, label, others): (&[f64], &str, &[Drawn<'_>]),
    x_of: &XAxisOf<'_>,
    sync: &str,
) -> String {
    let mut peak = f64::NEG_INFINITY;
    let drawdown: Vec<f64> = equity
        .iter()
        .map(|&e| {
            peak = peak.max(e);
            e / peak - 1.0
        })
        .collect();
    let keep = thin(equity, &drawdown);
    let (x, xs) = x_of(&keep);
    let pick = |values: &[f64]| keep.iter().map(|&i| values[i]).collect::<Vec<f64>>();
    let mut drawn = vec![("equity", "#31549B", pick(equity))];
    drawn.extend(others.iter().map(|&(l, c, v)| (l, c, pick(v))));
    let top = lines("Equity", &x, &Axis::new(label, Unit::Number), &xs, &drawn, Some(sync), 320);
    let dd = [("drawdown", "#B2182B", pick(&drawdown))];
    let bottom = lines("Drawdown", &x, &Axis::new("drawdown (%)", Unit::Percent), &xs, &dd, Some(sync), 180);
    let mut html = report.chart(&top);
    html.push_str(&report.chart(&bottom));
    if keep.len() < equity.len() {
        html.push_str(&note(&format!(
            "{} bars drawn as {} points: each stretch keeps its first, lowest and highest equity and its deepest drawdown.",
            equity.len(),
            keep.len()
        )));
    }
    html
}

/// A histogram: bars of `counts` at bin centres `centres`.
pub(crate) fn bars(title: &str, x: &Axis, y: &Axis, centres: &[f64], counts: &[f64], colour: &str) -> Value {
    json!({
        "kind": "bars", "title": title, "height": 260, "x": x.json(), "y": y.json(), "sync": null,
        "series": [{"label": y.label, "color": colour}],
        "data": [centres, counts],
    })
}

#[cfg(test)]
mod tests {
    use super::{MAX_POINTS, histogram, thin};

    #[test]
    fn thinning_keeps_every_extreme_and_the_ends() {
        let n = 1_000_003;
        let primary: Vec<f64> =
            (0..n).map(|i| ((i as f64) * 0.001).sin() + if i == 777_777 { 9.0 } else { 0.0 }).collect();
        let secondary: Vec<f64> = (0..n).map(|i| if i == 123_457 { -5.0 } else { 0.0 }).collect();
        let keep = thin(&primary, &secondary);
        assert!(keep.len() <= MAX_POINTS + 1, "{}", keep.len());
        assert!(keep.windows(2).all(|w| w[0] < w[1]), "in order, no repeats");
        for must in [0, n - 1, 777_777, 123_457] {
            assert!(keep.contains(&must), "{must} lost");
        }
        let short = [1.0, 2.0, 3.0];
        assert_eq!(thin(&short, &short), vec![0, 1, 2]);
    }

    #[test]
    fn a_histogram_counts_every_finite_value_once() {
        let values = [0.0, 0.1, 0.2, 0.9, 1.0, f64::NAN, 0.55];
        let (centres, counts) = histogram(values.iter().copied(), 10);
        assert_eq!(counts.iter().sum::<f64>(), 6.0);
        assert_eq!(counts[0], 1.0);
        assert_eq!(counts[9], 2.0, "the top value falls in the last bin");
        assert!((centres[0] - 0.05).abs() < 1e-12);
        assert_eq!(histogram([2.0, 2.0].into_iter(), 10), (vec![2.0], vec![2.0]));
        assert_eq!(histogram([f64::NAN].into_iter(), 10), (vec![], vec![]));
    }
}
