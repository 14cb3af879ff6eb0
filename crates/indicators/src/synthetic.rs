//! The built-in synthetic markets, deterministic from a seed on every machine (the
//! transcendentals are `libm`'s pure-Rust ones, not the platform's):
//!
//! - `btc` (the default): BTC-like 15-minute bars. Log-normal returns whose volatility
//!   switches between calm, normal and busy regimes (a Markov chain, regimes lasting
//!   days), a slow drift, intrabar highs and lows around the open and close, and volume
//!   that rises with volatility. Prices are in cents.
//! - `fx`: EURUSD-like hourly bars, quoted on a 1e-5 tick grid around 1.1, with no bars
//!   from Friday 21:00 to Sunday 22:00 UTC and a gap at each week's first bar, and quiet
//!   stretches where the close stays put or wobbles by a tick: many windows then have a
//!   mean exactly equal to the close, the ties that decide `close > middle`.
//!
//! Both keep `low <= min(open, close)` and `max(open, close) <= high`.

use crate::error::DataError;
use crate::ohlcv::Ohlcv;
use threadx_stats::SeededRng;

/// 2024-01-01T00:00:00Z, the first bar's open time.
const START_MS: i64 = 1_704_067_200_000;
const INTERVAL_MS: i64 = 15 * 60 * 1000;
const START_PRICE: f64 = 42_000.0;

/// Which synthetic market to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Market {
    /// BTC-like 15-minute bars in cents.
    #[default]
    Btc,
    /// EURUSD-like hourly bars on a 1e-5 tick grid.
    Fx,
}

impl std::str::FromStr for Market {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "btc" => Ok(Market::Btc),
            "fx" => Ok(Market::Fx),
            other => Err(format!("market `{other}` is not btc or fx")),
        }
    }
}

/// The most bars a data set may have: bar indices are 32-bit in books and kernels.
pub const MAX_BARS: usize = u32::MAX as usize;

/// Memory a generated bar takes: six f64 columns.
const BYTES_PER_BAR: u64 = 48;

/// What `synthetic:bars=N,seed=S[,market=btc|fx]` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyntheticSpec {
    pub bars: usize,
    pub seed: u64,
    pub market: Market,
}

impl Default for SyntheticSpec {
    /// One year of BTC-like 15-minute bars.
    fn default() -> Self {
        Self { bars: 35_040, seed: 42, market: Market::Btc }
    }
}

impl SyntheticSpec {
    /// Parses `bars=N,seed=S,market=M` (any may be left out: one year, seed 42, btc).
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
                "market" => out.market = value.parse().map_err(bad)?,
                other => return Err(bad(format!("unknown key `{other}` (known: bars, seed, market)"))),
            }
        }
        out.check()?;
        Ok(out)
    }

    /// Refuses, before anything is allocated, a bar count that is zero, past
    /// [`MAX_BARS`], or larger than the memory available now.
    pub fn check(&self) -> Result<(), DataError> {
        let bad = |problem: String| DataError::Synthetic { spec: self.origin(), problem };
        if self.bars == 0 {
            return Err(bad("bars must be at least 1".into()));
        }
        if self.bars > MAX_BARS {
            return Err(bad(format!("{} bars: at most {MAX_BARS} (the engine numbers bars in 32 bits)", self.bars)));
        }
        let needed = self.bars as u64 * BYTES_PER_BAR;
        if let Some(available) = threadx_telemetry::available_memory().filter(|&a| needed > a) {
            return Err(bad(format!(
                "{} bars need about {} MiB of memory and only {} MiB are available",
                self.bars,
                needed >> 20,
                available >> 20
            )));
        }
        Ok(())
    }

    /// The bars; the same spec gives the same bars on every machine.
    pub fn generate(&self) -> Ohlcv {
        match self.market {
            Market::Btc => self.btc(),
            Market::Fx => self.fx(),
        }
    }

    /// `synthetic:…` as `--data` names these bars (the market only when not btc).
    fn origin(&self) -> String {
        let market = if self.market == Market::Fx { ",market=fx" } else { "" };
        format!("synthetic:bars={},seed={}{market}", self.bars, self.seed)
    }

    fn btc(&self) -> Ohlcv {
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
            let c = cents(o * exp(ret)).max(0.01);
            let h = (o.max(c) * exp(vol * rng.normal().abs() * 0.6) * 100.0).ceil() / 100.0;
            let l = (o.min(c) * exp(-vol * rng.normal().abs() * 0.6) * 100.0).floor() / 100.0;
            ts.push(START_MS + i as i64 * INTERVAL_MS);
            open[i] = o;
            close[i] = c;
            high[i] = h;
            low[i] = l.max(0.01);
            volume[i] = (50.0 * (vol / VOL[1]) * exp(0.5 * rng.normal()) * 1e4).round() / 1e4;
            price = c;
        }
        Ohlcv::new(self.origin(), ts, open, high, low, close, volume)
            .unwrap_or_else(|e| unreachable!("synthetic bars: {e}"))
    }

    fn fx(&self) -> Ohlcv {
        /// 2024-01-01T00:00:00Z was a Monday.
        const HOUR_MS: i64 = 3_600_000;
        const WEEK_HOURS: i64 = 168;
        let mut rng = SeededRng::new(self.seed);
        let n = self.bars;
        let (mut ts, mut open, mut high, mut low, mut close, mut volume) =
            (Vec::with_capacity(n), vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
        let price = |ticks: i64| ticks as f64 / 1e5;
        let mut ticks: i64 = 110_000;
        let mut quiet = 0u32;
        let mut hour: i64 = 0;
        for i in 0..n {
            // The market is closed from Friday 21:00 (hour 117 of the week) to Sunday 22:00
            // (hour 166); the first bar after the weekend opens with a gap.
            let mut gap = 0;
            while (117..166).contains(&(hour % WEEK_HOURS)) {
                hour += 1;
                gap = (rng.normal() * 40.0).round() as i64;
            }
            if quiet == 0 && rng.uniform() < 0.03 {
                quiet = 20 + (rng.uniform() * 120.0) as u32;
            }
            let o = ticks + gap;
            let c = if quiet > 0 {
                quiet -= 1;
                // Mostly unchanged, now and then a tick either way.
                o + [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, -1][(rng.uniform() * 14.0) as usize]
            } else {
                o + (rng.normal() * 60.0).round() as i64
            }
            .clamp(50_000, 200_000);
            let wick = |rng: &mut SeededRng| (rng.normal().abs() * if quiet > 0 { 1.0 } else { 25.0 }).round() as i64;
            ts.push(START_MS + hour * HOUR_MS);
            open[i] = price(o);
            close[i] = price(c);
            high[i] = price(o.max(c) + wick(&mut rng));
            low[i] = price(o.min(c) - wick(&mut rng));
            volume[i] = (1_000.0 + rng.uniform() * 4_000.0).round();
            ticks = c;
            hour += 1;
        }
        Ohlcv::new(self.origin(), ts, open, high, low, close, volume)
            .unwrap_or_else(|e| unreachable!("synthetic bars: {e}"))
    }
}

fn exp(x: f64) -> f64 {
    libm::exp(x)
}

fn cents(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
