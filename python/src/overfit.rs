//! The overfitting statistics for a user's own returns: `pbo` (CSCV over a T×N matrix)
//! and `deflated_sharpe` (per column: Sharpe ratio, PSR, DSR, skew, kurtosis), both
//! threadx-stats', the sweep's own arithmetic.

use crate::value;
use numpy::{IntoPyArray, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use threadx_stats::SeededRng;
use threadx_stats::{BlockMatrix, SplitSet, deflated_sharpe, moments, pbo as cscv, psr, sample_std, sharpe};

/// CSCV over `returns` (T bars × N strategies), cut into `blocks` blocks: every split
/// while N · C(S, S/2) ≤ 2·10^8, else `splits` random ones drawn with `seed`.
#[pyfunction]
#[pyo3(signature = (returns, blocks=16, splits=1000, seed=0))]
pub fn pbo<'py>(
    py: Python<'py>,
    returns: PyReadonlyArray2<'py, f64>,
    blocks: usize,
    splits: usize,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let view = returns.as_array();
    let (rows, combos) = view.dim();
    let values: Vec<f64> = view.iter().copied().collect();
    let report = py
        .detach(|| -> Result<_, threadx_stats::StatsError> {
            let matrix = BlockMatrix::from_returns(&values, rows, combos, blocks)?;
            let mut rng = SeededRng::new(seed);
            let set = SplitSet::for_sweep(combos, blocks, splits, &mut || rng.next_u64())?;
            cscv(&matrix, &set)
        })
        .map_err(value)?;
    let out = PyDict::new(py);
    out.set_item("pbo", report.pbo)?;
    out.set_item("prob_oos_loss", report.prob_oos_loss)?;
    out.set_item("slope", report.slope)?;
    out.set_item("intercept", report.intercept)?;
    out.set_item("exhaustive", report.exhaustive)?;
    out.set_item("logits", report.logits.into_pyarray(py))?;
    out.set_item("best", report.best.iter().map(|&b| b as i64).collect::<Vec<_>>().into_pyarray(py))?;
    out.set_item("is_sharpe", report.is_sharpe.into_pyarray(py))?;
    out.set_item("oos_sharpe", report.oos_sharpe.into_pyarray(py))?;
    Ok(out)
}

/// Per column of `returns` (T × N): the Sharpe ratio (per bar), the returns' skew and
/// kurtosis, PSR against 0 and DSR against SR₀ = `sharpe_std` (default: the columns'
/// Sharpe ratios' standard deviation, ddof 1) × E[max of `trials` (default N) normals].
#[pyfunction]
#[pyo3(signature = (returns, trials=None, sharpe_std=None))]
pub fn deflated_sharpe_table<'py>(
    py: Python<'py>,
    returns: PyReadonlyArray2<'py, f64>,
    trials: Option<f64>,
    sharpe_std: Option<f64>,
) -> PyResult<Bound<'py, PyDict>> {
    let view = returns.as_array();
    let (rows, columns) = view.dim();
    if rows < 2 || columns == 0 {
        return Err(value(format!("returns: {rows} bars × {columns} columns; need two bars and a column")));
    }
    if let Some(((t, c), r)) = view.indexed_iter().find(|(_, r)| !r.is_finite()) {
        return Err(value(format!("returns: bar {t}, column {c}: {r} is not a finite return")));
    }
    let cols: Vec<Vec<f64>> = (0..columns).map(|c| view.column(c).to_vec()).collect();
    let sharpes: Vec<f64> =
        cols.iter().map(|x| sharpe(x.iter().sum(), x.iter().map(|r| r * r).sum(), x.len())).collect();
    let std = match sharpe_std {
        Some(s) => s,
        None if columns >= 2 => sample_std(&sharpes),
        None => return Err(value("one column: give sharpe_std (the trials' Sharpe ratios' spread) and trials")),
    };
    let trials = trials.unwrap_or(columns as f64);
    let mut table = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut sr0 = f64::NAN;
    for (x, &sr) in cols.iter().zip(&sharpes) {
        let (skew, kurt) = moments(x);
        let (dsr, zero) = deflated_sharpe(sr, rows as f64, skew, kurt, std, trials);
        sr0 = zero;
        table.0.push(psr(sr, rows as f64, skew, kurt, 0.0));
        table.1.push(dsr);
        table.2.push(skew);
        table.3.push(kurt);
    }
    let out = PyDict::new(py);
    out.set_item("sharpe", sharpes.into_pyarray(py))?;
    out.set_item("psr", table.0.into_pyarray(py))?;
    out.set_item("dsr", table.1.into_pyarray(py))?;
    out.set_item("skew", table.2.into_pyarray(py))?;
    out.set_item("kurtosis", table.3.into_pyarray(py))?;
    out.set_item("sr0", sr0)?;
    out.set_item("sharpe_std", std)?;
    out.set_item("trials", trials)?;
    Ok(out)
}
