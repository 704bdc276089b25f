//! The orphan-claim sweep (leader only): releases per-host index claims whose pod never
//! appeared or is gone, so their slots are reused (`domain::orphans` judges). Block
//! claims stay with their cluster: they keep per-host claims in their replica apart from
//! their maker's hand-outs (`world/kube/claims/block.rs`).

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::controller::{Controller, Cx, Plan};
use super::runner::Failure;
use crate::config::Config;
use crate::domain::labels::select;
use crate::domain::orphans::{self, SlotKey};
use crate::world::Background;
use crate::world::background::{Key, Kind, Scope};

pub struct OrphanClaims;

impl<W: Background> Controller<W> for OrphanClaims {
    const KIND: &'static str = "IndexClaim";

    fn plan(config: &Config) -> Option<Plan> {
        Plan::while_leading(
            config.indices.enabled,
            config.indices.reconcile_interval_seconds,
        )
    }

    fn new(_: &Config) -> Self {
        Self
    }

    async fn reconcile(&self, cx: &Cx<'_, W>, _: &Key) -> Result<(), Failure> {
        let cfg = &cx.config.indices;
        let judge = (
            cx.config.instance.as_str(),
            Duration::from_secs(cfg.claim_grace_seconds),
        );
        let per_host = select::per_host_claims();
        let scope = Scope {
            kind: Kind::Lease,
            namespace: None,
            labels: &per_host,
        };
        let claims = cx.world.list_metadata(scope).await.map_err(Failure::list)?;
        let now = Timestamp::now();
        // Nothing old enough to judge: no need to list the pods.
        if orphans::stale_claims(&claims, &HashSet::new(), judge, now).is_empty() {
            return Ok(());
        }
        let workers = select::indexed_workers();
        let scope = Scope {
            kind: Kind::Pod,
            namespace: None,
            labels: &workers,
        };
        let pods = cx.world.list_metadata(scope).await.map_err(Failure::list)?;
        let held: HashSet<SlotKey> = pods.iter().filter_map(orphans::slot_held).collect();
        for claim in orphans::stale_claims(&claims, &held, judge, now) {
            let reason = "no pod holds its slot";
            cx.delete_exact(Kind::Lease, claim, "IndexClaim", reason)
                .await;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "orphan_claims/tests.rs"]
mod tests;
