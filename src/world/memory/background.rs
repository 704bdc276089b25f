//! The controllers' port on [`MemoryWorld`]: the watches show `stored`, writes change
//! `objects` (and the stored jobs a patch names), lists read both. No call ever waits.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::{MemoryWorld, key};
use crate::domain::labels;
use crate::domain::shared_cluster::job_life::Submission;
use crate::domain::shared_cluster::job_life::job_list::JobList;
use crate::world::WorldError;
use crate::world::background::{Background, Key, Kind, Scope, Written};
use crate::world::ray::DashboardError;

fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn in_namespace(object: &Value, namespace: Option<&str>) -> bool {
    namespace.is_none_or(|ns| str_at(object, "/metadata/namespace") == ns)
}

/// Whether the object's labels match a selector of `k=v`, `k`, `!k` terms (what the
/// controllers ask for).
pub(crate) fn selects(selector: &str, object: &Value) -> bool {
    let labels = &object["metadata"]["labels"];
    selector
        .split(',')
        .filter(|t| !t.is_empty())
        .all(|term| match term.split_once('=') {
            Some((k, v)) => labels[k].as_str() == Some(v),
            None => match term.strip_prefix('!') {
                Some(k) => labels.get(k).is_none(),
                None => labels.get(term).is_some(),
            },
        })
}

impl MemoryWorld {
    /// Every object the API server would list: written ones and stored ones.
    fn everything(&self, scope: Scope<'_>) -> Vec<Value> {
        let objects = self.objects.lock().expect("not poisoned");
        let stored = self.stored.lock().expect("not poisoned");
        objects
            .values()
            .chain(stored.iter())
            .filter(|o| Kind::of(o) == Some(scope.kind))
            .filter(|o| in_namespace(o, scope.namespace))
            .filter(|o| selects(scope.labels, o))
            .cloned()
            .collect()
    }

    fn stored_of(&self, kind: Kind, namespace: Option<&str>) -> Vec<Value> {
        let stored = self.stored.lock().expect("not poisoned");
        stored
            .iter()
            .filter(|o| Kind::of(o) == Some(kind) && in_namespace(o, namespace))
            .cloned()
            .collect()
    }

    /// Records `what id` and applies `change` to the submission: its answer, or `false`
    /// when the dashboard lists no such job.
    fn ray_call(
        &self,
        base: &str,
        id: &str,
        what: &str,
        change: impl FnOnce(&mut Submission) -> bool,
    ) -> bool {
        self.ray_calls
            .lock()
            .expect("not poisoned")
            .push(format!("{what} {id}"));
        let mut listed = self.ray_jobs.lock().expect("not poisoned");
        let sub = listed
            .get_mut(base)
            .and_then(|subs| subs.iter_mut().find(|s| s.id == id));
        sub.is_some_and(change)
    }

    fn fail(&self) -> Result<(), WorldError> {
        self.fail_writes.clone().map_or(Ok(()), Err)
    }
}

impl Background for MemoryWorld {
    fn stored_jobs(&self, namespace: Option<&str>) -> Vec<Value> {
        self.stored_of(Kind::RayJob, namespace)
    }

    fn selected_clusters(&self) -> Vec<Key> {
        let mut keys: Vec<Key> = self
            .stored_jobs(None)
            .iter()
            .filter_map(|j| {
                let cluster = labels::selected_cluster(j)?;
                Some((str_at(j, "/metadata/namespace").to_string(), cluster.into()))
            })
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }

    fn went_idle(&self, namespace: &str, cluster: &str) -> Option<Timestamp> {
        let idle = self.went_idle.lock().expect("not poisoned");
        idle.get(&(namespace.to_string(), cluster.to_string()))
            .copied()
    }

    fn cached_cluster(&self, namespace: &str, name: &str) -> Option<Value> {
        let objects = self.objects.lock().expect("not poisoned");
        let k = ("RayCluster".into(), namespace.into(), name.into());
        objects.get(&k).cloned()
    }

    fn shared_clusters(&self, instance: &str) -> Vec<Value> {
        let selector = labels::select::shared_clusters(instance);
        let scope = Scope {
            kind: Kind::RayCluster,
            namespace: None,
            labels: &selector,
        };
        self.everything(scope)
    }

    fn stored_pods(&self) -> Vec<(Key, String)> {
        self.stored_of(Kind::Pod, None)
            .iter()
            .map(|p| {
                let (_, ns, name) = key(p);
                ((ns, name), str_at(p, "/metadata/uid").to_string())
            })
            .collect()
    }

    /// One process: every pod was admitted here.
    fn admitted_here(&self, _namespace: &str, _name: &str) -> bool {
        true
    }

    fn stored_pod(&self, namespace: &str, name: &str) -> Option<Value> {
        self.stored_of(Kind::Pod, Some(namespace))
            .into_iter()
            .find(|p| str_at(p, "/metadata/name") == name)
    }

    async fn get(
        &self,
        kind: Kind,
        (ns, name): &Key,
        _timeout: Duration,
    ) -> Result<Option<Value>, WorldError> {
        let scope = Scope {
            kind,
            namespace: Some(ns),
            labels: "",
        };
        let found = self.everything(scope).into_iter();
        Ok(found
            .into_iter()
            .find(|o| str_at(o, "/metadata/name") == name))
    }

    async fn ray_jobs(&self, base: &str, _token: Option<&str>) -> Result<JobList, DashboardError> {
        let listed = self.ray_jobs.lock().expect("not poisoned");
        let submissions = listed
            .get(base)
            .cloned()
            .ok_or_else(|| DashboardError::Failed {
                url: base.to_string(),
                message: "no such dashboard".into(),
            })?;
        Ok(JobList {
            submissions,
            drivers_running: 0,
            truncated: false,
        })
    }

    async fn stop_ray_job(
        &self,
        base: &str,
        id: &str,
        _token: Option<&str>,
    ) -> Result<bool, DashboardError> {
        Ok(self.ray_call(base, id, "stop", |s| {
            let was_active = s.active();
            s.status = "STOPPED".into();
            was_active
        }))
    }

    async fn delete_ray_job(
        &self,
        base: &str,
        id: &str,
        _token: Option<&str>,
    ) -> Result<bool, DashboardError> {
        let deleted = self.ray_call(base, id, "delete", |_| true);
        let mut listed = self.ray_jobs.lock().expect("not poisoned");
        if let Some(subs) = listed.get_mut(base) {
            subs.retain(|s| s.id != id);
        }
        Ok(deleted)
    }

    async fn create_new(
        &self,
        object: &Value,
        _timeout: Duration,
    ) -> Result<Option<Value>, WorldError> {
        self.fail()?;
        let mut objects = self.objects.lock().expect("not poisoned");
        if objects.contains_key(&key(object)) {
            return Ok(None);
        }
        objects.insert(key(object), object.clone());
        // As the API server answers: with the uid it gave the object.
        let mut made = object.clone();
        let name = str_at(object, "/metadata/name");
        made["metadata"]["uid"] = serde_json::json!(format!("uid-of-{name}"));
        Ok(Some(made))
    }

    async fn patch(
        &self,
        kind: Kind,
        (ns, name): &Key,
        patch: &Value,
        _timeout: Duration,
    ) -> Result<Written, WorldError> {
        self.fail()?;
        let k = (kind.as_str().to_string(), ns.clone(), name.clone());
        let mut objects = self.objects.lock().expect("not poisoned");
        let mut stored = self.stored.lock().expect("not poisoned");
        let found = objects
            .get_mut(&k)
            .or_else(|| stored.iter_mut().find(|o| key(o) == k));
        let Some(object) = found else {
            return Ok(Written::Gone);
        };
        let wanted = patch.pointer("/metadata/resourceVersion");
        if wanted.is_some_and(|v| object.pointer("/metadata/resourceVersion") != Some(v)) {
            return Ok(Written::Changed);
        }
        json_patch::merge(object, patch);
        self.patches.lock().expect("not poisoned").push((
            kind,
            (ns.clone(), name.clone()),
            patch.clone(),
        ));
        Ok(Written::Done)
    }

    async fn delete_exact(
        &self,
        kind: Kind,
        object: &ObjectMeta,
        _timeout: Duration,
    ) -> Result<Written, WorldError> {
        self.fail()?;
        let (ns, name) = (object.namespace.clone(), object.name.clone());
        let k = (
            kind.as_str().to_string(),
            ns.unwrap_or_default(),
            name.unwrap_or_default(),
        );
        let mut objects = self.objects.lock().expect("not poisoned");
        let Some(found) = objects.get(&k) else {
            return Ok(Written::Gone);
        };
        let same = |field: &str, wanted: &Option<String>| {
            wanted
                .as_deref()
                .is_none_or(|w| found["metadata"][field].as_str() == Some(w))
        };
        if !same("uid", &object.uid) || !same("resourceVersion", &object.resource_version) {
            return Ok(Written::Changed);
        }
        objects.remove(&k);
        Ok(Written::Done)
    }

    async fn for_each_metadata(
        &self,
        scope: Scope<'_>,
        each: &mut (dyn FnMut(ObjectMeta) + Send),
    ) -> Result<(), WorldError> {
        self.fail_lists.clone().map_or(Ok(()), Err)?;
        for object in self.everything(scope) {
            let meta = serde_json::from_value(object["metadata"].clone());
            each(meta.map_err(|e| WorldError::Api(e.to_string()))?);
        }
        Ok(())
    }

    async fn for_each(
        &self,
        scope: Scope<'_>,
        each: &mut (dyn FnMut(Value) + Send),
    ) -> Result<(), WorldError> {
        self.fail_lists.clone().map_or(Ok(()), Err)?;
        self.everything(scope).into_iter().for_each(each);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_selector_matches_as_the_api_server_would() {
        let o = json!({"metadata": {"labels": {"a": "1", "b": "x"}}});
        assert!(selects("a=1,b", &o));
        assert!(selects("", &o));
        assert!(!selects("a=2", &o));
        assert!(!selects("!b", &o));
        assert!(selects("!c,a", &o));
    }
}
