//! `GridCursor` walks any order of combos to the axis positions a mixed-radix decode gives
//! (the last axis varying fastest), stepping through runs and wrapping every axis.

use proptest::prelude::*;
use threadx_backtest::GridCursor;

/// Combo `combo`'s axis positions, by the definition: repeated division, last axis first.
fn decode(lens: &[usize], combo: u64) -> Vec<usize> {
    let mut rest = combo;
    let mut index = vec![0; lens.len()];
    for (i, &len) in lens.iter().enumerate().rev() {
        index[i] = (rest % len as u64) as usize;
        rest /= len as u64;
    }
    index
}

proptest! {
    #[test]
    fn runs_and_jumps_give_the_decoded_positions(
        lens in prop::collection::vec(1usize..6, 1..6),
        starts in prop::collection::vec((0u64..10_000, 0u64..40), 1..8),
    ) {
        let combos: u64 = lens.iter().map(|&l| l as u64).product();
        let mut cursor = GridCursor::new(lens.iter().copied());
        for (start, run) in starts {
            let start = start % combos;
            for combo in start..(start + run).min(combos) {
                prop_assert_eq!(cursor.index(combo), &decode(&lens, combo)[..], "combo {}", combo);
            }
        }
    }
}

#[test]
fn a_whole_grid_in_order_wraps_every_axis() {
    let lens = [3, 1, 4, 2];
    let mut cursor = GridCursor::new(lens);
    for combo in 0..24 {
        assert_eq!(cursor.index(combo), &decode(&lens, combo)[..]);
    }
    assert_eq!(cursor.index(23), &[2, 0, 3, 1]);
    assert_eq!(cursor.index(0), &[0, 0, 0, 0]);
}

#[test]
#[should_panic(expected = "combo 24 of a 24-combo grid")]
fn a_combo_past_the_grid_is_a_callers_bug() {
    let mut cursor = GridCursor::new([3, 1, 4, 2]);
    cursor.index(23);
    cursor.index(24);
}
