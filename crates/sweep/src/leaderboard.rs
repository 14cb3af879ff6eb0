//! The best combos by a metric ([`Leaderboard`]): rows taken one at a time in bounded
//! memory, the same result whatever order they come in (ties go to the lower combo
//! number); the metrics by name and which way each is better.

use crate::error::SweepError;
use crate::rows::Row;
use std::cmp::Ordering;
use threadx_backtest::{MetricSet, Metrics};

/// The position of metric `name` in [`Metrics::EVERY`], or a clear error.
pub fn metric_index(name: &str) -> Result<usize, SweepError> {
    Metrics::EVERY.iter().position(|n| *n == name).ok_or_else(|| {
        SweepError::Spec(format!(
            "unknown metric `{name}` (known: {}; a portfolio's: {})",
            Metrics::NAMES.join(", "),
            Metrics::PORTFOLIO.join(", ")
        ))
    })
}

/// Refuses to rank or constrain rows carrying `set`'s metrics by one of `names` they do
/// not carry: a single run's rows have no portfolio metric.
pub fn check_ranked_metrics<'a>(names: impl IntoIterator<Item = &'a str>, set: MetricSet) -> Result<(), SweepError> {
    for name in names {
        if metric_index(name)? >= set.count() {
            return Err(SweepError::Spec(format!(
                "`{name}` is a portfolio's metric: a single run's rows have none (rank or constrain by it with \
                 --portfolio)"
            )));
        }
    }
    Ok(())
}

/// Larger first, NaN last, then the lower combo first.
pub(crate) fn rank(a: (f64, u64), b: (f64, u64)) -> Ordering {
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
    /// −1 to rank smallest first (`--minimize`; NaN still last), else 1.
    sign: f64,
}

impl Leaderboard {
    pub fn new(by: &str, k: usize) -> Result<Self, SweepError> {
        Ok(Self { by: metric_index(by)?, k, rows: Vec::with_capacity(k + 1), sign: 1.0 })
    }

    /// The same board ranking smallest first when `minimize`.
    pub fn minimizing(self, minimize: bool) -> Self {
        Self { sign: if minimize { -1.0 } else { 1.0 }, ..self }
    }

    /// Whether it ranks smallest first.
    pub fn minimizes(&self) -> bool {
        self.sign < 0.0
    }

    pub fn by(&self) -> &'static str {
        Metrics::EVERY[self.by]
    }

    fn key(&self, row: &Row) -> (f64, u64) {
        (self.sign * row.metrics.at(self.by), row.combo)
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

/// Whether a larger value of `metric` is better (a counting metric has no better side).
pub fn better_higher(metric: &str) -> bool {
    !matches!(metric, "trades" | "closed_trades" | "exposure" | "turnover" | "mean_positions")
}
