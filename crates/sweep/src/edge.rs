//! The best combo on the grid's edge: a parameter of the winner at the smallest or largest
//! value swept (of an axis with at least three values) says the optimum may lie beyond
//! the grid. A run prints one line, and the summary's `best.edge` lists each such parameter
//! ([`best_of`] makes that `best` section, for grid, search and merge runs alike).

use crate::rows::Row;
use crate::summary::{Best, BestRow, Edge};
use threadx_backtest::{ParamCell, ParamKind, Strategy};

/// One parameter of a combo at an end of its axis.
#[derive(Debug, Clone, PartialEq)]
pub struct GridEdge {
    pub param: String,
    /// The value as the user writes it (`3`, `2.5`, `ema`).
    pub value: String,
    pub cell: ParamCell,
    /// At the largest value swept (else the smallest).
    pub largest: bool,
}

impl GridEdge {
    /// The summary's `{"param": "bb_std", "value": 3, "side": "largest"}`.
    pub fn summary(&self) -> Edge {
        let side = if self.largest { "largest" } else { "smallest" };
        Edge { param: self.param.clone(), value: self.cell.clone(), side: side.into() }
    }
}

impl std::fmt::Display for GridEdge {
    /// `bb_std=3 is the largest value swept`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side = if self.largest { "largest" } else { "smallest" };
        write!(f, "{}={} is the {side} value swept", self.param, self.value)
    }
}

/// The parameters of `row` at an end of their axis (`axes`: the values swept of each of
/// `strategy`'s parameters; axes of three values or more: with two, every value is an
/// end). Choices have no order: never an edge.
pub fn grid_edges(strategy: &Strategy, axes: &[Vec<f64>], row: &Row) -> Vec<GridEdge> {
    strategy
        .schema()
        .iter()
        .zip(axes)
        .zip(row.values.iter())
        .filter(|((p, axis), _)| axis.len() >= 3 && !matches!(p.kind, ParamKind::Choice(_)))
        .filter_map(|((p, axis), &v)| {
            let (lo, hi) = axis.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            (v == lo || v == hi).then(|| GridEdge {
                param: p.name.clone(),
                value: p.format(v),
                cell: p.cell(v),
                largest: v == hi,
            })
        })
        .collect()
}

/// Best rows as the summary's `best`: the metric that ranks them, each row, and the first
/// row's parameters on the grid's edge (`edge`, when any).
pub fn best_of(strategy: &Strategy, axes: &[Vec<f64>], by: &str, rows: &[Row]) -> Best {
    let edges = rows.first().map(|r| grid_edges(strategy, axes, r)).unwrap_or_default();
    Best {
        by: by.to_owned(),
        rows: rows.iter().map(|r| BestRow::of(strategy, r)).collect(),
        edge: (!edges.is_empty()).then(|| edges.iter().map(GridEdge::summary).collect()),
        constraints: None,
        passing: None,
        minimize: None,
    }
}

/// The line a run prints when its best combo sits on the grid's edge.
pub fn edge_note(edges: &[GridEdge]) -> Option<String> {
    (!edges.is_empty()).then(|| {
        let each: Vec<String> = edges.iter().map(ToString::to_string).collect();
        format!("the best combo sits on the edge of the grid: {}; the optimum may lie beyond it", each.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SweepRequest;
    use threadx_backtest::Metrics;

    #[test]
    fn a_parameter_at_an_end_of_an_axis_of_three_or_more_values_is_an_edge() {
        let spec = SweepRequest::new(
            "bb_atr",
            &[("bb_period", "10:30:10"), ("bb_std", "2,3"), ("atr_period", "7,14,21"), ("atr_mult", "1:3:1")],
        )
        .check()
        .unwrap();
        let row = |values: [f64; 4]| Row {
            combo: 0,
            values: threadx_backtest::ParamValues::new(&values),
            metrics: Metrics::from_values([0.0; Metrics::NAMES.len()]),
        };
        // bb_std has two values: never an edge. atr_period=14 is inside its axis.
        let edges = grid_edges(spec.strategy(), spec.axes(), &row([10.0, 3.0, 14.0, 3.0]));
        let texts: Vec<String> = edges.iter().map(ToString::to_string).collect();
        assert_eq!(texts, ["bb_period=10 is the smallest value swept", "atr_mult=3 is the largest value swept"]);
        let edge = serde_json::to_value(edges[1].summary()).unwrap();
        assert_eq!(edge, serde_json::json!({"param": "atr_mult", "value": 3.0, "side": "largest"}));
        assert_eq!(
            edge_note(&edges).unwrap(),
            "the best combo sits on the edge of the grid: bb_period=10 is the smallest value swept, atr_mult=3 is \
             the largest value swept; the optimum may lie beyond it"
        );
        assert!(grid_edges(spec.strategy(), spec.axes(), &row([20.0, 2.0, 14.0, 2.0])).is_empty());
        assert_eq!(edge_note(&[]), None);
    }
}
