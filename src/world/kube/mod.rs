//! The [`World`] of a running server: reflector caches and API calls through kube.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use crate::config::Config;
use crate::domain::indices::{self, Slot};
use crate::domain::labels;
use crate::health::Health;
use crate::world::{ClusterInfo, Created, IndexRequest, Touched, World, WorldError};

pub fn ray_cluster_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("ray.io", "v1", "RayCluster"),
        "rayclusters",
    )
}

pub fn pod_group_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "PodGroup"),
        "podgroups",
    )
}

pub fn lease_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"),
        "leases",
    )
}

pub fn ray_job_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("ray.io", "v1", "RayJob"), "rayjobs")
}

/// Label on index claim Leases.
pub const INDEX_CLAIM: &str = "rayshare.io/index-claim";

pub struct KubeWorld {
    client: Client,
    clusters: Option<Store<DynamicObject>>,
    namespaces: Option<Store<Namespace>>,
    /// One queue per worker group: this replica's claims for a group go one at a time, so
    /// they never race each other (races with other replicas are settled by the API server).
    group_queues: std::sync::Mutex<HashMap<GroupKey, Arc<tokio::sync::Mutex<KnownClaims>>>>,
    /// Active jobs per shared cluster, when `maxJobsPerCluster` needs them.
    jobs: Option<Arc<JobIndex>>,
}

/// Which jobs select which shared cluster: a watch-fed index (a count per admission
/// must not scan every job), plus jobs this replica admitted that the watch has not
/// delivered yet.
#[derive(Default)]
pub struct JobIndex {
    state: std::sync::Mutex<JobIndexState>,
}

#[derive(Default)]
struct JobIndexState {
    /// (namespace, job) -> the cluster it actively uses.
    active: HashMap<(String, String), String>,
    /// (namespace, cluster) -> its active jobs.
    by_cluster: HashMap<(String, String), BTreeSet<String>>,
    /// Replaces `active` when a relist completes.
    relisting: HashMap<(String, String), String>,
    /// (namespace, cluster) -> (job name, admitted at), until the watch shows them.
    pending: HashMap<(String, String), Vec<(String, Instant)>>,
}

impl JobIndexState {
    fn set(&mut self, (ns, job): (String, String), cluster: Option<String>) {
        if let Some(old) = self.active.remove(&(ns.clone(), job.clone())) {
            let key = (ns.clone(), old);
            if let Some(jobs) = self.by_cluster.get_mut(&key) {
                jobs.remove(&job);
                if jobs.is_empty() {
                    self.by_cluster.remove(&key);
                }
            }
        }
        if let Some(cluster) = cluster {
            let key = (ns.clone(), cluster.clone());
            self.by_cluster.entry(key).or_default().insert(job.clone());
            self.active.insert((ns, job), cluster);
        }
    }
}

/// How long an admitted job counts before the watch shows it.
const PENDING_FOR: Duration = Duration::from_secs(30);

impl JobIndex {
    fn active_entry(job: &DynamicObject) -> Option<((String, String), String)> {
        let value = serde_json::to_value(job).ok()?;
        if crate::domain::reclaim::is_terminal(&value) {
            return None;
        }
        let cluster = value["spec"]["clusterSelector"][labels::RAY_CLUSTER].as_str()?;
        Some(((job.namespace()?, job.name_any()), cluster.to_string()))
    }

    fn apply(&self, event: watcher::Event<DynamicObject>) {
        let mut s = self.state.lock().expect("not poisoned");
        let key = |job: &DynamicObject| (job.namespace().unwrap_or_default(), job.name_any());
        match event {
            watcher::Event::Apply(job) => {
                let cluster = Self::active_entry(&job).map(|(_, c)| c);
                let deleting = job.metadata.deletion_timestamp.is_some();
                s.set(key(&job), cluster.filter(|_| !deleting));
            }
            watcher::Event::Delete(job) => s.set(key(&job), None),
            watcher::Event::Init => s.relisting.clear(),
            watcher::Event::InitApply(job) => {
                if let Some((key, cluster)) = Self::active_entry(&job) {
                    s.relisting.insert(key, cluster);
                }
            }
            watcher::Event::InitDone => {
                let fresh = std::mem::take(&mut s.relisting);
                s.active.clear();
                s.by_cluster.clear();
                for (key, cluster) in fresh {
                    s.set(key, Some(cluster));
                }
            }
        }
    }

    /// Active jobs on a cluster: the watch's, plus admitted ones it has not shown yet.
    pub fn count(&self, namespace: &str, cluster: &str) -> usize {
        let mut s = self.state.lock().expect("not poisoned");
        let key = (namespace.to_string(), cluster.to_string());
        let mut pending = s.pending.remove(&key).unwrap_or_default();
        pending.retain(|(_, at)| at.elapsed() < PENDING_FOR);
        let known = s.by_cluster.get(&key);
        let unseen = pending
            .iter()
            .filter(|(job, _)| job.is_empty() || known.is_none_or(|k| !k.contains(job)))
            .count();
        let count = known.map_or(0, BTreeSet::len) + unseen;
        if !pending.is_empty() {
            s.pending.insert(key, pending);
        }
        count
    }

    pub fn note(&self, namespace: &str, cluster: &str, job: &str) {
        let mut s = self.state.lock().expect("not poisoned");
        let entry = s
            .pending
            .entry((namespace.into(), cluster.into()))
            .or_default();
        entry.push((job.into(), Instant::now()));
    }
}

/// (namespace, cluster, worker group).
type GroupKey = (String, String, String);

/// What this replica knows of a group's claims: the slots taken at its last list, plus
/// those it found or made taken since. Trusted for a moment, so a burst of one group's
/// pods costs a create each rather than a list and a create; a slot released meanwhile
/// is at worst passed over (uniqueness never rests on it: the create does).
#[derive(Default)]
struct KnownClaims {
    taken: BTreeSet<Slot>,
    listed: Option<Instant>,
}

/// How long a list of claims is trusted.
const CLAIMS_KNOWN_FOR: Duration = Duration::from_secs(1);

impl KnownClaims {
    fn fresh(&self) -> bool {
        self.listed.is_some_and(|t| t.elapsed() < CLAIMS_KNOWN_FOR)
    }
}

fn to_world_error(e: kube::Error) -> WorldError {
    match e {
        kube::Error::Api(s) if s.code == 403 => WorldError::Forbidden(s.message),
        kube::Error::Api(s) if s.code == 409 => WorldError::Conflict(s.message),
        kube::Error::Api(s) => WorldError::Api(format!("{} ({})", s.message, s.code)),
        other => WorldError::Unreachable(other.to_string()),
    }
}

fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}

/// Runs a reflector's watch stream forever, logging its errors (it retries with backoff).
fn drive<K, S>(what: &'static str, stream: S)
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

async fn bounded<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<Result<T, kube::Error>, WorldError> {
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| WorldError::Timeout)
}

impl KubeWorld {
    /// Starts the caches the enabled features need (watched with `watch_client`, on the
    /// runtime this is called in); `health.caches_synced` flips once they have all listed.
    /// `client` makes admission's own calls.
    pub fn start(
        client: Client,
        watch_client: Client,
        config: &Config,
        health: Arc<Health>,
    ) -> Arc<Self> {
        let need_clusters = config.shared_clusters.enabled || config.indices.enabled;
        let need_namespaces = config.pod_groups.enabled;

        let clusters = need_clusters.then(|| {
            let ar = ray_cluster_resource();
            let api: Api<DynamicObject> = Api::all_with(watch_client.clone(), &ar);
            let writer = reflector::store::Writer::new(ar);
            let reader = writer.as_reader();
            let stream = watcher(api, watcher::Config::default().any_semantic())
                .default_backoff()
                .modify(|o: &mut DynamicObject| {
                    // Only identity, labels, annotations and worker groups are read.
                    o.managed_fields_mut().clear();
                    o.annotations_mut()
                        .remove("kubectl.kubernetes.io/last-applied-configuration");
                    if let Some(spec) = o.data.get_mut("spec").and_then(Value::as_object_mut) {
                        spec.retain(|k, _| k == "workerGroupSpecs");
                        for g in spec.values_mut().flat_map(|v| v.as_array_mut()).flatten() {
                            if let Some(g) = g.as_object_mut() {
                                g.retain(|k, _| k == "groupName" || k == "numOfHosts");
                            }
                        }
                    }
                })
                .reflect(writer);
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
        let jobs = (config.shared_clusters.enabled
            && config.shared_clusters.max_jobs_per_cluster > 0)
            .then(|| {
                let index = Arc::new(JobIndex::default());
                let api: Api<DynamicObject> =
                    Api::all_with(watch_client.clone(), &ray_job_resource());
                let selector = watcher::Config::default()
                    .labels(labels::JOB_CLUSTER)
                    .any_semantic();
                let feed = index.clone();
                tokio::spawn(watcher(api, selector).default_backoff().for_each(move |e| {
                    match e {
                        Ok(event) => feed.apply(event),
                        Err(e) => tracing::warn!(error = %e, "RayJob watch error"),
                    }
                    async {}
                }));
                index
            });
        let world = Arc::new(Self {
            client,
            clusters,
            namespaces,
            group_queues: Default::default(),
            jobs,
        });
        let stores = (world.clusters.clone(), world.namespaces.clone());
        tokio::spawn(async move {
            if let Some(s) = &stores.0 {
                let _ = s.wait_until_ready().await;
            }
            if let Some(s) = &stores.1 {
                let _ = s.wait_until_ready().await;
            }
            tracing::info!("caches synced");
            health.caches_synced.store(true, Ordering::Release);
        });
        world
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    fn api_for(&self, object: &Value) -> Result<Api<DynamicObject>, WorldError> {
        let ar = match object["kind"].as_str() {
            Some("RayCluster") => ray_cluster_resource(),
            Some("PodGroup") => pod_group_resource(),
            Some("Lease") => lease_resource(),
            other => {
                return Err(WorldError::Api(format!(
                    "rayshare cannot create kind {other:?}"
                )));
            }
        };
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        Ok(Api::namespaced_with(self.client.clone(), ns, &ar))
    }

    /// `Ok(false)` when an object of that name already exists.
    async fn try_create(&self, object: &Value, timeout: Duration) -> Result<bool, WorldError> {
        let api = self.api_for(object)?;
        let dynamic: DynamicObject =
            serde_json::from_value(object.clone()).map_err(|e| WorldError::Api(e.to_string()))?;
        match bounded(timeout, api.create(&PostParams::default(), &dynamic)).await? {
            Ok(_) => Ok(true),
            Err(e) if is_already_exists(&e) => Ok(false),
            Err(e) => Err(to_world_error(e)),
        }
    }

    /// Deterministic per (cluster, group, slot), and unambiguous: joining the names with
    /// '-' would give (`a-b`, `c`) and (`a`, `b-c`) the same claim.
    fn claim_name(r: &IndexRequest, slot: Slot) -> String {
        use sha2::Digest;
        let h = sha2::Sha256::digest(format!("{}/{}", r.cluster, r.group).as_bytes());
        let h = data_encoding::BASE32_NOPAD.encode(&h)[..16].to_ascii_lowercase();
        format!("rayshare-idx-{h}-{}-{}", slot.replica, slot.host)
    }

    /// A claim Lease for one slot, owned by the RayCluster so it goes with it.
    pub fn claim_object(r: &IndexRequest, slot: Slot) -> Value {
        let mut metadata = json!({
            "name": Self::claim_name(r, slot),
            "namespace": r.namespace,
            "labels": {
                labels::MANAGED_BY: labels::MANAGER,
                INDEX_CLAIM: "true",
                labels::RAY_CLUSTER: r.cluster,
                labels::RAY_GROUP: r.group,
                labels::REPLICA_INDEX: slot.replica.to_string(),
                labels::HOST_INDEX: slot.host.to_string(),
            },
            "annotations": { labels::ADMISSION_UID: r.admission_uid },
        });
        if !r.cluster_uid.is_empty() {
            metadata["ownerReferences"] = json!([{
                "apiVersion": "ray.io/v1", "kind": "RayCluster",
                "name": r.cluster, "uid": r.cluster_uid,
            }]);
        }
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": { "holderIdentity": r.admission_uid },
        })
    }

    async fn taken_slots(
        &self,
        r: &IndexRequest,
        timeout: Duration,
    ) -> Result<BTreeSet<Slot>, WorldError> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &r.namespace, &lease_resource());
        let selector = format!(
            "{INDEX_CLAIM}=true,{}={},{}={}",
            labels::RAY_CLUSTER,
            r.cluster,
            labels::RAY_GROUP,
            r.group
        );
        let list = bounded(
            timeout,
            api.list_metadata(&ListParams::default().labels(&selector)),
        )
        .await?
        .map_err(to_world_error)?;
        Ok(list
            .items
            .iter()
            .filter_map(|o| {
                let l = o.metadata.labels.as_ref()?;
                Some(Slot {
                    replica: l.get(labels::REPLICA_INDEX)?.parse().ok()?,
                    host: l.get(labels::HOST_INDEX)?.parse().ok()?,
                })
            })
            .collect())
    }
}

impl World for KubeWorld {
    fn active_jobs(&self, namespace: &str, cluster: &str) -> usize {
        self.jobs
            .as_ref()
            .map_or(0, |j| j.count(namespace, cluster))
    }

    fn note_admitted(&self, namespace: &str, cluster: &str, job: &str) {
        if let Some(j) = &self.jobs {
            j.note(namespace, cluster, job);
        }
    }

    async fn touch(
        &self,
        target: &Value,
        patch: &Value,
        timeout: Duration,
    ) -> Result<Touched, WorldError> {
        let api = self.api_for(target)?;
        let name = target["metadata"]["name"].as_str().unwrap_or_default();
        let patch = Patch::Merge(patch);
        match bounded(timeout, api.patch(name, &PatchParams::default(), &patch)).await? {
            Ok(o) if o.metadata.deletion_timestamp.is_some() => Ok(Touched::Deleting),
            Ok(_) => Ok(Touched::Alive),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(Touched::Gone),
            Err(e) => Err(to_world_error(e)),
        }
    }

    fn ray_cluster(&self, namespace: &str, name: &str) -> Option<ClusterInfo> {
        let store = self.clusters.as_ref()?;
        let key = ObjectRef::new_with(name, ray_cluster_resource()).within(namespace);
        let obj = store.get(&key)?;
        let meta = obj.meta();
        Some(ClusterInfo::from_value(&json!({
            "metadata": {
                "uid": meta.uid, "labels": meta.labels, "annotations": meta.annotations,
                "creationTimestamp": meta.creation_timestamp,
                "deletionTimestamp": meta.deletion_timestamp,
            },
            "spec": obj.data.get("spec"),
        })))
    }

    fn namespace_queue(&self, namespace: &str) -> Option<String> {
        let ns = self.namespaces.as_ref()?.get(&ObjectRef::new(namespace))?;
        ns.annotations().get(labels::QUEUE_NAME).cloned()
    }

    async fn create(&self, object: &Value, timeout: Duration) -> Result<Created, WorldError> {
        let deadline = Instant::now() + timeout;
        if self.try_create(object, timeout).await? {
            return Ok(Created::Created);
        }
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let left = deadline.saturating_duration_since(Instant::now());
        let existing = bounded(left, self.api_for(object)?.get(name))
            .await?
            .map_err(to_world_error)?;
        let existing =
            serde_json::to_value(existing).map_err(|e| WorldError::Api(e.to_string()))?;
        Ok(Created::Exists(existing))
    }

    /// Lists the group's claims (unless listed a moment ago), then creates the claim of
    /// the lowest free slot; the API server's name uniqueness makes the create the
    /// arbiter. A lost race (with another replica) moves up to the next free slot,
    /// re-listing now and then, so claims stay compact: a claimer only ever passes slots
    /// it saw taken.
    async fn claim_slot(&self, r: &IndexRequest, timeout: Duration) -> Result<Slot, WorldError> {
        const RELIST_EVERY: u32 = 8;
        let deadline = Instant::now() + timeout;
        let remaining = || deadline.saturating_duration_since(Instant::now());
        let queue = {
            let mut queues = self.group_queues.lock().expect("not poisoned");
            queues.retain(|_, q| {
                Arc::strong_count(q) > 1 || q.try_lock().is_ok_and(|known| known.fresh())
            });
            let key = (r.namespace.clone(), r.cluster.clone(), r.group.clone());
            queues.entry(key).or_default().clone()
        };
        let mut known = tokio::time::timeout(remaining(), queue.lock())
            .await
            .map_err(|_| WorldError::Timeout)?;
        if !known.fresh() {
            let at = Instant::now();
            known.taken = self.taken_slots(r, remaining()).await?;
            known.listed = Some(at);
        }
        for lost in 1.. {
            let slot = indices::next_slot(&known.taken, r.hosts);
            if r.dry_run {
                return Ok(slot);
            }
            let won = self
                .try_create(&Self::claim_object(r, slot), remaining())
                .await?;
            known.taken.insert(slot);
            if won {
                return Ok(slot);
            }
            if lost % RELIST_EVERY == 0 {
                let at = Instant::now();
                let listed = self.taken_slots(r, remaining()).await?;
                known.taken.extend(listed);
                known.listed = Some(at);
            }
            if remaining().is_zero() {
                break;
            }
        }
        Err(WorldError::Timeout)
    }
}
