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

/// A tenant's text past a bound is refused as such, before the work it would take:
/// never by the stack (deep block nesting overflowed yaml-rust2's recursive loader) and
/// never after minutes of CPU (merged empty mappings were not counted).
#[test]
fn hostile_text_is_refused_as_past_a_bound() {
    for (name, text) in super::hostile::runtime_envs() {
        match read(&text) {
            Err(ReadError::Bound(_)) => {}
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn the_costliest_accepted_texts_are_read() {
    for (name, text) in super::hostile::largest_accepted() {
        assert!(read(&text).is_ok(), "{name}");
    }
}

/// Real runtime envs sit far inside the bounds: a long pip list, a deep config, aliases.
#[test]
fn real_runtime_envs_are_within_the_bounds() {
    let pip: String = (0..2_000)
        .map(|i| format!("  - package-{i}==1.{i}.0\n"))
        .collect();
    let deep = (0..20).fold("leaf".to_string(), |v, i| format!("{{k{i}: {v}}}"));
    let text = format!(
        "pip:\n{pip}env_vars: &e {{A: '1', B: x}}\nconfig: {deep}\nother: {{<<: *e, C: z}}\n"
    );
    let v = read(&text).unwrap();
    assert_eq!(v["pip"].as_array().unwrap().len(), 2_000);
    assert_eq!(v["other"], json!({"A": "1", "B": "x", "C": "z"}));
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
            // In units in the last place, not relative: subnormals (2.4e-309) carry
            // fewer digits, and a relative bound would refuse their last-bit rounding.
            let ulps = (x.to_bits() as i64).abs_diff(y.to_bits() as i64);
            x == y || (x.is_sign_negative() == y.is_sign_negative() && ulps <= 4)
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
            "on", "yes", "n", "off", "~", "1_000", "0x1F", "3", "017", "0o17", ".5", "1e3", "null",
            "true", "<<", "- a", "a: b", "#x", "'q'", "\"", "\\", "", " ", "\t", "é", "\u{2028}",
            "\u{85}", "%", "@", "`", "!x", "&a", "*a", "{", "[",
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
