//! The canonical form's JSON bytes, written straight from the spec: exactly
//! `serde_json::to_vec(&canonical::canonical(value))`, without building the canonical tree
//! (building, then serialising, then dropping it was most of a RayJob admission's cost).
//! A property test holds the two equal; the golden tests pin the digests.

use serde_json::Value;

use super::canonical::{self, USER_MAPS};

/// Appends the canonical form of `value` (found under `parent_key`) to `out`; `true` when
/// it is an empty map or list (which a parent map drops as a default).
pub(super) fn write(value: &Value, parent_key: &str, out: &mut Vec<u8>) -> bool {
    match value {
        Value::Object(map) => {
            let worker_group = parent_key == "workerGroupSpecs";
            let quantities = matches!(parent_key, "requests" | "limits" | "overhead");
            let user_map = USER_MAPS.contains(&parent_key);
            out.push(b'{');
            let mut kept = 0;
            // serde_json's Map is a BTreeMap: its keys come sorted, as the canonical form's.
            for (key, child) in map {
                let mark = out.len();
                if kept > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key.as_str()).expect("writing to a Vec");
                out.push(b':');
                let default = match child {
                    Value::Number(n) if quantities => {
                        serde_json::to_writer(&mut *out, &n.to_string()).expect("writing to a Vec");
                        false
                    }
                    Value::Object(_) | Value::Array(_) => write(child, key, out),
                    _ => {
                        scalar(child, out);
                        canonical::is_default(key, child, worker_group)
                    }
                };
                if default && !user_map {
                    out.truncate(mark);
                } else {
                    kept += 1;
                }
            }
            out.push(b'}');
            kept == 0
        }
        Value::Array(items) if parent_key == "env" => {
            let ordered = canonical::canonical_env(items.iter().collect());
            write_items(ordered.into_iter(), parent_key, out);
            items.is_empty()
        }
        // A pod tolerates a taint when any toleration matches, so their order means
        // nothing, and Flyte appends the per-resource ones in Go map order
        // (`GetPodTolerations`): ordered by each one's canonical bytes.
        Value::Array(items) if parent_key == "tolerations" => {
            let mut written: Vec<Vec<u8>> = items
                .iter()
                .map(|item| {
                    let mut bytes = Vec::new();
                    write(item, parent_key, &mut bytes);
                    bytes
                })
                .collect();
            written.sort();
            out.push(b'[');
            out.extend_from_slice(&written.join(&b',')[..]);
            out.push(b']');
            items.is_empty()
        }
        Value::Array(items) => {
            write_items(items.iter(), parent_key, out);
            items.is_empty()
        }
        _ => {
            scalar(value, out);
            false
        }
    }
}

/// A list of canonical items.
fn write_items<'a>(items: impl Iterator<Item = &'a Value>, parent_key: &str, out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write(item, parent_key, out);
    }
    out.push(b']');
}

/// serde_json's own bytes for a value (its escaping and number format).
fn scalar(value: &Value, out: &mut Vec<u8>) {
    serde_json::to_writer(out, value).expect("writing to a Vec cannot fail");
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn streamed(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        write(v, "", &mut out);
        out
    }

    /// JSON over the keys the canonical form treats specially, and the values it drops.
    fn arb_spec() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            prop::sample::select(vec![0i64, 1, 2, 2147483647, -3]).prop_map(Value::from),
            Just(json!(1.5)),
            prop::sample::select(vec!["", "TCP", "UDP", "a\"b", "é", "$(A)", "A", "B"])
                .prop_map(Value::from),
        ];
        let key = prop::sample::select(vec![
            "env",
            "tolerations",
            "requests",
            "limits",
            "overhead",
            "workerGroupSpecs",
            "numOfHosts",
            "minReplicas",
            "maxReplicas",
            "priority",
            "protocol",
            "optional",
            "readOnly",
            "labels",
            "nodeSelector",
            "rayStartParams",
            "name",
            "value",
            "a",
            "b",
        ]);
        leaf.prop_recursive(5, 64, 5, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((key.clone(), inner), 0..5).prop_map(|kv| Value::Object(
                    kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
                )),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn streamed_bytes_are_the_trees_bytes(v in arb_spec()) {
            let tree = serde_json::to_vec(&canonical::canonical(&v)).unwrap();
            prop_assert_eq!(String::from_utf8(streamed(&v)).unwrap(), String::from_utf8(tree).unwrap());
        }
    }

    #[test]
    fn samples_stream_as_their_trees() {
        for text in [
            include_str!("../../../deploy/samples/rayjob-run-a.yaml"),
            include_str!("../../../deploy/samples/flyte-v1-rayjobs.yaml"),
            include_str!("../../../deploy/samples/flyte-v2-rayjobs.yaml"),
        ] {
            for doc in crate::offline::documents(text).unwrap() {
                let spec = &doc["spec"]["rayClusterSpec"];
                assert_eq!(
                    streamed(spec),
                    serde_json::to_vec(&canonical::canonical(spec)).unwrap()
                );
            }
        }
    }
}
