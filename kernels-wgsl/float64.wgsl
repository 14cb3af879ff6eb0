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

// One step of the restoring division: (remainder, quotient) → the next quotient bit.
fn div_step(s: vec4<u32>, divisor: vec2<u32>) -> vec4<u32> {
    var r = s.xy;
    var q = vec2<u32>(s.z << 1u, (s.w << 1u) | (s.z >> 31u));
    if (le_u64(divisor, r)) {
        r = sub64(r, divisor);
        q.x |= 1u;
    }
    return vec4<u32>(r.x << 1u, (r.y << 1u) | (r.x >> 31u), q);
}

fn div_step8(s: vec4<u32>, divisor: vec2<u32>) -> vec4<u32> {
    return div_step(div_step(div_step(div_step(div_step(div_step(div_step(div_step(s, divisor), divisor),
        divisor), divisor), divisor), divisor), divisor), divisor);
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
    let divisor = significand(b);
    // 56 quotient bits of significand(a) / significand(b), the first of weight 1, and
    // the remainder (shifted once more): q = ⌊a/b · 2^55⌋ over the significands.
    var s = vec4<u32>(significand(a), 0u, 0u);
    s = div_step8(div_step8(div_step8(div_step8(div_step8(div_step8(div_step8(s, divisor), divisor),
        divisor), divisor), divisor), divisor), divisor);
    // Two quotient bits per unit of q, the lower one sticky (the remainder's sign of life).
    let sticky = select(0u, 1u, (s.x | s.y) != 0u);
    let q = vec4<u32>((s.z << 1u) | sticky, (s.w << 1u) | (s.z >> 31u), s.w >> 31u, 0u);
    return f64_round(q, i32(biased_exponent(a)) - i32(biased_exponent(b)) - 56, negative);
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
