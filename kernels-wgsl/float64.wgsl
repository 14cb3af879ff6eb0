// Signed f64 arithmetic for the market kernel (market.wgsl), on exact.wgsl's integers:
// addition, subtraction, multiplication and division of f64 values held as their bits,
// each rounded to nearest, ties to even, as IEEE 754 does, and a value's return units
// (crates/backtest/src/fixed.rs::ret_units). Zeros are exact (signed as IEEE signs them).
// What this file does not compute as the CPU would (a subnormal or non-finite operand or
// result, a division by zero, a return past 2^63) sets `out_of_range`: the host then runs
// that combo on the CPU, so no value is ever a guess. No loop: lavapipe counts every loop
// iteration against one bound per invocation (crates/dispatch/src/gpu.rs).

var<private> out_of_range: bool;

const F64_ONE: vec2<u32> = vec2<u32>(0u, 0x3ff00000u);

fn f64_negative(a: vec2<u32>) -> bool {
    return (a.y >> 31u) == 1u;
}

fn f64_is_zero(a: vec2<u32>) -> bool {
    return (a.x | (a.y & 0x7fffffffu)) == 0u;
}

fn f64_abs(a: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x, a.y & 0x7fffffffu);
}

fn f64_neg(a: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x, a.y ^ 0x80000000u);
}

fn f64_finite(a: vec2<u32>) -> bool {
    return biased_exponent(a) != 0x7ffu;
}

// A positive (not zero, not negative) finite value.
fn f64_positive(a: vec2<u32>) -> bool {
    return !f64_negative(a) && !f64_is_zero(a) && f64_finite(a);
}

// Flags an operand the arithmetic below does not take: subnormal or not finite.
fn f64_check(a: vec2<u32>) {
    let e = biased_exponent(a);
    if (e == 0x7ffu || (e == 0u && !f64_is_zero(a))) {
        out_of_range = true;
    }
}

// The key that orders f64 values as unsigned integers (−0 as +0).
fn f64_key(a: vec2<u32>) -> vec2<u32> {
    if (f64_is_zero(a)) {
        return vec2<u32>(0u, 0x80000000u);
    }
    if (f64_negative(a)) {
        return ~a;
    }
    return vec2<u32>(a.x, a.y | 0x80000000u);
}

// a < b and a ≤ b for finite values.
fn f64_lt(a: vec2<u32>, b: vec2<u32>) -> bool {
    return lt_u64(f64_key(a), f64_key(b));
}

fn f64_le(a: vec2<u32>, b: vec2<u32>) -> bool {
    return le_u64(f64_key(a), f64_key(b));
}

// RN(x · 2^scale) with sign `negative`, for x > 0; flags a result outside the normal range.
fn f64_round(x: vec4<u32>, scale: i32, negative: bool) -> vec2<u32> {
    let exponent = scale + i32(bit_length128(x)) - 1 + 1023;
    // One below the top: rounding may carry into the next binade.
    if (exponent < 1 || exponent > 2045) {
        out_of_range = true;
        return vec2<u32>(0u, 0u);
    }
    let bits = round_to_f64(x, scale);
    return select(bits, f64_neg(bits), negative);
}

// RN(a + b).
fn f64_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    f64_check(a);
    f64_check(b);
    if (f64_is_zero(a)) {
        if (f64_is_zero(b)) {
            // −0 only when both are −0.
            return vec2<u32>(0u, a.y & b.y & 0x80000000u);
        }
        return b;
    }
    if (f64_is_zero(b)) {
        return a;
    }
    // x: the operand of larger magnitude.
    var x = a;
    var y = b;
    if (lt_u64(f64_abs(a), f64_abs(b))) {
        x = b;
        y = a;
    }
    let ex = biased_exponent(x);
    let d = ex - biased_exponent(y);
    // |y| < a quarter of x's spacing (d ≥ 55): RN gives x.
    if (d > 64u) {
        return x;
    }
    let wide = vec4<u32>(0u, 0u, significand(x));
    let narrow = shl128(vec4<u32>(significand(y), 0u, 0u), 64u - d);
    var total: vec4<u32>;
    if (f64_negative(x) == f64_negative(y)) {
        total = add128(wide, narrow);
    } else {
        total = sub128(wide, narrow);
    }
    if (all(total == vec4<u32>(0u, 0u, 0u, 0u))) {
        return vec2<u32>(0u, 0u);
    }
    return f64_round(total, i32(ex) - 1075 - 64, f64_negative(x));
}

fn f64_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return f64_add(a, f64_neg(b));
}

// RN(a · b).
fn f64_mul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    f64_check(a);
    f64_check(b);
    let negative = f64_negative(a) != f64_negative(b);
    if (f64_is_zero(a) || f64_is_zero(b)) {
        return vec2<u32>(0u, select(0u, 0x80000000u, negative));
    }
    let scale = i32(biased_exponent(a)) + i32(biased_exponent(b)) - 2150;
    return f64_round(mul53(significand(a), significand(b)), scale, negative);
}

// The next `bits` quotient bits of r / d for r < d < 2^53: (digit, new remainder), that
// is ⌊r · 2^bits / d⌋ and r · 2^bits − digit · d. The digit is estimated in f32 from the
// reciprocal `inv` ≈ 1/d (off by less than one for bits ≤ 19) and made exact by comparing
// the remainder with 0 and d, twice each way.
fn div_digits(r: vec2<u32>, d: vec2<u32>, inv: f32, bits: u32) -> vec3<u32> {
    let estimate = (f32(r.y) * 4294967296.0 + f32(r.x)) * inv * f32(1u << bits);
    var digit = u32(max(estimate, 0.0));
    // r · 2^bits − digit · d, as a 128-bit two's complement integer.
    let low = mul32(digit, d.x);
    let high = mul32(digit, d.y);
    let product = add128(vec4<u32>(low, 0u, 0u), vec4<u32>(0u, high, 0u));
    var rest = sub128(shl128(vec4<u32>(r, 0u, 0u), bits), product);
    let divisor = vec4<u32>(d, 0u, 0u);
    // Written out, not looped (see the top of this file).
    if ((rest.w >> 31u) == 1u) {
        rest = add128(rest, divisor);
        digit -= 1u;
    }
    if ((rest.w >> 31u) == 1u) {
        rest = add128(rest, divisor);
        digit -= 1u;
    }
    if (!lt_u128(rest, divisor)) {
        rest = sub128(rest, divisor);
        digit += 1u;
    }
    if (!lt_u128(rest, divisor)) {
        rest = sub128(rest, divisor);
        digit += 1u;
    }
    return vec3<u32>(digit, rest.xy);
}

// RN(a / b); b = 0 flags.
fn f64_div(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    f64_check(a);
    f64_check(b);
    let negative = f64_negative(a) != f64_negative(b);
    if (f64_is_zero(b)) {
        out_of_range = true;
        return vec2<u32>(0u, 0u);
    }
    if (f64_is_zero(a)) {
        return vec2<u32>(0u, select(0u, 0x80000000u, negative));
    }
    let d = significand(b);
    let inv = 1.0 / (f32(d.y) * 4294967296.0 + f32(d.x));
    // q = ⌊significand(a) · 2^55 / d⌋ (56 bits, the first of weight 1): its leading bit,
    // then 19 + 18 + 18 bits, and the remainder.
    var r = significand(a);
    let first = select(0u, 1u, le_u64(d, r));
    if (first == 1u) {
        r = sub64(r, d);
    }
    let d1 = div_digits(r, d, inv, 19u);
    let d2 = div_digits(d1.yz, d, inv, 18u);
    let d3 = div_digits(d2.yz, d, inv, 18u);
    // q = first · 2^55 + d1 · 2^36 + d2 · 2^18 + d3, then one more bit, sticky: the
    // remainder's sign of life.
    let q = add128(add128(shl128(vec4<u32>(first, 0u, 0u, 0u), 55u), shl128(vec4<u32>(d1.x, 0u, 0u, 0u), 36u)),
        vec4<u32>(d3.x | (d2.x << 18u), d2.x >> 14u, 0u, 0u));
    let sticky = select(0u, 1u, (d3.y | d3.z) != 0u);
    let x = add128(shl128(q, 1u), vec4<u32>(sticky, 0u, 0u, 0u));
    return f64_round(x, i32(biased_exponent(a)) - i32(biased_exponent(b)) - 56, negative);
}

// ret_units(x): x · 2^64 rounded half away from zero, as a 128-bit two's complement
// integer; |x| ≥ 2^63 flags.
fn f64_ret_units(x: vec2<u32>) -> vec4<u32> {
    f64_check(x);
    if (f64_is_zero(x)) {
        return vec4<u32>(0u, 0u, 0u, 0u);
    }
    let m = vec4<u32>(significand(x), 0u, 0u);
    // x · 2^64 = m · 2^shift.
    let shift = i32(biased_exponent(x)) - 1075 + 64;
    var units = vec4<u32>(0u, 0u, 0u, 0u);
    if (shift >= 0) {
        if (shift > 74) {
            out_of_range = true;
            return units;
        }
        units = shl128(m, u32(shift));
    } else if (shift >= -53) {
        let k = u32(-shift);
        units = add128(shr128(m, k), vec4<u32>(shr128(m, k - 1u).x & 1u, 0u, 0u, 0u));
    }
    if (f64_negative(x)) {
        return sub128(vec4<u32>(0u, 0u, 0u, 0u), units);
    }
    return units;
}
