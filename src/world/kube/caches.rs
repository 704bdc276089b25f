//! The reflector caches admission reads, started once per process.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod, PodStatus};
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::KubeWorld;
use super::job_index::JobIndex;
use super::resources::{ray_cluster_resource, ray_job_resource};
use crate::config::Config;
use crate::domain::cluster::WorkerGroup;
use crate::domain::labels;
use crate::health::Health;
use crate::world::watch::{Change, Publish, WatchEvent};

/// What became of the object, and the object (`None`: the end of a relist, nothing to tell).
fn change_of<K>(event: &watcher::Event<K>) -> Option<(Change, &K)> {
    match event {
        watcher::Event::InitApply(o) => Some((Change::Listed, o)),
        watcher::Event::Apply(o) => Some((Change::Applied, o)),
        watcher::Event::Delete(o) => Some((Change::Deleted, o)),
        watcher::Event::Init | watcher::Event::InitDone => None,
    }
}

/// Runs a reflector's watch stream forever, logging its errors (it retries with backoff).
pub(super) fn drive<K, S>(what: &'static str, stream: S)
where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    K: Send + 'static,
{
    tokio::spawn(stream.for_each(move |r| async move {
        if let Err(e) = r {
            tracing::warn!(error = %e, "{what} watch error");
        }
    }));
}

impl KubeWorld {
    /// Starts the caches the enabled features need (watched with `watch_client`, on the
    /// runtime this is called in, which also makes the controllers' calls);
    /// `health.caches_synced` flips once they have all listed. `client` makes admission's
    /// own calls. What the watches see is published, typed, to `publish`.
    pub fn start(
        client: Client,
        watch_client: Client,
        config: &Config,
        health: Arc<Health>,
        events: Option<super::events::EventSink>,
        publish: Publish,
    ) -> Arc<Self> {
        let need_clusters = config.shared_clusters.enabled || config.indices.enabled;
        // Admission makes groups and claims only in namespaces this watch shows served.
        let need_namespaces = config.pod_groups.enabled || config.indices.enabled;

        let unconfirmed = Arc::new(std::sync::Mutex::new(
            crate::domain::unconfirmed::Unconfirmed::new(std::time::Duration::from_secs(
                config.pod_groups.unconfirmed_grace_seconds,
            )),
        ));
        let pods = config.pod_groups.enabled.then(|| {
            let api: Api<Pod> = Api::all(watch_client.clone());
            let (reader, writer) = reflector::store();
            let selector = labels::select::grouped_pods(&config.instance);
            let selector = watcher::Config::default().labels(&selector).any_semantic();
            let publish = publish.clone();
            let stored = unconfirmed.clone();
            let stream = watcher(api, selector)
                .default_backoff()
                .modify(|pod: &mut Pod| {
                    pod.managed_fields_mut().clear();
                    if let Some(status) = pod.status.as_mut() {
                        *status = PodStatus {
                            phase: status.phase.take(),
                            ..Default::default()
                        };
                    }
                })
                .reflect(writer)
                .inspect_ok(move |event| {
                    let Some((change, pod)) = change_of(event) else {
                        return;
                    };
                    let namespace = pod.namespace().unwrap_or_default();
                    if change != Change::Deleted
                        && let Some(group) = pod.annotations().get(labels::GROUP_NAME)
                    {
                        let mut u = stored.lock().expect("not poisoned");
                        u.confirm(&namespace, group);
                    }
                    let key = (namespace, pod.name_any());
                    publish(&WatchEvent::Pod { change, key });
                });
            drive("Pod", stream);
            reader
        });
        let clusters = need_clusters.then(|| {
            let ar = ray_cluster_resource();
            let api: Api<DynamicObject> = Api::all_with(watch_client.clone(), &ar);
            let writer = reflector::store::Writer::new(ar);
            let reader = writer.as_reader();
            let stream = watcher(api, watcher::Config::default().any_semantic())
                .default_backoff()
                .modify(slim_cluster)
                .reflect(writer)
                .inspect_ok({
                    let publish = publish.clone();
                    move |event| {
                        if let Some((change, c)) = change_of(event) {
                            let key = (c.namespace().unwrap_or_default(), c.name_any());
                            let shared = c.labels().contains_key(labels::SHARED_CLUSTER);
                            publish(&WatchEvent::RayCluster {
                                change,
                                key,
                                shared,
                            });
                        }
                    }
                });
            drive("RayCluster", stream);
            reader
        });
        let namespaces = need_namespaces.then(|| {
            let api: Api<Namespace> = Api::all(watch_client.clone());
            let (reader, writer) = reflector::store();
            let stream = watcher(api, watcher::Config::default().any_semantic())
                .default_backoff()
                .modify(|ns: &mut Namespace| {
                    ns.managed_fields_mut().clear();
                    ns.spec = None;
                    ns.status = None;
                })
                .reflect(writer);
            drive("Namespace", stream);
            reader
        });
        let jobs = config.shared_clusters.enabled.then(|| {
            let index = Arc::new(JobIndex::default());
            let ar = ray_job_resource();
            let api: Api<DynamicObject> = Api::all_with(watch_client.clone(), &ar);
            let selector = watcher::Config::default()
                .labels(&labels::select::rewritten_jobs(&config.instance))
                .any_semantic();
            let writer = reflector::store::Writer::new(ar);
            let reader = writer.as_reader();
            let (feed, publish) = (index.clone(), publish.clone());
            let stream = watcher(api, selector)
                .default_backoff()
                .modify(slim_job)
                .reflect(writer)
                .inspect_ok(move |event| {
                    // The index first: the provisioner reads it when woken.
                    feed.apply(event.clone());
                    let Some((change, job)) = change_of(event) else {
                        return;
                    };
                    if let Some(cluster) = JobIndex::selected(job) {
                        let over = JobIndex::is_over(job);
                        publish(&WatchEvent::RayJob {
                            change,
                            cluster,
                            over,
                        });
                    }
                });
            drive("RayJob", stream);
            (index, reader)
        });
        let world = Arc::new(Self {
            client,
            background: watch_client,
            clusters,
            namespaces,
            group_queues: Default::default(),
            jobs,
            pods,
            claim_in_flight: std::time::Duration::from_secs(config.indices.claim_in_flight_seconds),
            claim_takeover: std::time::Duration::from_millis(
                (config.indices.claim_takeover_ms)
                    .min(config.indices.claim_in_flight_seconds.saturating_mul(1000)),
            ),
            events,
            cluster_reads: Default::default(),
            dashboard: crate::world::ray::Dashboard::new(std::time::Duration::from_millis(
                config.shared_clusters.stop_jobs.timeout_ms,
            )),
            unconfirmed,
            leading: Default::default(),
            made_here: std::sync::Mutex::new(crate::domain::made_here::MadeHere::new(
                std::time::Duration::from_secs(config.pod_groups.unconfirmed_grace_seconds),
                crate::domain::unconfirmed::IN_ALL,
            )),
        });
        // What admission reads: a replica that counted no jobs yet would fill a pool
        // member past `maxJobsPerCluster` right after a restart.
        let stores = (
            world.clusters.clone(),
            world.namespaces.clone(),
            world.jobs.as_ref().map(|(_, reader)| reader.clone()),
        );
        tokio::spawn(async move {
            if let Some(s) = &stores.0 {
                let _ = s.wait_until_ready().await;
            }
            if let Some(s) = &stores.1 {
                let _ = s.wait_until_ready().await;
            }
            if let Some(s) = &stores.2 {
                let _ = s.wait_until_ready().await;
            }
            tracing::info!("caches synced");
            health.caches_synced.store(true, Ordering::Release);
        });
        world
    }
}

/// Keeps what the provisioner, the job index and the reclaim hand-off read of a RayJob.
fn slim_job(job: &mut DynamicObject) {
    job.managed_fields_mut().clear();
    job.annotations_mut()
        .remove("kubectl.kubernetes.io/last-applied-configuration");
    if let Some(spec) = job.data.get_mut("spec").and_then(Value::as_object_mut) {
        spec.retain(|k, _| k == "clusterSelector");
    }
    if let Some(status) = job.data.get_mut("status").and_then(Value::as_object_mut) {
        status.retain(|k, _| k == "jobDeploymentStatus" || k == "endTime" || k == "jobId");
    }
}

/// Keeps what admission, the indices, the job stopper and the cut-off warning read of a
/// RayCluster: identity, labels, annotations, worker groups' shapes, its `authOptions`,
/// whether it is suspended.
fn slim_cluster(o: &mut DynamicObject) {
    o.managed_fields_mut().clear();
    // Every RayCluster of every namespace is cached on every replica: only rayshare's own
    // annotations are read, so a tenant's annotations cannot grow rayshare.
    o.annotations_mut()
        .retain(|k, _| k.starts_with("rayshare.io/"));
    let Some(spec) = o.data.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.retain(|k, _| matches!(k.as_str(), "workerGroupSpecs" | "authOptions" | "suspend"));
    for g in spec.values_mut().flat_map(|v| v.as_array_mut()).flatten() {
        if let Some(g) = g.as_object_mut() {
            g.retain(|k, _| WorkerGroup::FIELDS.contains(&k.as_str()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slim_cluster_keeps_what_its_readers_need() {
        let mut cluster: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "c", "namespace": "n",
                "annotations": {"rayshare.io/idle-ttl-seconds": "60", "tenant": "x".repeat(4096)}},
            "spec": {"suspend": true, "authOptions": {"mode": "token"},
                "headGroupSpec": {"template": {}},
                "workerGroupSpecs": [{"groupName": "g", "replicas": 2, "template": {}}]},
        }))
        .unwrap();
        slim_cluster(&mut cluster);
        let spec = &cluster.data["spec"];
        assert_eq!(spec["suspend"], true);
        assert_eq!(spec["authOptions"]["mode"], "token");
        assert_eq!(spec["workerGroupSpecs"][0]["groupName"], "g");
        assert!(spec.get("headGroupSpec").is_none());
        assert!(spec["workerGroupSpecs"][0].get("template").is_none());
        let kept: Vec<_> = cluster.annotations().keys().collect();
        assert_eq!(kept, ["rayshare.io/idle-ttl-seconds"]);
    }
}
