//! One admission request, start to finish: dispatch on kind, run the pure planners,
//! carry out their side effects through a [`World`], and build the verdict.
//!
//! Shared by the HTTPS server and the offline `rayshare mutate`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub mod patch;
pub mod review;
pub mod triage;

use crate::config::Config;
use crate::metrics::{KindLabel, Metrics};
use k8s_openapi::jiff::Timestamp;
pub use review::{AdmissionRequest, GroupVersionKind, ReviewError, Verdict, parse_review};

use crate::domain::shared_cluster::{self, Rewrite};
use crate::domain::{indices, labels, pod_group, reclaim};
use crate::world::{ClusterInfo, Created, IndexRequest, Touched, World, WorldError};

/// How a request ended, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not a kind/operation rayshare handles.
    Ignored,
    /// Handled, nothing to change.
    Unchanged,
    Mutated,
    /// rayshare could not do its job; the object passes unchanged (or is denied).
    Failed(&'static str),
    Denied(&'static str),
}

impl Outcome {
    /// Nothing done and nothing wrong: no span, no log line above debug.
    pub fn is_quiet(&self) -> bool {
        matches!(self, Self::Ignored | Self::Unchanged)
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Ignored => "ignored",
            Self::Unchanged => "unchanged",
            Self::Mutated => "mutated",
            Self::Failed(_) => "failed_open",
            Self::Denied(_) => "denied",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Admission {
    pub verdict: Verdict,
    pub outcome: Outcome,
    /// The object as it will be stored (for `rayshare mutate`); `None` when untouched.
    pub object: Option<Value>,
    /// Objects rayshare created or found for this request.
    pub ensured: Vec<Value>,
}

/// Most clusters one config may spread over (`maxJobsPerCluster`).
const MAX_POOL: u32 = 100;

/// Why a shared cluster could not be used.
struct Failure {
    cause: &'static str,
    message: String,
    deny: bool,
}

impl Failure {
    fn conflict(name: &str) -> Self {
        Self {
            cause: "name_conflict",
            message: format!(
                "rayshare: RayJob left unchanged: a RayCluster named {name} exists that rayshare did not create for this config"
            ),
            deny: false,
        }
    }

    fn deleting(name: &str) -> Self {
        Self {
            cause: "cluster_deleting",
            message: format!(
                "rayshare: RayJob left unchanged (it gets its own cluster): shared RayCluster {name} is being reclaimed"
            ),
            deny: false,
        }
    }

    fn api(e: &WorldError, name: &str, deny: bool) -> Self {
        Self {
            cause: e.cause(),
            message: format!(
                "rayshare: RayJob left unchanged (it gets its own cluster): cannot ensure shared RayCluster {name}: {e}"
            ),
            deny,
        }
    }
}

/// Accumulates one request's changes; each feature either applies fully or not at all.
struct Work<'a, W: World> {
    req: &'a AdmissionRequest,
    cfg: &'a Config,
    world: &'a W,
    metrics: Option<&'a Metrics>,
    namespace: String,
    original: &'a Value,
    /// The object as changed so far; `None` while unchanged (no copy, no diff).
    changed: Option<Value>,
    warnings: Vec<String>,
    ensured: Vec<Value>,
    failure: Option<(&'static str, bool)>,
    deadline: Instant,
}

impl<W: World> Work<'_, W> {
    fn object(&self) -> &Value {
        self.changed.as_ref().unwrap_or(self.original)
    }

    fn count(
        &self,
        family: fn(
            &Metrics,
        ) -> &prometheus_client::metrics::family::Family<
            KindLabel,
            prometheus_client::metrics::counter::Counter,
        >,
        kind: &'static str,
    ) {
        if let Some(m) = self.metrics {
            family(m).get_or_create(&KindLabel { kind }).inc();
        }
    }

    /// Records a failure: a warning, a metric, and (when `deny`) a denial.
    fn fail(&mut self, cause: &'static str, message: String, deny: bool) {
        tracing::warn!(cause, %message, "rayshare could not do its job");
        if let Some(m) = self.metrics {
            m.error(cause);
        }
        self.warnings.push(message);
        if self.failure.is_none() || deny {
            self.failure = Some((cause, deny));
        }
    }

    /// A call's timeout: its own bound, within what is left of the request's budget
    /// (so the answer reaches the API server before its webhook timeout).
    fn budget(&self, timeout_ms: u64) -> Duration {
        let left = self.deadline.saturating_duration_since(Instant::now());
        Duration::from_millis(timeout_ms).min(left)
    }

    async fn create(&self, object: &Value, timeout_ms: u64) -> Result<Created, WorldError> {
        if self.req.dry_run {
            return Ok(Created::Created);
        }
        self.world.create(object, self.budget(timeout_ms)).await
    }

    async fn shared_cluster(&mut self) {
        let cfg = &self.cfg.shared_clusters;
        let plan = shared_cluster::plan(
            self.object(),
            &self.namespace,
            cfg,
            &self.cfg.opt_out_annotation,
        );
        let rewrite = match plan {
            Err(why) => {
                let msg =
                    format!("rayshare: RayJob left unchanged, its shape was not understood: {why}");
                return self.fail("odd_object", msg, cfg.deny_on_error);
            }
            Ok(shared_cluster::Plan::Skip(warning)) => {
                self.warnings.extend(warning);
                return;
            }
            Ok(shared_cluster::Plan::Rewrite(r)) => r,
        };
        let now = Timestamp::now();
        // The TTL a job asks for (capped), else the default; written on the cluster so
        // every replica judges it by the same TTL.
        let reclaim_cfg = &self.cfg.reclaim;
        let job_ttl = labels::get(self.object(), "annotations", &reclaim_cfg.ttl_annotation)
            .and_then(|v| v.parse::<u64>().ok())
            .map(|t| t.min(reclaim_cfg.max_idle_ttl_seconds));
        let initial_ttl = job_ttl.unwrap_or(reclaim_cfg.idle_ttl_seconds).to_string();
        for index in 0..MAX_POOL {
            let mut member = rewrite.pooled(index);
            let cluster = &mut member.cluster;
            labels::set(
                cluster,
                "annotations",
                reclaim::LAST_ADMITTED,
                &now.to_string(),
            );
            labels::set(cluster, "annotations", labels::IDLE_TTL, &initial_ttl);
            match self.ensure_member(&member, now, job_ttl).await {
                Ok(false) => continue,
                Ok(true) => {
                    if !self.req.dry_run {
                        let job = self.req.name.as_str();
                        self.world.note_admitted(&self.namespace, &member.name, job);
                    }
                    self.changed = Some(member.job);
                    self.warnings.extend(member.warnings);
                    self.ensured.push(member.cluster);
                    return;
                }
                Err(Failure {
                    cause,
                    message,
                    deny,
                }) => return self.fail(cause, message, deny),
            }
        }
        let msg = format!(
            "rayshare: RayJob left unchanged: all {MAX_POOL} shared clusters of its config are full"
        );
        self.fail("pool_exhausted", msg, false)
    }

    /// Makes one pool member usable for this job: `Ok(false)` when it is full.
    async fn ensure_member(
        &self,
        member: &Rewrite,
        now: Timestamp,
        job_ttl: Option<u64>,
    ) -> Result<bool, Failure> {
        let cfg = &self.cfg.shared_clusters;
        let info = match self.world.ray_cluster(&self.namespace, &member.name) {
            Some(info) => info,
            None => match self.create_member(member).await? {
                None => return Ok(true),
                // The cache had not seen it yet: treat it like a cached one (stamp it).
                Some(found) => found,
            },
        };
        if !info.serves(&member.digest) {
            return Err(Failure::conflict(&member.name));
        }
        let max = cfg.max_jobs_per_cluster as usize;
        if max > 0 && self.world.active_jobs(&self.namespace, &member.name) >= max {
            return Ok(false);
        }
        if info.deleting {
            return Err(Failure::deleting(&member.name));
        }
        // Refresh the last-admitted stamp (see `reclaim`): this is what keeps the
        // reclaimer from deleting a cluster a job was just admitted onto.
        let ttl = reclaim::ttl(info.idle_ttl.as_deref(), self.cfg.reclaim.idle_ttl_seconds);
        let wants_longer = job_ttl.is_some_and(|t| Duration::from_secs(t) > ttl);
        let reference = info.last_admitted.max(info.created);
        if !self.req.dry_run && (wants_longer || reclaim::stamp_due(reference, ttl, now)) {
            let mut stamp = json!({ reclaim::LAST_ADMITTED: now.to_string() });
            if let Some(t) = job_ttl.filter(|_| wants_longer) {
                stamp[labels::IDLE_TTL] = json!(t.to_string());
            }
            let patch = json!({ "metadata": { "annotations": stamp } });
            let timeout = self.budget(cfg.create_timeout_ms);
            match self.world.touch(&member.cluster, &patch, timeout).await {
                Ok(Touched::Alive) => {}
                // Reclaimed meanwhile: make it again (a racing deletion only ever wins
                // against an unstamped cluster, so what we create now is fresh).
                Ok(Touched::Gone) => {
                    return match self.create_member(member).await? {
                        None => Ok(true),
                        Some(found) if found.serves(&member.digest) && !found.deleting => Ok(true),
                        Some(_) => Err(Failure::deleting(&member.name)),
                    };
                }
                Ok(Touched::Deleting) => return Err(Failure::deleting(&member.name)),
                Err(e) => return Err(Failure::api(&e, &member.name, cfg.deny_on_error)),
            }
        }
        self.count(|m| &m.reused, "RayCluster");
        Ok(true)
    }

    /// Creates a pool member: `None` when this request created it, else what exists.
    async fn create_member(&self, member: &Rewrite) -> Result<Option<ClusterInfo>, Failure> {
        let cfg = &self.cfg.shared_clusters;
        match self.create(&member.cluster, cfg.create_timeout_ms).await {
            Ok(Created::Created) => {
                if !self.req.dry_run {
                    self.count(|m| &m.created, "RayCluster");
                }
                Ok(None)
            }
            Ok(Created::Exists(found)) => Ok(Some(ClusterInfo::from_value(&found))),
            Err(e) => Err(Failure::api(&e, &member.name, cfg.deny_on_error)),
        }
    }

    async fn indices(&mut self) {
        let cfg = &self.cfg.indices;
        let cluster_name = labels::get(self.object(), "labels", labels::RAY_CLUSTER);
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
                    m.error("cluster_not_cached");
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

    async fn pod_group(&mut self) {
        let cfg = &self.cfg.pod_groups;
        let queue = self.world.namespace_queue(&self.namespace);
        let plan = pod_group::plan(
            self.object(),
            &self.namespace,
            &self.req.uid,
            queue.as_deref(),
            cfg,
            &self.cfg.opt_out_annotation,
        );
        let group = match plan {
            Err(why) => {
                let msg = format!(
                    "rayshare: no PodGroup for this pod, its shape was not understood: {why}"
                );
                return self.fail("odd_object", msg, cfg.deny_on_error);
            }
            Ok(pod_group::Plan::Skip(warning)) => {
                self.warnings.extend(warning);
                return;
            }
            Ok(pod_group::Plan::Create(g)) => *g,
        };
        match self.create(&group.group, cfg.create_timeout_ms).await {
            Ok(Created::Created) => {
                if !self.req.dry_run {
                    self.count(|m| &m.created, "PodGroup");
                }
            }
            // A retry or reinvocation for the same pod: the group is ours already.
            // A pod of the same name again (a retry, or a recreated pod): bring the group
            // up to date and stamp it, so the orphan reconciler (which deletes only the
            // version it judged) cannot take it from under the new pod.
            Ok(Created::Exists(found))
                if labels::get(&found, "labels", labels::MANAGED_BY) == Some(labels::MANAGER) =>
            {
                let patch = json!({
                    "metadata": { "annotations": {
                        labels::ADMITTED_AT: Timestamp::now().to_string(),
                        labels::ADMISSION_UID: self.req.uid,
                    }},
                    "spec": group.group["spec"],
                });
                let timeout = self.budget(cfg.create_timeout_ms);
                let refreshed = match self.world.touch(&group.group, &patch, timeout).await {
                    Ok(Touched::Alive) => Ok(()),
                    Ok(Touched::Gone) => {
                        match self.create(&group.group, cfg.create_timeout_ms).await {
                            Ok(Created::Created) => Ok(()),
                            Ok(Created::Exists(_)) => Err("name_conflict"),
                            Err(e) => Err(e.cause()),
                        }
                    }
                    Ok(Touched::Deleting) => Err("pod_group_deleting"),
                    Err(e) => Err(e.cause()),
                };
                if let Err(cause) = refreshed {
                    let msg = format!(
                        "rayshare: no PodGroup for this pod: cannot refresh PodGroup {} ({cause})",
                        group.name
                    );
                    return self.fail(cause, msg, cfg.deny_on_error);
                }
                self.count(|m| &m.reused, "PodGroup");
            }
            Ok(Created::Exists(_)) => {
                let msg = format!(
                    "rayshare: no PodGroup for this pod: a PodGroup named {} exists that rayshare did not create",
                    group.name
                );
                return self.fail("name_conflict", msg, false);
            }
            Err(e) => {
                let msg = format!(
                    "rayshare: no PodGroup for this pod (Volcano will group it itself): cannot create PodGroup {}: {e}",
                    group.name
                );
                return self.fail(e.cause(), msg, cfg.deny_on_error);
            }
        }
        self.warnings
            .push(format!("rayshare: in Volcano PodGroup {}", group.name));
        self.changed = Some(group.pod);
        self.ensured.push(group.group);
    }
}

impl Admission {
    /// Nothing to change (the object is the request's own).
    fn untouched(outcome: Outcome) -> Self {
        Self {
            verdict: Verdict::allow(vec![]),
            outcome,
            object: None,
            ensured: vec![],
        }
    }

    /// rayshare could not look at the object: it passes unchanged, with a warning and a
    /// counted cause.
    pub fn failed_open(cause: &'static str, warning: String, metrics: Option<&Metrics>) -> Self {
        if let Some(m) = metrics {
            m.error(cause);
        }
        Self {
            verdict: Verdict::allow(vec![warning]),
            outcome: Outcome::Failed(cause),
            object: None,
            ensured: vec![],
        }
    }
}

/// Answers one admission request.
pub async fn admit<W: World>(
    req: &AdmissionRequest,
    cfg: &Config,
    world: &W,
    metrics: Option<&Metrics>,
) -> Admission {
    match settled(req, cfg, world, metrics) {
        Some(admission) => admission,
        None => work(req, cfg, world, metrics).await,
    }
}

/// Which feature handles this kind of request, if any.
fn target(req: &AdmissionRequest, cfg: &Config) -> Option<&'static str> {
    let gvk = &req.kind;
    let kind = match (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()) {
        ("ray.io", "v1", "RayJob") if cfg.shared_clusters.enabled => "RayJob",
        ("", "v1", "Pod") if cfg.pod_groups.enabled || cfg.indices.enabled => "Pod",
        _ => return None,
    };
    (req.operation == "CREATE" && req.sub_resource.is_none()).then_some(kind)
}

fn no_object(metrics: Option<&Metrics>) -> Admission {
    let warning = "rayshare: request carried no object; left unchanged".into();
    Admission::failed_open("no_object", warning, metrics)
}

/// The answer to a request that needs no work (most of them): a kind or operation
/// rayshare does not handle, no object, or one triage clears. Synchronous and cheap;
/// `None` means [`work`] must look closer.
pub fn settled<W: World>(
    req: &AdmissionRequest,
    cfg: &Config,
    world: &W,
    metrics: Option<&Metrics>,
) -> Option<Admission> {
    let Some(kind) = target(req, cfg) else {
        return Some(Admission::untouched(Outcome::Ignored));
    };
    let Some(head) = &req.head else {
        return Some(no_object(metrics));
    };
    let namespace = head.namespace(&req.namespace);
    (!triage::needs_work(kind, head, namespace, cfg, world))
        .then(|| Admission::untouched(Outcome::Unchanged))
}

/// Runs the features on a request [`settled`] did not answer.
pub async fn work<W: World>(
    req: &AdmissionRequest,
    cfg: &Config,
    world: &W,
    metrics: Option<&Metrics>,
) -> Admission {
    let Some(kind) = target(req, cfg) else {
        return Admission::untouched(Outcome::Ignored);
    };
    let original = match req.parse_object() {
        Ok(Some(v @ Value::Object(_))) => v,
        Ok(_) => return no_object(metrics),
        Err(e) => {
            let warning = format!("rayshare: left unchanged, the object does not parse: {e}");
            return Admission::failed_open("odd_object", warning, metrics);
        }
    };
    let no_head = triage::Head::default();
    let head = req.head.as_ref().unwrap_or(&no_head);
    let namespace = head.namespace(&req.namespace).to_string();
    let mut work = Work {
        req,
        cfg,
        world,
        metrics,
        namespace,
        original: &original,
        changed: None,
        warnings: vec![],
        ensured: vec![],
        failure: None,
        deadline: Instant::now() + Duration::from_millis(cfg.admission_timeout_ms),
    };
    match kind {
        "RayJob" => work.shared_cluster().await,
        _ => {
            if cfg.indices.enabled {
                work.indices().await;
            }
            if cfg.pod_groups.enabled {
                work.pod_group().await;
            }
        }
    }
    let Work {
        changed,
        warnings,
        ensured,
        failure,
        ..
    } = work;
    if let Some((cause, true)) = failure {
        return Admission {
            verdict: Verdict::deny(warnings.join("; "), warnings),
            outcome: Outcome::Denied(cause),
            object: Some(original),
            ensured,
        };
    }
    let patch = changed
        .as_ref()
        .map(|object| patch::diff(&original, object))
        .filter(|p| !p.0.is_empty());
    if patch.is_some()
        && let Some(m) = metrics
    {
        m.patches.get_or_create(&KindLabel { kind }).inc();
    }
    let outcome = match (failure, &patch) {
        (Some((cause, _)), _) => Outcome::Failed(cause),
        (None, Some(_)) => Outcome::Mutated,
        (None, None) => Outcome::Unchanged,
    };
    let mut verdict = Verdict::allow(warnings);
    verdict.patch = patch;
    Admission {
        verdict,
        outcome,
        object: Some(changed.unwrap_or(original)),
        ensured,
    }
}
