//! [`Objective`]: what a search maximises or minimises, and the [`Constraint`]s that make
//! a combo infeasible. An infeasible combo never wins.

use crate::error::SweepError;
use crate::leaderboard::metric_index;
use std::fmt;
use std::str::FromStr;
use threadx_backtest::Metrics;

/// A comparison of a constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cmp {
    Ge,
    Gt,
    Le,
    Lt,
}

impl Cmp {
    const ALL: [(Cmp, &'static str); 4] = [(Cmp::Ge, ">="), (Cmp::Le, "<="), (Cmp::Gt, ">"), (Cmp::Lt, "<")];

    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Cmp::Ge => a >= b,
            Cmp::Gt => a > b,
            Cmp::Le => a <= b,
            Cmp::Lt => a < b,
        }
    }

    fn text(self) -> &'static str {
        Cmp::ALL.iter().find(|(c, _)| *c == self).map_or("", |(_, t)| t)
    }
}

/// A rule on a metric, such as `trades >= 30`; a combo whose metric is NaN breaks it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Constraint {
    metric: usize,
    cmp: Cmp,
    value: f64,
}

impl Constraint {
    /// The metric it reads.
    pub fn metric(&self) -> &'static str {
        Metrics::EVERY[self.metric]
    }

    pub fn holds(&self, metrics: &Metrics) -> bool {
        self.cmp.holds(metrics.at(self.metric), self.value)
    }

    /// Whether `metrics` keep every one of `constraints` (none: always).
    pub fn all_hold(constraints: &[Constraint], metrics: &Metrics) -> bool {
        constraints.iter().all(|c| c.holds(metrics))
    }
}

impl FromStr for Constraint {
    type Err = SweepError;

    /// `METRIC OP VALUE` with OP one of `>=`, `>`, `<=`, `<`.
    fn from_str(text: &str) -> Result<Self, SweepError> {
        let bad = |problem: String| SweepError::Spec(format!("constraint `{text}`: {problem}"));
        let (at, cmp, op) = Cmp::ALL
            .iter()
            .filter_map(|&(cmp, op)| text.find(op).map(|at| (at, cmp, op)))
            .min_by_key(|&(at, _, op)| (at, std::cmp::Reverse(op.len())))
            .ok_or_else(|| bad("expected METRIC OP VALUE with OP one of >=, >, <=, < (e.g. `trades >= 30`)".into()))?;
        // A rule over parameters (`fast < slow`) is a rule file's `require`, not a constraint.
        let metric = metric_index(text[..at].trim()).map_err(|e| {
            bad(format!(
                "{e}; a constraint reads a combo's metrics: parameters are limited by --grid or a rule file's `require`"
            ))
        })?;
        let number = text[at + op.len()..].trim();
        let value: f64 = number.parse().map_err(|_| bad(format!("`{number}` is not a number")))?;
        if !value.is_finite() {
            return Err(bad(format!("`{number}` is not a finite number")));
        }
        Ok(Self { metric, cmp, value })
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", Metrics::EVERY[self.metric], self.cmp.text(), self.value)
    }
}

/// A metric to maximise (or minimise) under constraints.
#[derive(Debug, Clone, PartialEq)]
pub struct Objective {
    metric: usize,
    minimize: bool,
    constraints: Vec<Constraint>,
}

impl Objective {
    /// The metric named `by`, maximised unless `minimize`.
    pub fn new(by: &str, minimize: bool, constraints: Vec<Constraint>) -> Result<Self, SweepError> {
        Ok(Self { metric: metric_index(by)?, minimize, constraints })
    }

    pub fn metric(&self) -> &'static str {
        Metrics::EVERY[self.metric]
    }

    pub fn minimize(&self) -> bool {
        self.minimize
    }

    pub fn constraints(&self) -> &[Constraint] {
        &self.constraints
    }

    /// Every metric it reads: its own, then its constraints'.
    pub fn metrics(&self) -> impl Iterator<Item = &'static str> + '_ {
        std::iter::once(self.metric()).chain(self.constraints.iter().map(|c| c.metric()))
    }

    /// The combo's metric, or `None` when it is infeasible: a constraint breaks or the
    /// metric is NaN.
    pub fn value(&self, metrics: &Metrics) -> Option<f64> {
        let value = metrics.at(self.metric);
        (!value.is_nan() && Constraint::all_hold(&self.constraints, metrics)).then_some(value)
    }

    /// The combo's value as a score to maximise ([`Objective::oriented`]).
    pub fn score(&self, metrics: &Metrics) -> Option<f64> {
        self.value(metrics).map(|v| self.oriented(v))
    }

    /// A value as a score to maximise: itself, negated when minimising.
    pub fn oriented(&self, value: f64) -> f64 {
        if self.minimize { -value } else { value }
    }

    /// Whether `value` reaches `target` in the objective's direction.
    pub fn reaches(&self, value: f64, target: f64) -> bool {
        self.oriented(value) >= self.oriented(target)
    }
}
