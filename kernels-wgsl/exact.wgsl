// Exact integer arithmetic for kernels whose results must be the CPU's bits: 64-bit
// (vec2<u32>, (low, high) words) and 128-bit (vec4<u32>, lowest word first) two's
// complement integers, and f64 values held as their bits and computed with
// round-to-nearest-even exactly as IEEE 754 does (the GPU has no f64).
//
// Shift amounts in WGSL are taken modulo 32, so every shift by a variable amount below
// guards the amount-0 and amount-32 cases. No function-local array is indexed by a
// variable: lavapipe miscompiled that inside the backtest kernel's loops.

fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

// a < b as signed 64-bit integers.
fn lt_i64(a: vec2<u32>, b: vec2<u32>) -> bool {
    let ah = bitcast<i32>(a.y);
    let bh = bitcast<i32>(b.y);
    return ah < bh || (ah == bh && a.x < b.x);
}

fn max_i64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return select(a, b, lt_i64(a, b));
}

fn min_i64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return select(b, a, lt_i64(a, b));
}

// a < b and a ≤ b as unsigned 64-bit integers.
fn lt_u64(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.y < b.y || (a.y == b.y && a.x < b.x);
}

fn le_u64(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.y < b.y || (a.y == b.y && a.x <= b.x);
}

fn add128(a: vec4<u32>, b: vec4<u32>) -> vec4<u32> {
    let x = a.x + b.x;
    var carry = select(0u, 1u, x < a.x);
    let y0 = a.y + b.y;
    let y = y0 + carry;
    carry = select(0u, 1u, y0 < a.y) + select(0u, 1u, y < y0);
    let z0 = a.z + b.z;
    let z = z0 + carry;
    carry = select(0u, 1u, z0 < a.z) + select(0u, 1u, z < z0);
    return vec4<u32>(x, y, z, a.w + b.w + carry);
}

fn sub128(a: vec4<u32>, b: vec4<u32>) -> vec4<u32> {
    let x = a.x - b.x;
    var borrow = select(0u, 1u, a.x < b.x);
    let y0 = a.y - b.y;
    let y = y0 - borrow;
    borrow = select(0u, 1u, a.y < b.y) + select(0u, 1u, y0 < borrow);
    let z0 = a.z - b.z;
    let z = z0 - borrow;
    borrow = select(0u, 1u, a.z < b.z) + select(0u, 1u, z0 < borrow);
    return vec4<u32>(x, y, z, a.w - b.w - borrow);
}

// a < b as unsigned 128-bit integers.
fn lt_u128(a: vec4<u32>, b: vec4<u32>) -> bool {
    if (a.w != b.w) {
        return a.w < b.w;
    }
    if (a.z != b.z) {
        return a.z < b.z;
    }
    return lt_u64(a.xy, b.xy);
}

// x << n, for n in 0..128.
fn shl128(x: vec4<u32>, n: u32) -> vec4<u32> {
    var v = x;
    if (n >= 64u) {
        v = vec4<u32>(0u, 0u, v.x, v.y);
    }
    if ((n & 32u) != 0u) {
        v = vec4<u32>(0u, v.x, v.y, v.z);
    }
    let r = n & 31u;
    if (r != 0u) {
        let l = 32u - r;
        v = vec4<u32>(v.x << r, (v.y << r) | (v.x >> l), (v.z << r) | (v.y >> l), (v.w << r) | (v.z >> l));
    }
    return v;
}

// x >> n, for n in 0..128.
fn shr128(x: vec4<u32>, n: u32) -> vec4<u32> {
    var v = x;
    if (n >= 64u) {
        v = vec4<u32>(v.z, v.w, 0u, 0u);
    }
    if ((n & 32u) != 0u) {
        v = vec4<u32>(v.y, v.z, v.w, 0u);
    }
    let r = n & 31u;
    if (r != 0u) {
        let l = 32u - r;
        v = vec4<u32>((v.x >> r) | (v.y << l), (v.y >> r) | (v.z << l), (v.z >> r) | (v.w << l), v.w >> r);
    }
    return v;
}

// The number of significant bits of x (0 for 0).
fn bit_length128(x: vec4<u32>) -> u32 {
    if (x.w != 0u) {
        return 128u - countLeadingZeros(x.w);
    }
    if (x.z != 0u) {
        return 96u - countLeadingZeros(x.z);
    }
    if (x.y != 0u) {
        return 64u - countLeadingZeros(x.y);
    }
    return 32u - countLeadingZeros(x.x);
}

// The 53-bit significand (implicit bit included) and the biased exponent of a positive
// normal f64.
fn significand(bits: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(bits.x, (bits.y & 0xfffffu) | 0x100000u);
}

fn biased_exponent(bits: vec2<u32>) -> u32 {
    return (bits.y >> 20u) & 0x7ffu;
}

// The exact 64-bit product of two u32, by 16-bit halves.
fn mul32(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let low = a0 * b0;
    let cross1 = a0 * b1;
    let mid = cross1 + a1 * b0;
    let mid_carry = select(0u, 0x10000u, mid < cross1);
    let lo = low + (mid << 16u);
    return vec2<u32>(lo, a1 * b1 + (mid >> 16u) + mid_carry + select(0u, 1u, lo < low));
}

// The exact product of two 53-bit significands (≤ 106 bits).
fn mul53(a: vec2<u32>, b: vec2<u32>) -> vec4<u32> {
    let p00 = mul32(a.x, b.x);
    let p01 = mul32(a.x, b.y);
    let p10 = mul32(a.y, b.x);
    let p11 = mul32(a.y, b.y);
    let middle = add128(vec4<u32>(0u, p01.x, p01.y, 0u), vec4<u32>(0u, p10.x, p10.y, 0u));
    return add128(add128(vec4<u32>(p00.x, p00.y, 0u, 0u), middle), vec4<u32>(0u, 0u, p11.x, p11.y));
}

// The f64 nearest to x · 2^scale (ties to even), for x > 0 and a normal result.
fn round_to_f64(x: vec4<u32>, scale: i32) -> vec2<u32> {
    let k = bit_length128(x);
    var m: vec2<u32>;
    var exponent = scale + i32(k) - 1;
    if (k <= 53u) {
        m = shl128(x, 53u - k).xy;
    } else {
        let drop = k - 53u;
        m = shr128(x, drop).xy;
        // The dropped bits against half a unit of the last kept place.
        let dropped = sub128(x, shl128(shr128(x, drop), drop));
        let half = shl128(vec4<u32>(1u, 0u, 0u, 0u), drop - 1u);
        let tie = all(dropped == half);
        if (lt_u128(half, dropped) || (tie && (m.x & 1u) == 1u)) {
            m = add64(m, vec2<u32>(1u, 0u));
            if (m.y == 0x200000u) {
                m = vec2<u32>(0u, 0x100000u);
                exponent += 1;
            }
        }
    }
    return vec2<u32>(m.x, (u32(exponent + 1023) << 20u) | (m.y & 0xfffffu));
}

// RN(a · b) for a ≥ 0 and b > 0, both normal or zero, with a normal or zero product.
fn mul_f64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (all(a == vec2<u32>(0u, 0u))) {
        return a;
    }
    let scale = i32(biased_exponent(a)) + i32(biased_exponent(b)) - 2150;
    return round_to_f64(mul53(significand(a), significand(b)), scale);
}

// The bits of the stop level RN(close − RN(mult · atr)) for a positive normal close: a
// positive f64, or 0 when the level is ≤ 0 (no positive close is at or below it).
fn stop_level(close: vec2<u32>, atr: vec2<u32>, mult: vec2<u32>) -> vec2<u32> {
    let p = mul_f64(atr, mult);
    if (all(p == vec2<u32>(0u, 0u))) {
        return close;
    }
    if (!lt_u64(p, close)) {
        return vec2<u32>(0u, 0u);
    }
    let gap = biased_exponent(close) - biased_exponent(p);
    // p < 2^-63 · close: below a quarter of the spacing under close, so RN gives close.
    if (gap >= 64u) {
        return close;
    }
    let difference = sub128(shl128(vec4<u32>(significand(close), 0u, 0u), gap), vec4<u32>(significand(p), 0u, 0u));
    return round_to_f64(difference, i32(biased_exponent(p)) - 1075);
}
