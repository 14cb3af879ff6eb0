// Simple moving average, one invocation per output bar (bars period-1 .. n-1).
//
// Prices arrive centred on a reference value chosen by the host (price - reference),
// so that f32 keeps the small moves of large prices; the host adds the reference back
// in f64. Each invocation sums its own window, so no error accumulates along the series.

struct Params {
    n: u32,       // number of prices
    period: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> prices: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

const WORKGROUP: u32 = 256u;

@compute @workgroup_size(256)
fn sma(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    // Large inputs are dispatched as a 2-D grid of workgroups.
    let k = gid.y * groups.x * WORKGROUP + gid.x;
    let outputs = params.n - params.period + 1u;
    if (k >= outputs) {
        return;
    }
    var sum = 0.0;
    for (var j = 0u; j < params.period; j = j + 1u) {
        sum = sum + prices[k + j];
    }
    out[k] = sum / f32(params.period);
}
