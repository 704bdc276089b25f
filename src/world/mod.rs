//! What the mutations need from outside: cached knowledge and writes to the API server.
//!
//! The server implements it with kube (`world/kube/`); `rayshare mutate` and the
//! in-process tests with [`MemoryWorld`]. Both run the very same `admission::admit`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use crate::cause::Cause;
use crate::config::ServedNamespaces;
use crate::domain::indices::{self, Slot};
use crate::domain::labels::Meta;

pub mod kube;
pub mod ray;

pub use crate::domain::cluster::{ClusterInfo, WorkerGroup};
pub use crate::domain::events::Event;

#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    Created,
    /// An object of that name exists; here it is, as the API server has it.
    Exists(Value),
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum WorldError {
    #[error("API call timed out")]
    Timeout,
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("API server unreachable: {0}")]
    Unreachable(String),
    #[error("API error: {0}")]
    Api(String),
    #[error("conflict: {0}")]
    Conflict(String),
}

impl WorldError {
    pub fn cause(&self) -> Cause {
        match self {
            Self::Timeout => Cause::ApiTimeout,
            Self::Forbidden(_) => Cause::ApiForbidden,
            Self::Unreachable(_) => Cause::ApiUnreachable,
            Self::Api(_) => Cause::ApiError,
            Self::Conflict(_) => Cause::Conflict,
        }
    }
}

/// The slot a pod got, and how many claims whose pods never came it took over to keep
/// its group's replicas complete.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Claimed {
    pub slot: Slot,
    pub taken_over: usize,
}

/// A request for replica/host indices for one pod of a multi-host worker group.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexRequest {
    pub namespace: String,
    pub cluster: String,
    pub cluster_uid: String,
    pub group: String,
    pub shape: WorkerGroup,
    pub admission_uid: String,
    pub dry_run: bool,
    /// The installation admitting (its sweep releases only its own claims).
    pub instance: String,
}

pub trait World: Send + Sync + 'static {
    fn ray_cluster(&self, namespace: &str, name: &str) -> Option<ClusterInfo>;
    /// The RayCluster as the API server has it now (a read, for names the cache does not
    /// know yet: a cluster made a moment ago, maybe by someone else).
    fn fetch_cluster(
        &self,
        namespace: &str,
        name: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<ClusterInfo>, WorldError>> + Send;
    fn namespace_queue(&self, namespace: &str) -> Option<String>;
    /// Whether the namespace, as the watch shows it, is one the webhook is called for
    /// (`rule`). A namespace the watch has not shown is not.
    fn namespace_served(&self, namespace: &str, rule: &ServedNamespaces) -> bool;
    /// Counts a PodGroup admission is about to make before its pod is stored; `false`
    /// when the caps on such groups are reached (see `domain::unconfirmed`).
    fn note_unconfirmed_group(&self, namespace: &str, group: &str) -> bool;
    /// Active (non-terminal) RayJobs selecting the cluster, including ones this replica
    /// admitted that its cache has not seen yet.
    fn active_jobs(&self, namespace: &str, cluster: &str) -> usize;
    /// Records that a job was admitted onto a cluster.
    fn note_admitted(&self, namespace: &str, cluster: &str, job: &str);
    /// Queues a Kubernetes Event (recorded in the background, never awaited by admission).
    fn record(&self, event: Event);
    /// Creates the object, or returns the one of that name the API server has already.
    fn create(
        &self,
        object: &Value,
        timeout: Duration,
    ) -> impl Future<Output = Result<Created, WorldError>> + Send;
    /// Claims a free (replica, host) slot of a worker group through the API server.
    fn claim_slot(
        &self,
        request: &IndexRequest,
        timeout: Duration,
    ) -> impl Future<Output = Result<Claimed, WorldError>> + Send;
}

/// An in-memory world: what `rayshare mutate` shows, and what router tests run against.
#[derive(Default)]
pub struct MemoryWorld {
    pub objects: Mutex<HashMap<(String, String, String), Value>>,
    pub claims: Mutex<BTreeMap<(String, String, String), BTreeSet<Slot>>>,
    pub namespace_queues: HashMap<String, String>,
    /// The namespaces and their labels, as a watch would show them; `None` (offline, as
    /// `rayshare mutate` runs) serves every namespace.
    pub namespace_labels: Option<HashMap<String, BTreeMap<String, String>>>,
    /// Jobs admitted per (namespace, cluster).
    pub jobs: Mutex<HashMap<(String, String), usize>>,
    /// Makes every write fail, as an unreachable API server would.
    pub fail_writes: Option<WorldError>,
    /// Events admission asked to record.
    pub events: Mutex<Vec<Event>>,
    /// The cache has seen no RayCluster yet (reads of the API server find them).
    pub cache_behind: bool,
    /// Groups made at admission and not yet stored; `None`: uncapped.
    pub unconfirmed: Option<Mutex<crate::domain::unconfirmed::Unconfirmed>>,
}

fn key(object: &Value) -> (String, String, String) {
    let field = |p: &str| {
        object
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (
        field("/kind"),
        field("/metadata/namespace"),
        field("/metadata/name"),
    )
}

impl MemoryWorld {
    /// What follows once the API server stores an admitted object: the provisioner makes
    /// the shared cluster a rewritten RayJob selects (as `reconcile::provision` does from
    /// the stored job). Returns what was created.
    pub fn store(&self, admitted: &Value, config: &crate::config::Config) -> Option<Value> {
        if admitted["kind"] == "Pod" {
            // The provisioner watches only the pods this installation labelled.
            let grouped = crate::domain::labels::get(
                admitted,
                Meta::Labels,
                crate::domain::labels::POD_GROUPED,
            );
            if grouped != Some(config.instance.as_str()) {
                return None;
            }
            let mut pod = admitted.clone();
            pod["metadata"]["uid"] = json!(format!("uid-of-{}", key(admitted).2));
            let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
            let queue = self.namespace_queues.get(ns).map(String::as_str);
            let group = crate::domain::stored_pod_group::group_for(
                &pod,
                queue,
                &config.pod_groups,
                &config.opt_out_annotation,
            )?;
            return self.insert_new(group);
        }
        let mut cluster =
            crate::domain::shared_cluster::cluster_for_job(admitted, &config.shared_clusters)
                .ok()?;
        let reclaim = &config.reclaim;
        let ttl = crate::domain::reclaim::job_ttl(
            admitted,
            &reclaim.ttl_annotation,
            reclaim.max_idle_ttl_seconds,
        )
        .unwrap_or(reclaim.idle_ttl_seconds);
        crate::domain::labels::set(
            &mut cluster,
            Meta::Annotations,
            crate::domain::labels::IDLE_TTL,
            &ttl.to_string(),
        );
        self.insert_new(cluster)
    }

    fn insert_new(&self, object: Value) -> Option<Value> {
        let mut objects = self.objects.lock().expect("not poisoned");
        if objects.contains_key(&key(&object)) {
            return None;
        }
        objects.insert(key(&object), object.clone());
        Some(object)
    }

    /// Objects created so far, in a stable order.
    pub fn created(&self) -> Vec<Value> {
        let objects = self.objects.lock().expect("not poisoned");
        let mut out: Vec<_> = objects.iter().collect();
        out.sort_by(|a, b| a.0.cmp(b.0));
        out.into_iter().map(|(_, v)| v.clone()).collect()
    }

    fn stored_cluster(&self, namespace: &str, name: &str) -> Option<ClusterInfo> {
        let objects = self.objects.lock().expect("not poisoned");
        let k = (
            "RayCluster".to_string(),
            namespace.to_string(),
            name.to_string(),
        );
        objects.get(&k).map(ClusterInfo::from_value)
    }
}

impl World for MemoryWorld {
    async fn create(&self, object: &Value, _timeout: Duration) -> Result<Created, WorldError> {
        if let Some(e) = &self.fail_writes {
            return Err(e.clone());
        }
        let mut objects = self.objects.lock().expect("not poisoned");
        if let Some(existing) = objects.get(&key(object)) {
            return Ok(Created::Exists(existing.clone()));
        }
        objects.insert(key(object), object.clone());
        Ok(Created::Created)
    }

    fn ray_cluster(&self, namespace: &str, name: &str) -> Option<ClusterInfo> {
        if self.cache_behind {
            return None;
        }
        self.stored_cluster(namespace, name)
    }

    fn namespace_queue(&self, namespace: &str) -> Option<String> {
        self.namespace_queues.get(namespace).cloned()
    }

    fn note_unconfirmed_group(&self, namespace: &str, group: &str) -> bool {
        self.unconfirmed.as_ref().is_none_or(|u| {
            let mut u = u.lock().expect("not poisoned");
            u.try_note(namespace, group, std::time::Instant::now())
        })
    }

    fn namespace_served(&self, namespace: &str, rule: &ServedNamespaces) -> bool {
        let Some(known) = &self.namespace_labels else {
            return true;
        };
        known.get(namespace).is_some_and(|labels| {
            let labels = labels.iter().map(|(k, v)| (k.as_str(), v.as_str()));
            rule.serves(namespace, labels)
        })
    }

    async fn fetch_cluster(
        &self,
        namespace: &str,
        name: &str,
        _timeout: Duration,
    ) -> Result<Option<ClusterInfo>, WorldError> {
        Ok(self.stored_cluster(namespace, name))
    }

    fn active_jobs(&self, namespace: &str, cluster: &str) -> usize {
        let jobs = self.jobs.lock().expect("not poisoned");
        jobs.get(&(namespace.into(), cluster.into()))
            .copied()
            .unwrap_or(0)
    }

    fn note_admitted(&self, namespace: &str, cluster: &str, _job: &str) {
        let mut jobs = self.jobs.lock().expect("not poisoned");
        *jobs.entry((namespace.into(), cluster.into())).or_default() += 1;
    }

    fn record(&self, event: Event) {
        self.events.lock().expect("not poisoned").push(event);
    }

    async fn claim_slot(
        &self,
        r: &IndexRequest,
        _timeout: Duration,
    ) -> Result<Claimed, WorldError> {
        if let Some(e) = &self.fail_writes {
            return Err(e.clone());
        }
        let mut claims = self.claims.lock().expect("not poisoned");
        let taken = claims
            .entry((r.namespace.clone(), r.cluster.clone(), r.group.clone()))
            .or_default();
        let slot = indices::next_slot(taken, r.shape.hosts);
        if !r.dry_run {
            taken.insert(slot);
        }
        Ok(Claimed {
            slot,
            taken_over: 0,
        })
    }
}
