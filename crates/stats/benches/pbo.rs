//! CSCV's cost (`cargo bench -p threadx-stats --bench pbo`): block sums shaped like a
//! sweep's on 35,040 bars (16 blocks of 2,190 bars; each combo a small drift plus noise):
//!
//! - `all/10k`: the default job's size, 10,000 combos over all 12,870 splits;
//! - `random/100k`: 100,000 combos over 1,000 seeded splits (a 10^6-combo sweep does ten
//!   times this work).
//!
//! - `host/10k`: `all/10k` with a device whose screen costs nothing (it replays the
//!   answers of the kernel's CPU twin, recorded once): the CPU's share of CSCV when a GPU
//!   screens, which is what the GPU path adds to the default job besides the kernels.
//!
//! Throughput is in combo-splits (each one Sharpe ratio in sample and one out of sample).

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use std::convert::Infallible;
use std::hint::black_box;
use std::time::Duration;
use threadx_stats::{
    BlockMatrix, ScaledBlocks, ScreenDevice, ScreenPass, Screened, SplitSet, pbo, pbo_on, screen_on_cpu,
};

const BLOCKS: usize = 16;
const BARS: usize = 2190;

/// splitmix64, for test data.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A standard normal (Box–Muller).
fn normal(state: &mut u64) -> f64 {
    let u1 = 1.0 - (next(state) >> 11) as f64 / (1u64 << 53) as f64;
    let u2 = (next(state) >> 11) as f64 / (1u64 << 53) as f64;
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Blocks of `combos` combos: bar returns of deviation 0.001 around a drift of up to
/// 2·10^-5 a bar, summed per block (Σr² from the same draw, so each block is possible).
fn matrix(combos: usize, seed: u64) -> BlockMatrix {
    let mut state = seed;
    let n = BARS as f64;
    let mut values = Vec::with_capacity(combos * 2 * BLOCKS);
    for _ in 0..combos {
        let drift = 2e-5 * (next(&mut state) >> 11) as f64 / (1u64 << 53) as f64;
        for _ in 0..BLOCKS {
            let sum = drift * n + 0.001 * n.sqrt() * normal(&mut state);
            let spread = 1e-6 * (n - 1.0) * (1.0 + 0.05 * normal(&mut state)).abs();
            values.push(sum);
            values.push(spread + sum * sum / n);
        }
    }
    BlockMatrix::new(BLOCKS, BARS, values).expect("finite blocks")
}

fn cscv(c: &mut Criterion) {
    let mut group = c.benchmark_group("pbo");
    group.sample_size(10).measurement_time(Duration::from_secs(20));
    let small = matrix(10_000, 1);
    let all = SplitSet::all(BLOCKS).expect("16 blocks");
    group.throughput(Throughput::Elements((small.combos() * all.len()) as u64));
    group.bench_function("all/10k", |b| b.iter(|| black_box(pbo(&small, &all).expect("a report").pbo)));
    let mut twin = Recorded::default();
    let expected = pbo_on(&small, &all, &mut twin).expect("a report");
    group.bench_function("host/10k", |b| {
        b.iter_batched(
            || Recorded { answers: twin.answers.clone(), replaying: true },
            |mut replay| {
                let report = pbo_on(&small, &all, &mut replay).expect("a report");
                assert_eq!(report, expected, "the replayed answers give the same report");
                black_box(report.pbo)
            },
            BatchSize::LargeInput,
        )
    });
    let large = matrix(100_000, 2);
    let mut state = 7;
    let random = SplitSet::random(BLOCKS, 1000, &mut || next(&mut state)).expect("16 blocks");
    group.throughput(Throughput::Elements((large.combos() * random.len()) as u64));
    group.bench_function("random/100k", |b| b.iter(|| black_box(pbo(&large, &random).expect("a report").pbo)));
    group.finish();
}

/// The kernel's CPU twin, its answers recorded; or, `replaying`, those answers handed
/// back in turn at no cost.
#[derive(Default)]
struct Recorded {
    answers: Vec<Screened>,
    replaying: bool,
}

impl ScreenDevice for Recorded {
    type Error = Infallible;

    fn screen(&mut self, blocks: &ScaledBlocks, pass: &ScreenPass<'_>) -> Result<Screened, Infallible> {
        if self.replaying {
            return Ok(self.answers.remove(0));
        }
        let answer = screen_on_cpu(blocks, pass);
        self.answers.push(answer.clone());
        Ok(answer)
    }
}

criterion_group!(benches, cscv);
criterion_main!(benches);
