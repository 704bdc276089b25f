//! go-yaml v2's scalar resolution (YAML 1.1), as KubeRay's reader applies it.

use serde_json::{Number, Value};

use super::ReadError;

pub(super) const YAML_TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// A map key as go-yaml v2 holds it: keys are equal when their resolved values are.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Key {
    Str(String),
    Int(i64),
    Bool(bool),
    /// Keys sigs.k8s.io/yaml rejects (null, unsigned) or that rayshare does not mirror
    /// (floats, formatted by go-yaml with 32-bit precision).
    Unsupported(String),
}

/// A scalar after go-yaml v2's `resolve`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
}

pub(super) fn scalar_value(s: Scalar) -> Result<Value, ReadError> {
    Ok(match s {
        Scalar::Null => Value::Null,
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(i) => Value::from(i),
        Scalar::Uint(u) => Value::from(u),
        // encoding/json refuses NaN and infinities: KubeRay fails such a job.
        Scalar::Float(f) => Value::Number(Number::from_f64(f).ok_or_else(|| {
            ReadError::Invalid("a .nan or .inf value, which KubeRay cannot convert to JSON".into())
        })?),
        Scalar::Str(s) => Value::String(s),
    })
}

pub(super) fn map_key(s: Scalar) -> Key {
    match s {
        Scalar::Str(s) => Key::Str(s),
        Scalar::Int(i) => Key::Int(i),
        Scalar::Bool(b) => Key::Bool(b),
        Scalar::Null => Key::Unsupported("null".into()),
        Scalar::Uint(u) => Key::Unsupported(u.to_string()),
        Scalar::Float(f) => Key::Unsupported(f.to_string()),
    }
}

/// go-yaml v2 `decoder.scalar` + `resolve`: quoted and block scalars are strings; a plain
/// one is resolved by YAML 1.1 rules; an explicit standard tag must fit the value.
pub(super) fn resolve(text: &str, plain: bool, tag: Option<&str>) -> Result<Scalar, ReadError> {
    let Some(tag) = tag else {
        return Ok(if plain {
            resolve_plain(text)
        } else {
            Scalar::Str(text.into())
        });
    };
    let Some(kind) = tag.strip_prefix(YAML_TAG_PREFIX) else {
        // Local tags (`!foo`) are not resolvable: the text stays a string.
        return Ok(Scalar::Str(text.into()));
    };
    let resolved = resolve_plain(text);
    let fits = match (kind, &resolved) {
        ("str", _) => return Ok(Scalar::Str(text.into())),
        ("null", Scalar::Null) | ("bool", Scalar::Bool(_)) => true,
        ("int", Scalar::Int(_) | Scalar::Uint(_)) | ("float", Scalar::Float(_)) => true,
        ("float", Scalar::Int(i)) => return Ok(Scalar::Float(*i as f64)),
        ("timestamp", Scalar::Str(_)) => is_timestamp(text),
        ("null" | "bool" | "int" | "float" | "timestamp", _) => false,
        ("binary", _) => {
            return Err(ReadError::Invalid(
                "!!binary values are not supported".into(),
            ));
        }
        // Other yaml.org tags (e.g. !!merge, !!seq on a scalar) are not resolvable.
        _ => return Ok(Scalar::Str(text.into())),
    };
    if fits {
        Ok(resolved)
    } else {
        Err(ReadError::Invalid(format!(
            "cannot decode {text:?} as !!{kind}"
        )))
    }
}

/// go-yaml v2 `resolve` for an untagged plain scalar (YAML 1.1).
fn resolve_plain(text: &str) -> Scalar {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Scalar::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Scalar::Bool(false);
        }
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        ".nan" | ".NaN" | ".NAN" => return Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Scalar::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Scalar::Float(f64::NEG_INFINITY),
        _ => {}
    }
    let string = || Scalar::Str(text.into());
    match text.as_bytes()[0] {
        b'.' => parse_float(text).map_or_else(string, Scalar::Float),
        b'+' | b'-' | b'0'..=b'9' => {
            // A timestamp-looking value decodes to its text, like any other string.
            let plain = text.replace('_', "");
            if let Some(i) = go_parse_int(&plain) {
                Scalar::Int(i)
            } else if let Some(u) = go_parse_uint(&plain) {
                Scalar::Uint(u)
            } else {
                parse_float(&plain).map_or_else(string, Scalar::Float)
            }
        }
        _ => string(),
    }
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`, parsed; `None` when it does
/// not match or overflows (Go's ParseFloat errors there).
fn parse_float(text: &str) -> Option<f64> {
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let rest = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => !frac.is_empty() && digits(frac) == frac.len(),
        Some((int, frac)) => {
            !int.is_empty() && digits(int) == int.len() && digits(frac) == frac.len()
        }
        None => !mantissa.is_empty() && digits(mantissa) == mantissa.len(),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e) == e.len()
    });
    if !(mantissa_ok && exponent_ok) {
        return None;
    }
    text.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Go's `strconv.ParseUint(s, 0, 64)`: `0x`, `0o`, `0b` or a leading `0` (octal) pick
/// the base; no sign.
fn go_parse_uint(s: &str) -> Option<u64> {
    let lower = s.get(..2).map(str::to_ascii_lowercase);
    let (radix, digits) = match lower.as_deref() {
        Some("0x") => (16, &s[2..]),
        Some("0o") => (8, &s[2..]),
        Some("0b") => (2, &s[2..]),
        _ if s.len() > 1 && s.starts_with('0') => (8, &s[1..]),
        _ => (10, s),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Go's `strconv.ParseInt(s, 0, 64)`: an optional sign, then as [`go_parse_uint`].
fn go_parse_int(s: &str) -> Option<i64> {
    let (negative, unsigned) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let magnitude = go_parse_uint(unsigned)?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// go-yaml v2 `parseTimestamp`'s date part (`2006-1-2`, then optionally a time), only
/// for an explicit `!!timestamp`; the time part is not checked.
fn is_timestamp(text: &str) -> bool {
    let mut parts = text.splitn(3, '-');
    let digits = |p: Option<&str>, n: std::ops::RangeInclusive<usize>| {
        p.is_some_and(|p| n.contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
    };
    let (year, month) = (parts.next(), parts.next());
    let day = parts
        .next()
        .map(|d| d.split(['T', 't', ' ']).next().unwrap_or(d));
    digits(year, 4..=4) && digits(month, 1..=2) && digits(day, 1..=2)
}
