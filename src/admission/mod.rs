//! One admission request, start to finish: dispatch on kind, run the pure planners
//! (`domain`), carry out their side effects through a [`World`] (one module per feature),
//! and build the verdict.
//!
//! Shared by the HTTPS server and the offline `rayshare mutate`.

mod hedge;
mod indices;
pub(crate) mod patch;
mod pod_group;
pub mod review;
mod shared_cluster;
mod tree_cost;
pub(crate) mod triage;
mod work;

use std::time::{Duration, Instant};

use serde_json::Value;

pub use review::{AdmissionRequest, GroupVersionKind, ReviewError, Verdict, parse_review};

use crate::cause::Cause;
use crate::config::Config;
use crate::domain::labels;
use crate::metrics::{KindLabel, Metrics};
use crate::world::World;
use work::Work;

/// The kinds rayshare admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    RayJob,
    Pod,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RayJob => "RayJob",
            Self::Pod => "Pod",
        }
    }
}

/// How a request ended, for metrics and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not a kind/operation rayshare handles.
    Ignored,
    /// Handled, nothing to change.
    Unchanged,
    Mutated,
    /// rayshare could not do its job; the object passes unchanged (or is denied).
    Failed(Cause),
    Denied(Cause),
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
    /// The object as it will be stored (for `rayshare mutate`); `None` when untouched, or
    /// when only what triage read was looked at (then: the object with the patch applied).
    pub object: Option<Value>,
    /// Objects rayshare created or found for this request.
    pub ensured: Vec<Value>,
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
    pub fn failed_open(cause: Cause, warning: String, metrics: Option<&Metrics>) -> Self {
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
fn target(req: &AdmissionRequest, cfg: &Config) -> Option<Kind> {
    let gvk = &req.kind;
    let kind = match (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()) {
        ("ray.io", "v1", "RayJob") if cfg.shared_clusters.enabled => Kind::RayJob,
        ("", "v1", "Pod") if cfg.pod_groups.enabled || cfg.indices.enabled => Kind::Pod,
        _ => return None,
    };
    (req.operation == "CREATE" && req.sub_resource.is_none()).then_some(kind)
}

fn no_object(metrics: Option<&Metrics>) -> Admission {
    let warning = "rayshare: request carried no object; left unchanged".into();
    Admission::failed_open(Cause::NoObject, warning, metrics)
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
    if req.tree_cost > review::MAX_TREE_BYTES {
        let warning = format!(
            "rayshare: left unchanged: the object would take about {} MiB to read, more than \
             the {} MiB one request may",
            req.tree_cost.min(u64::MAX - 1) >> 20,
            review::MAX_TREE_BYTES >> 20
        );
        return Some(Admission::failed_open(Cause::InputBound, warning, metrics));
    }
    let Some(head) = &req.head else {
        return Some(no_object(metrics));
    };
    let namespace = head.namespace(&req.namespace);
    let clusters = |ns: &str, name: &str| world.ray_cluster(ns, name);
    (!triage::needs_work(kind, head, namespace, cfg, &clusters))
        .then(|| Admission::untouched(Outcome::Unchanged))
}

/// Runs the features on a request [`settled`] did not answer, its API calls within
/// `admissionTimeoutMs` from now.
pub async fn work<W: World>(
    req: &AdmissionRequest,
    cfg: &Config,
    world: &W,
    metrics: Option<&Metrics>,
) -> Admission {
    let deadline = Instant::now() + Duration::from_millis(cfg.admission_timeout_ms);
    work_until(req, cfg, world, metrics, deadline).await
}

/// [`work`] with its API calls bounded by `deadline` (the server's: the request's arrival
/// plus `admissionTimeoutMs`, so time spent waiting for a slot comes out of the budget).
pub async fn work_until<W: World>(
    req: &AdmissionRequest,
    cfg: &Config,
    world: &W,
    metrics: Option<&Metrics>,
    deadline: Instant,
) -> Admission {
    let Some(kind) = target(req, cfg) else {
        return Admission::untouched(Outcome::Ignored);
    };
    let no_head = triage::Head::default();
    let head = req.head.as_ref().unwrap_or(&no_head);
    // A pod that can only get a group is planned from what triage read; the rest from the
    // whole object.
    let worker = labels::get(head.view(), labels::Meta::Labels, labels::RAY_NODE_TYPE);
    let whole = kind == Kind::RayJob
        || req.head.is_none()
        || head.odd()
        || cfg.indices.enabled && worker == Some("worker");
    let parsed;
    let original: &Value = if let Some(tree) = head.tree().filter(|_| whole) {
        tree
    } else if whole {
        parsed = match req.parse_object() {
            Ok(Some(v @ Value::Object(_))) => v,
            Ok(_) => return no_object(metrics),
            Err(e) => {
                let warning = format!("rayshare: left unchanged, the object does not parse: {e}");
                return Admission::failed_open(Cause::OddObject, warning, metrics);
            }
        };
        &parsed
    } else {
        head.view()
    };
    let namespace = head.namespace(&req.namespace).to_string();
    let mut work = Work {
        req,
        cfg,
        world,
        metrics,
        namespace,
        original,
        changed: None,
        warnings: vec![],
        ensured: vec![],
        failure: None,
        deadline,
    };
    match kind {
        Kind::RayJob => work.shared_cluster().await,
        Kind::Pod => {
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
            object: None,
            ensured,
        };
    }
    let patch = changed
        .as_ref()
        .map(|object| patch::diff(original, object))
        .filter(|p| !p.0.is_empty());
    if patch.is_some()
        && let Some(m) = metrics
    {
        let kind = kind.as_str();
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
        object: changed.filter(|_| whole),
        ensured,
    }
}
