//! `runtimeEnvYAML` as KubeRay reads it, and written so that every reader agrees.
//!
//! KubeRay converts the text with `sigs.k8s.io/yaml.YAMLToJSON`: go-yaml v2, whose plain
//! scalars follow YAML 1.1 (`on`, `yes`, `n` are booleans; `1_000`, `0x1F`, `017` are
//! integers), then map keys turned into strings. [`read`] reproduces that (go-yaml v2's
//! `resolve.go`, `decode.go`; sigs.k8s.io/yaml's `convertToJSONableObject`), so rayshare
//! sees the types KubeRay would; [`write`] emits JSON, which YAML 1.1, YAML 1.2 and JSON
//! readers all read alike (strings are always quoted). The golden file
//! `tests/fixtures/flyte/kuberay-yaml.json` holds the real YAMLToJSON's answers.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// Bounds on what one runtime env may expand to (aliases can multiply a small text).
const MAX_NODES: usize = 100_000;
const MAX_DEPTH: usize = 128;
const YAML_TAG_PREFIX: &str = "tag:yaml.org,2002:";

/// The JSON KubeRay makes of `text` (the first YAML document; `null` for none), or why
/// it would fail or cannot be mirrored exactly.
pub fn read(text: &str) -> Result<Value, String> {
    let mut builder = Builder::default();
    Parser::new_from_str(text)
        .load(&mut builder, false)
        .map_err(|e| format!("not valid YAML: {e}"))?;
    if let Some(error) = builder.error {
        return Err(error);
    }
    let Some(root) = builder.root else {
        return Ok(Value::Null);
    };
    let mut decoder = Decoder {
        anchors: &builder.anchors,
        nodes: 0,
    };
    decoder.value(&root, 0)
}

/// JSON text of `value`, with the characters a YAML reader would not keep as they are
/// (C1 controls, NEL, line/paragraph separators, BOM) escaped; still valid JSON.
pub fn write(value: &Value) -> String {
    let json = serde_json::to_string(value).expect("JSON values serialise");
    // Every character a YAML reader would not keep is at or above DEL.
    if json.bytes().all(|b| b < 0x7f) {
        return json;
    }
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if matches!(
            c,
            '\u{7f}'..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
        ) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// A node as the parser saw it, before YAML 1.1 resolution.
#[derive(Debug, Clone)]
enum Raw {
    Scalar {
        text: String,
        plain: bool,
        tag: Option<String>,
    },
    Seq(Vec<Raw>),
    Map(Vec<(Raw, Raw)>),
    Alias(usize),
}

enum Frame {
    Seq(Vec<Raw>),
    Map(Vec<(Raw, Raw)>, Option<Raw>),
}

#[derive(Default)]
struct Builder {
    stack: Vec<(Frame, usize)>,
    anchors: HashMap<usize, Raw>,
    root: Option<Raw>,
    error: Option<String>,
}

fn full_tag(tag: Option<Tag>) -> Option<String> {
    tag.map(|t| match t.handle.as_str() {
        "!!" => format!("{YAML_TAG_PREFIX}{}", t.suffix),
        _ => format!("{}{}", t.handle, t.suffix),
    })
}

impl Builder {
    fn add(&mut self, node: Raw, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some((Frame::Seq(items), _)) => items.push(node),
            Some((Frame::Map(pairs, key), _)) => match key.take() {
                None => *key = Some(node),
                Some(k) => pairs.push((k, node)),
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, event: Event, _mark: Marker) {
        match event {
            Event::Scalar(text, style, anchor, tag) => {
                let plain = style == TScalarStyle::Plain;
                let tag = full_tag(tag);
                self.add(Raw::Scalar { text, plain, tag }, anchor)
            }
            Event::Alias(id) => {
                if !self.anchors.contains_key(&id) {
                    self.error = Some("an alias refers to an unfinished anchor".into());
                }
                self.add(Raw::Alias(id), 0)
            }
            Event::SequenceStart(anchor, _) => self.stack.push((Frame::Seq(Vec::new()), anchor)),
            Event::MappingStart(anchor, _) => {
                self.stack.push((Frame::Map(Vec::new(), None), anchor))
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((frame, anchor)) = self.stack.pop() {
                    let node = match frame {
                        Frame::Seq(items) => Raw::Seq(items),
                        Frame::Map(pairs, _) => Raw::Map(pairs),
                    };
                    self.add(node, anchor);
                }
            }
            _ => {}
        }
    }
}

/// A map key as go-yaml v2 holds it: keys are equal when their resolved values are.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Str(String),
    Int(i64),
    Bool(bool),
    /// Keys sigs.k8s.io/yaml rejects (null, unsigned) or that rayshare does not mirror
    /// (floats, formatted by go-yaml with 32-bit precision).
    Unsupported(String),
}

struct Decoder<'a> {
    anchors: &'a HashMap<usize, Raw>,
    nodes: usize,
}

impl Decoder<'_> {
    fn count(&mut self, depth: usize) -> Result<(), String> {
        self.nodes += 1;
        if self.nodes > MAX_NODES || depth > MAX_DEPTH {
            return Err("too large or too deeply nested once aliases are expanded".into());
        }
        Ok(())
    }

    fn value(&mut self, node: &Raw, depth: usize) -> Result<Value, String> {
        self.count(depth)?;
        let anchors = self.anchors;
        match node {
            Raw::Alias(id) => {
                let target = anchors
                    .get(id)
                    .ok_or("an alias refers to an unknown anchor")?;
                self.value(target, depth + 1)
            }
            Raw::Scalar { text, plain, tag } => {
                scalar_value(resolve(text, *plain, tag.as_deref())?)
            }
            Raw::Seq(items) => items
                .iter()
                .map(|item| self.value(item, depth + 1))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Raw::Map(pairs) => {
                let mut map = BTreeMap::new();
                self.map_into(pairs, &mut map, depth)?;
                json_object(map)
            }
        }
    }

    /// go-yaml v2 `decoder.mapping`: pairs in order, a later key overwriting an earlier
    /// equal one; `<<` merges a mapping (or a list of them, the first winning) in place.
    fn map_into(
        &mut self,
        pairs: &[(Raw, Raw)],
        out: &mut BTreeMap<Key, Value>,
        depth: usize,
    ) -> Result<(), String> {
        let anchors = self.anchors;
        for (key, value) in pairs {
            if is_merge(key) {
                let merged = deref(anchors, value)?;
                match merged {
                    Raw::Map(inner) => self.map_into(inner, out, depth + 1)?,
                    Raw::Seq(items) => {
                        for item in items.iter().rev() {
                            match deref(anchors, item)? {
                                Raw::Map(inner) => self.map_into(inner, out, depth + 1)?,
                                _ => return Err("a merge key needs mappings".into()),
                            }
                        }
                    }
                    _ => return Err("a merge key needs a mapping".into()),
                }
                continue;
            }
            self.count(depth)?;
            let key = match deref(anchors, key)? {
                Raw::Scalar { text, plain, tag } => map_key(resolve(text, *plain, tag.as_deref())?),
                _ => return Err("a map key is a collection".into()),
            };
            let value = self.value(value, depth + 1)?;
            out.insert(key, value);
        }
        Ok(())
    }
}

fn deref<'a>(anchors: &'a HashMap<usize, Raw>, node: &'a Raw) -> Result<&'a Raw, String> {
    match node {
        Raw::Alias(id) => anchors
            .get(id)
            .ok_or_else(|| "an alias refers to an unknown anchor".to_string()),
        other => Ok(other),
    }
}

fn is_merge(key: &Raw) -> bool {
    matches!(key, Raw::Scalar { text, plain, tag } if text == "<<"
        && ((*plain && tag.is_none()) || tag.as_deref() == Some("tag:yaml.org,2002:merge")))
}

/// sigs.k8s.io/yaml `convertToJSONableObject`: keys become strings. Two keys that become
/// the same string would be kept in Go's random map order, so they are refused.
fn json_object(map: BTreeMap<Key, Value>) -> Result<Value, String> {
    let mut out = Map::new();
    for (key, value) in map {
        let name = match key {
            Key::Str(s) => s,
            Key::Int(i) => i.to_string(),
            Key::Bool(b) => b.to_string(),
            Key::Unsupported(text) => return Err(format!("unsupported map key {text:?}")),
        };
        if out.insert(name.clone(), value).is_some() {
            return Err(format!("two map keys both read as {name:?}"));
        }
    }
    Ok(Value::Object(out))
}

/// A scalar after go-yaml v2's `resolve`.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
}

fn scalar_value(s: Scalar) -> Result<Value, String> {
    Ok(match s {
        Scalar::Null => Value::Null,
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(i) => Value::from(i),
        Scalar::Uint(u) => Value::from(u),
        // encoding/json refuses NaN and infinities: KubeRay fails such a job.
        Scalar::Float(f) => Value::Number(
            Number::from_f64(f)
                .ok_or("a .nan or .inf value, which KubeRay cannot convert to JSON")?,
        ),
        Scalar::Str(s) => Value::String(s),
    })
}

fn map_key(s: Scalar) -> Key {
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
fn resolve(text: &str, plain: bool, tag: Option<&str>) -> Result<Scalar, String> {
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
        ("binary", _) => return Err("!!binary values are not supported".into()),
        // Other yaml.org tags (e.g. !!merge, !!seq on a scalar) are not resolvable.
        _ => return Ok(Scalar::Str(text.into())),
    };
    if fits {
        Ok(resolved)
    } else {
        Err(format!("cannot decode {text:?} as !!{kind}"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rstest::rstest;
    use serde_json::json;

    fn read_value(yaml: &str) -> Value {
        read(&format!("v: {yaml}\n")).unwrap()["v"].clone()
    }

    /// go-yaml v2's resolution of plain scalars, case by case.
    #[rstest]
    #[case("on", json!(true))]
    #[case("On", json!(true))]
    #[case("yes", json!(true))]
    #[case("y", json!(true))]
    #[case("Y", json!(true))]
    #[case("n", json!(false))]
    #[case("no", json!(false))]
    #[case("off", json!(false))]
    #[case("OFF", json!(false))]
    #[case("True", json!(true))]
    #[case("~", json!(null))]
    #[case("", json!(null))]
    #[case("Null", json!(null))]
    #[case("1_000", json!(1000))]
    #[case("0x1F", json!(31))]
    #[case("-0x1F", json!(-31))]
    #[case("017", json!(15))]
    #[case("0o17", json!(15))]
    #[case("0b101", json!(5))]
    #[case("08", json!(8.0))]
    #[case("+12", json!(12))]
    #[case("3", json!(3))]
    #[case("3.0", json!(3.0))]
    #[case(".5", json!(0.5))]
    #[case("1e3", json!(1000.0))]
    #[case("-1.5e-3", json!(-0.0015))]
    #[case("18446744073709551615", json!(18446744073709551615u64))]
    #[case("-9223372036854775808", json!(i64::MIN))]
    #[case("99999999999999999999", json!(1e20))]
    #[case("2024-01-02", json!("2024-01-02"))]
    #[case("1:20", json!("1:20"))]
    #[case("0x", json!("0x"))]
    #[case("1e400", json!("1e400"))]
    #[case("._5", json!("._5"))]
    #[case("+", json!("+"))]
    #[case("<<", json!("<<"))]
    #[case("yes please", json!("yes please"))]
    #[case("'on'", json!("on"))]
    #[case("\"3\"", json!("3"))]
    #[case("!!str 3", json!("3"))]
    #[case("!!float 3", json!(3.0))]
    #[case("!!int '12'", json!(12))]
    #[case("!custom on", json!("on"))]
    #[case("!!timestamp 2024-1-2", json!("2024-1-2"))]
    fn plain_scalars_resolve_as_go_yaml_v2(#[case] yaml: &str, #[case] expected: Value) {
        assert_eq!(read_value(yaml), expected, "{yaml}");
    }

    #[rstest]
    #[case("v: .inf\n")]
    #[case("v: .nan\n")]
    #[case("v: !!int abc\n")]
    #[case("v: !!bool 1\n")]
    #[case("v: !!timestamp 2024-ab-cd\n")]
    #[case("? [a]\n: 1\n")]
    #[case("~: 1\n")]
    #[case("1.5: x\n")]
    #[case("1: a\n'1': b\n")]
    #[case("a: [unclosed\n")]
    fn what_kuberay_would_refuse_or_rayshare_cannot_mirror_is_an_error(#[case] yaml: &str) {
        assert!(read(yaml).is_err(), "{yaml}");
    }

    #[test]
    fn keys_become_strings() {
        let v = read("on: a\n12: b\n0x10: c\nn: d\n").unwrap();
        assert_eq!(v, json!({"true": "a", "12": "b", "16": "c", "false": "d"}));
    }

    #[test]
    fn equal_keys_keep_the_last() {
        assert_eq!(read("a: 1\na: 2\n").unwrap(), json!({"a": 2}));
        assert_eq!(read("1: a\n0x1: b\n").unwrap(), json!({"1": "b"}));
        assert_eq!(read("yes: a\ntrue: b\n").unwrap(), json!({"true": "b"}));
    }

    #[test]
    fn aliases_and_merge_keys() {
        let text =
            "base: &b {x: 1, f: on}\nc:\n  <<: *b\n  f: 'off'\nd:\n  f: 'off'\n  <<: *b\ne: *b\n";
        let v = read(text).unwrap();
        assert_eq!(v["c"], json!({"x": 1, "f": "off"}));
        // go-yaml v2 merges in place: a merge after a key overwrites it.
        assert_eq!(v["d"], json!({"x": 1, "f": true}));
        assert_eq!(v["e"], json!({"x": 1, "f": true}));
        let list = read("a: &a {k: 1}\nb: &b {k: 2, j: 3}\nc: {<<: [*a, *b]}\n").unwrap();
        assert_eq!(list["c"], json!({"k": 1, "j": 3}));
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        assert!(read(&text).is_err());
    }

    #[test]
    fn only_the_first_document_counts() {
        assert_eq!(read("a: 1\n---\nb: 2\n").unwrap(), json!({"a": 1}));
        assert_eq!(read("").unwrap(), Value::Null);
        assert_eq!(read("# only a comment\n").unwrap(), Value::Null);
    }

    #[test]
    fn written_text_escapes_what_yaml_would_fold() {
        let v = json!({"s": "a\u{2028}b\u{85}c\u{feff}\u{9f}d\u{1F600}"});
        let text = write(&v);
        assert!(text.is_ascii() || !text.contains('\u{2028}'));
        assert!(text.contains("\\u2028") && text.contains("\\u0085") && text.contains("\\ufeff"));
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
        assert_eq!(read(&text).unwrap(), v);
    }

    /// Numbers as a JSON reader gets them from Go's encoding/json, which prints an
    /// integral float without a fraction (`3.0` -> `3`).
    fn as_go_json(v: &Value) -> Value {
        match v {
            Value::Number(n) => match n.as_f64() {
                Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e19 => {
                    if f < 0.0 {
                        json!(f as i64)
                    } else {
                        json!(f as u64)
                    }
                }
                _ => v.clone(),
            },
            Value::Array(a) => Value::Array(a.iter().map(as_go_json).collect()),
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), as_go_json(v))).collect())
            }
            other => other.clone(),
        }
    }

    /// The golden answers of the real sigs.k8s.io/yaml.YAMLToJSON (v1.6.0, as KubeRay
    /// v1.6.1 builds it), made by tests/flyte-corpus/kuberayyaml.
    #[test]
    fn agrees_with_kuberays_yaml_to_json() {
        let cases: Vec<Value> = serde_json::from_str(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/flyte/kuberay-yaml.json"
        )))
        .unwrap();
        assert!(cases.len() > 90);
        for case in cases {
            let yaml = case["yaml"].as_str().unwrap();
            match (read(yaml), case.get("json")) {
                (Ok(ours), Some(theirs)) => {
                    assert_eq!(as_go_json(&ours), as_go_json(theirs), "{yaml:?}")
                }
                (Err(_), None) => {}
                (ours, theirs) => panic!(
                    "{yaml:?}: rayshare {ours:?}, KubeRay {theirs:?} {}",
                    case["error"]
                ),
            }
        }
    }

    fn same_up_to_float_rounding(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs())
            }
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|(x, y)| same_up_to_float_rounding(x, y))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|((k, x), (l, y))| k == l && same_up_to_float_rounding(x, y))
            }
            _ => a == b,
        }
    }

    fn arb_scalar_text() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "on", "yes", "n", "off", "~", "1_000", "0x1F", "3", "017", "0o17", ".5", "1e3",
                "null", "true", "<<", "- a", "a: b", "#x", "'q'", "\"", "\\", "", " ", "\t", "é",
                "\u{2028}", "\u{85}", "%", "@", "`", "!x", "&a", "*a", "{", "[",
            ])
            .prop_map(String::from),
            any::<String>(),
        ]
    }

    fn arb_env() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            arb_scalar_text().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            Just(Value::Null),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(arb_scalar_text(), inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever rayshare writes, KubeRay reads back exactly: every string stays a
        /// string with the same text, every number and boolean keeps its value.
        #[test]
        fn kuberay_reads_back_what_was_written(v in arb_env()) {
            let text = write(&v);
            prop_assert_eq!(read(&text).unwrap(), v.clone());
            // And a JSON reader agrees (serde_json's own float parsing is not exactly
            // rounded without its float_roundtrip feature, hence the tolerance).
            let json: Value = serde_json::from_str(&text).unwrap();
            prop_assert!(same_up_to_float_rounding(&json, &v), "{json} != {v}");
        }
    }
}
