//! One reclaim pass over the shared clusters, decided (pure): from the clusters' metadata
//! and the RayJobs that select them, what to write on each. The reclaimer
//! (`reconcile::reclaim`) lists, asks here and carries the [`Act`]s out.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

use super::head::{self, Head};
use super::pool;
use super::{Decision, Step};
use crate::config::Reclaim;
use crate::domain::cluster::ClusterInfo;
use crate::domain::labels;

/// (namespace, name) of a shared cluster.
pub type ClusterKey = (String, String);

/// Per cluster: active jobs and when the last one ended.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Usage {
    pub active: usize,
    pub last_end: Option<Timestamp>,
}

/// Counts a RayJob into the usage of the cluster it selects (none: not counted).
pub fn count(usage: &mut HashMap<ClusterKey, Usage>, job: &Value) {
    let Some(cluster) = labels::selected_cluster(job) else {
        return;
    };
    let ns = job["metadata"]["namespace"].as_str().unwrap_or_default();
    let u = usage
        .entry((ns.to_string(), cluster.to_string()))
        .or_default();
    if super::is_terminal(job) {
        let end = crate::domain::time::parse_time(&job["status"]["endTime"]);
        u.last_end = u.last_end.max(end);
    } else {
        u.active += 1;
    }
}

/// What the pass does with one cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Act {
    /// Nothing to write (already going, or the pool labels agree).
    Nothing,
    /// Kept: bring the pool labels up to date (a merge patch's `metadata.labels`).
    Labels(Map<String, Value>),
    /// Mark or unmark: a merge patch conditioned on the resourceVersion judged by.
    Patch(Value),
    /// Delete, conditioned on the uid and resourceVersion judged by.
    Delete {
        uid: Option<String>,
        resource_version: Option<String>,
    },
    /// `reclaim.dryRun`: the step that would be taken, only logged.
    DryRun(Step),
}

/// One cluster, judged.
#[derive(Debug, Clone, PartialEq)]
pub struct Look {
    pub key: ClusterKey,
    pub decision: Decision,
    pub active: usize,
    pub ttl: Duration,
    pub act: Act,
    /// What the cluster's head had to do with the step ([`super::head`]).
    pub note: Option<String>,
}

impl Look {
    /// Whether the pass is about to mark or delete the cluster: the steps the head's word
    /// can hold back (`Beyond::head`), so the head is asked only then.
    pub fn marks_or_deletes(&self) -> bool {
        match &self.act {
            Act::Delete { .. } | Act::DryRun(Step::Mark | Step::Delete) => true,
            Act::Patch(patch) => {
                patch["metadata"]["annotations"][labels::RECLAIM_MARKED].is_string()
            }
            Act::Nothing | Act::Labels(_) | Act::DryRun(_) => false,
        }
    }

    /// Why the cluster is (un)marked or deleted, for the log.
    pub fn reason(&self) -> String {
        let reason = match self.decision {
            Decision::Reclaim { idle_for } => format!(
                "no active RayJob for {}s (TTL {}s)",
                idle_for.as_secs(),
                self.ttl.as_secs()
            ),
            _ => "in use again".into(),
        };
        match &self.note {
            Some(note) => format!("{reason}; {note}"),
            None => reason,
        }
    }
}

/// What a pass may know of a cluster beyond its RayJobs (nothing, by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beyond {
    /// What its head last said about its work: never deleted while it lists work after
    /// the mark, held at most `reclaim.headSilenceSeconds` by a silent head.
    pub head: Head,
    /// Kept warm ahead of demand, and why (`domain::warm_ahead`): never marked, and a
    /// mark it carries comes off (admission sends no job to a marked cluster).
    pub kept_warm: Option<String>,
}

impl Default for Beyond {
    fn default() -> Self {
        Self {
            head: Head::NotAsked,
            kept_warm: None,
        }
    }
}

/// Judges one shared cluster from its metadata and its jobs' usage. `None`: not this
/// pass's (a namespace left out by `reclaim.namespaces`, or no name).
pub fn judge(meta: &ObjectMeta, usage: Usage, cfg: &Reclaim, now: Timestamp) -> Option<Look> {
    judge_with(meta, usage, &Beyond::default(), cfg, now)
}

/// [`judge`], with what else the pass knows of the cluster ([`Beyond`]).
pub fn judge_with(
    meta: &ObjectMeta,
    usage: Usage,
    beyond: &Beyond,
    cfg: &Reclaim,
    now: Timestamp,
) -> Option<Look> {
    let (ns, name) = (meta.namespace.clone()?, meta.name.clone()?);
    if !cfg.namespaces.is_empty() && !cfg.namespaces.contains(&ns) {
        return None;
    }
    let annotations = meta.annotations.clone().unwrap_or_default();
    let info = ClusterInfo::from_value(&json!({ "metadata": meta }));
    let since = super::idle_since(&info, usage.last_end).unwrap_or(now);
    let ttl = super::ttl(
        annotations.get(labels::IDLE_TTL).map(String::as_str),
        cfg.idle_ttl_seconds,
    );
    let decision = super::decide(usage.active, since, ttl, now);
    let look = |act, note| Look {
        key: (ns.clone(), name.clone()),
        decision: decision.clone(),
        active: usage.active,
        ttl,
        act,
        note,
    };
    if meta.deletion_timestamp.is_some() {
        return Some(look(Act::Nothing, None));
    }
    let marked = annotations
        .get(labels::RECLAIM_MARKED)
        .and_then(|t| t.parse().ok());
    let step = super::step(
        &decision,
        marked,
        Duration::from_secs(cfg.quiet_seconds),
        now,
    );
    let silence = Duration::from_secs(cfg.head_silence_seconds);
    let heard = head::check(step, &beyond.head, marked, silence, now);
    let (step, note) = match &beyond.kept_warm {
        Some(why) if marked.is_some() => (Step::Unmark, Some(why.clone())),
        Some(why) if step == Step::Mark => (Step::Keep, Some(why.clone())),
        _ => (heard.step, heard.note),
    };
    let digest = annotations.get(labels::CONFIG_DIGEST).map(String::as_str);
    let last_admitted = info.last_admitted.max(info.created);
    let glance = pool::labels(digest, usage.active, last_admitted, &decision, now);
    let label_patch = pool::label_patch(&meta.labels.clone().unwrap_or_default(), &glance);
    let act = match step {
        Step::Keep if cfg.dry_run => Act::Nothing,
        Step::Keep => label_patch.map_or(Act::Nothing, Act::Labels),
        _ if cfg.dry_run => Act::DryRun(step),
        // The resourceVersion judged by: the provisioner lifting the mark for a job
        // stored meanwhile makes the delete fail.
        Step::Delete => Act::Delete {
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
        },
        Step::Mark | Step::Unmark => {
            let mark = (step == Step::Mark).then(|| now.to_string());
            Act::Patch(json!({ "metadata": {
                "resourceVersion": meta.resource_version,
                "annotations": { labels::RECLAIM_MARKED: mark },
                "labels": label_patch.unwrap_or_default(),
            }}))
        }
    };
    Some(look(act, note))
}

#[cfg(test)]
mod tests;
