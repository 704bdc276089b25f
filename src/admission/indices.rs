//! Replica/host indices at admission: claim a slot through the API server, apply it.

use super::work::Work;
use crate::cause::Cause;
use crate::domain::labels::Meta;
use crate::domain::{indices, labels};
use crate::world::{IndexRequest, World};

impl<W: World> Work<'_, W> {
    pub(super) async fn indices(&mut self) {
        let cfg = &self.cfg.indices;
        let cluster_name = labels::get(self.object(), Meta::Labels, labels::RAY_CLUSTER);
        let info = cluster_name.and_then(|c| self.world.ray_cluster(&self.namespace, c));
        let (cluster, group, hosts) = match indices::plan(
            self.object(),
            info.as_ref(),
            cfg,
            &self.cfg.opt_out_annotation,
        ) {
            indices::Plan::Skip(warning) => {
                if warning.is_some()
                    && info.is_none()
                    && let Some(m) = self.metrics
                {
                    m.error(Cause::ClusterNotCached);
                }
                self.warnings.extend(warning);
                return;
            }
            indices::Plan::Claim {
                cluster,
                group,
                hosts,
            } => (cluster, group, hosts),
        };
        // The pod's own controller reference names the live cluster; the cache may still
        // hold a deleted cluster of the same name (claims owned by it would be collected).
        let owner_uid = self.object()["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|o| o["kind"] == "RayCluster" && o["name"] == cluster.as_str())
            .and_then(|o| o["uid"].as_str())
            .map(String::from);
        let request = IndexRequest {
            namespace: self.namespace.clone(),
            cluster: cluster.clone(),
            cluster_uid: owner_uid.or(info.map(|i| i.uid)).unwrap_or_default(),
            group: group.clone(),
            hosts,
            admission_uid: self.req.uid.clone(),
            dry_run: self.req.dry_run,
        };
        match self
            .world
            .claim_slot(&request, self.budget(cfg.claim_timeout_ms))
            .await
        {
            Ok(slot) => {
                let (object, warnings) =
                    indices::apply(self.object(), &cluster, &group, hosts, slot, cfg);
                self.changed = Some(object);
                self.warnings.extend(warnings);
                if !self.req.dry_run {
                    self.count(|m| &m.created, "IndexClaim");
                }
            }
            Err(e) => {
                let msg = format!("rayshare: no replica/host indices for this pod: {e}");
                self.fail(e.cause(), msg, cfg.deny_on_error);
            }
        }
    }
}
