// Recursive indicators (EMA, RSI, MACD) for a batch of parameter sets: one invocation
// per set walks every bar, because each value depends on the previous one.
//
// Prices arrive as (hi, lo) f32 pairs of (price - reference), so that a bar-to-bar
// change is exact to f32's relative precision. The recursions never carry a price level:
// the EMA carries u = price - EMA (u' = keep * (u + change)), which stays small, and the
// host rebuilds EMA = price - u in f64. RSI needs only changes; MACD = u_slow - u_fast.
// Seeding and warm-up follow TA-Lib (see the CPU twin in cpu.rs).

// Params and diff(): indicators_common.wgsl.
@group(0) @binding(0) var<storage, read> prices: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
@group(0) @binding(3) var<storage, read> periods: array<u32>;

// Mean of price[seed] - price[j] over the `period` bars ending at `seed`:
// price - SMA, the EMA's seed in the u form.
fn seed_offset(seed: u32, period: u32) -> f32 {
    var acc = 0.0;
    for (var j = seed + 1u - period; j < seed; j = j + 1u) {
        acc = acc + diff(prices[seed], prices[j]);
    }
    return acc / f32(period);
}

// out[set s][t] = price[t] - EMA[t] from bar period - 1.
@compute @workgroup_size(64)
fn ema(@builtin(global_invocation_id) gid: vec3<u32>) {
    let s = gid.x;
    if (s >= params.sets) {
        return;
    }
    let p = periods[s];
    let row = s * params.n;
    let keep = f32(p - 1u) / f32(p + 1u);
    var u = seed_offset(p - 1u, p);
    out[row + p - 1u] = u;
    for (var t = p; t < params.n; t = t + 1u) {
        u = keep * (u + diff(prices[t], prices[t - 1u]));
        out[row + t] = u;
    }
}

fn rsi_value(gain: f32, loss: f32) -> f32 {
    let total = gain + loss;
    if (total == 0.0) {
        return 0.0;
    }
    return 100.0 * (gain / total);
}

// out[set s][t] = RSI from bar period.
@compute @workgroup_size(64)
fn rsi(@builtin(global_invocation_id) gid: vec3<u32>) {
    let s = gid.x;
    if (s >= params.sets) {
        return;
    }
    let p = periods[s];
    let row = s * params.n;
    let pf = f32(p);
    let keep = f32(p - 1u);
    var gain = 0.0;
    var loss = 0.0;
    for (var t = 1u; t <= p; t = t + 1u) {
        let change = diff(prices[t], prices[t - 1u]);
        gain = gain + max(change, 0.0);
        loss = loss + max(-change, 0.0);
    }
    gain = gain / pf;
    loss = loss / pf;
    out[row + p] = rsi_value(gain, loss);
    for (var t = p + 1u; t < params.n; t = t + 1u) {
        let change = diff(prices[t], prices[t - 1u]);
        gain = (gain * keep + max(change, 0.0)) / pf;
        loss = (loss * keep + max(-change, 0.0)) / pf;
        out[row + t] = rsi_value(gain, loss);
    }
}

// periods holds (fast, slow, signal) per set. Output blocks of sets * n: line, signal,
// histogram, from bar slow + signal - 2.
@compute @workgroup_size(64)
fn macd(@builtin(global_invocation_id) gid: vec3<u32>) {
    let s = gid.x;
    if (s >= params.sets) {
        return;
    }
    let fast = periods[3u * s];
    let slow = periods[3u * s + 1u];
    let signal = periods[3u * s + 2u];
    let row = s * params.n;
    let block = params.sets * params.n;
    let start = slow - 1u;
    let first = start + signal - 1u;
    let keep_fast = f32(fast - 1u) / f32(fast + 1u);
    let keep_slow = f32(slow - 1u) / f32(slow + 1u);
    let k_signal = 2.0 / (f32(signal) + 1.0);
    var u_fast = seed_offset(start, fast);
    var u_slow = seed_offset(start, slow);
    var acc = 0.0;
    var sig = 0.0;
    for (var t = start; t < params.n; t = t + 1u) {
        if (t > start) {
            let change = diff(prices[t], prices[t - 1u]);
            u_fast = keep_fast * (u_fast + change);
            u_slow = keep_slow * (u_slow + change);
        }
        let line = u_slow - u_fast;
        if (t < first) {
            acc = acc + line;
        } else {
            if (t == first) {
                sig = (acc + line) / f32(signal);
            } else {
                sig = sig + (line - sig) * k_signal;
            }
            out[row + t] = line;
            out[block + row + t] = sig;
            out[2u * block + row + t] = line - sig;
        }
    }
}
