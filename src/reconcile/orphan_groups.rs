//! The orphan-group sweep (leader only): deletes rayshare's PodGroups whose pod never
//! appeared or is gone, and that have no owner to take them away (Volcano issue 4195:
//! orphaned groups hold queue capacity). `domain::orphans` judges; this lists and deletes.

use std::collections::{BTreeSet, HashSet};

use k8s_openapi::jiff::Timestamp;

use super::controller::{Controller, Cx, Plan};
use super::runner::Failure;
use crate::config::Config;
use crate::domain::labels::select;
use crate::domain::orphans::{self, GroupKey};
use crate::world::Background;
use crate::world::background::{Key, Kind, Scope};

/// Beyond this many namespaces with candidates, one cluster-wide list is cheaper.
const MAX_NAMESPACED_LISTS: usize = 20;

pub struct OrphanGroups;

impl<W: Background> Controller<W> for OrphanGroups {
    const KIND: &'static str = "PodGroup";

    fn plan(config: &Config) -> Option<Plan> {
        Plan::while_leading(
            config.pod_groups.enabled,
            config.pod_groups.reconcile_interval_seconds,
        )
    }

    fn new(_: &Config) -> Self {
        Self
    }

    async fn reconcile(&self, cx: &Cx<'_, W>, _: &Key) -> Result<(), Failure> {
        let mine = select::made_by(&cx.config.instance);
        let scope = Scope {
            kind: Kind::PodGroup,
            namespace: None,
            labels: &mine,
        };
        let groups = cx.world.list_metadata(scope).await.map_err(Failure::list)?;
        let cfg = &cx.config.pod_groups;
        let candidates = orphans::pod_group_candidates(&groups, cfg, Timestamp::now());
        if candidates.is_empty() {
            return Ok(());
        }
        // (namespace, group) of every pod that names a group, in the candidates'
        // namespaces only (or the whole cluster, when they are spread over many).
        let namespaces: BTreeSet<&str> = candidates
            .iter()
            .filter_map(|g| g.namespace.as_deref())
            .collect();
        let scopes: Vec<Option<&str>> = if namespaces.len() > MAX_NAMESPACED_LISTS {
            vec![None]
        } else {
            namespaces.into_iter().map(Some).collect()
        };
        let mut in_use: HashSet<GroupKey> = HashSet::new();
        for namespace in scopes {
            let pods = Scope {
                kind: Kind::Pod,
                namespace,
                labels: "",
            };
            let mut note = |p| in_use.extend(orphans::group_named(&p));
            let listed = cx.world.for_each_metadata(pods, &mut note).await;
            listed.map_err(Failure::list)?;
        }
        for group in orphans::orphaned_groups(candidates, &in_use) {
            let reason = "its pod never appeared or is gone";
            cx.delete_exact(Kind::PodGroup, group, "PodGroup", reason)
                .await;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "orphan_groups/tests.rs"]
mod tests;
