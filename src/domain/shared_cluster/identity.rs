//! The identity of a Ray cluster config: strip what differs per run, canonicalise, hash.
//!
//! The canonical form is a compatibility promise: changing it renames every shared
//! cluster after an upgrade (the old ones are orphaned). The golden tests pin it.

use std::collections::BTreeMap;

use data_encoding::BASE32_NOPAD;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::config::SharedClusters;

/// Bumped only on a deliberate change of the canonical form.
const CANONICAL_VERSION: &str = "rayshare.io/cluster-identity/v1";
/// 20 base32 characters = 100 bits: a collision needs ~2^50 distinct configs.
const NAME_HASH_CHARS: usize = 20;
pub const NAME_PREFIX: &str = "ray-";

/// A run-scoped env var removed from the cluster's pods.
#[derive(Debug, Clone, PartialEq)]
pub struct StrippedEnv {
    pub name: String,
    /// `None` when the var had `valueFrom` (it cannot travel in a runtime env).
    pub value: Option<String>,
    /// Found in the head's first container, the driver's host.
    pub on_head: bool,
}

pub fn is_run_scoped_env(name: &str, cfg: &SharedClusters) -> bool {
    cfg.run_scoped_env_names.iter().any(|n| n == name)
        || cfg
            .run_scoped_env_prefixes
            .iter()
            .any(|p| name.starts_with(p.as_str()))
}

/// Every pod template of a cluster spec, flagged `true` for the head's.
fn templates_mut(spec: &mut Value) -> Vec<(bool, &mut Value)> {
    let mut out = Vec::new();
    let Some(obj) = spec.as_object_mut() else {
        return out;
    };
    for (key, value) in obj.iter_mut() {
        match key.as_str() {
            "headGroupSpec" => out.extend(value.get_mut("template").map(|t| (true, t))),
            "workerGroupSpecs" => {
                for group in value.as_array_mut().into_iter().flatten() {
                    out.extend(group.get_mut("template").map(|t| (false, t)));
                }
            }
            _ => {}
        }
    }
    out
}

/// Removes run-scoped env, labels and annotations from every pod template, in place.
/// Returns the env vars removed (literal values) and those kept because of `valueFrom`.
pub fn strip_run_scoped(spec: &mut Value, cfg: &SharedClusters) -> Vec<StrippedEnv> {
    let mut stripped = Vec::new();
    for (is_head, template) in templates_mut(spec) {
        if let Some(meta) = template.get_mut("metadata").and_then(Value::as_object_mut) {
            for (field, keys) in [
                ("labels", &cfg.run_scoped_labels),
                ("annotations", &cfg.run_scoped_annotations),
            ] {
                if let Some(map) = meta.get_mut(field).and_then(Value::as_object_mut) {
                    map.retain(|k, _| !keys.contains(k));
                }
            }
        }
        let Some(pod) = template.get_mut("spec") else {
            continue;
        };
        for list in ["containers", "initContainers"] {
            let Some(containers) = pod.get_mut(list).and_then(Value::as_array_mut) else {
                continue;
            };
            for (index, container) in containers.iter_mut().enumerate() {
                let on_head = is_head && list == "containers" && index == 0;
                let Some(env) = container.get_mut("env").and_then(Value::as_array_mut) else {
                    continue;
                };
                env.retain(|var| {
                    let Some(name) = var.get("name").and_then(Value::as_str) else {
                        return true;
                    };
                    if !is_run_scoped_env(name, cfg) {
                        return true;
                    }
                    if var.get("valueFrom").is_some() {
                        // Same text for every run: harmless on the cluster, and it cannot
                        // travel in a runtime env, so it stays (and counts for identity).
                        stripped.push(StrippedEnv {
                            name: name.into(),
                            value: None,
                            on_head,
                        });
                        return true;
                    }
                    let value = var.get("value").and_then(Value::as_str).unwrap_or("");
                    stripped.push(StrippedEnv {
                        name: name.into(),
                        value: Some(value.into()),
                        on_head,
                    });
                    false
                });
            }
        }
    }
    stripped
}

/// Maps whose keys are the user's, not schema fields.
const USER_MAPS: &[&str] = &[
    "labels",
    "annotations",
    "nodeSelector",
    "rayStartParams",
    "matchLabels",
    "data",
];

/// Keys whose value equals the API default, per the RayCluster CRD and core/v1.
fn is_default(key: &str, value: &Value, in_worker_group: bool) -> bool {
    match (key, value) {
        (_, Value::Null) => true,
        (_, Value::String(s)) if s.is_empty() => true,
        (_, Value::Object(m)) if m.is_empty() => true,
        (_, Value::Array(a)) if a.is_empty() => true,
        ("optional" | "readOnly", Value::Bool(false)) => true,
        ("protocol", Value::String(s)) => s == "TCP",
        ("numOfHosts", v) if in_worker_group => v.as_i64() == Some(1),
        ("minReplicas" | "priority", v) if in_worker_group => v.as_i64() == Some(0),
        ("maxReplicas", v) if in_worker_group => v.as_i64() == Some(i64::from(i32::MAX)),
        _ => false,
    }
}

/// A canonical copy: objects with sorted keys and defaulted fields removed, resource
/// quantities as strings. Arrays keep their order (order is meaningful in pod specs).
pub fn canonical(value: &Value) -> Value {
    canonical_at(value, "")
}

fn canonical_at(value: &Value, parent_key: &str) -> Value {
    match value {
        Value::Object(map) => {
            let worker_group = parent_key == "workerGroupSpecs";
            let quantities = matches!(parent_key, "requests" | "limits" | "overhead");
            // In maps of user keys an empty value is a value (`nodeSelector: {gpu: ""}` is
            // not the absence of a selector): only the map itself may be dropped as empty.
            let user_map = USER_MAPS.contains(&parent_key);
            let sorted: BTreeMap<&String, Value> = map
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::Number(n) if quantities => Value::String(n.to_string()),
                        _ => canonical_at(v, k),
                    };
                    (k, v)
                })
                .filter(|(k, v)| user_map || !is_default(k, v, worker_group))
                .collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        // Array items inherit the array's key, so worker groups see "workerGroupSpecs".
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| canonical_at(item, parent_key))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Full hex sha256 of the canonical (spec, copied labels).
pub fn digest(stripped_spec: &Value, copied_labels: &Map<String, Value>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(CANONICAL_VERSION.as_bytes());
    hasher.update([0]);
    let identity = serde_json::json!({
        "spec": canonical(stripped_spec),
        "labels": canonical(&Value::Object(copied_labels.clone())),
    });
    // serde_json's Map is a BTreeMap (no `preserve_order`), so this is key-sorted.
    hasher.update(serde_json::to_vec(&identity).expect("JSON values serialise"));
    hex(&hasher.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `ray-` + lowercase base32 of the digest: a DNS-1035 label well inside 53 characters.
pub fn cluster_name(digest_hex: &str) -> String {
    let bytes: Vec<u8> = (0..digest_hex.len())
        .step_by(2)
        .filter_map(|i| u8::from_str_radix(digest_hex.get(i..i + 2)?, 16).ok())
        .collect();
    let encoded = BASE32_NOPAD.encode(&bytes).to_ascii_lowercase();
    format!("{NAME_PREFIX}{}", &encoded[..NAME_HASH_CHARS])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_and_drops_defaults() {
        let a = json!({"b": 1, "a": {"y": "", "x": [], "z": {"protocol": "TCP", "p": 1}}});
        let b = json!({"a": {"z": {"p": 1}}, "b": 1});
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(
            serde_json::to_string(&canonical(&a)).unwrap(),
            r#"{"a":{"z":{"p":1}},"b":1}"#
        );
    }

    #[test]
    fn worker_group_defaults_only_in_worker_groups() {
        let with =
            json!({"workerGroupSpecs": [{"groupName": "g", "numOfHosts": 1, "minReplicas": 0}]});
        let without = json!({"workerGroupSpecs": [{"groupName": "g"}]});
        assert_eq!(canonical(&with), canonical(&without));
        let other = json!({"numOfHosts": 1});
        assert_ne!(canonical(&other), canonical(&json!({})));
    }

    /// What kube-apiserver adds to a RayJob's embedded spec from the CRD's defaults
    /// before any webhook sees it (observed on the e2e control plane).
    #[test]
    fn api_server_defaults_do_not_change_identity() {
        let sent = json!({"workerGroupSpecs": [{"groupName": "cpu", "replicas": 2}]});
        let defaulted = json!({"workerGroupSpecs": [{"groupName": "cpu", "replicas": 2, "priority": 0, "numOfHosts": 1}]});
        assert_eq!(digest(&sent, &Map::new()), digest(&defaulted, &Map::new()));
    }

    #[test]
    fn empty_values_in_user_maps_are_values() {
        let gpu = json!({"template": {"spec": {"nodeSelector": {"gpu": ""}}}});
        let none = json!({"template": {"spec": {}}});
        assert_ne!(digest(&gpu, &Map::new()), digest(&none, &Map::new()));
        let labelled = json!({"metadata": {"labels": {"tier": ""}}});
        assert_ne!(canonical(&labelled), canonical(&json!({})));
        // An empty map is still the same as an absent one.
        let empty = json!({"template": {"spec": {"nodeSelector": {}}}});
        assert_eq!(digest(&empty, &Map::new()), digest(&none, &Map::new()));
    }

    #[test]
    fn quantities_compare_as_strings() {
        let a = json!({"resources": {"requests": {"cpu": 1}}});
        let b = json!({"resources": {"requests": {"cpu": "1"}}});
        assert_eq!(canonical(&a), canonical(&b));
    }

    #[test]
    fn name_is_a_dns_1035_label() {
        let name = cluster_name(&digest(&json!({}), &Map::new()));
        assert_eq!(name.len(), 24);
        assert!(name.starts_with("ray-"));
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            "[a-z]{0,4}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-z]{1,3}", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// Rebuilds every object with its keys inserted in reverse order.
    fn reversed(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, v) in m.iter().rev() {
                    out.insert(k.clone(), reversed(v));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(reversed).collect()),
            other => other.clone(),
        }
    }

    proptest! {
        #[test]
        fn digest_ignores_key_order(v in arb_json()) {
            prop_assert_eq!(digest(&v, &Map::new()), digest(&reversed(&v), &Map::new()));
        }

        #[test]
        fn canonical_is_idempotent(v in arb_json()) {
            prop_assert_eq!(canonical(&canonical(&v)), canonical(&v));
        }

        #[test]
        fn digest_ignores_run_scoped_env(run in "[a-z0-9]{1,12}", attempt in 0u8..9) {
            let cfg = SharedClusters::default();
            let spec = |run: &str, attempt: u8| json!({"headGroupSpec": {"template": {
                "metadata": {"labels": {"run": run, "project": "p"}},
                "spec": {"containers": [{"name": "ray-head", "env": [
                    {"name": "RUN_NAME", "value": run},
                    {"name": "FLYTE_ATTEMPT_NUMBER", "value": attempt.to_string()},
                    {"name": "FLYTE_INTERNAL_EXECUTION_ID", "value": run},
                    {"name": "KEEP", "value": "1"}]}]}}}});
            let mut a = spec(&run, attempt);
            let mut b = spec("fixed", 0);
            strip_run_scoped(&mut a, &cfg);
            strip_run_scoped(&mut b, &cfg);
            prop_assert_eq!(digest(&a, &Map::new()), digest(&b, &Map::new()));
        }
    }
}
