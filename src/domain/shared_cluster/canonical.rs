//! The canonical form of a cluster config, as rules (pure): which maps hold the user's
//! keys, which values are API defaults, how container env is ordered. `canonical_bytes`
//! writes the form the hash reads from these rules; [`canonical`] builds it as a tree, the
//! definition those bytes are tested against.

use std::borrow::Borrow;
#[cfg(test)]
use std::collections::BTreeMap;

use serde_json::Value;

/// Maps whose keys are the user's, not schema fields.
pub(super) const USER_MAPS: &[&str] = &[
    "labels",
    "annotations",
    "nodeSelector",
    "rayStartParams",
    "matchLabels",
    "data",
];

/// Keys whose value equals the API default, per the RayCluster CRD and core/v1.
pub(super) fn is_default(key: &str, value: &Value, in_worker_group: bool) -> bool {
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

/// The canonical form as a tree: objects with sorted keys and defaulted fields removed,
/// resource quantities as strings. Arrays keep their order (order is meaningful in pod
/// specs), except the lists whose order Kubernetes ignores and Flyte does not control
/// (see [`canonical_env`], and tolerations in `canonical_bytes`). The definition that
/// `canonical_bytes`, which the hash reads, is tested against.
#[cfg(test)]
pub fn canonical(value: &Value) -> Value {
    canonical_at(value, "")
}

/// Tolerations sorted by their canonical JSON.
#[cfg(test)]
fn canonical_tolerations(items: Vec<Value>) -> Vec<Value> {
    let mut keyed: Vec<(String, Value)> = items
        .into_iter()
        .map(|t| (serde_json::to_string(&t).expect("JSON values serialise"), t))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.into_iter().map(|(_, t)| t).collect()
}

/// Names a value refers to with `$(NAME)` (a `$$(NAME)` escape counts too: treating it
/// as a reference only keeps more order than needed).
fn env_references(value: &str) -> impl Iterator<Item = &str> {
    value
        .split("$(")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(name, _)| name))
}

/// Container env in an order-free form. Kubernetes applies the list in order, so order
/// matters only between variables with the same name (the last wins) and between a
/// `$(NAME)` reference and the variables named `NAME` (expanded only when defined
/// earlier). Variables that take part in neither keep their order among themselves and
/// go, sorted stably by name, before the others; the others (every variable whose name
/// is referenced, or that refers to one) keep the list's order. Flyte appends its
/// platform and execution env from Go maps (`DecorateEnvVars`), so their order varies
/// from one propeller (or executor) process to the next. Items may be as written or
/// already canonical: an empty name or value counts as absent, as the canonical form
/// drops it.
pub(super) fn canonical_env<T: Borrow<Value>>(items: Vec<T>) -> Vec<T> {
    let name = |v: &T| {
        let name = v.borrow().get("name").and_then(Value::as_str);
        name.filter(|n| !n.is_empty()).map(str::to_owned)
    };
    if items.iter().any(|v| name(v).is_none()) {
        return items;
    }
    let mut involved = std::collections::BTreeSet::new();
    for item in &items {
        let value = item
            .borrow()
            .get("value")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut refs = env_references(value).peekable();
        if refs.peek().is_some() {
            involved.extend(refs.map(str::to_owned));
            involved.extend(name(item));
        }
    }
    let (ordered, mut free): (Vec<T>, Vec<T>) = items
        .into_iter()
        .partition(|v| name(v).is_some_and(|n| involved.contains(&n)));
    free.sort_by_key(|v| name(v));
    free.extend(ordered);
    free
}

#[cfg(test)]
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
        Value::Array(items) => {
            let items = items.iter().map(|item| canonical_at(item, parent_key));
            Value::Array(match parent_key {
                "env" => canonical_env(items.collect()),
                "tolerations" => canonical_tolerations(items.collect()),
                _ => items.collect(),
            })
        }
        other => other.clone(),
    }
}
