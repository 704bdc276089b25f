//! Reclaims shared clusters that stayed idle past their TTL: mark, wait the quiet period,
//! delete (see `crate::domain::reclaim` for the rule and the hand-off with the provisioner
//! that keeps jobs from being stranded).

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions};

use super::{for_each_page, is_conflict, is_not_found, list_metadata};
use crate::cause::Cause;
use crate::config::Config;
use crate::domain::cluster::ClusterInfo;
use crate::domain::events::{self, Event, ObjectRef, Regarding};
use crate::domain::reclaim::{self, Decision, Step};
use crate::domain::{labels, pool};
use crate::metrics::{ClusterLabels, KindLabel, Metrics, StateLabel};
use crate::world::kube::events::EventSink;
use crate::world::kube::{ray_cluster_resource, ray_job_resource};

/// Per cluster: active jobs and when the last one ended.
#[derive(Default)]
struct Usage {
    active: usize,
    last_end: Option<Timestamp>,
}

/// One pass; the runner retries a failed one with backoff.
pub async fn pass(
    client: &Client,
    config: &Config,
    metrics: &Metrics,
    events: Option<&EventSink>,
) -> Result<(), kube::Error> {
    let cfg = &config.reclaim;
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
    let mut usage: HashMap<(String, String), Usage> = HashMap::new();
    let job_params = ListParams::default().labels(labels::JOB_CLUSTER);
    let count = |job: DynamicObject| {
        let job = serde_json::to_value(job).unwrap_or_default();
        let Some(cluster) = labels::selected_cluster(&job) else {
            return;
        };
        let ns = job["metadata"]["namespace"].as_str().unwrap_or_default();
        let u = usage
            .entry((ns.to_string(), cluster.to_string()))
            .or_default();
        if reclaim::is_terminal(&job) {
            let end = crate::domain::time::parse_time(&job["status"]["endTime"]);
            u.last_end = u.last_end.max(end);
        } else {
            u.active += 1;
        }
    };
    let jobs = &jobs;
    for_each_page(job_params, |p| async move { jobs.list(&p).await }, count).await?;

    let now = Timestamp::now();
    let mut states: HashMap<&'static str, i64> = HashMap::new();
    let mut active_jobs = Vec::new();
    for cluster in clusters_list {
        let meta = &cluster.metadata;
        let (Some(ns), Some(name)) = (meta.namespace.clone(), meta.name.clone()) else {
            continue;
        };
        if !cfg.namespaces.is_empty() && !cfg.namespaces.contains(&ns) {
            continue;
        }
        let annotations = meta.annotations.clone().unwrap_or_default();
        let u = usage
            .remove(&(ns.clone(), name.clone()))
            .unwrap_or_default();
        let info = ClusterInfo::from_value(&serde_json::json!({ "metadata": meta }));
        let since = reclaim::idle_since(&info, u.last_end).unwrap_or(now);
        let ttl = reclaim::ttl(
            annotations.get(labels::IDLE_TTL).map(String::as_str),
            cfg.idle_ttl_seconds,
        );
        let decision = reclaim::decide(u.active, since, ttl, now);
        *states.entry(decision.state()).or_default() += 1;
        active_jobs.push((
            ClusterLabels {
                cluster_namespace: ns.clone(),
                cluster: name.clone(),
            },
            u.active as i64,
        ));
        if meta.deletion_timestamp.is_some() {
            continue;
        }
        let marked = annotations
            .get(labels::RECLAIM_MARKED)
            .and_then(|t| t.parse().ok());
        let quiet = Duration::from_secs(cfg.quiet_seconds);
        let step = reclaim::step(&decision, marked, quiet, now);
        let digest = annotations.get(labels::CONFIG_DIGEST).map(String::as_str);
        let glance = pool::labels(
            digest,
            u.active,
            info.last_admitted.max(info.created),
            &decision,
            now,
        );
        let label_patch = pool::label_patch(&meta.labels.clone().unwrap_or_default(), &glance);
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &ray_cluster_resource());
        if step == Step::Keep {
            if let Some(l) = label_patch.filter(|_| !cfg.dry_run) {
                let patch = serde_json::json!({ "metadata": { "labels": l } });
                if let Err(e) = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    tracing::debug!(namespace = %ns, cluster = %name, error = %e, "cannot update the pool labels");
                }
            }
            continue;
        }
        let reason = match decision {
            Decision::Reclaim { idle_for } => format!(
                "no active RayJob for {}s (TTL {}s)",
                idle_for.as_secs(),
                ttl.as_secs()
            ),
            _ => "in use again".into(),
        };
        if cfg.dry_run {
            tracing::info!(namespace = %ns, cluster = %name, %reason, ?step, "reclaim (dry run): nothing done");
            continue;
        }
        let result = match step {
            Step::Delete => {
                // The resourceVersion we judged by: the provisioner lifting the mark for a
                // job stored meanwhile makes this fail.
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: meta.uid.clone(),
                        resource_version: meta.resource_version.clone(),
                    }),
                    ..DeleteParams::default()
                };
                api.delete(&name, &params).await.map(|_| ())
            }
            _ => {
                let mark = (step == Step::Mark).then(|| now.to_string());
                let patch = serde_json::json!({ "metadata": {
                    "resourceVersion": meta.resource_version,
                    "annotations": { labels::RECLAIM_MARKED: mark },
                    "labels": label_patch.unwrap_or_default(),
                }});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(|_| ())
            }
        };
        match result {
            Ok(()) if step == Step::Delete => {
                tracing::info!(namespace = %ns, cluster = %name, %reason, "reclaimed idle shared cluster");
                if let (Some(sink), Decision::Reclaim { idle_for }, Some(uid)) =
                    (events, &decision, meta.uid.clone())
                {
                    sink.record(Event {
                        regarding: Regarding::Stored(ObjectRef {
                            api_version: "ray.io/v1".into(),
                            kind: "RayCluster".into(),
                            namespace: ns.clone(),
                            name: name.clone(),
                            uid,
                        }),
                        warning: false,
                        reason: "Reclaimed",
                        action: "Reclaim",
                        note: events::cluster_reclaimed(*idle_for, ttl),
                    });
                }
                metrics
                    .deleted
                    .get_or_create(&KindLabel { kind: "RayCluster" })
                    .inc();
            }
            Ok(()) => {
                tracing::info!(namespace = %ns, cluster = %name, %reason, ?step, "reclaim mark changed");
            }
            Err(e) if is_conflict(&e) || is_not_found(&e) => {
                tracing::info!(namespace = %ns, cluster = %name, ?step, "not done: the cluster changed (a job was stored) or is gone");
            }
            Err(e) => {
                tracing::warn!(namespace = %ns, cluster = %name, error = %e, ?step, "reclaim call failed");
                metrics.error(Cause::ReconcileDelete);
            }
        }
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
