//! Which RayJobs actively use which shared cluster: a watch-fed index.

use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::watcher;

use super::pending::{PENDING_FOR, Pending};
use crate::domain::labels;

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
    /// (namespace, cluster) -> jobs admitted there, until the watch shows them.
    pending: HashMap<(String, String), Pending>,
    /// Admissions in `pending`, over every cluster.
    pending_len: usize,
    /// When `pending` was last swept of expired entries.
    swept: Option<Instant>,
    /// (namespace, cluster) -> when its last active job ended or went, until the
    /// provisioner stamps it.
    went_idle: HashMap<(String, String), Timestamp>,
}

/// Most admissions remembered over all clusters: a forged review can name any namespace
/// and config, and each new one would otherwise leave an entry for good.
const MAX_PENDING_TOTAL: usize = 16_384;
/// Longest namespace, cluster or job name remembered; no stored object has a longer one.
const MAX_NAME: usize = 253;

impl JobIndexState {
    fn set(&mut self, (ns, job): (String, String), cluster: Option<String>) {
        if let Some(old) = self.active.remove(&(ns.clone(), job.clone())) {
            let key = (ns.clone(), old);
            if let Some(jobs) = self.by_cluster.get_mut(&key) {
                jobs.remove(&job);
                if jobs.is_empty() {
                    self.by_cluster.remove(&key);
                    self.note_idle(key);
                }
            }
        }
        if let Some(cluster) = cluster {
            let key = (ns.clone(), cluster.clone());
            self.went_idle.remove(&key);
            if let Some(pending) = self.pending.get_mut(&key) {
                pending.seen(&job);
            }
            self.by_cluster.entry(key).or_default().insert(job.clone());
            self.active.insert((ns, job), cluster);
        }
    }

    /// The cluster's last active job went now (bounded like `pending`).
    fn note_idle(&mut self, key: (String, String)) {
        if self.went_idle.len() < MAX_PENDING_TOTAL {
            self.went_idle.insert(key, Timestamp::now());
        }
    }

    /// Runs `f` on a cluster's pending admissions, keeping `pending_len` right and dropping
    /// the entry once it is empty.
    fn pending_mut<R>(&mut self, key: (String, String), f: impl FnOnce(&mut Pending) -> R) -> R {
        let pending = self.pending.entry(key.clone()).or_default();
        let before = pending.len();
        let result = f(pending);
        let after = pending.len();
        if pending.is_empty() {
            self.pending.remove(&key);
        }
        self.pending_len = self.pending_len + after - before;
        result
    }

    /// Drops every cluster's expired admissions, at most once per `PENDING_FOR`, so keys
    /// that are never asked about again go too.
    fn sweep(&mut self, now: Instant) {
        if self
            .swept
            .is_some_and(|at| now.saturating_duration_since(at) < PENDING_FOR)
        {
            return;
        }
        self.swept = Some(now);
        self.pending.retain(|_, p| {
            p.count(now);
            !p.is_empty()
        });
        self.pending_len = self.pending.values().map(Pending::len).sum();
    }
}

impl JobIndex {
    fn active_entry(job: &DynamicObject) -> Option<((String, String), String)> {
        let value = serde_json::to_value(job).ok()?;
        if crate::domain::reclaim::is_terminal(&value) {
            return None;
        }
        let cluster = labels::selected_cluster(&value)?;
        Some(((job.namespace()?, job.name_any()), cluster.to_string()))
    }

    /// Deleting, or over on KubeRay's side.
    pub(super) fn is_over(job: &DynamicObject) -> bool {
        job.metadata.deletion_timestamp.is_some()
            || serde_json::to_value(job).is_ok_and(|v| crate::domain::reclaim::is_terminal(&v))
    }

    /// The (namespace, cluster) a rewritten job selects.
    pub(super) fn selected(job: &DynamicObject) -> Option<(String, String)> {
        let cluster = labels::selected_cluster(&job.data)?;
        Some((job.namespace()?, cluster.to_string()))
    }

    pub(super) fn apply(&self, event: watcher::Event<DynamicObject>) {
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
                let before = std::mem::take(&mut s.by_cluster);
                for (key, cluster) in fresh {
                    s.set(key, Some(cluster));
                }
                // Their last jobs went while the watch was away.
                for key in before.into_keys() {
                    if !s.by_cluster.contains_key(&key) {
                        s.note_idle(key);
                    }
                }
            }
        }
    }

    /// When the cluster's last active job ended or went, once (the provisioner stamps it).
    pub fn went_idle(&self, namespace: &str, cluster: &str) -> Option<Timestamp> {
        let mut s = self.state.lock().expect("not poisoned");
        let key = (namespace.to_string(), cluster.to_string());
        s.went_idle.remove(&key)
    }

    /// Active jobs on a cluster: the watch's, plus admitted ones it has not shown yet.
    pub fn count(&self, namespace: &str, cluster: &str) -> usize {
        self.count_at(namespace, cluster, Instant::now())
    }

    fn count_at(&self, namespace: &str, cluster: &str, now: Instant) -> usize {
        let mut s = self.state.lock().expect("not poisoned");
        let key = (namespace.to_string(), cluster.to_string());
        let known = s.by_cluster.get(&key).map_or(0, BTreeSet::len);
        let unseen = if s.pending.contains_key(&key) {
            s.pending_mut(key, |p| p.count(now))
        } else {
            0
        };
        known + unseen
    }

    /// Counts `job` as admitted to `cluster` until the watch shows it, within bounds: not
    /// past `MAX_PENDING_TOTAL` admissions in all, nor for names no stored object can have.
    pub fn note(&self, namespace: &str, cluster: &str, job: &str) {
        self.note_at(namespace, cluster, job, Instant::now())
    }

    fn note_at(&self, namespace: &str, cluster: &str, job: &str, now: Instant) {
        if [namespace, cluster, job].iter().any(|n| n.len() > MAX_NAME) {
            return;
        }
        let mut s = self.state.lock().expect("not poisoned");
        s.sweep(now);
        let key = (namespace.to_string(), cluster.to_string());
        if s.pending_len >= MAX_PENDING_TOTAL
            || s.by_cluster
                .get(&key)
                .is_some_and(|known| known.contains(job))
        {
            return;
        }
        s.pending_mut(key, |p| p.note(job, now));
    }
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;

    fn job(name: &str, cluster: &str, state: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": { "name": name, "namespace": "ns" },
            "spec": { "clusterSelector": { "ray.io/cluster": cluster } },
            "status": { "jobDeploymentStatus": state },
        }))
        .unwrap()
    }

    #[test]
    fn active_jobs_are_counted_per_cluster_and_terminal_ones_leave() {
        let index = JobIndex::default();
        index.apply(Event::Apply(job("a", "c1", "Running")));
        index.apply(Event::Apply(job("b", "c1", "Initializing")));
        index.apply(Event::Apply(job("c", "c2", "Running")));
        assert_eq!((index.count("ns", "c1"), index.count("ns", "c2")), (2, 1));
        index.apply(Event::Apply(job("a", "c1", "Complete")));
        index.apply(Event::Delete(job("c", "c2", "Running")));
        assert_eq!((index.count("ns", "c1"), index.count("ns", "c2")), (1, 0));
        // A job moved to another cluster counts there only.
        index.apply(Event::Apply(job("b", "c2", "Running")));
        assert_eq!((index.count("ns", "c1"), index.count("ns", "c2")), (0, 1));
    }

    #[test]
    fn a_cluster_goes_idle_when_its_last_active_job_ends_or_goes() {
        let index = JobIndex::default();
        index.apply(Event::Apply(job("a", "c1", "Running")));
        index.apply(Event::Apply(job("b", "c1", "Running")));
        index.apply(Event::Delete(job("a", "c1", "Running")));
        assert_eq!(index.went_idle("ns", "c1"), None, "b still runs");
        let before = Timestamp::now();
        index.apply(Event::Delete(job("b", "c1", "Running")));
        let went = index.went_idle("ns", "c1").expect("the last job went");
        assert!(went >= before);
        assert_eq!(index.went_idle("ns", "c1"), None, "told once");
        // A job that ends (rather than goes) counts too; a new job cancels the news.
        index.apply(Event::Apply(job("c", "c2", "Running")));
        index.apply(Event::Apply(job("c", "c2", "Complete")));
        index.apply(Event::Apply(job("d", "c2", "Running")));
        assert_eq!(index.went_idle("ns", "c2"), None);
        // Deleting a job that was over already is no news.
        index.apply(Event::Delete(job("c", "c2", "Complete")));
        assert_eq!(index.went_idle("ns", "c2"), None);
        // A relist that no longer shows a cluster's jobs: they went while it was away.
        index.apply(Event::Init);
        index.apply(Event::InitDone);
        assert!(index.went_idle("ns", "c2").is_some());
    }

    #[test]
    fn a_relist_replaces_what_was_known() {
        let index = JobIndex::default();
        index.apply(Event::Apply(job("gone", "c1", "Running")));
        index.apply(Event::Init);
        index.apply(Event::InitApply(job("kept", "c1", "Running")));
        // Until the relist is done, the old view stands.
        assert_eq!(index.count("ns", "c1"), 1);
        index.apply(Event::InitDone);
        assert_eq!(index.count("ns", "c1"), 1);
        index.apply(Event::Delete(job("kept", "c1", "Running")));
        assert_eq!(index.count("ns", "c1"), 0, "the relist dropped `gone`");
    }

    #[test]
    fn admitted_jobs_count_until_the_watch_shows_them_once() {
        let index = JobIndex::default();
        index.note("ns", "c1", "new");
        assert_eq!(index.count("ns", "c1"), 1);
        index.apply(Event::Apply(job("new", "c1", "Running")));
        assert_eq!(index.count("ns", "c1"), 1, "not counted twice");
        index.note("ns", "c1", "new");
        assert_eq!(index.count("ns", "c1"), 1, "known already");
        index.apply(Event::Delete(job("new", "c1", "Running")));
        assert_eq!(index.count("ns", "c1"), 0, "gone, not pending again");
    }

    /// Forged reviews naming a new namespace each: bounded in all, and gone once expired
    /// though no one asks about those clusters again.
    #[test]
    fn forged_admissions_across_clusters_are_bounded_and_swept() {
        let (index, t0) = (JobIndex::default(), Instant::now());
        for i in 0..MAX_PENDING_TOTAL + 100 {
            index.note_at(&format!("forged-{i}"), "c1", "j", t0);
        }
        index.note_at(&"n".repeat(MAX_NAME + 1), "c1", "j", t0);
        let len = |index: &JobIndex| {
            let s = index.state.lock().unwrap();
            (s.pending.len(), s.pending_len)
        };
        assert_eq!(len(&index), (MAX_PENDING_TOTAL, MAX_PENDING_TOTAL));
        index.note_at("late", "c1", "j", t0);
        assert_eq!(
            index.count_at("late", "c1", t0),
            0,
            "past the bound, not noted"
        );
        let later = t0 + PENDING_FOR;
        index.note_at("ns", "c1", "real", later);
        assert_eq!(len(&index), (1, 1), "the expired keys were swept");
        assert_eq!(index.count_at("ns", "c1", later), 1);
    }

    #[test]
    fn a_deleting_job_is_not_active() {
        let index = JobIndex::default();
        let mut j = job("a", "c1", "Running");
        j.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-01-01T00:00:00Z".parse().unwrap(),
        ));
        index.apply(Event::Apply(j));
        assert_eq!(index.count("ns", "c1"), 0);
        assert_eq!(
            JobIndex::selected(&job("x", "c9", "")),
            Some(("ns".into(), "c9".into()))
        );
    }
}
