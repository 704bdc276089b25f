//! Which of rayshare's own objects no pod stands behind any more (pure): PodGroups whose
//! pod never appeared or is gone, per-host index claims whose slot no pod holds. The
//! leader's sweeps (`reconcile::orphan_groups`, `reconcile::orphan_claims`) list, ask here,
//! and delete what comes back (each delete conditioned on what was judged).

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;

use crate::config::PodGroups;
use crate::domain::indices::Slot;
use crate::domain::labels;
use crate::domain::time::{age, elapsed, least_age};

/// (namespace, name): the PodGroup a pod names.
pub type GroupKey = (String, String);
/// (namespace, cluster, worker group, slot): the slot a pod or a claim holds.
pub type SlotKey = (String, String, String, Slot);

/// PodGroups old enough to judge: past their grace since made and since last admitted.
/// A group no stored pod has taken up yet was made on a review's word alone: shorter grace.
pub fn pod_group_candidates<'a>(
    groups: &'a [ObjectMeta],
    cfg: &PodGroups,
    now: Timestamp,
) -> Vec<&'a ObjectMeta> {
    let grace = |g: &ObjectMeta| {
        let taken_up = g
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(labels::POD_UID));
        Duration::from_secs(if taken_up {
            cfg.orphan_grace_seconds
        } else {
            cfg.unconfirmed_grace_seconds
        })
    };
    // Owned groups too: an owner (a Job, a Flyte workflow) can outlive many of its pods,
    // and each orphaned group holds queue capacity until then.
    let admitted_at = |g: &ObjectMeta| {
        let stamp = g.annotations.as_ref()?.get(labels::ADMITTED_AT)?;
        stamp.parse::<Timestamp>().ok()
    };
    groups
        .iter()
        .filter(|g| age(g, now) > grace(g))
        .filter(|g| admitted_at(g).is_none_or(|t| elapsed(now, t) > grace(g)))
        .collect()
}

/// The group a pod names (Volcano's annotation), if any.
pub fn group_named(pod: &ObjectMeta) -> Option<GroupKey> {
    let group = pod.annotations.as_ref()?.get(labels::GROUP_NAME)?;
    Some((pod.namespace.clone()?, group.clone()))
}

/// The candidates no pod names: to delete.
pub fn orphaned_groups<'a>(
    candidates: Vec<&'a ObjectMeta>,
    in_use: &HashSet<GroupKey>,
) -> Vec<&'a ObjectMeta> {
    candidates
        .into_iter()
        .filter(|g| {
            let key = (
                g.namespace.clone().unwrap_or_default(),
                g.name.clone().unwrap_or_default(),
            );
            !in_use.contains(&key)
        })
        .collect()
}

/// The slot a worker pod or a per-host claim holds, from its labels.
pub fn slot_held(meta: &ObjectMeta) -> Option<SlotKey> {
    slot_key(meta.namespace.as_ref(), meta.labels.as_ref()?)
}

fn slot_key(namespace: Option<&String>, l: &BTreeMap<String, String>) -> Option<SlotKey> {
    Some((
        namespace?.clone(),
        l.get(labels::RAY_CLUSTER)?.clone(),
        l.get(labels::RAY_GROUP)?.clone(),
        Slot::of_labels(l)?,
    ))
}

/// Per-host claims of installation `instance` past their grace whose slot no pod holds:
/// to delete. A claim whose labels do not name a slot is left alone (not one rayshare
/// could have made); so is another installation's, judged by its own grace. A claim with
/// no installation label was made by a release before it had one: anyone's.
pub fn stale_claims<'a>(
    claims: &'a [ObjectMeta],
    held: &HashSet<SlotKey>,
    (instance, grace): (&str, Duration),
    now: Timestamp,
) -> Vec<&'a ObjectMeta> {
    let ours = |c: &ObjectMeta| {
        let made_by = c.labels.as_ref().and_then(|l| l.get(labels::INSTANCE));
        made_by.is_none_or(|i| i == instance)
    };
    claims
        .iter()
        .filter(|c| ours(c))
        .filter(|c| least_age(c, now) > grace)
        .filter(|c| slot_held(c).is_some_and(|k| !held.contains(&k)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn now() -> Timestamp {
        "2026-11-26T12:00:00Z".parse().expect("a time")
    }

    fn meta(ns: &str, name: &str, age_secs: i64) -> ObjectMeta {
        ObjectMeta {
            namespace: Some(ns.into()),
            name: Some(name.into()),
            creation_timestamp: Some(Time(now() - jiff_secs(age_secs))),
            ..ObjectMeta::default()
        }
    }

    fn jiff_secs(s: i64) -> k8s_openapi::jiff::SignedDuration {
        k8s_openapi::jiff::SignedDuration::from_secs(s)
    }

    fn annotated(mut m: ObjectMeta, pairs: &[(&str, String)]) -> ObjectMeta {
        m.annotations = Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        );
        m
    }

    fn cfg() -> PodGroups {
        PodGroups {
            unconfirmed_grace_seconds: 30,
            orphan_grace_seconds: 120,
            ..PodGroups::default()
        }
    }

    fn names(objects: &[&ObjectMeta]) -> Vec<String> {
        objects.iter().filter_map(|m| m.name.clone()).collect()
    }

    #[test]
    fn a_group_no_pod_took_up_is_judged_after_the_short_grace() {
        let groups = [meta("a", "young", 10), meta("a", "old", 31)];
        let judged = pod_group_candidates(&groups, &cfg(), now());
        assert_eq!(names(&judged), ["old"]);
    }

    #[test]
    fn a_group_a_pod_took_up_gets_the_long_grace() {
        let uid = (labels::POD_UID, "u1".to_string());
        let groups = [
            annotated(meta("a", "taken-young", 100), std::slice::from_ref(&uid)),
            annotated(meta("a", "taken-old", 121), std::slice::from_ref(&uid)),
        ];
        let judged = pod_group_candidates(&groups, &cfg(), now());
        assert_eq!(names(&judged), ["taken-old"]);
    }

    #[test]
    fn a_group_readmitted_lately_waits_its_grace_again() {
        let recent = (now() - jiff_secs(5)).to_string();
        let stale = (now() - jiff_secs(60)).to_string();
        let groups = [
            annotated(meta("a", "recent", 600), &[(labels::ADMITTED_AT, recent)]),
            annotated(meta("a", "stale", 600), &[(labels::ADMITTED_AT, stale)]),
            annotated(
                meta("a", "garbled", 600),
                &[(labels::ADMITTED_AT, "x".into())],
            ),
        ];
        let judged = pod_group_candidates(&groups, &cfg(), now());
        assert_eq!(names(&judged), ["stale", "garbled"]);
    }

    #[test]
    fn only_groups_no_pod_names_are_orphans() {
        let groups = [
            meta("a", "used", 600),
            meta("a", "free", 600),
            meta("b", "used", 600),
        ];
        let pod = annotated(meta("a", "pod", 1), &[(labels::GROUP_NAME, "used".into())]);
        let in_use: HashSet<GroupKey> = group_named(&pod).into_iter().collect();
        let orphans = orphaned_groups(groups.iter().collect(), &in_use);
        let keys: Vec<_> = orphans
            .iter()
            .map(|g| (g.namespace.clone().unwrap(), g.name.clone().unwrap()))
            .collect();
        // The same name in another namespace is another group.
        assert_eq!(
            keys,
            [("a".into(), "free".into()), ("b".into(), "used".into())]
        );
    }

    #[test]
    fn a_pod_without_the_annotation_names_no_group() {
        assert_eq!(group_named(&meta("a", "pod", 1)), None);
    }

    fn slot_labels(mut m: ObjectMeta, cluster: &str, replica: u32, host: u32) -> ObjectMeta {
        m.labels = Some(
            [
                (labels::RAY_CLUSTER, cluster.to_string()),
                (labels::RAY_GROUP, "tpu".to_string()),
                (labels::REPLICA_INDEX, replica.to_string()),
                (labels::HOST_INDEX, host.to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        );
        m
    }

    #[test]
    fn claims_are_stale_when_old_and_no_pod_holds_their_slot() {
        let pod = slot_labels(meta("a", "pod", 1), "c", 0, 1);
        let held: HashSet<SlotKey> = slot_held(&pod).into_iter().collect();
        let claims = [
            slot_labels(meta("a", "held", 600), "c", 0, 1),
            slot_labels(meta("a", "free", 600), "c", 0, 2),
            slot_labels(meta("a", "young", 5), "c", 0, 3),
            slot_labels(meta("a", "other-cluster", 600), "d", 0, 1),
            meta("a", "no-slot", 600),
        ];
        let stale = stale_claims(&claims, &held, ("rs", Duration::from_secs(60)), now());
        assert_eq!(names(&stale), ["free", "other-cluster"]);
    }

    #[test]
    fn a_claim_is_judged_by_the_least_age_its_whole_second_stamp_allows() {
        // A stamp that reads 61 s may be 60.1 s old: not yet past a 60 s grace.
        let claims = [
            slot_labels(meta("a", "maybe-in-grace", 61), "c", 0, 1),
            slot_labels(meta("a", "past-grace", 62), "c", 0, 2),
        ];
        let stale = stale_claims(
            &claims,
            &HashSet::new(),
            ("rs", Duration::from_secs(60)),
            now(),
        );
        assert_eq!(names(&stale), ["past-grace"]);
    }

    #[test]
    fn another_installations_claims_are_its_own_to_judge() {
        let by = |m: ObjectMeta, instance: &str| {
            let mut m = slot_labels(m, "c", 0, 1);
            let l = m.labels.as_mut().unwrap();
            l.insert(labels::INSTANCE.into(), instance.into());
            m
        };
        let claims = [
            by(meta("a", "ours", 600), "rs"),
            by(meta("a", "theirs", 600), "other"),
            slot_labels(meta("a", "older-release", 600), "c", 0, 2),
        ];
        let stale = stale_claims(
            &claims,
            &HashSet::new(),
            ("rs", Duration::from_secs(60)),
            now(),
        );
        assert_eq!(names(&stale), ["ours", "older-release"]);
    }

    #[test]
    fn a_single_host_pod_holds_host_zero() {
        let mut pod = slot_labels(meta("a", "pod", 1), "c", 3, 0);
        pod.labels.as_mut().unwrap().remove(labels::HOST_INDEX);
        let slot = slot_held(&pod).map(|k| k.3);
        assert_eq!(
            slot,
            Some(Slot {
                replica: 3,
                host: 0
            })
        );
    }
}
