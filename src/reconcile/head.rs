//! A shared cluster's Ray head, as the controllers reach it: its dashboard (through the
//! head pod KubeRay made, or the configured URL), its token in token mode, its job list.
//! The job stopper reads the list to stop jobs; the reclaimer to know whether the head
//! runs work no RayJob stands for before a cluster goes (`domain::reclaim::head`).

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::controller::CALL_TIMEOUT;
use crate::cause::Cause;
use crate::config::Config;
use crate::domain::reclaim::head::{Head, Said};
use crate::domain::shared_cluster::job_life::{self, job_list::JobList};
use crate::world::background::{Key, Kind};
use crate::world::ray::DashboardError;
use crate::world::{Background, WorldError};

#[derive(Debug, thiserror::Error)]
pub(super) enum HeadError {
    #[error(transparent)]
    Dashboard(#[from] DashboardError),
    #[error("reading the cluster's head pod: {0}")]
    HeadPods(#[from] WorldError),
    #[error("reading the cluster's auth token: {0}")]
    AuthSecret(String),
    #[error("the cluster's pass took longer than {0:?}; the rest waits for the next")]
    Slow(std::time::Duration),
}

impl HeadError {
    pub(super) fn cause(&self) -> Cause {
        match self {
            // Both keep the stopper from the dashboard.
            Self::Dashboard(_) | Self::AuthSecret(_) | Self::Slow(_) => Cause::Dashboard,
            Self::HeadPods(_) => Cause::ReconcileList,
        }
    }
}

/// Where a head answers: its dashboard, and the token it wants.
pub(super) struct Reached {
    pub base: String,
    pub auth: Option<String>,
}

/// The cluster's dashboard; `None`: no head to ask now (suspended, none running, or not
/// the one KubeRay made), so no Ray work runs there either.
pub(super) async fn reach<W: Background>(
    world: &W,
    config: &Config,
    (ns, name): &Key,
    cluster: &Value,
) -> Result<Option<Reached>, HeadError> {
    // Suspended (Kueue preempted it): no head.
    if cluster["spec"]["suspend"] == true {
        return Ok(None);
    }
    let template = &config.shared_clusters.stop_jobs.dashboard_url;
    let head = if job_life::needs_head(template) {
        match job_life::head(cluster, &head_pods(world, ns, cluster).await?) {
            Ok(head) => Some(head),
            Err(e) => {
                tracing::debug!(namespace = %ns, cluster = %name, reason = %e, "no dashboard to ask");
                return Ok(None);
            }
        }
    } else {
        None
    };
    let Some(base) = job_life::dashboard_url(template, cluster, head.as_ref()) else {
        return Ok(None);
    };
    let auth = match job_life::auth_secret(cluster) {
        Some(expected) => Some(auth_token(world, ns, cluster, &expected).await?),
        None => None,
    };
    Ok(Some(Reached { base, auth }))
}

/// What the reclaimer knows of the head of cluster `key` now: its job list read now; no
/// work when no head runs (nothing can run without one); `Unheard` when it does not answer
/// (`reclaim.headSilenceSeconds` bounds how long that holds a cluster); `NotAsked` when
/// the job stopper, which owns the dashboard settings, is off.
pub(super) async fn heard<W: Background>(world: &W, config: &Config, key: &Key) -> Head {
    let stop_jobs = &config.shared_clusters.stop_jobs;
    if !stop_jobs.enabled {
        return Head::NotAsked;
    }
    let Some(cluster) = world.cached_cluster(&key.0, &key.1) else {
        return Head::Unheard;
    };
    let bound = std::time::Duration::from_millis(stop_jobs.timeout_ms) * 2;
    let read = async {
        let Some(at) = reach(world, config, key, &cluster).await? else {
            return Ok(None);
        };
        let list: JobList = world.ray_jobs(&at.base, at.auth.as_deref()).await?;
        Ok::<_, HeadError>(Some(list))
    };
    match tokio::time::timeout(bound, read).await {
        Ok(Ok(Some(list))) => Head::Said(Said::of(&list, Timestamp::now())),
        Ok(Ok(None)) => Head::Said(Said::of(&JobList::default(), Timestamp::now())),
        Ok(Err(e)) => {
            tracing::info!(namespace = %key.0, cluster = %key.1, error = %e, "the head did not say what it runs; reclaim waits for it (bounded)");
            Head::Unheard
        }
        Err(_) => Head::Unheard,
    }
}

/// The head pod KubeRay reports for the cluster, as the API server has it (none yet:
/// empty); [`job_life::head`] checks it is the one KubeRay made.
async fn head_pods<W: Background>(
    world: &W,
    ns: &str,
    cluster: &Value,
) -> Result<Vec<Value>, WorldError> {
    let Ok(name) = job_life::head_pod_name(cluster) else {
        return Ok(Vec::new());
    };
    let key = (ns.to_string(), name.to_string());
    let pod = world.get(Kind::Pod, &key, CALL_TIMEOUT).await?;
    Ok(pod.into_iter().collect())
}

/// A token-mode cluster's dashboard token, from the Secret KubeRay's own dashboard
/// client reads (a live read: rayshare keeps no Secret in memory between passes).
async fn auth_token<W: Background>(
    world: &W,
    ns: &str,
    cluster: &Value,
    expected: &job_life::AuthSecret,
) -> Result<String, HeadError> {
    let key = (ns.to_string(), expected.name.clone());
    let read = world.get(Kind::Secret, &key, CALL_TIMEOUT).await;
    let secret = read
        .map_err(|e| {
            let hint = if matches!(e, WorldError::Forbidden(_)) {
                " (the chart grants reading it with rbac.rayAuthSecrets: true)"
            } else {
                ""
            };
            HeadError::AuthSecret(format!("secret {}: {e}{hint}", expected.name))
        })?
        .ok_or_else(|| HeadError::AuthSecret(format!("secret {}: not found", expected.name)))?;
    job_life::auth_token(&secret, cluster, expected)
        .map_err(|e| HeadError::AuthSecret(e.to_string()))
}
