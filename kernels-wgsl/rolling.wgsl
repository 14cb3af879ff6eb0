// Rolling mean and population standard deviation (SMA, STDDEV, Bollinger bands) for a
// batch of periods: one invocation per (period, bar), each summing its own window, so no
// error runs along the series.
//
// Prices arrive as (hi, lo) f32 pairs of (price - reference) computed in f64 by the host,
// and the window is measured from its first bar: differences of nearby prices are then
// exact to f32's relative precision even around 60,000. The host adds the first bar's
// price back in f64. Output: mean offsets for every (set, bar), then deviations; bars
// before a period's warm-up are left unwritten.

// Params and diff(): indicators_common.wgsl.
@group(0) @binding(0) var<storage, read> prices: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
@group(0) @binding(3) var<storage, read> periods: array<u32>;

const WORKGROUP: u32 = 256u;

@compute @workgroup_size(WORKGROUP)
fn rolling_mean_std(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.y * groups.x * WORKGROUP + gid.x;
    if (i >= params.n * params.sets) {
        return;
    }
    let s = i / params.n;
    let t = i % params.n;
    let p = periods[s];
    if (t + 1u < p) {
        return;
    }
    let first = t + 1u - p;
    let base = prices[first];
    var sum = 0.0;
    for (var j = first + 1u; j <= t; j = j + 1u) {
        sum = sum + diff(prices[j], base);
    }
    let mean = sum / f32(p);
    var squares = 0.0;
    for (var j = first; j <= t; j = j + 1u) {
        let d = diff(prices[j], base) - mean;
        squares = squares + d * d;
    }
    out[i] = mean;
    out[params.n * params.sets + i] = sqrt(squares / f32(p));
}
