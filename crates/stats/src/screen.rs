//! [`Screen`]: a Sharpe ratio t as f32 constants that place [`LANES`] sets against it from
//! their f32 sums ([`crate::lanes`]) for certain: each lane surely below t (a NaN ratio
//! included: NaN ranks below every number), surely above it, or neither (left to the exact
//! f64 comparison).
//!
//! With n bars in a set, Σr = A and Σr² = Q, the ratio's square is A²(n−1)/(n(nQ − A²)),
//! so for A > 0 it is below t > 0 exactly when A²·c1 < Q·c2, with c1 = n − 1 + t²n and
//! c2 = t²n² (likewise for the other signs). A lane's A lies within its slack of the f32
//! sum and Q within ρ of it ([`crate::lanes`]), and the constants are widened by more than
//! f32's roundings of the test, so a test that holds in f32 holds for the f64 sums. It
//! places a lane by a ratio only where nQ − A² ≥ 2^-10·nQ (`varies`): there the f64
//! variance has no cancellation, and sharpe()'s f64 value is within 2^-40 of the exact
//! ratio of the f64 sums, far inside the constants' margins.
//!
//! Invariant: a lane placed below (above) t has a Sharpe ratio whose f64 value, as
//! [`sharpe`](crate::sharpe) computes it from the f64 sums, is below (above) t, or NaN
//! (never NaN).

use crate::device_screen::{DeviceScreen, GREATEST_CONSTANT, LEAST_CONSTANT, NOT_NAN, NOTHING, RATIO};
use crate::lanes::{ALL_LANES, LANES, Mask, Q_MIN, U, relative_error};
use crate::vector::Vector;

/// A ratio to place lanes against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Screen {
    kind: Kind,
    /// 1 for t > 0; −1 for t < 0, which mirrors the lanes (Σr → −Σr) so that one test,
    /// against |t|, serves both signs without a branch.
    sign: f32,
    /// Every lane where t < 0, else none: picks the mirrored lanes' answers.
    mirrored: Mask,
    /// c1 widened up, c2 narrowed down: `A²·c1_up < Q·c2_dn` in f32 says A²c1 < c2Q.
    c1_up: f32,
    c2_dn: f32,
    /// c1 narrowed down, c2 widened up: `A²·c1_dn > Q·c2_up` in f32 says A²c1 > c2Q.
    c1_dn: f32,
    c2_up: f32,
    /// `A² < Q·varies` in f32 says nQ − A² ≥ 2^-10·nQ.
    varies: f32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// t is a number other than 0.
    Ratio,
    /// t is NaN: "above" says a lane is surely not NaN.
    NotNan,
    /// t is 0 or infinite: nothing is placed.
    Nothing,
}

impl Screen {
    /// Against the f64 Sharpe ratio `t` (`None`: NaN, and "above" says only that a lane is
    /// surely not NaN) of sets of `n` bars out of `blocks` blocks.
    pub fn new(t: Option<f64>, n: f64, blocks: usize) -> Self {
        let rho = relative_error(blocks);
        // Each product in f32 rounds twice (≤ 2^-24 each); the constants' own rounding to
        // f32 once more; Q is within ρ; 8·2^-24 more covers the f64 roundings of c1, c2.
        let (wide, narrow) = (1.0 + 8.0 * U, 1.0 - 8.0 * U);
        let (q_up, q_dn) = (1.0 + 2.0 * rho, 1.0 - 2.0 * rho);
        let varies = (n * (1.0 - 2f64.powi(-10)) * q_dn * narrow) as f32;
        let plain =
            |kind| Self { kind, sign: 1.0, mirrored: 0, c1_up: 0.0, c2_dn: 0.0, c1_dn: 0.0, c2_up: 0.0, varies };
        let t = match t {
            None => return plain(Kind::NotNan),
            Some(t) if t == 0.0 || !t.is_finite() => return plain(Kind::Nothing),
            Some(t) => t,
        };
        let (c1, c2) = (n - 1.0 + t * t * n, t * t * n * n);
        Self {
            kind: Kind::Ratio,
            sign: if t > 0.0 { 1.0 } else { -1.0 },
            mirrored: if t > 0.0 { 0 } else { ALL_LANES },
            c1_up: (c1 * wide) as f32,
            c2_dn: (c2 * q_dn * narrow) as f32,
            c1_dn: (c1 * narrow) as f32,
            c2_up: (c2 * q_up * wide) as f32,
            varies,
        }
    }

    /// The same value for a device (`device.rs`): a ratio whose constants leave the range
    /// a device's f32 keeps certain places nothing, and nothing infinite is handed over.
    pub fn for_device(&self) -> DeviceScreen {
        let in_range = |c: f32| (LEAST_CONSTANT..=GREATEST_CONSTANT).contains(&c);
        let kind = match self.kind {
            Kind::Ratio if [self.c1_up, self.c2_dn, self.c1_dn, self.c2_up].into_iter().all(in_range) => RATIO,
            Kind::NotNan => NOT_NAN,
            _ => NOTHING,
        };
        let constant = |c: f32| if kind == RATIO { c } else { 0.0 };
        DeviceScreen {
            kind,
            mirrored: u32::from(self.mirrored != 0),
            sign: self.sign,
            c1_up: constant(self.c1_up),
            c2_dn: constant(self.c2_dn),
            c1_dn: constant(self.c1_dn),
            c2_up: constant(self.c2_up),
            varies: if self.varies.is_finite() && self.varies <= GREATEST_CONSTANT { self.varies } else { 0.0 },
        }
    }

    /// Where the lanes with f32 sums `sums` and slacks `slack` lie: (surely below t or NaN,
    /// surely above t and not NaN). With no ratio, "above" means surely not NaN.
    #[inline(always)]
    pub fn place<V: Vector>(&self, v: V, sums: &[[f32; LANES]; 2], slack: &[f32; LANES]) -> (Mask, Mask) {
        // The lanes mirrored where t < 0: A is their Σr, against |t| > 0.
        let (a, q, d) = (v.mul(v.load(&sums[0]), v.splat(self.sign)), v.load(&sums[1]), v.load(slack));
        let (hi, lo, mag) = (v.add(a, d), v.sub(a, d), v.add(v.abs(a), d));
        let varies = v.and(v.lt(v.mul(mag, mag), v.mul(q, v.splat(self.varies))), v.ge(q, v.splat(Q_MIN)));
        if self.kind != Kind::Ratio {
            return (0, if self.kind == Kind::NotNan { v.bits(varies) } else { 0 });
        }
        let zero = v.splat(0.0);
        // A²·c1 against Q·c2, each side rounded the way that keeps the test certain.
        let less = |x| v.lt(v.mul(v.mul(x, x), v.splat(self.c1_up)), v.mul(q, v.splat(self.c2_dn)));
        let more = |x| v.lt(v.mul(q, v.splat(self.c2_up)), v.mul(v.mul(x, x), v.splat(self.c1_dn)));
        // A surely below |t| (A ≤ 0 included) or NaN; A surely above |t| and not NaN.
        let under = v.bits(v.or(v.le(hi, zero), v.and(varies, less(hi))));
        let over = v.bits(v.and(varies, v.and(v.lt(zero, lo), more(lo))));
        // Mirrored, "above |t|" is below t, and "below |t|" (not NaN) above it.
        let m = self.mirrored;
        ((under & !m) | (over & m), (over & !m) | (under & v.bits(varies) & m))
    }
}

impl DeviceScreen {
    /// Against the f64 Sharpe ratio `t` (`None`: NaN) of sets of `n` bars out of `blocks`
    /// blocks, as [`pbo_on`](crate::pbo_on) hands it to a device.
    pub fn new(t: Option<f64>, n: f64, blocks: usize) -> Self {
        Screen::new(t, n, blocks).for_device()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::BlockMatrix;
    use crate::lanes::{GROUP, LaneTables};
    use crate::ratio::Bars;
    use crate::vector::Portable;
    use proptest::prelude::*;

    /// A tile of combos' blocks: each lane at its own scale (2^-300 to 2^300), with
    /// kinds that press on the bounds: few trades (most blocks 0), a variance near zero
    /// (Σr² = (Σr)²/bars), flat combos, copies of lane 0, a negative Σr² now and then.
    fn tile(seed: u64, blocks: usize, bars: usize) -> BlockMatrix {
        let mut state = seed;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut unit = move || (next() >> 11) as f64 / (1u64 << 53) as f64;
        let n = bars as f64;
        let mut values = Vec::new();
        for lane in 0..LANES {
            let kind = (unit() * 6.0) as u32;
            let scale = 2f64.powi((unit() * 600.0) as i32 - 300);
            let drift = (unit() - 0.4) * 0.02;
            for _ in 0..blocks {
                let noise = (unit() - 0.5) * 3.0;
                let mut sum = scale * (drift * n + noise * n.sqrt() * 0.01);
                let mut sum_sq = scale * scale * (1e-4 * (n - 1.0) * (0.5 + unit())) + sum * sum / n;
                match kind {
                    1 if unit() < 0.7 => (sum, sum_sq) = (0.0, 0.0),
                    2 => sum_sq = sum * sum / n,
                    3 => (sum, sum_sq) = (0.0, 0.0),
                    4 if lane > 0 => {
                        let k = values.len() % (2 * blocks);
                        (sum, sum_sq) = (values[k], values[k + 1]);
                    }
                    5 if unit() < 0.1 => sum_sq = -sum_sq,
                    _ => {}
                }
                values.push(sum);
                values.push(sum_sq);
            }
        }
        BlockMatrix::new(blocks, bars, values).unwrap()
    }

    /// The lanes' f32 sums over the blocks in `mask`, as the passes make them.
    fn screened_sums(tables: &LaneTables, mask: u64, blocks: usize) -> [[f32; LANES]; 2] {
        let parts: Vec<u8> = (0..blocks.div_ceil(GROUP)).map(|g| ((mask >> (g * GROUP)) & 0xff) as u8).collect();
        let last = parts.len() - 1;
        tables.finish(&tables.head(&parts[..last]), last, parts[last])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]
        /// Every lane the screen places is where the exact f64 ratios put it, on every path.
        #[test]
        fn placed_lanes_are_where_their_f64_ratios_are(
            seed in any::<u64>(),
            half in 1usize..20,
            bars in 1usize..3_000,
            mask_seed in any::<u64>(),
            at in 0usize..LANES,
            nudge in prop_oneof![Just(0.0), Just(1e-12), Just(-1e-12), -1e-6f64..1e-6, Just(1e-5), -0.5f64..0.5],
            nan_value in any::<bool>(),
        ) {
            let blocks = 2 * half;
            prop_assume!(bars * half >= 2);
            let matrix = tile(seed, blocks, bars);
            let mut tables = LaneTables::new(blocks);
            let combos: Vec<usize> = (0..LANES).collect();
            tables.fill(&matrix, &combos);
            // A random half of the blocks (not always a split's: the screen does not care).
            let all = if blocks == 64 { u64::MAX } else { (1u64 << blocks) - 1 };
            let mask = (mask_seed & all).max(1);
            let n = (bars * mask.count_ones() as usize) as f64;
            let sets = Bars::new(n);
            let exact: Vec<f64> = (0..LANES).map(|c| {
                let (a, q) = matrix.set_sums(c, mask);
                sets.sharpe(a, q)
            }).collect();
            // The value: a lane's own ratio, nudged.
            let t = exact[at] * (1.0 + nudge);
            let value = if nan_value || t.is_nan() { None } else { Some(t) };
            let screen = Screen::new(value, n, blocks);
            let sums = screened_sums(&tables, mask, blocks);
            let (below, above) = screen.place(Portable, &sums, &tables.slack);
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            {
                if let Some(v3) = pulp::x86::V3::try_new() {
                    prop_assert_eq!(screen.place(v3, &sums, &tables.slack), (below, above));
                }
                if let Some(v4) = pulp::x86::V4::try_new() {
                    prop_assert_eq!(screen.place(v4, &sums, &tables.slack), (below, above));
                }
            }
            for (l, &r) in exact.iter().enumerate() {
                let (b, a) = ((below >> l) & 1 == 1, (above >> l) & 1 == 1);
                prop_assert!(!(b && a));
                match value {
                    Some(t) => {
                        prop_assert!(!b || r.is_nan() || r < t, "lane {l}: {r} placed below {t}");
                        prop_assert!(!a || r > t, "lane {l}: {r} placed above {t}");
                    }
                    None => prop_assert!(!a || !r.is_nan(), "lane {l}: NaN placed as a number"),
                }
            }
        }
    }

    /// On blocks shaped like a sweep's, against a ratio that is not a near tie, the screen
    /// places nearly every lane (else the passes would compute them all exactly).
    #[test]
    fn the_screen_places_nearly_every_lane_of_a_sweep() {
        let (blocks, bars) = (16, 2190);
        let mut placed = 0;
        let mut lanes = 0;
        for seed in 0..200u64 {
            let mut values = Vec::new();
            for lane in 0..LANES {
                for b in 0..blocks {
                    let x = ((seed * 131 + lane as u64 * 17 + b as u64 * 7) % 97) as f64 / 97.0 - 0.45;
                    let sum = x * 0.05;
                    values.push(sum);
                    values.push(1e-4 * (bars - 1) as f64 + sum * sum / bars as f64);
                }
            }
            let matrix = BlockMatrix::new(blocks, bars, values).unwrap();
            let mut tables = LaneTables::new(blocks);
            tables.fill(&matrix, &(0..LANES).collect::<Vec<_>>());
            let mask = 0b1010_0110_0101_1001u64;
            let t = if seed % 2 == 0 { 0.001 } else { -0.001 };
            let screen = Screen::new(Some(t), (8 * bars) as f64, blocks);
            let (below, above) = screen.place(Portable, &screened_sums(&tables, mask, blocks), &tables.slack);
            placed += (below | above).count_ones();
            lanes += LANES as u32;
        }
        assert!(placed * 100 >= lanes * 99, "{placed} of {lanes} lanes placed");
    }
}
