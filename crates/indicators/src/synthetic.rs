//! The built-in synthetic market: BTC-like 15-minute bars, deterministic from a seed.
//!
//! Log-normal returns whose volatility switches between calm, normal and busy regimes
//! (a Markov chain, regimes lasting days), a slow drift, intrabar highs and lows around
//! the open and close, and volume that rises with volatility. Prices are in cents with
//! `low <= min(open, close)` and `max(open, close) <= high`.

use crate::ohlcv::{DataError, Ohlcv};

/// 2024-01-01T00:00:00Z, the first bar's open time.
const START_MS: i64 = 1_704_067_200_000;
const INTERVAL_MS: i64 = 15 * 60 * 1000;
const START_PRICE: f64 = 42_000.0;

/// What `synthetic:bars=N,seed=S` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntheticSpec {
    pub bars: usize,
    pub seed: u64,
}

impl Default for SyntheticSpec {
    /// One year of 15-minute bars.
    fn default() -> Self {
        Self { bars: 35_040, seed: 42 }
    }
}

impl SyntheticSpec {
    /// Parses `bars=N,seed=S` (either may be left out: one year, seed 42).
    pub fn parse(spec: &str) -> Result<Self, DataError> {
        let bad = |problem: String| DataError::Synthetic { spec: spec.to_owned(), problem };
        let mut out = Self::default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| bad(format!("`{part}` is not key=value")))?;
            match key.trim() {
                "bars" => {
                    out.bars = value.trim().parse().map_err(|_| bad(format!("bars `{value}` is not a count")))?;
                }
                "seed" => {
                    out.seed = value.trim().parse().map_err(|_| bad(format!("seed `{value}` is not an integer")))?;
                }
                other => return Err(bad(format!("unknown key `{other}` (known: bars, seed)"))),
            }
        }
        if out.bars == 0 {
            return Err(bad("bars must be at least 1".into()));
        }
        Ok(out)
    }

    /// The bars; the same spec gives the same bars on every machine.
    pub fn generate(&self) -> Ohlcv {
        let mut rng = SeededRng::new(self.seed);
        let n = self.bars;
        let (mut ts, mut open, mut high, mut low, mut close, mut volume) =
            (Vec::with_capacity(n), vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        // Per-bar volatility of the calm, normal and busy regimes (about 35%, 60% and
        // 130% a year), and the chance per bar of leaving the current regime (~2 days).
        const VOL: [f64; 3] = [0.0018, 0.0032, 0.0070];
        const SWITCH: f64 = 1.0 / 200.0;
        let mut regime = 1;
        let mut price = START_PRICE;
        for i in 0..n {
            if rng.uniform() < SWITCH {
                regime = (regime + 1 + (rng.uniform() * 2.0) as usize) % 3;
            }
            let vol = VOL[regime];
            let o = price;
            let ret = 2e-6 + vol * rng.normal();
            let c = cents(o * ret.exp()).max(0.01);
            let h = (o.max(c) * (vol * rng.normal().abs() * 0.6).exp() * 100.0).ceil() / 100.0;
            let l = (o.min(c) * (-vol * rng.normal().abs() * 0.6).exp() * 100.0).floor() / 100.0;
            ts.push(START_MS + i as i64 * INTERVAL_MS);
            open[i] = o;
            close[i] = c;
            high[i] = h;
            low[i] = l.max(0.01);
            volume[i] = (50.0 * (vol / VOL[1]) * (0.5 * rng.normal()).exp() * 1e4).round() / 1e4;
            price = c;
        }
        let origin = format!("synthetic:bars={},seed={}", self.bars, self.seed);
        Ohlcv::new(origin, ts, open, high, low, close, volume).unwrap_or_else(|e| unreachable!("synthetic bars: {e}"))
    }
}

fn cents(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// xoshiro256** seeded by splitmix64: small, fast, and the same stream for a seed on every
/// machine. The one seeded generator of ThreadX (synthetic data, sweep sampling).
#[derive(Debug, Clone)]
pub struct SeededRng([u64; 4]);

impl SeededRng {
    pub fn new(seed: u64) -> Self {
        let mut s = seed;
        let mut next = || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Self([next(), next(), next(), next()])
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller; one draw per call keeps the stream simple).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}
