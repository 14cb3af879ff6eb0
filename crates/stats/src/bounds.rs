//! [`Bounds`]: the least and the greatest Sharpe ratio a combo can have over any half of
//! its blocks, which let CSCV skip the combos that cannot matter (`pbo.rs`). Each combo's
//! blocks are sorted by a network of comparisons, eight combos side by side ([`SIDE`]):
//! no branch depends on the data, where a sort would mispredict about every other one.
//!
//! Invariant: no half of a combo's blocks has a Sharpe ratio outside its bounds; they only
//! skip work, so their own roundings never reach an answer (they are widened past them).

use crate::blocks::BlockMatrix;
use crate::sharpe_of;
use crate::splits::MAX_BLOCKS;
use rayon::prelude::*;

/// Combos whose blocks are sorted side by side.
const SIDE: usize = 8;

/// Bounds on a combo's Sharpe ratio over every half of its blocks, from the least and
/// greatest Σr and Σr² any half can have (the ratio rises with Σr, and with Σr² only
/// while Σr < 0). `never_nan`: no half can have a zero variance.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    pub low: f64,
    pub high: f64,
    pub never_nan: bool,
}

/// Every combo's bounds, in combo order, for halves of `n` bars.
pub(crate) fn all_bounds(matrix: &BlockMatrix, n: f64, n_minus_1: f64) -> Vec<Bounds> {
    let s = matrix.blocks();
    let comparators = network(s);
    let combos = matrix.combos();
    (0..combos.div_ceil(SIDE))
        .into_par_iter()
        .flat_map_iter(|t| {
            let tile = t * SIDE..combos.min((t + 1) * SIDE);
            let (mut a, mut q) = ([[0.0; SIDE]; MAX_BLOCKS], [[0.0; SIDE]; MAX_BLOCKS]);
            for (l, c) in tile.clone().enumerate() {
                for (b, sums) in matrix.combo(c).chunks_exact(2).enumerate() {
                    (a[b][l], q[b][l]) = (sums[0], sums[1]);
                }
            }
            for &(i, j) in &comparators {
                order(&mut a, i, j);
                order(&mut q, i, j);
            }
            let half = s / 2;
            (0..tile.len()).map(move |l| {
                // The least half and the greatest half of each, summed in ascending order.
                let sum = |x: &[[f64; SIDE]]| x.iter().map(|v| v[l]).sum::<f64>();
                let (a_min, a_max) = (sum(&a[..half]), sum(&a[half..s]));
                let (q_min, q_max) = (sum(&q[..half]), sum(&q[half..s]));
                bounds(a_min, a_max, q_min, q_max, n, n_minus_1)
            })
        })
        .collect()
}

/// Batcher's odd–even merge sort of `s` values: the pairs (i, j), i < j, to put in order,
/// in turn. It sorts the next power of two with the rest +∞, so the pairs that reach past
/// `s` would leave every value where it is and are left out.
fn network(s: usize) -> Vec<(usize, usize)> {
    let n = s.next_power_of_two();
    let mut pairs = Vec::new();
    let mut p = 1;
    while p < n {
        let mut k = p;
        while k >= 1 {
            for j in (k % p..n - k).step_by(2 * k) {
                for i in 0..k.min(n - j - k) {
                    let (x, y) = (i + j, i + j + k);
                    if x / (2 * p) == y / (2 * p) && y < s {
                        pairs.push((x, y));
                    }
                }
            }
            k /= 2;
        }
        p *= 2;
    }
    pairs
}

/// Puts values i and j of every lane in order (the blocks are finite: no NaN).
#[inline(always)]
fn order(x: &mut [[f64; SIDE]; MAX_BLOCKS], i: usize, j: usize) {
    let (lo, hi) = (x[i], x[j]);
    x[i] = std::array::from_fn(|l| if hi[l] < lo[l] { hi[l] } else { lo[l] });
    x[j] = std::array::from_fn(|l| if hi[l] < lo[l] { lo[l] } else { hi[l] });
}

/// Room for the rounding of the sums (the bounds' are added in another order).
fn widen(x: f64, up: bool) -> f64 {
    let slack = x.abs() * 1e-9 + 1e-15;
    if up { x + slack } else { x - slack }
}

/// The bounds from the least and greatest Σr and Σr² of a half.
fn bounds(a_min: f64, a_max: f64, q_min: f64, q_max: f64, n: f64, n_minus_1: f64) -> Bounds {
    let var = |a: f64, q: f64| (q - a * (a / n)) / n_minus_1;
    let ratio = |a: f64, q: f64| sharpe_of(a, q, n, n_minus_1);
    let high = if a_max > 0.0 {
        if var(a_max, q_min) > 0.0 { ratio(a_max, q_min) } else { f64::INFINITY }
    } else if var(a_max, q_max) > 0.0 {
        ratio(a_max, q_max)
    } else {
        0.0
    };
    let low = if a_min < 0.0 {
        if var(a_min, q_min) > 0.0 { ratio(a_min, q_min) } else { f64::NEG_INFINITY }
    } else if var(a_min, q_max) > 0.0 {
        ratio(a_min, q_max)
    } else {
        0.0
    };
    let widest = a_min.abs().max(a_max.abs());
    let v = var(widest, q_min);
    let never_nan = v > 0.0 && v > 1e-9 * (q_min / n_minus_1).abs();
    Bounds { low: widen(low, false), high: widen(high, true), never_nan }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The network sorts every even count of blocks CSCV takes, ties included.
        #[test]
        fn the_network_sorts(half in 1usize..=MAX_BLOCKS / 2, seed in any::<u64>()) {
            let s = 2 * half;
            let mut state = seed;
            let mut x = [[0.0; SIDE]; MAX_BLOCKS];
            for row in x.iter_mut().take(s) {
                for v in row.iter_mut() {
                    state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    // Few distinct values, so that ties are common; both signs.
                    *v = ((state >> 60) as f64 - 8.0) * 0.5;
                }
            }
            let mut expected: Vec<Vec<f64>> = (0..SIDE).map(|l| x[..s].iter().map(|r| r[l]).collect()).collect();
            expected.iter_mut().for_each(|e| e.sort_by(f64::total_cmp));
            for (i, j) in network(s) {
                order(&mut x, i, j);
            }
            for (l, e) in expected.iter().enumerate() {
                let sorted: Vec<f64> = x[..s].iter().map(|r| r[l]).collect();
                prop_assert_eq!(&sorted, e);
            }
        }
    }

    #[test]
    fn the_network_of_sixteen_has_batchers_63_comparators() {
        assert_eq!(network(16).len(), 63);
        assert_eq!(network(2), vec![(0, 1)]);
    }
}
