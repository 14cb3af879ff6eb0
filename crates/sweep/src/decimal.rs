//! Numbers as the results CSV writes them, fast: an f64 in the very bytes of Rust's
//! `format!("{v}")` (the shortest digits that read back to the same f64, in plain decimal
//! notation, never an exponent), from zmij's shortest digits (Schubfach), faster per row
//! than `{}` (`cargo bench -p threadx-sweep --bench sweep -- csv_rows`); integers through
//! itoa.
//!
//! zmij and Rust's formatter find the same shortest digits except on an exact tie between
//! two shortest forms, where zmij rounds half to even and Rust rounds half up. A tie needs
//! the value to end exactly in a 5 one place past the shortest digits, with its last digit
//! at or right of the decimal point and a unit in the last place at least as large as
//! that digit's: those values (about 1 in 1,500 random bit patterns, large numbers with
//! few fraction bits) are formatted by Rust itself.

use std::fmt::Write as _;

/// Appends `v` as `format!("{v}")` would.
pub(crate) fn push_f64(out: &mut String, v: f64) {
    if !v.is_finite() {
        let _ = write!(out, "{v}");
        return;
    }
    let mut buffer = zmij::Buffer::new();
    let printed = buffer.format_finite(v);
    // zmij writes plain decimals for decimal exponents -5..=15: well inside those bounds the
    // text is known to have no `e` without reading it back (reading the bytes just written
    // stalled the store buffer: a quarter of this function's time). Outside, an `e` is
    // among the last five bytes (`e-324`).
    let magnitude = v.abs();
    let plain_for_sure = (1e-4..1e15).contains(&magnitude) || magnitude == 0.0;
    let split = match plain_for_sure {
        true => None,
        false => {
            let tail = printed.len().saturating_sub(5);
            printed.as_bytes()[tail..].iter().position(|&b| b == b'e').map(|e| printed.split_at(tail + e))
        }
    };
    let Some((mantissa, exponent)) = split.map(|(m, e)| (m, &e[1..])) else {
        // Most values print without an exponent: then zmij's text is Rust's, less the ".0"
        // that only an integer's text ends with.
        let plain = if v.fract() == 0.0 { printed.strip_suffix(".0").unwrap_or(printed) } else { printed };
        // A tie needs v·2^(1 − last_unit) to be an integer, and −last_unit, the digits
        // after the point, is below the text's length: most values fail that at once.
        if tie_excluded(v, plain.len()) {
            out.push_str(plain);
            return;
        }
        let (len, last_unit) = shape(plain.as_bytes());
        if tie_possible(v, len, last_unit) {
            let _ = write!(out, "{v}");
        } else {
            out.push_str(plain);
        }
        return;
    };
    // An exponent form, `[-]D[.DDD]e[-]X`: its digits moved by the exponent.
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest.as_bytes()),
        None => (false, mantissa.as_bytes()),
    };
    let exponent = exponent.parse::<i32>().unwrap_or(0);
    let mut digits = [0u8; 32];
    let mut n = 0usize;
    let mut before_point = mantissa.len() as i32;
    for (i, &b) in mantissa.iter().enumerate() {
        if b == b'.' {
            before_point = i as i32;
        } else if n < digits.len() {
            digits[n] = b;
            n += 1;
        }
    }
    // value = 0.DIGITS × 10^point, with no leading or trailing zero digits.
    let leading = digits[..n].iter().take_while(|&&d| d == b'0').count();
    if leading == n {
        out.push_str(if negative { "-0" } else { "0" });
        return;
    }
    let mut point = before_point + exponent - leading as i32;
    let digits = &digits[leading..n];
    let digits = &digits[..digits.len() - digits.iter().rev().take_while(|&&d| d == b'0').count()];
    let last_unit = point - digits.len() as i32;
    if tie_possible(v, digits.len(), last_unit) {
        let _ = write!(out, "{v}");
        return;
    }
    if negative {
        out.push('-');
    }
    if point <= 0 {
        out.push_str("0.");
        while point < 0 {
            out.push('0');
            point += 1;
        }
        out.push_str(text(digits));
    } else if (point as usize) < digits.len() {
        let (whole, fraction) = digits.split_at(point as usize);
        out.push_str(text(whole));
        out.push('.');
        out.push_str(text(fraction));
    } else {
        out.push_str(text(digits));
        for _ in digits.len()..point as usize {
            out.push('0');
        }
    }
}

/// The significant digits of a plain decimal (an upper bound: an integer's trailing
/// zeros count) and the unit exponent of its last digit.
fn shape(plain: &[u8]) -> (usize, i32) {
    let digits = plain.strip_prefix(b"-").unwrap_or(plain);
    let point = digits.iter().position(|&b| b == b'.');
    let after_point = point.map_or(0, |p| digits.len() - p - 1);
    let leading = digits.iter().take_while(|&&b| b == b'0' || b == b'.').count();
    let len = digits.len() - leading - usize::from(point.is_some_and(|p| p >= leading));
    (len, -(after_point as i32))
}

/// Whether `v`, whose shortest form has `len` digits, the last one of unit
/// 10^`last_unit`, may lie exactly halfway between two shortest forms. A tie needs the
/// last digit at or right of the point, an ulp of at least its unit (so at least 16
/// digits: v ≥ 2^52 units) and v a multiple of half that unit: with v = m·2^e, m·2^(e+1−last_unit)
/// an integer (the power of 5 in the unit divides no dyadic fraction away). The cheap
/// tests come first; the checks only widen what Rust formats.
fn tie_possible(v: f64, len: usize, last_unit: i32) -> bool {
    if last_unit > 0 || len < 16 {
        return false;
    }
    // log2 of the ulp against log2 of half the unit, with a margin.
    let ulp_log2 = ((v.to_bits() >> 52) & 0x7ff) as i32 - 1075;
    if f64::from(ulp_log2) < f64::from(last_unit) * std::f64::consts::LOG2_10 - 2.0 {
        return false;
    }
    let (m, e) = significand(v);
    m == 0 || m.trailing_zeros() as i32 + e + 1 - last_unit >= 0
}

/// Whether no tie is possible for `v` whose plain text is `chars` long: `tie_possible`'s
/// last test fails for every `last_unit` ≥ −`chars`.
fn tie_excluded(v: f64, chars: usize) -> bool {
    let (m, e) = significand(v);
    m != 0 && (m.trailing_zeros() as i32) + e + 1 + (chars as i32) < 0
}

/// `v` as m·2^e, m an integer (the significand with its implicit bit).
fn significand(v: f64) -> (u64, i32) {
    let bits = v.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1 << 52) - 1);
    if biased == 0 { (fraction, -1074) } else { (fraction | 1 << 52, biased - 1075) }
}

/// ASCII digits as text (always UTF-8).
fn text(digits: &[u8]) -> &str {
    std::str::from_utf8(digits).unwrap_or_default()
}

/// Appends `v` as `format!("{v}")` would.
pub(crate) fn push_u64(out: &mut String, v: u64) {
    out.push_str(itoa::Buffer::new().format(v));
}

#[cfg(test)]
mod tests {
    use super::push_f64;
    use proptest::prelude::*;

    fn same(v: f64) {
        let mut fast = String::new();
        push_f64(&mut fast, v);
        assert_eq!(fast, format!("{v}"), "{v:e} ({:#x})", v.to_bits());
    }

    #[test]
    fn edges_and_ties_are_rusts_bytes() {
        for v in [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.1,
            0.3,
            1e21,
            1e22,
            1e-7,
            5e-324,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            123_456_789_012_345_680.0,
            // Exact ties between two shortest forms (zmij would write …562.2); the sums
            // are exact (ulps of 1/4 and 1/32).
            1_658_206_780_088_562.0 + 0.25,
            -1_052_730_259_603_333.0 - 0.25,
            233_115_890_514_796.0 + 0.125,
            0.000_123,
            20.0,
            2.5,
            -0.056_25,
        ] {
            same(v);
        }
    }

    #[test]
    fn every_binade_near_ties_is_rusts_bytes() {
        // Large values with two to four fraction bits: where ties live.
        for exponent in 40..60 {
            for k in 0..2000u64 {
                let v = (1u64 << exponent) as f64 + k as f64 * 0.25;
                same(v);
                same(-v * 0.5);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200_000))]
        #[test]
        fn any_f64_is_rusts_bytes(bits in any::<u64>()) {
            same(f64::from_bits(bits));
        }

        #[test]
        fn metric_like_values_are_rusts_bytes(x in -1e6f64..1e6, scale in 0i32..12) {
            same(x);
            same((x * 10f64.powi(scale)).round() / 10f64.powi(scale));
        }
    }
}
