//! The one builder of profile keys. The indicator bank uses it too, so that equal
//! parameters written differently (`2` and `2.0`, keys in another order) share a key.

use serde_json::Value;
use std::fmt::Write;

/// Builds the key `name:{canonical params}`: object keys sorted, no spaces, and floats
/// with an integral value written as integers (`2.0` → `2`).
///
/// ```
/// use serde_json::json;
/// let key = threadx_profile_store::profile_key("bollinger_bands", &json!({"size": 10000, "period": 20.0}));
/// assert_eq!(key, r#"bollinger_bands:{"period":20,"size":10000}"#);
/// ```
pub fn profile_key(name: &str, params: &Value) -> String {
    let mut key = String::with_capacity(name.len() + 32);
    key.push_str(name);
    key.push(':');
    write_canonical(&mut key, params);
    key
}

/// Splits a key built by [`profile_key`] into its name and parameters.
pub fn split_key(key: &str) -> Option<(&str, Value)> {
    let (name, params) = key.split_once(':')?;
    Some((name, serde_json::from_str(params).ok()?))
}

/// Largest magnitude below which every integer is exactly representable in f64.
const EXACT_INT: f64 = 9_007_199_254_740_992.0;

fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_canonical(out, v);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, v);
            }
            out.push(']');
        }
        Value::Number(n) => match n.as_f64() {
            Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < EXACT_INT => {
                // Integral floats are written as integers; -0.0 becomes 0.
                let _ = write!(out, "{}", f as i64);
            }
            _ => {
                let _ = write!(out, "{n}");
            }
        },
        Value::String(s) => write_string(out, s),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Null => out.push_str("null"),
    }
}

fn write_string(out: &mut String, s: &str) {
    // serde_json's string encoding is already canonical (minimal escapes).
    out.push_str(&Value::String(s.to_owned()).to_string());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_and_normalized() {
        let a = profile_key("bbands", &json!({"std": 2.0, "period": 20, "nested": {"b": 1, "a": [1.0, 2.5]}}));
        let b = profile_key("bbands", &json!({"nested": {"a": [1, 2.5], "b": 1.0}, "period": 20.0, "std": 2}));
        assert_eq!(a, b);
        assert_eq!(a, r#"bbands:{"nested":{"a":[1,2.5],"b":1},"period":20,"std":2}"#);
    }

    #[test]
    fn fractional_and_large_values_stay_exact() {
        assert_eq!(profile_key("x", &json!({"k": 1.5})), r#"x:{"k":1.5}"#);
        assert_eq!(profile_key("x", &json!({"k": 1e300})), r#"x:{"k":1e+300}"#);
        assert_eq!(profile_key("x", &json!({"k": -0.0})), r#"x:{"k":0}"#);
        assert_eq!(profile_key("x", &json!({"s": "a\"b"})), r#"x:{"s":"a\"b"}"#);
    }

    #[test]
    fn split_inverts_build() {
        let key = profile_key("sma", &json!({"period": 20, "size": 1000}));
        let (name, params) = split_key(&key).unwrap();
        assert_eq!(name, "sma");
        assert_eq!(profile_key(name, &params), key);
        assert!(split_key("no-colon").is_none());
        assert!(split_key("x:{not json").is_none());
    }
}
