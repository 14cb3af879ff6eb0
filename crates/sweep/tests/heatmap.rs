//! The heatmap as a reader sees it: labelled axes at any grid size, a colour scale centred
//! on zero when the metric changes sign, cells without a value explained, and a title
//! naming the metric and what each cell is the best over.

use threadx_backtest::{Metrics, ParamValues, Strategy};
use threadx_sweep::{Heatmap, Row};

fn metrics(sharpe: f64) -> Metrics {
    Metrics {
        total_return: 0.0,
        trades: 1,
        closed_trades: 1,
        win_rate: 1.0,
        max_drawdown: 0.0,
        sharpe,
        sharpe_annual: sharpe,
        exposure: 0.5,
        ..Metrics::from_values([0.0; Metrics::NAMES.len()])
    }
}

/// The text of every `<text>` element.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_owned()))
        .collect()
}

#[test]
fn a_large_grid_has_readable_labels_a_zero_centred_scale_and_explained_grey_cells() {
    // The README's big grid: 100 bb_period × 21 bb_std, best over 2 atr_period.
    let periods: Vec<f64> = (5..105).map(f64::from).collect();
    let widths: Vec<f64> = (10..31).map(|i| f64::from(i) / 10.0).collect();
    let axes = vec![periods.clone(), widths.clone(), vec![10.0, 20.0], vec![2.0]];
    let mut map = Heatmap::new(Strategy::parse("bb_atr").unwrap(), &axes, None, None, "sharpe").unwrap();
    let mut combo = 0;
    for (i, &p) in periods.iter().enumerate() {
        for (j, &k) in widths.iter().enumerate() {
            for &a in &axes[2] {
                // Sharpe from −1 to 2 across the grid; the cell (0, 0) has no value.
                let sharpe = if i + j == 0 { f64::NAN } else { -1.0 + 3.0 * (i * 21 + j) as f64 / 2099.0 };
                map.offer(&Row { combo, values: ParamValues::new(&[p, k, a, 2.0]), metrics: metrics(sharpe) });
                combo += 1;
            }
        }
    }
    let svg = map.to_svg().unwrap();
    let texts = texts(&svg);
    assert!(texts.contains(&"bb_atr sharpe: the best over atr_period in each cell".to_owned()), "{texts:?}");
    // Every label is a value of its axis, and there are enough of them to read positions.
    let on_x: Vec<&String> = texts.iter().filter(|t| periods.iter().any(|p| p.to_string() == **t)).collect();
    assert!(on_x.len() >= 8, "{texts:?}");
    for w in ["1", "2", "3"] {
        assert!(texts.iter().any(|t| t == w), "bb_std label {w} missing: {texts:?}");
    }
    // The colour bar is labelled at both ends and at 0, and the grey cell is explained.
    for t in ["2.0000", "-0.9986", "0.0000", "no value", "(no trades)"] {
        assert!(texts.iter().any(|x| x == t), "{t} missing: {texts:?}");
    }
    // Grey for the empty cell, white (the scale's middle) only near zero.
    assert!(svg.contains("fill=\"#C8C8C8\""), "no grey cell");
    assert!(svg.contains("fill=\"#F7F7F7\""), "no white: the scale is not centred on zero");
    // Each side spans its own extreme: the best cell (2.0) full blue and the worst
    // (−0.9986, half the size) full red, not the pale red of a symmetric scale.
    assert!(svg.contains("fill=\"#31549B\""), "the best cell is not full blue");
    assert!(svg.contains("fill=\"#B2182B\""), "the worst cell is not full red");
}

#[test]
fn a_heatmap_past_the_cell_limit_is_refused_before_any_allocation() {
    let big = |n: usize| (0..n).map(|i| 0.001 * (i + 1) as f64).collect::<Vec<f64>>();
    // 100,000 × 1,000,000 cells (1.6 TB as a dense grid): refused, naming both axes.
    let axes =
        vec![big(100_000).iter().map(|v| 2.0 + (v * 1000.0).round()).collect(), big(1_000_000), vec![14.0], vec![2.0]];
    let err = Heatmap::new(Strategy::parse("bb_atr").unwrap(), &axes, None, None, "sharpe").unwrap_err().to_string();
    assert!(err.contains("bb_period × bb_std would have 100000 × 1000000 cells"), "{err}");
    // 1,000 × 1,000 is the largest drawn.
    let axes = vec![big(1_000).iter().map(|v| 2.0 + (v * 1000.0).round()).collect(), big(1_000), vec![14.0], vec![2.0]];
    assert!(Heatmap::new(Strategy::parse("bb_atr").unwrap(), &axes, None, None, "sharpe").is_ok());
}

#[test]
fn a_sampled_heatmap_grows_with_what_ran_not_with_the_grid() {
    let axis = |n: usize, from: f64| (0..n).map(|i| from + i as f64).collect::<Vec<f64>>();
    let axes = vec![axis(1_000, 2.0), (1..=999).map(|i| 0.001 * f64::from(i)).collect(), vec![14.0], vec![2.0]];
    let strategy = Strategy::parse("bb_atr").unwrap();
    let mut map = Heatmap::new(strategy, &axes, None, None, "sharpe").unwrap();
    for k in 0..100u64 {
        let combo = k * 9_973;
        let (i, j) = ((combo / 999) as usize, (combo % 999) as usize);
        map.offer(&Row {
            combo,
            values: ParamValues::new(&[axes[0][i], axes[1][j], 14.0, 2.0]),
            metrics: metrics(0.01),
        });
    }
    let svg = map.to_svg().unwrap();
    // 100 cells and one "not run" background, not 999,000 cells.
    assert_eq!(svg.matches("(combo ").count(), 100);
    assert_eq!(svg.matches("not run (not sampled)").count(), 1);
    assert!(svg.len() < 200_000, "{} bytes", svg.len());
}
