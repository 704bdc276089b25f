//! `rayshare drain`, for uninstalling: which shared clusters go now and which wait for
//! their jobs, from what `status` summarized (pure: the shell deletes and waits).
//!
//! Shared clusters have no owner, so nothing removes them once rayshare is gone; index
//! claims are read by nothing once it is gone, and a PodGroup made at admission has no
//! owner until the group provisioner takes it up.

use serde::Serialize;

use super::status::Status;

/// (namespace, name)
pub type Key = (String, String);

#[derive(Debug, Default, PartialEq, Serialize)]
pub struct Plan {
    /// Shared clusters no active job uses (or every one, forced): deleted now.
    pub delete: Vec<Key>,
    /// Shared clusters still running jobs, with those jobs: deleted once they end.
    pub busy: Vec<(Key, Vec<String>)>,
    /// RayJobs waiting for a shared cluster that is not there: nothing will make it any
    /// more; they must be created again.
    pub stranded: Vec<Key>,
    /// Namespaces with index claims to delete.
    pub claims: Vec<String>,
    /// PodGroups made at admission and never taken up (no owner: nothing deletes them),
    /// with the pod (or name prefix) each was made for: given to the pod that names it,
    /// deleted when none does.
    pub groups: Vec<(Key, String)>,
}

impl Plan {
    pub fn done(&self) -> bool {
        self.busy.is_empty()
    }
}

/// What to do with what `status` found. `force`: delete busy clusters too (their jobs
/// die with them).
pub fn plan(status: &Status, force: bool) -> Plan {
    let mut plan = Plan::default();
    for (ns, namespace) in &status.namespaces {
        for c in &namespace.clusters {
            let key = (ns.clone(), c.name.clone());
            match c.state.as_str() {
                // On its way out already.
                "deleting" => {}
                "missing" => plan
                    .stranded
                    .extend(c.active_jobs.iter().map(|job| (ns.clone(), job.clone()))),
                _ if c.active_jobs.is_empty() || force => plan.delete.push(key),
                _ => plan.busy.push((key, c.active_jobs.clone())),
            }
        }
        if !namespace.index_claims.is_empty() {
            plan.claims.push(ns.clone());
        }
        let unowned = namespace.pod_groups.iter().filter(|g| !g.owned);
        plan.groups
            .extend(unowned.map(|g| ((ns.clone(), g.name.clone()), g.pod.clone())));
    }
    plan
}

#[cfg(test)]
mod tests {
    use rstest::rstest;

    use super::*;
    use crate::domain::status::{Claim, Cluster, Namespace, PodGroup};

    fn cluster(name: &str, state: &str, jobs: &[&str]) -> Cluster {
        Cluster {
            name: name.into(),
            digest: String::new(),
            image: String::new(),
            head: String::new(),
            workers: Vec::new(),
            state: state.into(),
            active_jobs: jobs.iter().map(|j| j.to_string()).collect(),
            idle_seconds: None,
            reclaimable_in_seconds: None,
            kept_warm: None,
        }
    }

    fn status(clusters: Vec<Cluster>, claims: usize) -> Status {
        let claim = || Claim {
            cluster: "c".into(),
            group: "g".into(),
            replica: "0".into(),
            host: "0".into(),
            age_seconds: None,
        };
        let group = |name: &str, owned: bool| PodGroup {
            name: name.into(),
            pod: format!("pod-{name}"),
            owned,
            queue: String::new(),
            priority_class: String::new(),
            min_member: 1,
            phase: String::new(),
        };
        let namespace = Namespace {
            clusters,
            pod_groups: vec![group("taken-up", true), group("made-at-admission", false)],
            index_claims: (0..claims).map(|_| claim()).collect(),
        };
        Status {
            namespaces: [("team".to_string(), namespace)].into(),
        }
    }

    fn key(name: &str) -> Key {
        ("team".into(), name.into())
    }

    #[rstest]
    #[case::idle(cluster("a", "idle", &[]), false, &["a"], &[], &[])]
    #[case::expired(cluster("a", "expired", &[]), false, &["a"], &[], &[])]
    #[case::marked(cluster("a", "marked", &[]), false, &["a"], &[], &[])]
    #[case::busy(cluster("a", "busy", &["j"]), false, &[], &["a"], &[])]
    #[case::busy_forced(cluster("a", "busy", &["j"]), true, &["a"], &[], &[])]
    #[case::deleting(cluster("a", "deleting", &[]), false, &[], &[], &[])]
    #[case::missing(cluster("a", "missing", &["j"]), true, &[], &[], &["j"])]
    fn clusters_are_planned(
        #[case] c: Cluster,
        #[case] force: bool,
        #[case] delete: &[&str],
        #[case] busy: &[&str],
        #[case] stranded: &[&str],
    ) {
        let p = plan(&status(vec![c], 0), force);
        assert_eq!(p.delete, delete.iter().map(|n| key(n)).collect::<Vec<_>>());
        let waiting: Vec<Key> = p.busy.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(waiting, busy.iter().map(|n| key(n)).collect::<Vec<_>>());
        assert_eq!(
            p.stranded,
            stranded.iter().map(|n| key(n)).collect::<Vec<_>>()
        );
        assert_eq!(p.done(), busy.is_empty());
    }

    #[test]
    fn only_groups_without_an_owner_are_the_drains() {
        let groups = plan(&status(vec![], 0), false).groups;
        assert_eq!(
            groups,
            vec![(key("made-at-admission"), "pod-made-at-admission".into())]
        );
    }

    #[test]
    fn claims_go_by_namespace() {
        assert_eq!(plan(&status(vec![], 3), false).claims, vec!["team"]);
        assert!(plan(&status(vec![], 0), false).claims.is_empty());
    }
}
