//! A cheap first look at an admitted object: could any feature change it at all?
//!
//! Most objects that reach the webhook need nothing (`matchConditions` filter some
//! earlier, not all). Triage reads only their labels, annotations and a few spec fields
//! from the raw JSON, skipping the rest without building it, so that an object left
//! unchanged costs a scan of its bytes rather than a tree of them.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};

use super::Kind;
use crate::config::Config;
use crate::domain::cluster::ClusterInfo;
use crate::domain::{indices, labels, pod_group};

/// What triage reads of an object, in the same pass that parses the review.
///
/// It deserialises from any JSON: an object of odd shape (not a map, metadata or spec
/// not maps) yields a head that says so rather than an error, so a review always
/// parses and the full path explains the oddity in a warning.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Head {
    odd: bool,
    namespace: Option<String>,
    /// The fields triage read, in the object's own shape (only those present):
    /// `{"metadata": {labels, annotations, name, generateName, ownerReferences},
    /// "spec": {schedulerName}}`. `labels::get` and the planners that read only those
    /// take it; for a pod that only needs a group it stands in for the object.
    view: Value,
    /// `None` when missing.
    spec: Option<HeadSpec>,
    /// The whole object, for a RayJob whose `apiVersion` and `kind` came before its other
    /// fields (as the API server writes them): its rewrite needs all of it, so it is built
    /// in this pass rather than parsed again.
    tree: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct HeadSpec {
    scheduler_name: Value,
    /// Present and not null.
    ray_cluster_spec: bool,
    cluster_selector: bool,
}

impl Head {
    /// What triage read, in the object's shape (see the field).
    pub fn view(&self) -> &Value {
        &self.view
    }

    /// The object's top level or metadata or spec was not a map.
    pub fn odd(&self) -> bool {
        self.odd
    }

    /// The whole object, when this pass built it (see the field).
    pub fn tree(&self) -> Option<&Value> {
        self.tree.as_ref()
    }

    /// The object's namespace, as the request names it or else as the object does.
    pub fn namespace<'a>(&'a self, requested: &'a str) -> &'a str {
        Some(requested)
            .filter(|n| !n.is_empty())
            .or(self.namespace.as_deref())
            .unwrap_or("default")
    }
}

/// The fields of one kind of JSON map that triage reads.
trait Fields: Sized {
    fn visit<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error>;
}

/// The `visit_*` methods of a visitor that reads any list or scalar but a string as
/// `$value` (a list is consumed unread): triage's reads accept any JSON.
macro_rules! others_are {
    ($value:expr) => {
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            IgnoredAny.visit_seq(seq).map(|_| $value)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($value)
        }
    };
}

/// A map's fields, or `None` (consumed and dropped) for any other JSON value.
struct MapOr<F>(Option<F>);

impl<'de, F: Fields> Deserialize<'de> for MapOr<F> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<F>(PhantomData<F>);
        impl<'de, F: Fields> Visitor<'de> for V<F> {
            type Value = MapOr<F>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                F::visit(map).map(|f| MapOr(Some(f)))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(MapOr(None))
            }
            others_are!(MapOr(None));
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// Field names as borrowed identifiers: no allocation per key.
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "camelCase")]
enum Key {
    ApiVersion,
    Kind,
    Metadata,
    Spec,
    Namespace,
    Name,
    GenerateName,
    OwnerReferences,
    Labels,
    Annotations,
    SchedulerName,
    RayClusterSpec,
    ClusterSelector,
    Status,
    #[serde(other)]
    Other,
}

/// Metadata fields triage reads.
#[derive(Default)]
struct Meta {
    namespace: Option<String>,
    /// The view's metadata: the fields above that the object has.
    view: serde_json::Map<String, Value>,
}

/// A [`Head`] read without ever building the object whole.
#[derive(Debug, Clone, Default)]
pub struct LazyHead(pub Head);

impl Fields for LazyHead {
    fn visit<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        Head::read(map, false).map(LazyHead)
    }
}

// In all three: later duplicates of a key win, as they do in a `serde_json::Value`.
impl Fields for Head {
    fn visit<'de, A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        Head::read(map, true)
    }
}

impl Head {
    /// Reads an object's fields; a RayJob whole when `may_build` (see `tree`).
    fn read<'de, A: MapAccess<'de>>(mut map: A, may_build: bool) -> Result<Self, A::Error> {
        let mut head = Head::default();
        let (mut ray_job_version, mut ray_job_kind) = (false, false);
        // The object's other fields while it may still be read whole (see `tree`).
        let mut whole = may_build.then(serde_json::Map::new);
        while let Some(key) = map.next_key::<Key>()? {
            let field = match key {
                Key::ApiVersion => {
                    ray_job_version = map.next_value_seed(IsString("ray.io/v1"))?;
                    continue;
                }
                Key::Kind => {
                    ray_job_kind = map.next_value_seed(IsString("RayJob"))?;
                    continue;
                }
                Key::Metadata => "metadata",
                Key::Spec => "spec",
                Key::Status => "status",
                _ => "",
            };
            match whole.as_mut() {
                Some(fields) if ray_job_version && ray_job_kind && !field.is_empty() => {
                    let value: Value = map.next_value()?;
                    head.read_field(key, &value).map_err(de::Error::custom)?;
                    fields.insert(field.into(), value);
                }
                _ => {
                    whole = None;
                    match key {
                        Key::Metadata => head.take_metadata(map.next_value()?),
                        Key::Spec => head.take_spec(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
            }
        }
        if let Some(mut fields) = whole.filter(|_| ray_job_version && ray_job_kind) {
            fields.insert("apiVersion".into(), json!("ray.io/v1"));
            fields.insert("kind".into(), json!("RayJob"));
            head.tree = Some(Value::Object(fields));
        }
        Ok(head)
    }

    /// Reads what triage needs of one field from its tree.
    fn read_field(&mut self, key: Key, value: &Value) -> Result<(), serde_json::Error> {
        match key {
            Key::Metadata => self.take_metadata(MapOr::deserialize(value)?),
            Key::Spec => self.take_spec(MapOr::deserialize(value)?),
            _ => {}
        }
        Ok(())
    }

    fn take_metadata(&mut self, MapOr(meta): MapOr<Meta>) {
        self.odd |= meta.is_none();
        let Meta { namespace, view } = meta.unwrap_or_default();
        self.namespace = namespace;
        self.view["metadata"] = Value::Object(view);
    }

    fn take_spec(&mut self, MapOr(spec): MapOr<HeadSpec>) {
        self.odd |= spec.is_none();
        let scheduler = spec.as_ref().map(|s| &s.scheduler_name);
        self.view["spec"] = match scheduler.filter(|s| !s.is_null()) {
            Some(name) => json!({ "schedulerName": name }),
            None => json!({}),
        };
        self.spec = spec;
    }
}

/// Whether a value is the string `.0`, read without building it.
struct IsString(&'static str);

impl<'de> de::DeserializeSeed<'de> for IsString {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        struct V(&'static str);
        impl<'de> Visitor<'de> for V {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<bool, E> {
                Ok(s == self.0)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
                IgnoredAny.visit_map(map).map(|_| false)
            }
            others_are!(false);
        }
        d.deserialize_any(V(self.0))
    }
}

impl Fields for Meta {
    fn visit<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut meta = Meta::default();
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Namespace => {
                    meta.namespace = map.next_value::<Value>()?.as_str().map(Into::into)
                }
                Key::Name => meta.keep("name", map.next_value()?),
                Key::GenerateName => meta.keep("generateName", map.next_value()?),
                Key::OwnerReferences => meta.keep("ownerReferences", map.next_value()?),
                Key::Labels => meta.keep("labels", map.next_value()?),
                Key::Annotations => meta.keep("annotations", map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(meta)
    }
}

impl Meta {
    /// A field for the view; `null` counts as absent, as the API server treats it.
    fn keep(&mut self, key: &str, value: Value) {
        if value.is_null() {
            self.view.remove(key);
        } else {
            self.view.insert(key.into(), value);
        }
    }
}

impl Fields for HeadSpec {
    fn visit<'de, A: MapAccess<'de>>(mut map: A) -> Result<Self, A::Error> {
        let mut spec = HeadSpec::default();
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::SchedulerName => spec.scheduler_name = map.next_value()?,
                Key::RayClusterSpec => {
                    spec.ray_cluster_spec = map.next_value::<Option<IgnoredAny>>()?.is_some()
                }
                Key::ClusterSelector => {
                    spec.cluster_selector = map.next_value::<Option<IgnoredAny>>()?.is_some()
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(spec)
    }
}

impl<'de> Deserialize<'de> for Head {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let MapOr(head) = MapOr::<Head>::deserialize(d)?;
        Ok(head.unwrap_or_else(Head::odd_shape))
    }
}

impl<'de> Deserialize<'de> for LazyHead {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let MapOr(head) = MapOr::<LazyHead>::deserialize(d)?;
        Ok(head.unwrap_or_else(|| LazyHead(Head::odd_shape())))
    }
}

impl Head {
    /// What an object that is not a map reads as.
    fn odd_shape() -> Self {
        Head {
            odd: true,
            ..Head::default()
        }
    }
}

/// `false` only when no feature could change the object; when unsure, `true`.
/// `clusters` is what the cache knows of a RayCluster (namespace, name): triage reads,
/// never calls.
pub fn needs_work(
    kind: Kind,
    head: &Head,
    namespace: &str,
    cfg: &Config,
    clusters: &dyn Fn(&str, &str) -> Option<ClusterInfo>,
) -> bool {
    let Some(spec) = head.spec.as_ref().filter(|_| !head.odd) else {
        return true;
    };
    match kind {
        // A job rayshare rewrote that Kueue's webhook then put in a queue is looked at again.
        Kind::RayJob => {
            let label = |k| labels::get(&head.view, labels::Meta::Labels, k).is_some();
            (spec.ray_cluster_spec && !spec.cluster_selector)
                || (spec.cluster_selector
                    && label(labels::KUEUE_QUEUE)
                    && label(labels::JOB_CLUSTER))
        }
        Kind::Pod => {
            let scheduler = spec.scheduler_name.as_str();
            let grouped = cfg.pod_groups.enabled
                && pod_group::scheduled_by_gang_scheduler(scheduler, &cfg.pod_groups)
                && labels::get(&head.view, labels::Meta::Annotations, labels::GROUP_NAME).is_none();
            grouped || cfg.indices.enabled && wants_indices(head, namespace, cfg, clusters)
        }
    }
}

/// What `indices::plan` makes of the pod, on what the cache knows (only a worker pod
/// costs a lookup).
fn wants_indices(
    head: &Head,
    namespace: &str,
    cfg: &Config,
    clusters: &dyn Fn(&str, &str) -> Option<ClusterInfo>,
) -> bool {
    let label = |k| labels::get(&head.view, labels::Meta::Labels, k);
    if label(labels::RAY_NODE_TYPE) != Some("worker") {
        return false;
    }
    let info = label(labels::RAY_CLUSTER).and_then(|c| clusters(namespace, c));
    indices::plan(
        &head.view,
        info.as_ref(),
        &cfg.indices,
        &cfg.opt_out_annotation,
    ) != indices::Plan::Skip(None)
}

#[cfg(test)]
mod tests;
