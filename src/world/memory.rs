//! An in-memory world: what `rayshare mutate` shows, what router tests run against, and
//! where the controllers' glue is tested. Writes land in `objects`; what the watches would
//! show (stored jobs and pods) in `stored`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

use super::background::Kind;
use super::{Claimed, Created, IndexRequest, World, WorldError};
use crate::config::ServedNamespaces;
use crate::domain::cluster::ClusterInfo;
use crate::domain::events::Event;
use crate::domain::indices;
use crate::domain::indices::Slot;
use crate::domain::shared_cluster::job_life::Submission;

mod background;

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
    /// Makes every list fail.
    pub fail_lists: Option<WorldError>,
    /// Events admission asked to record.
    pub events: Mutex<Vec<Event>>,
    /// The cache has seen no RayCluster yet (reads of the API server find them).
    pub cache_behind: bool,
    /// Groups made at admission and not yet stored; `None`: uncapped.
    pub unconfirmed: Option<Mutex<crate::domain::unconfirmed::Unconfirmed>>,
    /// What the API server stored that the watches show the controllers: rewritten
    /// RayJobs and labelled pods (`store`, or a test).
    pub stored: Mutex<Vec<Value>>,
    /// When each shared cluster's last active job went, as the job watch would say.
    pub went_idle: Mutex<HashMap<(String, String), k8s_openapi::jiff::Timestamp>>,
    /// Every merge patch written, in order.
    pub patches: Mutex<Vec<Patched>>,
    /// The Ray jobs each dashboard (by base URL) lists.
    pub ray_jobs: Mutex<HashMap<String, Vec<Submission>>>,
    /// Every call to a dashboard that changes something: `stop <id>`, `delete <id>`.
    pub ray_calls: Mutex<Vec<String>>,
}

/// A merge patch written: to which kind, (namespace, name), and the patch.
pub type Patched = (Kind, (String, String), Value);

pub(crate) fn key(object: &Value) -> (String, String, String) {
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
