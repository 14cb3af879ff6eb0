//! What a backtest's page shows of its risk beside the equity curve: the worst drawdown
//! periods (quantstats' "worst drawdowns": peak, valley, recovery, depth), a rolling
//! annualised Sharpe ratio, and the buy-and-hold curve it is compared with.

/// One fall of equity from a running peak and its recovery.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DrawdownPeriod {
    /// The bar of the peak it fell from.
    pub peak: usize,
    /// The bar of its lowest equity.
    pub valley: usize,
    /// The first bar back at or above the peak; `None` while it has not recovered.
    pub recovery: Option<usize>,
    /// valley / peak − 1 (< 0).
    pub depth: f64,
}

/// The `k` deepest drawdown periods of `equity`, deepest first (ties: the earlier first).
/// A period starts when equity falls below its running peak and ends at the first bar
/// back at or above it, as the page's drawdown chart draws it.
pub(crate) fn worst_drawdowns(equity: &[f64], k: usize) -> Vec<DrawdownPeriod> {
    let mut periods = Vec::new();
    let mut peak = (0, f64::NEG_INFINITY);
    let mut open: Option<DrawdownPeriod> = None;
    for (i, &e) in equity.iter().enumerate() {
        if e >= peak.1 {
            if let Some(mut p) = open.take() {
                p.recovery = Some(i);
                periods.push(p);
            }
            peak = (i, e);
            continue;
        }
        let depth = e / peak.1 - 1.0;
        match &mut open {
            Some(p) if depth < p.depth => {
                p.valley = i;
                p.depth = depth;
            }
            Some(_) => {}
            None => open = Some(DrawdownPeriod { peak: peak.0, valley: i, recovery: None, depth }),
        }
    }
    periods.extend(open);
    periods.sort_by(|a, b| a.depth.total_cmp(&b.depth).then(a.peak.cmp(&b.peak)));
    periods.truncate(k);
    periods
}

/// The Sharpe ratio of each bar's last `window` returns (equity over the bar before, the
/// first over 1), annualised by √`per_year` (NaN before `window` returns, or where they do
/// not vary): ThreadX's one Sharpe ratio (`threadx_stats::sharpe`) of sums kept as the
/// window slides, for a chart.
pub(crate) fn rolling_sharpe(equity: &[f64], window: usize, per_year: f64) -> Vec<f64> {
    let returns: Vec<f64> =
        std::iter::once(1.0).chain(equity.iter().copied()).zip(equity).map(|(before, &e)| e / before - 1.0).collect();
    let scale = if per_year.is_finite() { per_year.sqrt() } else { 1.0 };
    let (mut sum, mut sum_sq) = (0.0, 0.0);
    (0..returns.len())
        .map(|i| {
            sum += returns[i];
            sum_sq += returns[i] * returns[i];
            if i >= window {
                sum -= returns[i - window];
                sum_sq -= returns[i - window] * returns[i - window];
            }
            if window < 2 || i + 1 < window {
                return f64::NAN;
            }
            threadx_stats::sharpe(sum, sum_sq, window) * scale
        })
        .collect()
}

/// The bars in a rolling window: about a quarter of a year of bars when the data has time
/// (63 trading days, 13 weeks of hours), else a tenth of the bars; at least 20.
pub(crate) fn rolling_window(bars: usize, per_year: f64) -> usize {
    let window = if per_year.is_finite() { (per_year / 4.0).round() as usize } else { bars / 10 };
    window.max(20)
}

/// Holding the asset from the first close: each close over the first.
pub(crate) fn buy_and_hold(close: &[f64]) -> Vec<f64> {
    let first = close.first().copied().unwrap_or(f64::NAN);
    close.iter().map(|&c| c / first).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawdown_periods_run_from_a_peak_to_the_first_bar_back_above_it() {
        //            0    1    2    3    4    5    6    7    8    9
        let equity = [1.0, 1.2, 0.9, 1.0, 1.2, 1.3, 1.1, 1.25, 0.65, 0.7];
        let periods = worst_drawdowns(&equity, 5);
        assert_eq!(periods.len(), 2);
        // From 1.3 at bar 5 down to 0.65 at bar 8, not recovered.
        assert_eq!((periods[0].peak, periods[0].valley, periods[0].recovery), (5, 8, None));
        assert!((periods[0].depth - (0.65 / 1.3 - 1.0)).abs() < 1e-15);
        // From 1.2 at bar 1 down to 0.9, back at 1.2 on bar 4 (equal counts as back).
        assert_eq!((periods[1].peak, periods[1].valley, periods[1].recovery), (1, 2, Some(4)));
        assert!((periods[1].depth + 0.25).abs() < 1e-15);
        assert_eq!(worst_drawdowns(&equity, 1), periods[..1]);
        assert!(worst_drawdowns(&[1.0, 1.1, 1.2], 5).is_empty());
    }

    #[test]
    fn the_rolling_sharpe_is_the_sharpe_of_each_window() {
        let equity: Vec<f64> = (0..50).map(|i| 1.0 + 0.01 * f64::from(i) + 0.003 * f64::from(i % 3)).collect();
        let rolling = rolling_sharpe(&equity, 10, 252.0);
        assert!(rolling[..9].iter().all(|v| v.is_nan()));
        let returns: Vec<f64> = (0..50).map(|i| equity[i] / if i == 0 { 1.0 } else { equity[i - 1] } - 1.0).collect();
        for i in 9..50 {
            let span = &returns[i - 9..=i];
            let mean = span.iter().sum::<f64>() / 10.0;
            let std = (span.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / 9.0).sqrt();
            let want = mean / std * 252f64.sqrt();
            assert!((rolling[i] - want).abs() < 1e-9 * want.abs(), "bar {i}: {} against {want}", rolling[i]);
        }
        assert_eq!(rolling_window(35_040, 35_040.0), 8760);
        assert_eq!(rolling_window(1000, f64::NAN), 100);
        assert_eq!(rolling_window(100, 52.0), 20);
        assert_eq!(buy_and_hold(&[2.0, 3.0, 1.0]), [1.0, 1.5, 0.5]);
    }
}
