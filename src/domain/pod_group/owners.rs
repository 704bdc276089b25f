//! Which pods get a PodGroup of their own, by their owners (pure).
//!
//! Volcano's pg-controller puts all pods of one controller owner into one group
//! (`podgroup-<owner uid>`), which a Deployment, StatefulSet or batch Job relies on. What
//! rayshare fixes is narrower: pods of one Flyte workflow (v1) or action (v2) sharing that
//! group, so that no pod task can have its own queue and priority. So by default it groups
//! bare pods and Flyte's pods, and leaves every other owner to Volcano.

use serde_json::Value;

use crate::config::PodGroups;

/// Why a pod gets no group of rayshare's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// An owner on `excludedOwnerKinds`: it brings its own gang scheduling.
    Excluded(String),
    /// A controller owner not on `ownerKinds`: Volcano's controller groups its pods.
    NotListed(String),
    /// No controller owner, and `barePods` is off.
    Bare,
}

/// `Ok(())` when the pod's owners allow rayshare to give it its own group.
pub fn allowed(pod: &Value, cfg: &PodGroups) -> Result<(), Refusal> {
    let owners = pod["metadata"]["ownerReferences"].as_array();
    let owners = owners.map(Vec::as_slice).unwrap_or_default();
    if let Some(kind) = owners
        .iter()
        .filter_map(qualified_kind)
        .find(|k| matches(&cfg.excluded_owner_kinds, k))
    {
        return Err(Refusal::Excluded(kind.to_string()));
    }
    match owners.iter().find(|o| o["controller"] == true) {
        None if cfg.bare_pods => Ok(()),
        None => Err(Refusal::Bare),
        Some(owner) => {
            let kind = qualified_kind(owner).unwrap_or_default();
            if matches(&cfg.owner_kinds, &kind) {
                Ok(())
            } else {
                Err(Refusal::NotListed(kind))
            }
        }
    }
}

/// `group/Kind` of an owner reference (`Kind` alone for the core group).
fn qualified_kind(owner: &Value) -> Option<String> {
    let kind = owner["kind"].as_str()?;
    let api_version = owner["apiVersion"].as_str()?;
    Some(match api_version.rsplit_once('/') {
        Some((group, _)) => format!("{group}/{kind}"),
        None => kind.to_string(),
    })
}

/// Whether `qualified` (`group/Kind`) is on a list of `*`, `Kind` or `group/Kind` entries.
/// Kinds compare without case: owner references are not validated, and flytepropeller
/// writes `flyteworkflow` for its `FlyteWorkflow`.
fn matches(list: &[String], qualified: &str) -> bool {
    let (group, kind) = qualified.rsplit_once('/').unwrap_or(("", qualified));
    list.iter().any(|entry| match entry.rsplit_once('/') {
        _ if entry == "*" => true,
        Some((g, k)) => g == group && k.eq_ignore_ascii_case(kind),
        None => entry.eq_ignore_ascii_case(kind),
    })
}

#[cfg(test)]
mod tests {
    use rstest::rstest;
    use serde_json::json;

    use super::*;

    fn owner(api_version: &str, kind: &str, controller: bool) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "name": "o", "uid": "u", "controller": controller})
    }

    fn pod(owners: &[Value]) -> Value {
        json!({"metadata": {"name": "p", "ownerReferences": owners}})
    }

    #[rstest]
    #[case::bare(vec![], Ok(()))]
    #[case::flyte_v1(vec![owner("flyte.lyft.com/v1alpha1", "flyteworkflow", true)], Ok(()))]
    #[case::flyte_v1_camel(vec![owner("flyte.lyft.com/v1alpha1", "FlyteWorkflow", true)], Ok(()))]
    #[case::flyte_v2(vec![owner("flyte.org/v1", "TaskAction", true)], Ok(()))]
    #[case::non_controller_owner_is_bare(vec![owner("apps/v1", "ReplicaSet", false)], Ok(()))]
    #[case::deployment(vec![owner("apps/v1", "ReplicaSet", true)], Err(Refusal::NotListed("apps/ReplicaSet".into())))]
    #[case::statefulset(vec![owner("apps/v1", "StatefulSet", true)], Err(Refusal::NotListed("apps/StatefulSet".into())))]
    #[case::batch_job(vec![owner("batch/v1", "Job", true)], Err(Refusal::NotListed("batch/Job".into())))]
    #[case::same_kind_other_group(vec![owner("example.com/v1", "TaskAction", true)], Err(Refusal::NotListed("example.com/TaskAction".into())))]
    #[case::node_owner_core_group(vec![owner("v1", "Node", true)], Err(Refusal::NotListed("Node".into())))]
    #[case::excluded_any_owner(vec![owner("flyte.org/v1", "TaskAction", true), owner("ray.io/v1", "RayCluster", false)], Err(Refusal::Excluded("ray.io/RayCluster".into())))]
    fn default_rule(#[case] owners: Vec<Value>, #[case] want: Result<(), Refusal>) {
        assert_eq!(allowed(&pod(&owners), &PodGroups::default()), want);
    }

    #[test]
    fn lists_configure_both_ways() {
        let rs = [owner("apps/v1", "ReplicaSet", true)];
        let mut cfg = PodGroups {
            owner_kinds: vec!["*".into()],
            ..PodGroups::default()
        };
        assert_eq!(allowed(&pod(&rs), &cfg), Ok(()), "`*`: every owner");
        cfg.excluded_owner_kinds.push("ReplicaSet".into());
        assert_eq!(
            allowed(&pod(&rs), &cfg),
            Err(Refusal::Excluded("apps/ReplicaSet".into())),
            "a bare kind on the exclude list matches any group; exclusion wins over `*`"
        );
        cfg.bare_pods = false;
        assert_eq!(allowed(&pod(&[]), &cfg), Err(Refusal::Bare));
        let cfg = PodGroups {
            owner_kinds: vec!["apps/ReplicaSet".into()],
            ..PodGroups::default()
        };
        assert_eq!(allowed(&pod(&rs), &cfg), Ok(()));
        let flyte = [owner("flyte.org/v1", "TaskAction", true)];
        assert!(
            allowed(&pod(&flyte), &cfg).is_err(),
            "the list replaces the default"
        );
    }

    #[test]
    fn odd_owner_references_do_not_panic() {
        let odd = json!({"metadata": {"ownerReferences": [{"controller": true}, 3, {"kind": 1}]}});
        assert!(allowed(&odd, &PodGroups::default()).is_err());
        let not_a_list = json!({"metadata": {"ownerReferences": "x"}});
        assert_eq!(allowed(&not_a_list, &PodGroups::default()), Ok(()));
    }
}
