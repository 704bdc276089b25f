//! Replica/host indices at admission: claim a slot through the API server, apply it.

use super::work::Work;
use crate::cause::Cause;
use crate::domain::cluster::ClusterInfo;
use crate::domain::events::{self, Event, Regarding};
use crate::domain::indices::Slot;
use crate::domain::labels::Meta;
use crate::domain::{indices, labels};
use crate::world::{Claimed, IndexRequest, World};

impl<W: World> Work<'_, W> {
    pub(super) async fn indices(&mut self) {
        let cfg = &self.cfg.indices;
        let plan = |info: Option<&ClusterInfo>| {
            indices::plan(self.object(), info, cfg, &self.cfg.opt_out_annotation)
        };
        let cluster_name = labels::get(self.object(), Meta::Labels, labels::RAY_CLUSTER);
        let mut info = cluster_name.and_then(|c| self.world.ray_cluster(&self.namespace, c));
        let mut planned = plan(info.as_ref());
        // KubeRay makes a cluster's first pods, or a new group's, a moment after the
        // cluster: the watch may not have caught up. Ask before leaving a pod without.
        let group = labels::get(self.object(), Meta::Labels, labels::RAY_GROUP).unwrap_or("");
        let unknown = info
            .as_ref()
            .is_none_or(|c| !c.worker_groups.contains_key(group));
        if unknown
            && matches!(planned, indices::Plan::Skip(Some(_)))
            && let Some(name) = cluster_name
            && let Ok(Some(read)) = self.read_cluster(name, cfg.claim_timeout_ms).await
        {
            info = Some(read);
            planned = plan(info.as_ref());
        }
        let (cluster, group, shape) = match planned {
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
                shape,
            } => (cluster, group, shape),
        };
        let hosts = shape.hosts;
        if !self.served_namespace() {
            let (cause, msg) = super::pod_group::not_served(&self.namespace);
            return self.fail(cause, msg, cfg.deny_on_error);
        }
        // The pod's own controller reference names the live cluster; the cache may still
        // hold a deleted cluster of the same name (claims owned by it would be collected).
        // Claims are made only for a cluster whose uid the API server confirms: a review
        // naming another uid is no reason to hold a group's slots.
        let owner_uid = self.object()["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|o| o["kind"] == "RayCluster" && o["name"] == cluster.as_str())
            .and_then(|o| o["uid"].as_str())
            .map(String::from);
        // The uid the pod names (if any) must be the cluster's: the cache's, else a read's.
        let confirmed = |uid: &str| owner_uid.as_deref().is_none_or(|o| o == uid);
        let cluster_uid = match info.filter(|i| confirmed(&i.uid)) {
            Some(known) => known.uid,
            None => match self.read_cluster(&cluster, cfg.claim_timeout_ms).await {
                Ok(Some(live)) if confirmed(&live.uid) => live.uid,
                _ => {
                    let msg = format!(
                        "rayshare: no replica/host indices for this pod: its owner is not \
                         the RayCluster {cluster} the API server has"
                    );
                    return self.fail(Cause::ClusterNotCached, msg, false);
                }
            },
        };
        let request = IndexRequest {
            namespace: self.namespace.clone(),
            cluster: cluster.clone(),
            cluster_uid,
            group: group.clone(),
            shape,
            admission_uid: self.req.uid.clone(),
            dry_run: self.req.dry_run,
            instance: self.cfg.instance.clone(),
        };
        match self
            .world
            .claim_slot(&request, self.budget(cfg.claim_timeout_ms))
            .await
        {
            Ok(Claimed { slot, taken_over }) => {
                let (object, warnings) =
                    indices::apply(self.object(), &cluster, &group, hosts, slot, cfg);
                if !self.req.dry_run {
                    self.count(|m| &m.created, "IndexClaim");
                    for _ in 0..taken_over {
                        self.count(|m| &m.deleted, "IndexClaim");
                    }
                    self.world.record(assigned_event(
                        &object,
                        &self.namespace,
                        &group,
                        slot,
                        hosts,
                    ));
                }
                self.changed = Some(object);
                self.warnings.extend(warnings);
            }
            Err(e) => {
                let msg = format!("rayshare: no replica/host indices for this pod: {e}");
                self.fail(e.cause(), msg, cfg.deny_on_error);
            }
        }
    }
}

/// On the pod, once stored: found by name, or by its slot's labels (unique while it holds
/// the slot) when it has only a `generateName`.
fn assigned_event(
    pod: &serde_json::Value,
    namespace: &str,
    group: &str,
    slot: Slot,
    hosts: u32,
) -> Event {
    let label = |k: &str| labels::get(pod, Meta::Labels, k).unwrap_or_default();
    let selector = format!(
        "{}={},{}={}",
        labels::REPLICA_NAME,
        label(labels::REPLICA_NAME),
        labels::HOST_INDEX,
        label(labels::HOST_INDEX)
    );
    Event {
        regarding: Regarding::Admitted {
            api_version: "v1",
            kind: "Pod",
            namespace: namespace.to_string(),
            name: events::admitted_name(pod),
            selector: Some(selector),
        },
        warning: false,
        reason: crate::domain::events::Reason::IndicesAssigned,
        action: "Admit",
        note: events::indices_assigned(group, slot.replica, slot.host, hosts),
    }
}
