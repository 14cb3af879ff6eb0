// Shared by the indicator kernels (rolling.wgsl, smoothing.wgsl, range.wgsl), which the
// host compiles each with this text in front: WGSL has no include.

struct Params {
    n: u32,     // bars
    sets: u32,  // parameter sets (periods) in this dispatch
    pad: vec2<u32>,
}

// The difference of two prices given as (hi, lo) f32 pairs of (price - reference):
// exact to f32's relative precision on the difference, not on the price.
fn diff(a: vec2<f32>, b: vec2<f32>) -> f32 {
    return (a.x - b.x) + (a.y - b.y);
}

