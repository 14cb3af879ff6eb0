// True range (one invocation per bar) and Wilder's ATR (one invocation per period,
// walking every bar). High, low and close arrive as (hi, lo) f32 pairs of
// (price - reference), so that the ranges, small differences of large prices, are exact
// to f32's relative precision. Seeding and warm-up follow TA-Lib (cpu.rs).

// Params and diff(): indicators_common.wgsl.
@group(0) @binding(0) var<storage, read> high: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read> low: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read> close: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;
@group(0) @binding(5) var<storage, read> periods: array<u32>;

const WORKGROUP: u32 = 256u;

fn tr_at(t: u32) -> f32 {
    let prev = close[t - 1u];
    let hl = diff(high[t], low[t]);
    let hc = abs(diff(high[t], prev));
    let lc = abs(diff(low[t], prev));
    return max(hl, max(hc, lc));
}

// out[t] = true range from bar 1.
@compute @workgroup_size(WORKGROUP)
fn true_range(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let t = gid.y * groups.x * WORKGROUP + gid.x;
    if (t == 0u || t >= params.n) {
        return;
    }
    out[t] = tr_at(t);
}

// out[set s][t] = ATR from bar period.
@compute @workgroup_size(64)
fn atr(@builtin(global_invocation_id) gid: vec3<u32>) {
    let s = gid.x;
    if (s >= params.sets) {
        return;
    }
    let p = periods[s];
    let row = s * params.n;
    let pf = f32(p);
    let keep = f32(p - 1u);
    var prev = 0.0;
    for (var t = 1u; t <= p; t = t + 1u) {
        prev = prev + tr_at(t);
    }
    prev = prev / pf;
    out[row + p] = prev;
    for (var t = p + 1u; t < params.n; t = t + 1u) {
        prev = (prev * keep + tr_at(t)) / pf;
        out[row + t] = prev;
    }
}
