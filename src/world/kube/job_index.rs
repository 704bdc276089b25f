//! Which RayJobs actively use which shared cluster: a watch-fed index.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::watcher;

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

    /// The (namespace, cluster) a rewritten job selects.
    pub(super) fn selected(job: &DynamicObject) -> Option<(String, String)> {
        let cluster = job.data["spec"]["clusterSelector"][labels::RAY_CLUSTER].as_str()?;
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
