//! The price levels a parameter set's rules compare prices with, for a report to draw
//! over the closes: a Bollinger band, a moving average, a Donchian channel's rolling high,
//! an SMA crossing another. Oscillators and distances (an RSI, an ATR alone) are left out.

use super::bound::{Bound, Op, Price, SeriesKey};
use super::eval::{Eval, SeriesTable};
use crate::error::BacktestError;
use crate::rules::RuleKind;
use crate::strategy::Strategy;
use threadx_indicators::{Indicator, IndicatorBank};

/// (label, values) of every price level the entry and exit rules of `values` compare:
/// what a price is compared with, or both sides of a comparison of two levels (a
/// crossing), each once, in the rules' order: `sma_20 − 2·stddev_20`, `highest(high, 20)[1]`.
pub fn price_series(
    bank: &IndicatorBank<'_>,
    strategy: &Strategy,
    values: &[f64],
) -> Result<Vec<(String, Vec<f64>)>, BacktestError> {
    strategy.check(values)?;
    let decisions = [RuleKind::Entry, RuleKind::Exit, RuleKind::ShortEntry, RuleKind::ShortExit];
    let bound = strategy
        .rules()
        .filter(|rule| decisions.contains(&rule.kind))
        .map(|rule| rule.bind(values, strategy.schema()).map_err(|e| BacktestError::Definition(e.message)))
        .collect::<Result<Vec<Bound>, _>>()?;
    let mut levels = Vec::new();
    for rule in &bound {
        compared_levels(rule, &mut levels);
    }
    let table = SeriesTable::new(bank, levels.iter().copied())?;
    let labels: Vec<String> = levels.iter().map(|l| label(l)).collect();
    let mut series: Vec<(String, Vec<f64>)> = Vec::new();
    for (level, label) in levels.iter().zip(&labels) {
        // A crossing also compares the bar before: its level is drawn once, unshifted.
        let unshifted = label.strip_suffix(']').and_then(|l| l.rsplit_once('[')).map(|(base, _)| base);
        if unshifted.is_some_and(|base| labels.iter().any(|l| l == base)) || series.iter().any(|(l, _)| l == label) {
            continue;
        }
        series.push((label.clone(), Eval::new(level, &table).values(table.bars())));
    }
    Ok(series)
}

/// The levels `bound` compares: a comparison's side that is a level when the other is a
/// price or a level.
fn compared_levels<'b>(bound: &'b Bound, out: &mut Vec<&'b Bound>) {
    match bound {
        Bound::Binary(Op::Lt | Op::Le | Op::Gt | Op::Ge, a, b) => {
            for (this, other) in [(a, b), (b, a)] {
                if is_level(this) && (is_price(other) || is_level(other)) {
                    out.push(this);
                }
            }
        }
        Bound::Binary(_, a, b) => {
            compared_levels(a, out);
            compared_levels(b, out);
        }
        Bound::Neg(a) | Bound::Abs(a) | Bound::Not(a) => compared_levels(a, out),
        Bound::If(c, a, b) => {
            for x in [c, a, b] {
                compared_levels(x, out);
            }
        }
        Bound::Const(_) | Bound::Series(..) => {}
    }
}

/// An open, high, low or close.
fn is_price(bound: &Bound) -> bool {
    matches!(bound, Bound::Series(key, _) if matches!(key.as_ref(), SeriesKey::Price(p) if *p != Price::Volume))
}

/// A level on the price axis: a moving average or band of prices, a rolling high or low
/// of prices, or one of these or a price moved by a distance (`sma − k·stddev`).
fn is_level(bound: &Bound) -> bool {
    match bound {
        Bound::Series(key, _) => match key.as_ref() {
            SeriesKey::Indicator(indicator, _) => {
                matches!(indicator, Indicator::Sma { .. } | Indicator::Ema { .. } | Indicator::BollingerBands { .. })
            }
            SeriesKey::Rolling { source, .. } => is_price(source) || is_level(source),
            SeriesKey::Derived { indicator, source, .. } => {
                matches!(indicator, Indicator::Sma { .. } | Indicator::Ema { .. } | Indicator::BollingerBands { .. })
                    && (is_price(source) || is_level(source))
            }
            SeriesKey::Price(_) => false,
        },
        Bound::Binary(Op::Add | Op::Sub, a, b) => {
            (is_level(a) || is_price(a)) && !matches!(b.as_ref(), Bound::Const(_))
                || (is_level(b) || is_price(b)) && matches!(bound, Bound::Binary(Op::Add, ..))
        }
        _ => false,
    }
}

/// (period, k) of a Bollinger band written as the language builds it: the middle band
/// plus or minus k standard deviations of the same period.
fn band_of(middle: &Bound, width: &Bound) -> Option<(usize, f64)> {
    let Bound::Series(m, 0) = middle else { return None };
    let SeriesKey::Indicator(Indicator::BollingerBands { period, .. }, 0) = m.as_ref() else { return None };
    let Bound::Binary(Op::Mul, k, sd) = width else { return None };
    match (k.as_ref(), sd.as_ref()) {
        (Bound::Const(k), Bound::Series(s, 0)) => match s.as_ref() {
            SeriesKey::Indicator(Indicator::StdDev { period: p }, 0) if p == period => Some((*period, *k)),
            _ => None,
        },
        _ => None,
    }
}

/// A level written back as the rules read: `sma_20 − 2·stddev_20`, `highest(high, 20)[1]`.
fn label(bound: &Bound) -> String {
    match bound {
        Bound::Const(v) => format!("{v}"),
        Bound::Series(key, shift) => {
            let name = match key.as_ref() {
                SeriesKey::Price(price) => {
                    Price::ALL.iter().find(|(_, p)| p == price).map_or("price", |(n, _)| n).into()
                }
                SeriesKey::Indicator(Indicator::BollingerBands { period, .. }, 0) => format!("bbands_{period} middle"),
                SeriesKey::Indicator(indicator, output) => match indicator.output_names() {
                    [_] => indicator.label(),
                    names => format!("{} {}", indicator.label(), names[*output]),
                },
                SeriesKey::Rolling { max, period, source } => {
                    format!("{}({}, {period})", if *max { "highest" } else { "lowest" }, label(source))
                }
                SeriesKey::Derived { indicator, output, source } => match indicator.output_names() {
                    [_] => format!("{}({})", indicator.label(), label(source)),
                    names => format!("{}({}) {}", indicator.label(), label(source), names[*output]),
                },
            };
            if *shift == 0 { name } else { format!("{name}[{shift}]") }
        }
        Bound::Binary(op @ (Op::Add | Op::Sub), a, b) if band_of(a, b).is_some() => {
            let (period, k) = band_of(a, b).unwrap_or_default();
            format!("bbands_{period}_{k} {}", if *op == Op::Add { "upper" } else { "lower" })
        }
        Bound::Binary(op, a, b) => {
            let symbol = match op {
                Op::Add => " + ",
                Op::Sub => " − ",
                Op::Mul => "·",
                Op::Div => "/",
                _ => " ? ",
            };
            format!("{}{symbol}{}", label(a), label(b))
        }
        Bound::Neg(a) => format!("−{}", label(a)),
        _ => "level".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadx_dispatch::{DeviceMode, Dispatcher};
    use threadx_indicators::Ohlcv;

    #[test]
    fn the_price_unit_series_a_strategy_reads_are_its_overlays() {
        let data = Ohlcv::load("synthetic:bars=300,seed=4").unwrap();
        let dispatcher = Dispatcher::from_env(Some(DeviceMode::Cpu)).unwrap();
        let bank = IndicatorBank::new(&data, &dispatcher);
        let bb_atr = Strategy::parse("bb_atr").unwrap();
        let series = price_series(&bank, &bb_atr, &[20.0, 2.0, 14.0, 2.0]).unwrap();
        let labels: Vec<&str> = series.iter().map(|(l, _)| l.as_str()).collect();
        // The lower band (sma − k·stddev) and the middle band the closes are compared with;
        // the ATR (a distance, for the stop) is not drawn.
        assert_eq!(labels, ["bbands_20_2 lower", "bbands_20 middle"]);
        let middle = bank.get(&Indicator::BollingerBands { period: 20, std: 1.0 }).unwrap();
        let sd = bank.get(&Indicator::StdDev { period: 20 }).unwrap();
        let lower: Vec<f64> = middle.output(0).iter().zip(sd.output(0)).map(|(m, s)| m - 2.0 * s).collect();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&series[0].1), bits(&lower));
        assert_eq!(bits(&series[1].1), bits(middle.output(0)));
        // A Donchian channel: rolling highs and lows of prices; the rsi of trend_rsi is not drawn.
        let example = |name: &str| format!("{}/../../examples/strategies/{name}.toml", env!("CARGO_MANIFEST_DIR"));
        let donchian = Strategy::load(&example("donchian")).unwrap();
        let defaults: Vec<f64> = donchian.schema().iter().map(|p| p.default).collect();
        let labels: Vec<String> =
            price_series(&bank, &donchian, &defaults).unwrap().into_iter().map(|(l, _)| l).collect();
        assert_eq!(labels, ["highest(high, 20)[1]", "lowest(low, 20)[1]"]);
        // A crossing of two moving averages: both, once.
        let trend_trail = Strategy::load(&example("trend_trail")).unwrap();
        let labels: Vec<String> =
            price_series(&bank, &trend_trail, &[10.0, 50.0, 3.0]).unwrap().into_iter().map(|(l, _)| l).collect();
        assert_eq!(labels, ["sma_10", "sma_50"]);
        let trend_rsi = Strategy::load(&example("trend_rsi")).unwrap();
        let defaults: Vec<f64> = trend_rsi.schema().iter().map(|p| p.default).collect();
        let labels: Vec<String> =
            price_series(&bank, &trend_rsi, &defaults).unwrap().into_iter().map(|(l, _)| l).collect();
        assert!(labels.iter().all(|l| !l.starts_with("rsi")), "{labels:?}");
    }
}
