// Whole-backtest kernel: one invocation runs one combo over every bar and writes only its
// metrics' raw totals. It reads the signal book shared by all combos (uploaded once):
// entry and exit decisions as bit rows (decided in f64 on the host, so the GPU takes the
// CPU's decisions), stop levels as (hi, lo) f32 pairs of level − close[0], close the same
// way, and each bar's return close[t]/close[t−1] − 1. Equity is f32, the rules are the
// CPU's (crates/backtest/src/simulate.rs), step for step.

struct Params {
    bars: u32,
    // u32 words per bit row.
    words: u32,
    combos: u32,
    // Index of this dispatch's first combo in plans/outcomes.
    first: u32,
    // 1 + fee and 1 − fee.
    buy: f32,
    sell: f32,
    // close[0], the reference of the (hi, lo) pairs.
    c0: f32,
    pad: u32,
}

struct Plan {
    entry: u32,
    exit: u32,
    stop: u32,
    warmup: u32,
}

struct Outcome {
    // Σ over trades of log-close differences, 64-bit two's complement, 2^-40 units.
    log_lo: u32,
    log_hi: u32,
    trades: u32,
    closed: u32,
    wins: u32,
    max_drawdown: f32,
    sum: f32,
    sum_sq: f32,
    held: u32,
}

@group(0) @binding(0) var<storage, read> close: array<vec2<f32>>;
// (ret[t] as f32 bits, low word of log-close fixed point, high word, unused).
@group(0) @binding(1) var<storage, read> bar: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> entry_bits: array<u32>;
@group(0) @binding(3) var<storage, read> exit_bits: array<u32>;
@group(0) @binding(4) var<storage, read> stops: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read> plans: array<Plan>;
@group(0) @binding(6) var<storage, read_write> outcomes: array<Outcome>;
@group(0) @binding(7) var<uniform> params: Params;

const WORKGROUP: u32 = 64u;
const NO_STOP: u32 = 0xffffffffu;

// Return sums and drawdown (lowest equity since the last peak, divided at new peaks).
struct Acc {
    sum: f32,
    sum_sq: f32,
    peak: f32,
    trough: f32,
    max_drawdown: f32,
}

fn step(acc: ptr<function, Acc>, r: f32, equity: f32) {
    (*acc).sum += r;
    (*acc).sum_sq += r * r;
    if (equity > (*acc).peak) {
        (*acc).max_drawdown = min((*acc).max_drawdown, (*acc).trough / (*acc).peak - 1.0);
        (*acc).peak = equity;
        (*acc).trough = equity;
    } else if (equity < (*acc).trough) {
        (*acc).trough = equity;
    }
}

// a + b − c on 64-bit two's complement (lo, hi) pairs.
fn add_sub(a: vec2<u32>, b: vec2<u32>, c: vec2<u32>) -> vec2<u32> {
    let lo1 = a.x + b.x;
    let hi1 = a.y + b.y + select(0u, 1u, lo1 < a.x);
    let lo2 = lo1 - c.x;
    let hi2 = hi1 - c.y - select(0u, 1u, lo1 < c.x);
    return vec2<u32>(lo2, hi2);
}

// The first entry bit at or after `start` in the row starting at word `base`, or bars.
fn next_entry(base: u32, start: u32) -> u32 {
    var w = start >> 5u;
    if (w >= params.words) {
        return params.bars;
    }
    var word = entry_bits[base + w] & (0xffffffffu << (start & 31u));
    while (word == 0u) {
        w += 1u;
        if (w >= params.words) {
            return params.bars;
        }
        word = entry_bits[base + w];
    }
    return min(w * 32u + countTrailingZeros(word), params.bars);
}

// a ≤ b for (hi, lo) pairs whose sums stand for f64 values.
fn at_or_below(a: vec2<f32>, b: vec2<f32>) -> bool {
    return a.x < b.x || (a.x == b.x && a.y <= b.y);
}

@compute @workgroup_size(64)
fn backtest(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.y * groups.x * WORKGROUP + gid.x;
    if (i >= params.combos) {
        return;
    }
    let plan = plans[params.first + i];
    let n = params.bars;
    let entry_base = plan.entry * params.words;
    let exit_base = plan.exit * params.words;
    let has_stop = plan.stop != NO_STOP;
    var acc = Acc(0.0, 0.0, 1.0, 1.0, 0.0);
    var trades = 0u;
    var closed = 0u;
    var wins = 0u;
    var held = 0u;
    var cash = 1.0;
    var log_growth = vec2<u32>(0u, 0u);
    var start = plan.warmup;
    loop {
        let e = next_entry(entry_base, start);
        if (e >= n) {
            break;
        }
        trades += 1u;
        let ce = close[e];
        let entry_price = params.c0 + (ce.x + ce.y);
        // Shares × entry close: cash / (close · (1 + fee)) · close.
        let entry_value = cash / params.buy;
        var value = entry_value;
        step(&acc, entry_value / cash - 1.0, value);
        var stop = vec2<f32>(0.0, 0.0);
        if (has_stop) {
            stop = stops[plan.stop * n + e];
        }
        var t = e + 1u;
        var exited = false;
        loop {
            if (t >= n) {
                break;
            }
            let c = close[t];
            let signal = ((exit_bits[exit_base + (t >> 5u)] >> (t & 31u)) & 1u) == 1u;
            if (signal || (has_stop && at_or_below(c, stop))) {
                exited = true;
                break;
            }
            // The move since entry is exact in the pairs; its ratio to the price is small.
            value = entry_value * (1.0 + ((c.x - ce.x) + (c.y - ce.y)) / entry_price);
            step(&acc, bitcast<f32>(bar[t].x), value);
            t += 1u;
        }
        if (!exited) {
            held += n - e;
            log_growth = add_sub(log_growth, bar[n - 1u].yz, bar[e].yz);
            break;
        }
        log_growth = add_sub(log_growth, bar[t].yz, bar[e].yz);
        let c = close[t];
        let proceeds = entry_value * (1.0 + ((c.x - ce.x) + (c.y - ce.y)) / entry_price) * params.sell;
        step(&acc, proceeds / value - 1.0, proceeds);
        held += t - e;
        closed += 1u;
        if (proceeds > cash) {
            wins += 1u;
        }
        cash = proceeds;
        // No new entry on the bar of an exit.
        start = t + 1u;
    }
    let max_drawdown = min(acc.max_drawdown, acc.trough / acc.peak - 1.0);
    outcomes[params.first + i] = Outcome(log_growth.x, log_growth.y, trades, closed, wins, max_drawdown, acc.sum, acc.sum_sq, held);
}
