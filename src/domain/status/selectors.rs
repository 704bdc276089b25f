//! Which of rayshare's objects `status` lists and `drain` deletes: label selectors, by
//! installation. Every kind rayshare makes for a workload names its installation
//! (`rayshare.io/instance`): shared clusters, the RayJobs on them, PodGroups and index
//! claims. With an instance, only that installation's objects are selected, so draining one
//! installation never touches another's claims, groups or clusters in the same cluster.

use crate::domain::labels;

/// Label selectors, one per kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selectors {
    pub clusters: String,
    pub jobs: String,
    pub pod_groups: String,
    pub claims: String,
}

/// The selectors of installation `instance`, or of every installation (`None`). Objects
/// made by a release before the instance label (none of this installation's name) are
/// selected only without an instance.
pub fn selectors(instance: Option<&str>) -> Selectors {
    let mine = format!("{}={}", labels::MANAGED_BY, labels::MANAGER);
    let of = |base: String| match instance {
        Some(i) => format!("{base},{}={i}", labels::INSTANCE),
        None => base,
    };
    Selectors {
        clusters: of(format!("{mine},{}=true", labels::SHARED_CLUSTER)),
        // The jobs on this installation's clusters only, so another's never show as missing.
        jobs: of(labels::JOB_CLUSTER.to_string()),
        pod_groups: of(mine.clone()),
        claims: of(format!("{mine},{}=true", labels::INDEX_CLAIM)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_selected_by_instance() {
        let s = selectors(Some("team-a"));
        for selector in [&s.clusters, &s.jobs, &s.pod_groups, &s.claims] {
            assert!(
                selector.ends_with(",rayshare.io/instance=team-a"),
                "{selector}"
            );
        }
        assert_eq!(
            s.claims,
            "app.kubernetes.io/managed-by=rayshare,rayshare.io/index-claim=true,rayshare.io/instance=team-a"
        );
        assert_eq!(
            s.pod_groups,
            "app.kubernetes.io/managed-by=rayshare,rayshare.io/instance=team-a"
        );
    }

    #[test]
    fn without_an_instance_every_installations_objects_are_selected() {
        let s = selectors(None);
        assert_eq!(
            s,
            Selectors {
                clusters: "app.kubernetes.io/managed-by=rayshare,rayshare.io/shared-cluster=true"
                    .into(),
                jobs: "rayshare.io/cluster".into(),
                pod_groups: "app.kubernetes.io/managed-by=rayshare".into(),
                claims: "app.kubernetes.io/managed-by=rayshare,rayshare.io/index-claim=true".into(),
            }
        );
    }
}
