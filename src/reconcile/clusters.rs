//! Reclaims shared clusters that stayed idle past their TTL: mark, wait the quiet period,
//! delete (see `crate::domain::reclaim` for the rule and the hand-off with the provisioner
//! that keeps jobs from being stranded).

use std::collections::HashMap;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions};

use super::{for_each_page, is_conflict, is_not_found, list_metadata};
use crate::cause::Cause;
use crate::config::Config;
use crate::domain::events::{self, Event, ObjectRef, Regarding};
use crate::domain::labels;
use crate::domain::reclaim::Decision;
use crate::domain::reclaim::sweep::{self, Act, ClusterKey, Look, Usage};
use crate::metrics::{ClusterLabels, KindLabel, Metrics, StateLabel};
use crate::world::kube::events::EventSink;
use crate::world::kube::{ray_cluster_resource, ray_job_resource};

/// One pass; the runner retries a failed one with backoff.
pub async fn pass(
    client: &Client,
    config: &Config,
    metrics: &Metrics,
    events: Option<&EventSink>,
) -> Result<(), kube::Error> {
    let clusters: Api<DynamicObject> = Api::all_with(client.clone(), &ray_cluster_resource());
    // This installation's clusters only (another installation reclaims its own).
    let selector = format!(
        "{}={},{}=true,{}={}",
        labels::MANAGED_BY,
        labels::MANAGER,
        labels::SHARED_CLUSTER,
        labels::INSTANCE,
        config.instance
    );
    let clusters_list = list_metadata(&clusters, ListParams::default().labels(&selector)).await?;
    let jobs: Api<DynamicObject> = Api::all_with(client.clone(), &ray_job_resource());
    let mut usage: HashMap<ClusterKey, Usage> = HashMap::new();
    let job_params = ListParams::default().labels(labels::JOB_CLUSTER);
    let count = |job: DynamicObject| {
        sweep::count(&mut usage, &serde_json::to_value(job).unwrap_or_default());
    };
    let jobs = &jobs;
    for_each_page(job_params, |p| async move { jobs.list(&p).await }, count).await?;

    let now = Timestamp::now();
    let mut states: HashMap<&'static str, i64> = HashMap::new();
    let mut active_jobs = Vec::new();
    for cluster in clusters_list {
        let meta = &cluster.metadata;
        let key = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        );
        let used = usage.remove(&key).unwrap_or_default();
        let Some(look) = sweep::judge(meta, used, &config.reclaim, now) else {
            continue;
        };
        *states.entry(look.decision.state()).or_default() += 1;
        let (cluster_namespace, cluster) = look.key.clone();
        let series = ClusterLabels {
            cluster_namespace,
            cluster,
        };
        active_jobs.push((series, look.active as i64));
        carry_out(client, &look, metrics, events).await;
    }
    // Replaced as a whole, so a reclaimed cluster's series goes with it.
    metrics.cluster_jobs.clear();
    for (labels, n) in active_jobs {
        metrics.cluster_jobs.get_or_create(&labels).set(n);
    }
    for state in ["busy", "idle", "expired"] {
        let n = states.get(state).copied().unwrap_or(0);
        metrics
            .shared_clusters
            .get_or_create(&StateLabel { state })
            .set(n);
    }
    Ok(())
}

/// Writes what the pass decided for one cluster.
async fn carry_out(client: &Client, look: &Look, metrics: &Metrics, events: Option<&EventSink>) {
    let (ns, name) = &look.key;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ray_cluster_resource());
    let merge = |patch: serde_json::Value| {
        let api = &api;
        async move {
            let patch = Patch::Merge(&patch);
            api.patch(name, &PatchParams::default(), &patch)
                .await
                .map(|_| ())
        }
    };
    let result = match &look.act {
        Act::Nothing => return,
        Act::DryRun(step) => {
            let reason = look.reason();
            tracing::info!(namespace = %ns, cluster = %name, %reason, ?step, "reclaim (dry run): nothing done");
            return;
        }
        Act::Labels(l) => {
            let patch = serde_json::json!({ "metadata": { "labels": l } });
            if let Err(e) = merge(patch).await {
                tracing::debug!(namespace = %ns, cluster = %name, error = %e, "cannot update the pool labels");
            }
            return;
        }
        Act::Patch(patch) => merge(patch.clone()).await,
        Act::Delete {
            uid,
            resource_version,
        } => {
            let preconditions = Preconditions {
                uid: uid.clone(),
                resource_version: resource_version.clone(),
            };
            let params = DeleteParams {
                preconditions: Some(preconditions),
                ..DeleteParams::default()
            };
            api.delete(name, &params).await.map(|_| ())
        }
    };
    let reason = look.reason();
    let deleted = matches!(look.act, Act::Delete { .. });
    match result {
        Ok(()) if deleted => {
            tracing::info!(namespace = %ns, cluster = %name, %reason, "reclaimed idle shared cluster");
            if let (
                Some(sink),
                Decision::Reclaim { idle_for },
                Act::Delete { uid: Some(uid), .. },
            ) = (events, &look.decision, &look.act)
            {
                sink.record(Event {
                    regarding: Regarding::Stored(ObjectRef {
                        api_version: "ray.io/v1".into(),
                        kind: "RayCluster".into(),
                        namespace: ns.clone(),
                        name: name.clone(),
                        uid: uid.clone(),
                    }),
                    warning: false,
                    reason: "Reclaimed",
                    action: "Reclaim",
                    note: events::cluster_reclaimed(*idle_for, look.ttl),
                });
            }
            metrics
                .deleted
                .get_or_create(&KindLabel { kind: "RayCluster" })
                .inc();
        }
        Ok(()) => {
            tracing::info!(namespace = %ns, cluster = %name, %reason, "reclaim mark changed");
        }
        Err(e) if is_conflict(&e) || is_not_found(&e) => {
            tracing::info!(namespace = %ns, cluster = %name, deleted, "not done: the cluster changed (a job was stored) or is gone");
        }
        Err(e) => {
            tracing::warn!(namespace = %ns, cluster = %name, error = %e, deleted, "reclaim call failed");
            metrics.error(Cause::ReconcileDelete);
        }
    }
}
