//! The probabilistic and deflated Sharpe ratios (Bailey & López de Prado, 2014), the
//! expected maximum of N standard normals that deflates them, and exact sample moments.
//! Sharpe ratios here are per bar (not annualised) and T is the number of bars.

use statrs::distribution::{ContinuousCDF, Normal};

/// The Euler–Mascheroni constant γ.
pub const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

fn standard_normal() -> Normal {
    Normal::standard()
}

/// Φ(x), the standard normal distribution function.
pub fn normal_cdf(x: f64) -> f64 {
    standard_normal().cdf(x)
}

/// E[max of `trials` independent standard normals], by the paper's approximation
/// (1 − γ)·Φ⁻¹(1 − 1/N) + γ·Φ⁻¹(1 − 1/(N·e)); 0 for a single trial.
pub fn expected_max(trials: f64) -> f64 {
    if trials.is_nan() || trials <= 1.0 {
        return 0.0;
    }
    let normal = standard_normal();
    (1.0 - EULER_GAMMA) * normal.inverse_cdf(1.0 - 1.0 / trials)
        + EULER_GAMMA * normal.inverse_cdf(1.0 - 1.0 / (trials * std::f64::consts::E))
}

/// PSR: the probability that the true Sharpe ratio exceeds `benchmark`, given the observed
/// `sharpe` over `bars` bars with the returns' `skew` and (non-excess) `kurtosis`:
/// Φ((SR − SR*)·√(T − 1) / √(1 − γ₃·SR + (γ₄ − 1)/4·SR²)). NaN when that root is not real.
pub fn psr(sharpe: f64, bars: f64, skew: f64, kurtosis: f64, benchmark: f64) -> f64 {
    let spread = 1.0 - skew * sharpe + (kurtosis - 1.0) / 4.0 * sharpe * sharpe;
    if spread.is_nan() || spread <= 0.0 || bars < 2.0 {
        return f64::NAN;
    }
    normal_cdf((sharpe - benchmark) * (bars - 1.0).sqrt() / spread.sqrt())
}

/// DSR: [`psr`] against SR₀ = `sharpe_std` · [`expected_max`] of `trials`, the best Sharpe
/// ratio expected among `trials` with no edge whose Sharpe ratios spread by `sharpe_std`.
/// Returns (DSR, SR₀).
pub fn deflated_sharpe(sharpe: f64, bars: f64, skew: f64, kurtosis: f64, sharpe_std: f64, trials: f64) -> (f64, f64) {
    let sr0 = sharpe_std * expected_max(trials);
    (psr(sharpe, bars, skew, kurtosis, sr0), sr0)
}

/// The skewness and the (non-excess) kurtosis of `values`, from their central moments
/// (m₃/m₂^1.5 and m₄/m₂², the population forms: scipy's `skew` and `kurtosis(fisher=False)`
/// with their default `bias=True`), computed in two passes; NaN for fewer than two values
/// or no spread.
pub fn moments(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    if values.len() < 2 {
        return (f64::NAN, f64::NAN);
    }
    let mean = values.iter().sum::<f64>() / n;
    let (mut m2, mut m3, mut m4) = (0.0, 0.0, 0.0);
    for &v in values {
        let d = v - mean;
        let d2 = d * d;
        m2 += d2;
        m3 += d2 * d;
        m4 += d2 * d2;
    }
    let (m2, m3, m4) = (m2 / n, m3 / n, m4 / n);
    if m2.is_nan() || m2 <= 0.0 {
        return (f64::NAN, f64::NAN);
    }
    (m3 / m2.powf(1.5), m4 / (m2 * m2))
}
