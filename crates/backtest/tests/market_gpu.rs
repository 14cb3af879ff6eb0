//! The market kernel (market.wgsl) against its CPU twin (market.rs), on every adapter:
//! its f64 arithmetic bit for bit, every example rule file's totals and blocks, and a
//! proptest over random bars with gaps and random signals, every market rule in
//! combination (shorts × reversals × stops and take-profits × trails × intrabar × next-open
//! fills × slippage). The two-million-bar parity is tests/long_data.rs.

use crate::common;

use common::{all_plans, cpu_book, one_test_on_the_gpus};
use ndarray::Array2;
use proptest::prelude::*;
use threadx_backtest::{
    BarTables, BlockCuts, Costs, Fill, Fills, GpuBacktester, SignalBook, Strategy, UserSignals, simulate_cpu,
};
use threadx_dispatch::Kernel;
use threadx_dispatch::testing::adapters;
use threadx_indicators::Ohlcv;
use threadx_stats::SeededRng;

/// A kernel that applies float64.wgsl's operations to (a, b) pairs: a + b, a − b, a · b,
/// a / b, ret_units(a) (four words) and whether a < b, a ≤ b, per pair.
const FLOAT64_OPS: Kernel = Kernel {
    name: "float64_ops_test",
    source: concat!(
        include_str!("../../../kernels-wgsl/exact.wgsl"),
        include_str!("../../../kernels-wgsl/float64.wgsl"),
        r#"
@group(0) @binding(0) var<storage, read> inputs: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<u32>>;
@compute @workgroup_size(64)
fn ops(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= arrayLength(&inputs)) {
        return;
    }
    out_of_range = false;
    let a = inputs[i].xy;
    let b = inputs[i].zw;
    out[4u * i] = vec4<u32>(f64_add(a, b), f64_sub(a, b));
    out[4u * i + 1u] = vec4<u32>(f64_mul(a, b), f64_div(a, b));
    out[4u * i + 2u] = f64_ret_units(a);
    out[4u * i + 3u] = vec4<u32>(select(0u, 1u, f64_lt(a, b)), select(0u, 1u, f64_le(a, b)),
        select(0u, 1u, out_of_range), 0u);
}
"#
    ),
    entry: "ops",
};

/// The CPU's answers as the kernel writes them: the four results' bits, ret_units(a) and
/// whether a < b, a ≤ b.
fn cpu_ops(a: f64, b: f64) -> ([u64; 4], u128, [u32; 2]) {
    let x = a * 18_446_744_073_709_551_616.0;
    let units = if x.abs() < 9_223_372_036_854_775_808.0 {
        let whole = x as i64;
        let fraction = x - whole as f64;
        i128::from(whole + i64::from(fraction >= 0.5) - i64::from(fraction <= -0.5))
    } else {
        x.round() as i128
    };
    (
        [(a + b).to_bits(), (a - b).to_bits(), (a * b).to_bits(), (a / b).to_bits()],
        units as u128,
        [u32::from(a < b), u32::from(a <= b)],
    )
}

/// Whether the CPU's results of (a, b) all lie where float64.wgsl computes them: normal
/// or zero operands and results below 2^1022, a nonzero divisor, |a| < 2^63.
fn in_range(a: f64, b: f64) -> bool {
    let normal_or_zero = |v: f64| v == 0.0 || v.is_normal();
    let [sum, difference, product, quotient] = [a + b, a - b, a * b, a / b];
    // A product or quotient of nonzero operands that is 0 underflowed.
    let underflow = (product == 0.0 && a != 0.0 && b != 0.0) || (quotient == 0.0 && a != 0.0);
    [a, b, sum, difference, product, quotient].into_iter().all(normal_or_zero)
        && !underflow
        && b != 0.0
        && a.abs() < 9.2e18
        && [sum, difference, product, quotient].iter().all(|v| v.abs() < 4.4e307)
}

fn pairs() -> Vec<(f64, f64)> {
    let mut rng = SeededRng::new(51);
    let mut pairs = Vec::new();
    let signed = |rng: &mut SeededRng, v: f64| if rng.next_u64().is_multiple_of(2) { v } else { -v };
    // Prices, cash and returns as a simulation meets them.
    for _ in 0..20_000 {
        let (price, ratio) = ((1.0 + rng.uniform() * 1e5).round() / 100.0, rng.uniform() * 3.0);
        let a = signed(&mut rng, price);
        let b = signed(&mut rng, ratio);
        pairs.push((a, b));
        pairs.push((a, a * (1.0 + (rng.uniform() - 0.5) * 1e-12)));
        pairs.push((1.0 + (rng.uniform() - 0.5) * 1e-3, 1.0));
    }
    // Arbitrary bits over a wide range of magnitudes.
    for _ in 0..20_000 {
        let bits = |rng: &mut SeededRng, spread: u64| {
            let exponent = 1023 + rng.next_u64() % spread - spread / 2;
            f64::from_bits((rng.next_u64() & 0x800f_ffff_ffff_ffff) | exponent << 52)
        };
        pairs.push((bits(&mut rng, 120), bits(&mut rng, 120)));
        pairs.push((bits(&mut rng, 2040), bits(&mut rng, 2040)));
    }
    // Divisions: exact quotients, quotients a few units off exact, divisors of every
    // significand pattern (all ones, one bit), dividends just below and above divisors.
    for i in 0..4_000u64 {
        let b = f64::from_bits((rng.next_u64() & 0x000f_ffff_ffff_ffff) | (1023 + i % 40 - 20) << 52);
        let k = (1 + rng.next_u64() % 1_000) as f64;
        let nudge = |x: f64, units: i64| f64::from_bits((x.to_bits() as i64 + units) as u64);
        pairs.push((b * k, b));
        pairs.push((nudge(b * k, (i % 5) as i64 - 2), b));
        pairs.push((nudge(b, 1), b));
        pairs.push((nudge(b, -1), b));
        pairs.push((b, f64::from_bits(0x3fff_ffff_ffff_ffff - (i % 3))));
        pairs.push((b, f64::from_bits(0x3ff0_0000_0000_0000 | 1 << (i % 52))));
    }
    // Ties, exact cancellations, zeros of both signs, powers of two.
    for i in 0..2_000u64 {
        let a = f64::from_bits(0x3ff0_0000_0000_0000 | (i << 40) | 1);
        pairs.push((a, 1.0 + f64::EPSILON * (i % 7) as f64));
        pairs.push((a, -a));
        pairs.push((a, 0.0));
        pairs.push((-0.0, a));
        pairs.push((0.0, -0.0));
        pairs.push((2f64.powi((i % 200) as i32 - 100), -(1.0 + f64::EPSILON)));
        pairs.push((0.5 / 2f64.powi(64) * (1.0 + (i % 3) as f64), 3.0));
    }
    pairs
}

#[test]
fn float64_operations_are_the_cpus_bits_or_flagged() {
    let pairs = pairs();
    let inputs: Vec<u64> = pairs.iter().flat_map(|&(a, b)| [a.to_bits(), b.to_bits()]).collect();
    let _gpus = one_test_on_the_gpus();
    for ctx in adapters() {
        let input = ctx.storage_buffer::<u32>("inputs", bytemuck::cast_slice(&inputs)).unwrap();
        let out = ctx.output_buffer::<[u32; 16]>("out", pairs.len()).unwrap();
        ctx.dispatch(&FLOAT64_OPS, &[&input, &out], [(pairs.len() as u32).div_ceil(64), 1, 1]).unwrap();
        let got: Vec<[u32; 16]> = ctx.read_back(&out, pairs.len()).unwrap();
        let (mut flagged, mut checked) = (0, 0);
        for (&(a, b), g) in pairs.iter().zip(&got) {
            let (values, units, order) = cpu_ops(a, b);
            let word = |k: usize| u64::from(g[2 * k]) | u64::from(g[2 * k + 1]) << 32;
            let label = ctx.report().label();
            if g[14] == 1 {
                assert!(!in_range(a, b), "{label}: ({a:e}, {b:e}) flagged though in range");
                flagged += 1;
                continue;
            }
            // Not flagged: every value is the CPU's (out of range, it would differ).
            for (k, want) in values.into_iter().enumerate() {
                assert_eq!(word(k), want, "{label}: op {k} of ({a:e}, {b:e})");
            }
            let got_units = g[8..12].iter().rev().fold(0u128, |acc, &w| acc << 32 | u128::from(w));
            assert_eq!(got_units, units, "{label}: ret_units({a:e})");
            assert_eq!([g[12], g[13]], order, "{label}: order of ({a:e}, {b:e})");
            checked += 1;
        }
        assert!(checked > 90_000 && flagged > 1_000, "{checked} checked, {flagged} flagged");
    }
}

const COSTS: Costs = Costs { fee: 0.0007, slippage: 0.0003 };

fn example(name: &str) -> Strategy {
    Strategy::load(&format!("{}/../../examples/strategies/{name}.toml", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// Every plan's totals and blocks on every adapter against the CPU's.
fn assert_gpu_is_cpu(what: &str, book: &SignalBook, tables: &BarTables) {
    let plans = all_plans(book);
    let cpu = simulate_cpu(book, tables, &plans);
    let _gpus = one_test_on_the_gpus();
    for ctx in adapters() {
        let gpu = GpuBacktester::new(ctx.clone(), book, tables).unwrap().run(book, tables, &plans).unwrap();
        assert_eq!(gpu, cpu, "{what} on {}", ctx.report().label());
    }
}

#[test]
fn every_example_rule_file_trades_on_the_gpu_as_on_the_cpu() {
    for source in ["synthetic:bars=4000,seed=8", "synthetic:bars=3000,seed=2,market=fx"] {
        let data = Ohlcv::load(source).unwrap();
        for name in ["bb_long_short", "trend_trail", "breakout_next_open", "macd_tp", "donchian", "trend_rsi"] {
            let strategy = example(name);
            // Each parameter's default and one value beside it.
            let axes: Vec<Vec<f64>> = strategy
                .schema()
                .iter()
                .map(|p| {
                    let up = if p.default.fract() == 0.0 { p.default + 1.0 } else { p.default * 1.25 };
                    if up <= p.max { vec![p.default, up] } else { vec![p.default] }
                })
                .collect();
            let book = cpu_book(&data, strategy, &axes);
            let tables = BarTables::new(&book, COSTS).with_blocks(Some(BlockCuts::new(data.len(), 16).unwrap()));
            assert_gpu_is_cpu(&format!("{source} {name}"), &book, &tables);
        }
    }
}

/// A short that loses more than the account (the price triples) leaves no cash; the next
/// short's first return is 0/0, which the kernel flags and the host runs on the CPU: the
/// CPU's totals and blocks all the same.
#[test]
fn a_combo_the_kernel_cannot_hold_is_run_on_the_cpu_with_the_same_bits() {
    let close = [10.0, 10.0, 30.0, 31.0, 29.0, 28.0, 30.0, 27.0, 26.0, 25.0, 26.0, 24.0];
    let n = close.len();
    let ts = (0..n as i64).map(|i| 1_700_000_000_000 + i * 900_000).collect();
    let data =
        Ohlcv::new("wipe", ts, close.to_vec(), close.to_vec(), close.to_vec(), close.to_vec(), vec![1.0; n]).unwrap();
    let at = |bars: &[usize]| Array2::from_shape_fn((n, 2), |(t, c)| c == 0 && bars.contains(&t) || c == 1 && t == 4);
    let (long_in, long_out, short_in, short_out) = (at(&[]), at(&[]), at(&[1, 4]), at(&[2, 9]));
    let signals = UserSignals {
        short_entries: Some(short_in.view()),
        short_exits: Some(short_out.view()),
        ..UserSignals::long(long_in.view(), long_out.view())
    };
    let book = SignalBook::from_signals(&data, signals).unwrap();
    let tables = BarTables::new(&book, Costs { fee: 0.001, slippage: 0.0 }).with_blocks(BlockCuts::new(n, 2).ok());
    let cpu = simulate_cpu(&book, &tables, &all_plans(&book));
    // Column 0 was wiped out: its log equity is the lowest there is.
    assert!(cpu.totals[0].log_equity < -1_000 * (1 << 52), "{:?}", cpu.totals[0]);
    assert_gpu_is_cpu("a wiped-out short", &book, &tables);
}

/// Random bars whose opens gap away from the last close, and random signals and stops.
fn random_case(seed: u64, bars: usize, columns: usize) -> (Ohlcv, Vec<Array2<bool>>, Vec<Array2<f64>>) {
    let mut rng = SeededRng::new(seed);
    let (mut open, mut high, mut low, mut close) = (vec![], vec![], vec![], vec![]);
    let mut last = 100.0;
    for _ in 0..bars {
        let o = last * (1.0 + (rng.uniform() - 0.5) * 0.04);
        let c = o * (1.0 + (rng.uniform() - 0.5) * 0.03);
        open.push(o);
        close.push(c);
        high.push(o.max(c) * (1.0 + rng.uniform() * 0.01));
        low.push(o.min(c) * (1.0 - rng.uniform() * 0.01));
        last = c;
    }
    let ts = (0..bars as i64).map(|i| 1_700_000_000_000 + i * 900_000).collect();
    let data = Ohlcv::new("random", ts, open, high, low, close, vec![1.0; bars]).unwrap();
    let mut flags = |p: f64| Array2::from_shape_fn((bars, columns), |_| rng.uniform() < p);
    let signals = vec![flags(0.08), flags(0.05), flags(0.08), flags(0.05)];
    let mut levels = |scale: f64| {
        Array2::from_shape_fn((bars, columns), |_| if rng.uniform() < 0.1 { f64::NAN } else { rng.uniform() * scale })
    };
    let stops = vec![levels(0.03), levels(0.05)];
    (data, signals, stops)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_markets_trade_on_the_gpu_as_on_the_cpu(
        seed in any::<u64>(),
        bars in 40usize..600,
        shorts in any::<bool>(),
        stops in 0usize..4,
        trail in any::<bool>(),
        intrabar in any::<bool>(),
        next_open in any::<bool>(),
        slippage in prop::sample::select(vec![0.0, 0.0004]),
    ) {
        let columns = 6;
        let (data, signals, levels) = random_case(seed, bars, columns);
        let fills = Fills { fill: if next_open { Fill::NextOpen } else { Fill::Close }, intrabar };
        let trails = [trail];
        let user = UserSignals {
            short_entries: shorts.then(|| signals[2].view()),
            short_exits: shorts.then(|| signals[3].view()),
            sl_stop: (stops & 1 == 1 || trail).then(|| levels[0].view()),
            tp_stop: (stops & 2 == 2).then(|| levels[1].view()),
            sl_trail: if trail { &trails } else { &[] },
            fills,
            ..UserSignals::long(signals[0].view(), signals[1].view())
        };
        let book = SignalBook::from_signals(&data, user).unwrap();
        let costs = Costs { fee: 0.001, slippage };
        let blocks = BlockCuts::new(bars, 4).ok();
        let tables = BarTables::new(&book, costs).with_blocks(blocks);
        assert_gpu_is_cpu(&format!("seed {seed}, {bars} bars"), &book, &tables);
    }
}
