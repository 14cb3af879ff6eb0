//! The session VWAP against its definition written out: each UTC day's Σ tp · volume
//! over Σ volume so far, the same additions in the same order (the same bits), NaN while
//! a session has traded nothing; and a GPU declines it (no kernel).

use threadx_dispatch::testing::adapters;
use threadx_indicators::{Indicator, Ohlcv, compute_cpu, compute_gpu};

#[test]
fn the_vwap_restarts_each_utc_day_and_weighs_by_volume() {
    let data = Ohlcv::load("synthetic:bars=700,seed=4").unwrap();
    let mut volume = data.volume().to_vec();
    // The second day opens with no volume: NaN until its first traded bar.
    let day = |t: i64| t.div_euclid(86_400_000);
    let second = (1..data.len()).find(|&t| day(data.timestamps()[t]) != day(data.timestamps()[t - 1])).unwrap();
    volume[second..second + 3].fill(0.0);
    let data = Ohlcv::new(
        "vwap",
        data.timestamps().to_vec(),
        data.open().to_vec(),
        data.high().to_vec(),
        data.low().to_vec(),
        data.close().to_vec(),
        volume.clone(),
    )
    .unwrap();
    let got = compute_cpu(&data, &[Indicator::Vwap]).unwrap().remove(0);
    let (mut traded, mut shares, mut days) = (0.0, 0.0, 0);
    for (t, &v) in volume.iter().enumerate() {
        if t > 0 && day(data.timestamps()[t]) != day(data.timestamps()[t - 1]) {
            (traded, shares, days) = (0.0, 0.0, days + 1);
        }
        traded += (data.high()[t] + data.low()[t] + data.close()[t]) / 3.0 * v;
        shares += v;
        let want = traded / shares;
        assert_eq!(got.output(0)[t].to_bits(), want.to_bits(), "bar {t}");
    }
    assert!(days >= 6, "{days} sessions");
    assert!(got.output(0)[second..second + 3].iter().all(|v| v.is_nan()));
    assert!(got.output(0)[second + 3].is_finite());
    for ctx in adapters() {
        let e = compute_gpu(ctx, &data, &[Indicator::Vwap]).unwrap_err();
        assert!(e.to_string().contains("vwap has no GPU kernel"), "{e}");
    }
}
