//! JSON text exactly as Python's `json.dumps(x, sort_keys=True, separators=(",", ":"))`
//! writes it, and `str()` of JSON scalars as Python prints them.
//!
//! The cache's MAC (`zyntax.frontend.cache.mac`) is an HMAC over that text, so a
//! tuning file signed in Python verifies here and the other way round. The
//! differences from serde_json's writer: non-ASCII escaped as `\uXXXX`, floats
//! as Python's `repr` (`1.0`, `1e-05`, `1e+16`), keys sorted.

use serde_json::Value;
use std::fmt::Write;

/// Python's `repr(float)` of a finite `x` (shortest round-trip digits; fixed
/// notation when the decimal exponent is in -4..16, else `d.ddde±XX`).
pub fn float_repr(x: f64) -> String {
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, as Python's repr.
    let (digits, exp) = shortest(x.abs());
    let decpt = exp + 1; // value = 0.DIGITS x 10^decpt
    let sign = if x < 0.0 { "-" } else { "" };
    let n = digits.len() as i32;
    if (-3..=16).contains(&decpt) {
        let body = if decpt <= 0 {
            format!("0.{}{}", "0".repeat((-decpt) as usize), digits)
        } else if decpt >= n {
            format!("{}{}.0", digits, "0".repeat((decpt - n) as usize))
        } else {
            format!(
                "{}.{}",
                &digits[..decpt as usize],
                &digits[decpt as usize..]
            )
        };
        return format!("{sign}{body}");
    }
    let mut m = digits[..1].to_string();
    if n > 1 {
        m.push('.');
        m.push_str(&digits[1..]);
    }
    let e = decpt - 1;
    format!("{sign}{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
}

/// Digits and exponent of `{:e}`: `1.25e3` is ("125", 3).
fn sci(text: &str) -> (String, i32) {
    let (mant, exp) = text.split_once('e').unwrap_or((text, "0"));
    let digits = mant.chars().filter(|c| *c != '.').collect();
    (digits, exp.parse().unwrap_or(0))
}

/// The shortest digits that round-trip `x` > 0, and the exponent of the first.
/// Rust's `{:e}` finds them; where two candidates are equally close (`x` is
/// exactly halfway, e.g. ...286.25 for ...286.2 / ...286.3) Python's dtoa takes
/// the even last digit and Rust may not, so the tie is settled here.
fn shortest(x: f64) -> (String, i32) {
    let (digits, exp) = sci(&format!("{x:e}"));
    let n = digits.len();
    let odd = digits.as_bytes()[n - 1] % 2 == 1;
    // A tie means x is exactly the n digits truncated, then a 5: n + 1 digits.
    let (exact, eexp) = sci(&format!("{x:.*e}", n + 24));
    let tie = eexp == exp
        && exact.as_bytes()[n] == b'5'
        && exact.as_bytes()[n + 1..].iter().all(|b| *b == b'0');
    if !odd || !tie {
        return (digits, exp);
    }
    let low = exact[..n].to_string();
    if low != digits {
        return (low, exp); // rounded up to odd: the even one is below
    }
    // Rounded down to odd: the even one is one unit in the last place above.
    let mut up: Vec<u8> = low.into_bytes();
    let mut i = n;
    loop {
        if i == 0 {
            up.insert(0, b'1');
            return (trim(up), exp + 1);
        }
        i -= 1;
        if up[i] == b'9' {
            up[i] = b'0';
        } else {
            up[i] += 1;
            return (trim(up), exp);
        }
    }
}

fn trim(mut d: Vec<u8>) -> String {
    while d.len() > 1 && d.last() == Some(&b'0') {
        d.pop();
    }
    String::from_utf8(d).unwrap_or_default()
}

fn number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else if let Some(u) = n.as_u64() {
        u.to_string()
    } else {
        float_repr(n.as_f64().unwrap_or(f64::NAN))
    }
}

fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

fn write(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => string(out, s),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(out, x);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(out, k);
                out.push(':');
                write(out, &m[k]);
            }
            out.push('}');
        }
    }
}

/// `json.dumps(v, sort_keys=True, separators=(",", ":"))`.
pub fn dumps_canonical(v: &Value) -> String {
    let mut out = String::new();
    write(&mut out, v);
    out
}

/// Python's `str()` of a JSON scalar (`True`, `None`, `1.5`, text as is): how a
/// config's name shows its arguments.
pub fn py_str(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Number(n) => number(n),
        Value::String(s) => s.clone(),
        other => dumps_canonical(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_as_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (0.25, "0.25"),
            (0.1, "0.1"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.2345e20, "1.2345e+20"),
            (123.456, "123.456"),
            (-2.5, "-2.5"),
            (0.0, "0.0"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            // Exactly halfway between two shortest candidates: the even digit.
            (f64::from_bits(0x4302_b49c_187e_26b2), "658141512451286.2"), // ...286.25
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(x), want, "{x}");
        }
    }

    #[test]
    fn canonical_text_matches_python() {
        // Text printed by CPython 3.12: json.dumps(v, sort_keys=True, separators=(",", ":")).
        let v = json!({"b": [1, 2.0, null, true], "a": "é\"\n\u{1F600}\u{7f}", "c": {"z": 1e-6}});
        assert_eq!(
            dumps_canonical(&v),
            r#"{"a":"\u00e9\"\n\ud83d\ude00\u007f","b":[1,2.0,null,true],"c":{"z":1e-06}}"#
        );
        assert_eq!(py_str(&json!(true)), "True");
        assert_eq!(py_str(&json!(null)), "None");
        assert_eq!(py_str(&json!(2)), "2");
        assert_eq!(py_str(&json!("x")), "x");
    }
}
