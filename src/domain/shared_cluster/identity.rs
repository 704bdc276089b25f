//! The identity of a Ray cluster config: strip what differs per run, canonicalise, hash.
//!
//! The canonical form is a compatibility promise: changing it renames every shared
//! cluster after an upgrade (the old ones are orphaned). The golden tests pin it.

#[cfg(test)]
use std::collections::BTreeMap;

use serde_json::Value;

use super::copied::Copied;
use sha2::{Digest, Sha256};

use crate::config::SharedClusters;

/// Bumped only on a deliberate change of the canonical form.
/// v2: `env` and `tolerations` are compared as sets (Flyte builds them from Go maps).
const CANONICAL_VERSION: &str = "rayshare.io/cluster-identity/v2";
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

#[cfg(test)]
pub use super::canonical::canonical;

/// Full hex sha256 of the canonical (spec, copied labels and annotations).
pub fn digest(stripped_spec: &Value, copied: &Copied) -> String {
    let mut hasher = Sha256::new();
    hasher.update(CANONICAL_VERSION.as_bytes());
    hasher.update([0]);
    // The bytes of `{"labels": canonical(labels), "spec": canonical(spec)}` (keys sorted),
    // written without building either tree.
    // Annotations only when there are any: the digests (and names) of every config
    // without them stay what they were.
    let mut bytes = Vec::with_capacity(4096);
    bytes.push(b'{');
    if !copied.annotations.is_empty() {
        bytes.extend_from_slice(br#""annotations":"#);
        let annotations = Value::Object(copied.annotations.clone());
        super::canonical_bytes::write(&annotations, "", &mut bytes);
        bytes.push(b',');
    }
    bytes.extend_from_slice(br#""labels":"#);
    super::canonical_bytes::write(&Value::Object(copied.labels.clone()), "", &mut bytes);
    bytes.extend_from_slice(br#","spec":"#);
    super::canonical_bytes::write(stripped_spec, "", &mut bytes);
    bytes.push(b'}');
    hasher.update(&bytes);
    data_encoding::HEXLOWER.encode(&hasher.finalize())
}

/// `ray-` + lowercase base32 of the digest: a DNS-1035 label well inside 53 characters.
pub fn cluster_name(digest_hex: &str) -> String {
    let bytes: Vec<u8> = (0..digest_hex.len())
        .step_by(2)
        .filter_map(|i| u8::from_str_radix(digest_hex.get(i..i + 2)?, 16).ok())
        .collect();
    format!(
        "{NAME_PREFIX}{}",
        crate::domain::naming::base32(&bytes, NAME_HASH_CHARS)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rstest::rstest;
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
        assert_eq!(
            digest(&sent, &Copied::default()),
            digest(&defaulted, &Copied::default())
        );
    }

    #[test]
    fn empty_values_in_user_maps_are_values() {
        let gpu = json!({"template": {"spec": {"nodeSelector": {"gpu": ""}}}});
        let none = json!({"template": {"spec": {}}});
        assert_ne!(
            digest(&gpu, &Copied::default()),
            digest(&none, &Copied::default())
        );
        let labelled = json!({"metadata": {"labels": {"tier": ""}}});
        assert_ne!(canonical(&labelled), canonical(&json!({})));
        // An empty map is still the same as an absent one.
        let empty = json!({"template": {"spec": {"nodeSelector": {}}}});
        assert_eq!(
            digest(&empty, &Copied::default()),
            digest(&none, &Copied::default())
        );
    }

    #[test]
    fn quantities_compare_as_strings() {
        let a = json!({"resources": {"requests": {"cpu": 1}}});
        let b = json!({"resources": {"requests": {"cpu": "1"}}});
        assert_eq!(canonical(&a), canonical(&b));
    }

    #[test]
    fn name_is_a_dns_1035_label() {
        let name = cluster_name(&digest(&json!({}), &Copied::default()));
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

    fn count_leaves(v: &Value) -> usize {
        match v {
            Value::Object(m) => m.values().map(count_leaves).sum(),
            Value::Array(a) => a.iter().map(count_leaves).sum(),
            _ => 1,
        }
    }

    /// Changes the `n`th leaf (depth first): a bool flips, a number moves, a string grows.
    fn change_leaf(v: &mut Value, n: &mut usize) -> bool {
        match v {
            Value::Object(m) => m.values_mut().any(|c| change_leaf(c, n)),
            Value::Array(a) => a.iter_mut().any(|c| change_leaf(c, n)),
            leaf if *n > 0 => {
                let _ = leaf;
                *n -= 1;
                false
            }
            Value::Bool(b) => {
                *b = !*b;
                true
            }
            Value::Number(x) => {
                let i = x.as_i64().unwrap_or(0);
                *v = json!(if i == i64::MAX { 0 } else { i + 1 });
                true
            }
            Value::String(s) => {
                s.push('q');
                true
            }
            Value::Null => {
                *v = json!("q");
                true
            }
        }
    }

    fn env(vars: &[(&str, &str)]) -> Value {
        let env: Vec<Value> = vars
            .iter()
            .map(|(n, v)| json!({"name": n, "value": v}))
            .collect();
        json!({"containers": [{"name": "c", "env": env}]})
    }

    fn same_identity(a: &Value, b: &Value) -> bool {
        digest(a, &Copied::default()) == digest(b, &Copied::default())
    }

    #[rstest]
    #[case::plain_vars(&[("A", "1"), ("B", "2"), ("C", "3")], &[("C", "3"), ("A", "1"), ("B", "2")], true)]
    #[case::reference_before_its_target(&[("A", "1"), ("B", "$(A)")], &[("B", "$(A)"), ("A", "1")], false)]
    #[case::free_vars_move_around_references(&[("C", "3"), ("A", "1"), ("B", "x$(A)")], &[("A", "1"), ("B", "x$(A)"), ("C", "3")], true)]
    #[case::escaped_reference_kept_in_order(&[("A", "1"), ("B", "$$(A)")], &[("B", "$$(A)"), ("A", "1")], false)]
    #[case::duplicate_names_last_wins(&[("A", "1"), ("A", "2")], &[("A", "2"), ("A", "1")], false)]
    #[case::duplicates_among_free_vars(&[("A", "1"), ("B", "2"), ("A", "3")], &[("B", "2"), ("A", "1"), ("A", "3")], true)]
    #[case::different_values(&[("A", "1")], &[("A", "2")], false)]
    fn env_order_counts_only_where_kubernetes_reads_it(
        #[case] a: &[(&str, &str)],
        #[case] b: &[(&str, &str)],
        #[case] same: bool,
    ) {
        assert_eq!(same_identity(&env(a), &env(b)), same);
    }

    #[test]
    fn tolerations_are_a_set_and_env_from_a_list() {
        let tol = |k: &str| json!({"key": k, "operator": "Exists", "effect": "NoSchedule"});
        let a = json!({"tolerations": [tol("x"), tol("y"), tol("z")]});
        let b = json!({"tolerations": [tol("z"), tol("x"), tol("y")]});
        assert!(same_identity(&a, &b));
        assert!(!same_identity(
            &a,
            &json!({"tolerations": [tol("x"), tol("y")]})
        ));
        // envFrom: a later source wins for a name both define, so its order stays.
        let from = |n: &str| json!({"configMapRef": {"name": n}});
        let a = json!({"envFrom": [from("a"), from("b")]});
        let b = json!({"envFrom": [from("b"), from("a")]});
        assert!(!same_identity(&a, &b));
    }

    /// Kubernetes' env expansion: in order, `$(NAME)` replaced by an earlier NAME's
    /// value, `$$` an escaped `$`; the last definition of a name wins.
    fn kubernetes_env(vars: &[(String, String)]) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in vars {
            let mut out = String::new();
            let mut rest = value.as_str();
            while let Some(i) = rest.find('$') {
                out.push_str(&rest[..i]);
                rest = &rest[i..];
                if let Some(r) = rest.strip_prefix("$$") {
                    out.push('$');
                    rest = r;
                } else if let Some((var, r)) =
                    rest.strip_prefix("$(").and_then(|r| r.split_once(')'))
                {
                    match env.get(var) {
                        Some(v) => out.push_str(v.as_str()),
                        None => out.push_str(&rest[..var.len() + 3]),
                    }
                    rest = r;
                } else {
                    out.push('$');
                    rest = &rest[1..];
                }
            }
            out.push_str(rest);
            env.insert(name.clone(), out);
        }
        env
    }

    fn arb_env_list() -> impl Strategy<Value = Vec<(String, String)>> {
        let name = prop::sample::select(vec!["A", "B", "C", "D"]).prop_map(String::from);
        let value = prop::sample::select(vec!["1", "2", "$(A)", "$(B)x", "$$(C)", "$(D", "$(E)"])
            .prop_map(String::from);
        prop::collection::vec((name, value), 0..6)
    }

    proptest! {
        /// Two orders of one env list get one identity only when Kubernetes would give
        /// their containers the same environment.
        #[test]
        fn equal_env_identity_means_equal_environment(
            (list, shuffled) in arb_env_list().prop_flat_map(|l| (Just(l.clone()), Just(l).prop_shuffle()))
        ) {
            let as_json = |l: &[(String, String)]| {
                let pairs: Vec<(&str, &str)> = l.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
                env(&pairs)
            };
            if same_identity(&as_json(&list), &as_json(&shuffled)) {
                prop_assert_eq!(kubernetes_env(&list), kubernetes_env(&shuffled));
            }
        }

        /// Without references or repeated names, any order is one identity.
        #[test]
        fn plain_env_order_is_ignored(
            (list, shuffled) in prop::collection::btree_map("[A-Z_]{1,8}", "[a-z0-9:/.]{0,8}", 0..8)
                .prop_map(|m| m.into_iter().collect::<Vec<_>>())
                .prop_flat_map(|l| (Just(l.clone()), Just(l).prop_shuffle()))
        ) {
            let as_json = |l: &[(String, String)]| {
                let pairs: Vec<(&str, &str)> = l.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
                env(&pairs)
            };
            prop_assert!(same_identity(&as_json(&list), &as_json(&shuffled)));
        }

        /// The identity sees every value: changing any one leaf of a spec names another
        /// cluster (a canonical form that dropped or merged values would share clusters
        /// between configs).
        #[test]
        fn every_leaf_enters_the_digest(v in arb_json(), pick in any::<prop::sample::Index>()) {
            let leaves = count_leaves(&v);
            prop_assume!(leaves > 0);
            let mut changed = v.clone();
            change_leaf(&mut changed, &mut pick.index(leaves));
            prop_assert_ne!(digest(&v, &Copied::default()), digest(&changed, &Copied::default()));
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
            prop_assert_eq!(digest(&a, &Copied::default()), digest(&b, &Copied::default()));
        }
    }
}
