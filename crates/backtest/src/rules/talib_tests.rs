//! The rule language's indicators against TA-Lib's own outputs (the golden file of the
//! indicators crate, made by its `make_talib_golden.py` with ta-lib 0.8.2): NaN exactly
//! where TA-Lib has none, and a relative error of at most 1e-10 elsewhere. Covers the
//! functions built in the language (willr, stoch_k, stoch_d), the bank's CCI, OBV, ADX
//! and DI,
//! and indicators of other series (`sma(volume, 20)`, `ema(rsi(14), 5)`).

use super::eval::{Eval, SeriesTable};
use super::program::{Rule, RuleKind};
use serde_json::Value;
use threadx_dispatch::DeviceMode;
use threadx_dispatch::testing::dispatcher_in;
use threadx_indicators::{IndicatorBank, Ohlcv};

fn golden() -> Value {
    serde_json::from_str(include_str!("../../../indicators/tests/golden/talib.json")).unwrap()
}

fn column(doc: &Value, section: &str, name: &str) -> Vec<f64> {
    doc[section][name].as_array().unwrap().iter().map(|v| v.as_f64().unwrap_or(f64::NAN)).collect()
}

/// The values of the number rule `text` over the golden bars.
fn series(bank: &IndicatorBank<'_>, text: &str) -> Vec<f64> {
    let bound = Rule::compile(RuleKind::Stop, text, &[]).unwrap().bind(&[], &[]).unwrap();
    let table = SeriesTable::new(bank, [&bound]).unwrap();
    Eval::new(&bound, &table).values(bank.data().len())
}

#[test]
fn rule_indicators_match_talib() {
    let doc = golden();
    let close = column(&doc, "input", "close");
    let ts = (0..close.len() as i64).map(|i| 1_700_000_000_000 + i * 900_000).collect();
    let [open, high, low, volume] = ["open", "high", "low", "volume"].map(|c| column(&doc, "input", c));
    let data = Ohlcv::new("golden", ts, open, high, low, close, volume).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dispatcher = dispatcher_in(dir.path(), DeviceMode::Cpu);
    let bank = IndicatorBank::new(&data, &dispatcher);
    let cases = [
        ("willr(14)", "WILLR_14"),
        ("cci(14)", "CCI_14"),
        ("cci(20)", "CCI_20"),
        ("obv()", "OBV"),
        ("adx(14)", "ADX_14"),
        ("adx(5)", "ADX_5"),
        ("plus_di(14)", "PLUS_DI_14"),
        ("minus_di(14)", "MINUS_DI_14"),
        ("stoch_k(5, 3, 3)", "STOCH_5_3_3_slowk"),
        ("stoch_d(5, 3, 3)", "STOCH_5_3_3_slowd"),
        ("stoch_k(14, 3, 3)", "STOCH_14_3_3_slowk"),
        ("stoch_d(14, 3, 3)", "STOCH_14_3_3_slowd"),
        ("sma(volume, 20)", "SMA_20_of_volume"),
        ("stddev(volume, 10)", "STDDEV_10_of_volume"),
        ("ema(rsi(14), 5)", "EMA_5_of_RSI_14"),
        ("rsi(sma(5), 14)", "RSI_14_of_SMA_5"),
        ("sma(close, 20)", "SMA_20"),
        ("bbands_upper(close, 20, 2)", "BBANDS_20_2_upper"),
    ];
    for (text, name) in cases {
        let (got, want) = (series(&bank, text), column(&doc, "output", name));
        let mut worst = 0.0f64;
        for (t, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.is_nan(), w.is_nan(), "{text} bar {t}: {g} against TA-Lib's {w}");
            if !w.is_nan() {
                worst = worst.max(if *w == 0.0 { g.abs() } else { ((g - w) / w).abs() });
            }
        }
        assert!(worst <= 1e-10, "{text}: relative error {worst:e} against {name}");
    }
    // The close written out or left out: the bank's one series, the same bits.
    let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect::<Vec<_>>();
    assert_eq!(bits(series(&bank, "sma(close, 20)")), bits(series(&bank, "sma(20)")));
    assert_eq!(bits(series(&bank, "ema(close[2], 5)")), bits(series(&bank, "ema(5)[2]")));
    assert_eq!(
        bits(series(&bank, "keltner_upper(14, 2)")),
        bits(series(&bank, "ema(14) + 2 * atr(14)")),
        "keltner: ema ± k atr"
    );
}
