//! The deflated Sharpe ratio against the paper's worked example (Bailey & López de Prado,
//! 2014, section "A numerical example"), and exact moments.

use threadx_stats::{deflated_sharpe, expected_max, moments, psr};

#[test]
fn the_papers_worked_example() {
    // N = 100 trials whose annualised Sharpe ratios vary by V = 1/2, T = 1,250 daily
    // observations, an annualised Sharpe ratio of 2.5, skew −3, kurtosis 10.
    let per_year = 250.0f64;
    let sr = 2.5 / per_year.sqrt();
    let std = (0.5 / per_year).sqrt();
    let (dsr, sr0) = deflated_sharpe(sr, 1_250.0, -3.0, 10.0, std, 100.0);
    // The paper: SR₀ ≈ 0.1132 per day, DSR ≈ 0.9004.
    assert!((sr0 - 0.1132).abs() < 5e-5, "SR0 {sr0}");
    assert!((dsr - 0.9004).abs() < 5e-4, "DSR {dsr}");
    // E[max] of 100 standard normals by the approximation: 2.5306 (paper's Fig. 1 scale).
    assert!((expected_max(100.0) - 2.5306).abs() < 1e-3, "{}", expected_max(100.0));
    // Against 0, the same Sharpe ratio is near certain.
    assert!(psr(sr, 1_250.0, -3.0, 10.0, 0.0) > 0.999);
    assert_eq!(expected_max(1.0), 0.0);
}

#[test]
fn moments_are_the_population_forms() {
    // 1, 2, 3, 10: mean 4, central moments m2 = 12.5, m3 = 45, m4 = 348.5 (by hand).
    let (skew, kurt) = moments(&[1.0, 2.0, 3.0, 10.0]);
    assert!((skew - 45.0 / 12.5f64.powf(1.5)).abs() < 1e-15);
    assert!((kurt - 348.5 / (12.5 * 12.5)).abs() < 1e-15);
    assert!(moments(&[1.0]).0.is_nan() && moments(&[2.0, 2.0]).1.is_nan());
}
