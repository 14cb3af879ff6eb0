//! CSCV from blocks against CSCV computed the long way, from the whole returns matrix
//! (pypbo's procedure: concatenate each half's rows, Sharpe ratio per column, rank with
//! ties averaged); PBO near 0.5 on noise and near 0 with a planted edge.

use proptest::prelude::*;
use std::convert::Infallible;
use threadx_stats::{
    BlockMatrix, DeviceScreen, Listing, OpenPair, PboError, ScaledBlocks, ScreenDevice, ScreenPass, Screened, SplitSet,
    pbo, pbo_on, screen_on_cpu, sharpe,
};

/// A seeded stream (splitmix64) for test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let u2 = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// T×N returns, row-major: column c drifts by `drift(c)` per bar.
fn returns(rows: usize, combos: usize, seed: u64, drift: impl Fn(usize) -> f64) -> Vec<f64> {
    let mut rng = Rng(seed);
    (0..rows * combos).map(|i| 0.01 * rng.normal() + drift(i % combos)).collect()
}

/// Ranks ascending with ties averaged and NaN below every number (1-based).
fn rank_of(values: &[f64], j: usize) -> f64 {
    let v = values[j];
    let nan = values.iter().filter(|x| x.is_nan()).count() as f64;
    if v.is_nan() {
        return (nan + 1.0) / 2.0;
    }
    let below = values.iter().filter(|x| x.is_nan() || **x < v).count() as f64;
    let equal = values.iter().filter(|x| **x == v).count() as f64;
    below + (equal + 1.0) / 2.0
}

/// The long way: per split, each column's Sharpe ratio over the concatenated rows.
fn long_way(returns: &[f64], rows: usize, combos: usize, s: usize, splits: &SplitSet) -> (Vec<f64>, Vec<usize>, f64) {
    let (first, len) = (rows % s, rows / s);
    let mut ties = 0;
    let mut logits = Vec::new();
    let mut bests = Vec::new();
    for &mask in splits.masks() {
        let sharpes = |in_sample: bool| -> Vec<f64> {
            (0..combos)
                .map(|c| {
                    let (mut a, mut q, mut n) = (0.0, 0.0, 0);
                    for b in (0..s).filter(|&b| ((mask >> b) & 1 == 1) == in_sample) {
                        for t in first + b * len..first + (b + 1) * len {
                            let r = returns[t * combos + c];
                            a += r;
                            q += r * r;
                            n += 1;
                        }
                    }
                    sharpe(a, q, n)
                })
                .collect()
        };
        let (is, oos) = (sharpes(true), sharpes(false));
        let ranks: Vec<f64> = (0..combos).map(|c| rank_of(&is, c)).collect();
        let best = (0..combos).fold(0, |b, c| if ranks[c] > ranks[b] { c } else { b });
        let w = rank_of(&oos, best) / (combos as f64 + 1.0);
        logits.push((w / (1.0 - w)).ln());
        bests.push(best);
        let first = oos[0];
        ties += usize::from(oos.iter().all(|v| v.is_nan()) || oos.iter().all(|&v| v == first));
    }
    // Undefined with one combo, or when every split ranks all combos alike.
    let pbo = if combos < 2 || ties == splits.len() {
        f64::NAN
    } else {
        logits.iter().filter(|&&l| l <= 0.0).count() as f64 / logits.len() as f64
    };
    (logits, bests, pbo)
}

fn check(returns: &[f64], rows: usize, combos: usize, s: usize) {
    let matrix = BlockMatrix::from_returns(returns, rows, combos, s).unwrap();
    let splits = SplitSet::all(s).unwrap();
    let report = pbo(&matrix, &splits).unwrap();
    let (logits, bests, pbo_long) = long_way(returns, rows, combos, s, &splits);
    assert_eq!(report.best, bests);
    for (a, b) in report.logits.iter().zip(&logits) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
    assert_eq!(report.pbo.to_bits(), pbo_long.to_bits(), "{} vs {pbo_long}", report.pbo);
}

#[test]
fn blocks_give_the_long_ways_answer_on_noise_on_an_edge_and_with_ties() {
    // Noise (no combo skipped by the bounds).
    check(&returns(803, 12, 1, |_| 0.0), 803, 12, 8);
    // Half the combos lose badly (skipped by the bounds), one has an edge.
    let drift = |c: usize| {
        if c == 3 {
            0.004
        } else if c.is_multiple_of(2) {
            -0.02
        } else {
            0.0
        }
    };
    check(&returns(640, 20, 2, drift), 640, 20, 8);
    // Identical columns tie: the first is the best, ranks are averaged.
    let base = returns(400, 5, 3, |_| 0.0);
    let doubled: Vec<f64> = base.chunks(5).flat_map(|row| row.iter().chain(row).copied().collect::<Vec<_>>()).collect();
    check(&doubled, 400, 10, 6);
    // Flat columns (no trades): NaN ratios rank below every number.
    let flat: Vec<f64> = base.chunks(5).flat_map(|row| [row[0], 0.0, row[1], 0.0, row[2]]).collect();
    check(&flat, 400, 5, 4);
}

#[test]
fn pbo_is_near_a_half_on_noise_and_near_zero_with_a_planted_edge() {
    let (rows, combos, s) = (2_000, 100, 16);
    let splits = SplitSet::all(s).unwrap();
    let noise = BlockMatrix::from_returns(&returns(rows, combos, 7, |_| 0.0), rows, combos, s).unwrap();
    let report = pbo(&noise, &splits).unwrap();
    assert!((0.3..0.7).contains(&report.pbo), "noise: PBO {}", report.pbo);
    // One combo with a true Sharpe ratio of 0.1 per bar among 99 without.
    let edge =
        BlockMatrix::from_returns(&returns(rows, combos, 7, |c| if c == 42 { 0.001 } else { 0.0 }), rows, combos, s)
            .unwrap();
    let report = pbo(&edge, &splits).unwrap();
    assert!(report.pbo < 0.05, "edge: PBO {}", report.pbo);
    assert!(report.best.iter().filter(|&&b| b == 42).count() > splits.len() * 9 / 10);
    assert!(report.prob_oos_loss < 0.05);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn blocks_equal_the_long_way_on_random_matrices(
        seed in 0u64..1_000,
        combos in 1usize..40,
        half in 1usize..4,
        extra in 0usize..7,
        odd in any::<bool>(),
    ) {
        let s = 2 * half;
        let rows = s * 5 + extra;
        let drift = |c: usize| (c as f64 - 3.0) * 0.002;
        let mut values = returns(rows, combos, seed, drift);
        if odd {
            // Copies of the first column (ties across the lanes of a tile) and flat ones
            // (NaN ratios), here and there.
            for row in values.chunks_mut(combos) {
                for c in 1..combos {
                    if c % 7 == 3 {
                        row[c] = row[0];
                    } else if c % 5 == 4 {
                        row[c] = 0.0;
                    }
                }
            }
        }
        check(&values, rows, combos, s);
    }
}

/// A set's sums as CSCV defines them: blocks added in order within each group of eight,
/// then the groups' sums in order.
fn set_sums(blocks: &[f64], mask: u64) -> (f64, f64) {
    let mut total = (0.0, 0.0);
    for (g, group) in blocks.chunks(16).enumerate() {
        let mut sums = (0.0, 0.0);
        for (k, b) in group.chunks_exact(2).enumerate() {
            if (mask >> (8 * g + k)) & 1 == 1 {
                sums = (sums.0 + b[0], sums.1 + b[1]);
            }
        }
        total = if g == 0 { sums } else { (total.0 + sums.0, total.1 + sums.1) };
    }
    total
}

/// Blocks of `combos` combos at scales from 2^-300 to 2^300, with few trades, variances
/// near zero, flat combos, exact copies and (as a user's own blocks may have) a negative
/// Σr² here and there: what the screen's bounds must hold on.
fn odd_blocks(seed: u64, combos: usize, blocks: usize, bars: usize) -> BlockMatrix {
    let mut rng = Rng(seed);
    let mut unit = || (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
    let n = bars as f64;
    let mut values: Vec<f64> = Vec::new();
    for c in 0..combos {
        let kind = (unit() * 8.0) as u32;
        let scale = 2f64.powi((unit() * 600.0) as i32 - 300);
        let drift = (unit() - 0.45) * 2e-3;
        let level = scale * n.sqrt() * 0.01;
        for b in 0..blocks {
            let mut sum = scale * (drift * n + (unit() - 0.5) * n.sqrt() * 0.01);
            let mut sum_sq = scale * scale * 1e-4 * (n - 1.0) * (0.5 + unit()) + sum * sum / n;
            match kind {
                1 if unit() < 0.7 => (sum, sum_sq) = (0.0, 0.0),
                2 if unit() < 0.5 => sum_sq = sum * sum / n,
                3 => (sum, sum_sq) = (0.0, 0.0),
                4 if c > 0 => {
                    (sum, sum_sq) = (values[2 * blocks * (c - 1) + 2 * b], values[2 * blocks * (c - 1) + 2 * b + 1])
                }
                5 if unit() < 0.05 => sum_sq = -sum_sq,
                // Blocks of one size and random signs: a set's Σr may nearly cancel.
                6 => sum = if unit() < 0.5 { level } else { -level * (1.0 + 1e-9 * (unit() - 0.5)) },
                _ => {}
            }
            values.extend([sum, sum_sq]);
        }
    }
    BlockMatrix::new(blocks, bars, values).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// Every split's IS best, its IS and OOS Sharpe ratios and the logit are the bits of a
    /// plain computation of the definition: each set's f64 Sharpe ratio, ranked.
    #[test]
    fn cscv_is_the_definitions_bits_on_odd_blocks(
        seed in any::<u64>(),
        combos in 1usize..40,
        half in 1usize..9,
        bars in 1usize..500,
    ) {
        let s = 2 * half;
        prop_assume!(bars * half >= 2);
        let matrix = odd_blocks(seed, combos, s, bars);
        check_definition(&matrix, &SplitSet::all(s).unwrap());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]
    /// Every set a device places (the kernel's twin) is where its f64 ratio is, against a
    /// ratio near a set's own.
    #[test]
    fn a_device_places_only_what_is_certain(
        seed in any::<u64>(),
        half in 1usize..33,
        bars in 1usize..500,
        mask_seed in any::<u64>(),
        at in 0usize..20,
        nudge in prop_oneof![Just(0.0), Just(1e-12), Just(-1e-12), -1e-6f64..1e-6, -0.5f64..0.5],
        nan_value in any::<bool>(),
    ) {
        let s = 2 * half;
        prop_assume!(bars * half >= 2);
        let matrix = odd_blocks(seed, 20, s, bars);
        let all = if s == 64 { u64::MAX } else { (1u64 << s) - 1 };
        let mask = (mask_seed & all).max(1);
        let n = bars * mask.count_ones() as usize;
        let exact: Vec<f64> = (0..20).map(|c| {
            let (a, q) = set_sums(matrix.combo(c), mask);
            sharpe(a, q, n)
        }).collect();
        let t = exact[at] * (1.0 + nudge);
        let value = if nan_value || t.is_nan() { None } else { Some(t) };
        let blocks = ScaledBlocks::new(&matrix);
        let combos: Vec<u32> = (0..20).collect();
        let screens = [DeviceScreen::new(value, n as f64, s)];
        let masks = [[mask as u32, (mask >> 32) as u32]];
        let open = |listing| {
            let pass = ScreenPass { masks: &masks, screens: &screens, combos: &combos, listing };
            screen_on_cpu(&blocks, &pass).open.iter().map(|p| p.combo as usize).collect::<Vec<_>>()
        };
        let (not_below, neither) = (open(Listing::NotBelow), open(Listing::Undecided));
        // The likeliest is the first of the pairs not below with the highest likeness.
        let likeliest = open(Listing::Likeliest);
        prop_assert!(likeliest.len() <= 1 && likeliest.iter().all(|c| not_below.contains(c)));
        for (c, &r) in exact.iter().enumerate() {
            let (below, above) = (!not_below.contains(&c), !neither.contains(&c) && not_below.contains(&c));
            match value {
                Some(t) => {
                    prop_assert!(!below || r.is_nan() || r < t, "combo {c}: {r} placed below {t}");
                    prop_assert!(!above || r > t, "combo {c}: {r} placed above {t}");
                }
                None => prop_assert!(!below && (!above || !r.is_nan()), "combo {c}: {r} placed against NaN"),
            }
        }
    }
}

/// Every split's IS best, its IS and OOS Sharpe ratios and the logit against a plain
/// computation of the definition: each set's f64 Sharpe ratio, ranked.
fn check_definition(matrix: &BlockMatrix, splits: &SplitSet) {
    let report = pbo(matrix, splits).unwrap();
    // The same report, bit for bit, with the pairs screened by the kernel's twin.
    assert_eq!(format!("{:?}", pbo_on(matrix, splits, &mut Twin).unwrap()), format!("{report:?}"));
    let (s, combos) = (matrix.blocks(), matrix.combos());
    let n = matrix.bars() * s / 2;
    let all = if s == 64 { u64::MAX } else { (1u64 << s) - 1 };
    for (j, &mask) in splits.masks().iter().enumerate() {
        let ratios = |mask: u64| -> Vec<f64> {
            (0..combos)
                .map(|c| {
                    let (a, q) = set_sums(matrix.combo(c), mask);
                    sharpe(a, q, n)
                })
                .collect()
        };
        let (is, oos) = (ratios(mask), ratios(all & !mask));
        let ranks: Vec<f64> = (0..combos).map(|c| rank_of(&is, c)).collect();
        let best = (0..combos).fold(0, |b, c| if ranks[c] > ranks[b] { c } else { b });
        let w = rank_of(&oos, best) / (combos as f64 + 1.0);
        assert_eq!(report.best[j], best, "split {j}");
        assert_eq!(report.is_sharpe[j].to_bits(), is[best].to_bits(), "split {j}");
        assert_eq!(report.oos_sharpe[j].to_bits(), oos[best].to_bits(), "split {j}");
        assert_eq!(report.logits[j].to_bits(), (w / (1.0 - w)).ln().to_bits(), "split {j}");
    }
}

#[test]
fn where_every_ratio_is_nan_the_first_combo_is_the_best_even_a_flat_one() {
    // Combo 0 never trades; combo 1 varies only in block 0, so every split whose in-sample
    // half lacks block 0 has no number at all; combo 2 varies everywhere but in block 0.
    let values = vec![
        0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, //
        1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, //
        0.0, 0.0, 0.5, 0.3, -0.2, 0.1, 0.1, 0.2,
    ];
    let matrix = BlockMatrix::new(4, 3, values).unwrap();
    check_definition(&matrix, &SplitSet::all(4).unwrap());
    let two = BlockMatrix::new(4, 3, matrix.values()[..16].to_vec()).unwrap();
    let splits = SplitSet::all(4).unwrap();
    let report = pbo(&two, &splits).unwrap();
    // {2, 3} in sample: both NaN, the first wins.
    let j = splits.masks().iter().position(|&m| m == 0b1100).unwrap();
    assert_eq!(report.best[j], 0);
    check_definition(&two, &splits);
}

#[test]
fn splits_are_every_half_in_combination_order_or_a_seeded_draw() {
    let all = SplitSet::all(6).unwrap();
    assert_eq!(all.len(), 20);
    assert_eq!(&all.masks()[..3], &[0b000111, 0b001011, 0b010011]);
    assert!(all.masks().iter().all(|m| m.count_ones() == 3));
    let mut rng = Rng(5);
    let drawn = SplitSet::random(16, 1_000, &mut || rng.next()).unwrap();
    assert!(!drawn.exhaustive() && drawn.len() == 1_000);
    assert!(drawn.masks().iter().all(|m| m.count_ones() == 8 && *m < 1 << 16));
    let mut again = Rng(5);
    assert_eq!(SplitSet::random(16, 1_000, &mut || again.next()).unwrap(), drawn);
    // The sweep's rule: every split while combos × C(16, 8) ≤ 2·10^8.
    assert!(SplitSet::for_sweep(15_540, 16, 1_000, &mut || 0).unwrap().exhaustive());
    assert!(!SplitSet::for_sweep(15_541, 16, 1_000, &mut || 0).unwrap().exhaustive());
    // Counted without being made, as the sweep's device warm-up does.
    for (combos, blocks) in [(15_540, 16), (15_541, 16), (10, 2), (3, 64), (10_000, 20)] {
        let made = SplitSet::for_sweep(combos, blocks, 700, &mut || rng.next()).unwrap().len();
        assert_eq!(SplitSet::count_for_sweep(combos, blocks, 700), made, "{combos} combos, {blocks} blocks");
    }
    assert!(SplitSet::all(7).is_err() && SplitSet::all(0).is_err() && SplitSet::all(66).is_err());
}

/// The GPU kernel's CPU twin as a device: each pair placed by `DeviceScreen::place`. The
/// sums of odd splits are added in reverse block order with subnormals flushed to zero,
/// as a GPU may: the answer must not change.
struct Twin;

impl ScreenDevice for Twin {
    type Error = Infallible;

    fn screen(&mut self, blocks: &ScaledBlocks, pass: &ScreenPass<'_>) -> Result<Screened, Infallible> {
        let s = blocks.blocks();
        let mut screened = Screened { below: vec![0; pass.screens.len()], open: Vec::new() };
        for (i, (mask, screen)) in pass.masks.iter().zip(pass.screens).enumerate() {
            let mask = u64::from(mask[0]) | u64::from(mask[1]) << 32;
            let flush = |x: f32| if i % 2 == 1 && x.abs() < f32::MIN_POSITIVE { 0.0 } else { x };
            for (j, &c) in pass.combos.iter().enumerate() {
                let record = blocks.record(c as usize);
                let (mut a, mut q) = (0.0f32, 0.0f32);
                for k in 0..s {
                    let b = if i % 2 == 1 { s - 1 - k } else { k };
                    if (mask >> b) & 1 == 1 {
                        (a, q) = (flush(a + flush(record[b][0])), flush(q + flush(record[b][1])));
                    }
                }
                let (below, above) = screen.place(a, q, record[s][0]);
                if below {
                    screened.below[i] += 1;
                } else if pass.listing != Listing::Undecided || !above {
                    screened.open.push(OpenPair { split: i as u32, combo: j as u32, sum: a, sum_sq: q });
                }
            }
        }
        if pass.listing == Listing::Likeliest {
            // Of equally likely pairs the last, where the kernel's twin keeps the first.
            let mut kept: Vec<OpenPair> = Vec::new();
            for p in screened.open {
                match kept.last_mut() {
                    Some(last) if last.split == p.split => {
                        if p.likeness() >= last.likeness() {
                            *last = p;
                        }
                    }
                    _ => kept.push(p),
                }
            }
            screened.open = kept;
        }
        Ok(screened)
    }
}

/// A device that fails, or answers for pairs that are not in the pass.
struct Broken(&'static str);

impl ScreenDevice for Broken {
    type Error = String;

    fn screen(&mut self, _: &ScaledBlocks, pass: &ScreenPass<'_>) -> Result<Screened, String> {
        match self.0 {
            "fails" => Err("lost".into()),
            "too many" => Ok(Screened { below: vec![u32::MAX; pass.screens.len()], open: Vec::new() }),
            _ => {
                let outside = OpenPair { split: 0, combo: pass.combos.len() as u32, sum: 0.0, sum_sq: 0.0 };
                Ok(Screened { below: vec![0; pass.screens.len()], open: vec![outside] })
            }
        }
    }
}

#[test]
fn a_device_that_fails_or_answers_outside_the_pass_is_named_not_believed() {
    let matrix = odd_blocks(3, 20, 8, 50);
    let splits = SplitSet::all(8).unwrap();
    assert!(matches!(pbo_on(&matrix, &splits, &mut Broken("fails")), Err(PboError::Device(e)) if e == "lost"));
    for answer in ["too many", "outside"] {
        let error = pbo_on(&matrix, &splits, &mut Broken(answer)).unwrap_err();
        assert!(matches!(error, PboError::Answer(_)), "{answer}: {error}");
    }
    let other = SplitSet::all(6).unwrap();
    assert!(matches!(pbo_on(&matrix, &other, &mut Twin), Err(PboError::Input(_))));
}

#[test]
fn pbo_is_undefined_where_nothing_is_ranked_and_defined_where_anything_is() {
    let splits = SplitSet::all(8).unwrap();
    let of = |values: Vec<f64>, combos: usize| {
        let report = pbo(&BlockMatrix::from_returns(&values, 400, combos, 8).unwrap(), &splits).unwrap();
        check(&values, 400, combos, 8);
        report.pbo
    };
    let one = returns(400, 1, 3, |_| 0.0);
    assert!(of(one.clone(), 1).is_nan(), "one combo: no ranking");
    let identical: Vec<f64> = one.iter().flat_map(|&r| [r; 10]).collect();
    assert!(of(identical, 10).is_nan(), "ten identical combos: every split a tie");
    assert!(of(vec![0.0; 400 * 6], 6).is_nan(), "no trades: every ratio NaN");
    // One combo apart from nine identical ones is ranked in every split: defined.
    let mut apart: Vec<f64> = one.iter().flat_map(|&r| [r; 10]).collect();
    let other = returns(400, 1, 4, |_| 0.0);
    for (t, r) in other.iter().enumerate() {
        apart[t * 10 + 9] = *r;
    }
    assert!((0.0..=1.0).contains(&of(apart, 10)));
}
