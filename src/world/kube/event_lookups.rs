//! Admitted objects looked up by label for their Events, one list shared by many: a
//! 256-pod slice's pods (each found by its slot's labels, having only a `generateName`)
//! made 256 lists a second after the burst, each filtering every pod of the namespace.
//! Lookups due at about the same time now share one list of the objects carrying the
//! selector's keys, each picking its own object from it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams};
use kube::core::PartialObjectMeta;

/// How long one list answers later lookups. A lookup that misses an object stored since
/// is tried again seconds later (`FIND_AFTER`) with a new list.
const FRESH: Duration = Duration::from_millis(250);

type Found = Arc<Vec<PartialObjectMeta<DynamicObject>>>;
type Slot = Arc<tokio::sync::Mutex<Option<(Instant, Found)>>>;

/// The equality requirements of a selector rayshare built (`k=v,k2=v2`); `None` for
/// anything else, which is then listed on its own.
pub(super) fn equalities(selector: &str) -> Option<BTreeMap<&str, &str>> {
    let parts: Vec<(&str, &str)> = selector
        .split(',')
        .map(|part| {
            let (k, v) = part.split_once('=')?;
            let plain = |s: &str| !s.is_empty() && !s.contains(['=', '!', '(', ')', ' ']);
            (plain(k) && (v.is_empty() || plain(v))).then_some((k, v))
        })
        .collect::<Option<_>>()?;
    let wanted: BTreeMap<&str, &str> = parts.iter().copied().collect();
    // A key twice (`a=x,a=y`) selects nothing; a map would keep only one of them.
    (wanted.len() == parts.len()).then_some(wanted)
}

/// The objects of `list` that `wanted` selects.
pub(super) fn matching<'a>(
    list: &'a [PartialObjectMeta<DynamicObject>],
    wanted: &BTreeMap<&str, &str>,
) -> Vec<&'a PartialObjectMeta<DynamicObject>> {
    list.iter()
        .filter(|o| {
            let labels = o.metadata.labels.as_ref();
            wanted
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(*k)).is_some_and(|x| x == v))
        })
        .collect()
}

#[derive(Default)]
pub(super) struct EventLookups {
    lists: Mutex<HashMap<(String, String, String), Slot>>,
}

impl EventLookups {
    /// The one object `selector` selects in `api`'s namespace, if exactly one does.
    pub(super) async fn find(
        &self,
        api: &Api<DynamicObject>,
        (namespace, kind): (&str, &str),
        selector: &str,
    ) -> Option<PartialObjectMeta<DynamicObject>> {
        let Some(wanted) = equalities(selector) else {
            let list = api
                .list_metadata(&ListParams::default().labels(selector))
                .await
                .ok()?;
            return (list.items.len() == 1).then(|| list.items.into_iter().next())?;
        };
        let keys: Vec<&str> = wanted.keys().copied().collect();
        let broad = keys.join(",");
        let slot = {
            let mut lists = self.lists.lock().expect("not poisoned");
            lists.retain(|_, s| Arc::strong_count(s) > 1 || s.try_lock().is_ok_and(|c| fresh(&c)));
            let key = (namespace.to_string(), kind.to_string(), broad.clone());
            lists.entry(key).or_default().clone()
        };
        let found = {
            let mut cached = slot.lock().await;
            match &*cached {
                Some((_, found)) if fresh(&cached) => found.clone(),
                _ => {
                    // Fresh from when it was asked for: a slow list is an older picture.
                    let asked = Instant::now();
                    let params = ListParams::default().labels(&broad);
                    let found: Found = Arc::new(api.list_metadata(&params).await.ok()?.items);
                    *cached = Some((asked, found.clone()));
                    found
                }
            }
        };
        let hits = matching(&found, &wanted);
        (hits.len() == 1).then(|| hits[0].clone())
    }
}

fn fresh(cached: &Option<(Instant, Found)>) -> bool {
    cached.as_ref().is_some_and(|(at, _)| at.elapsed() < FRESH)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(name: &str, labels: &[(&str, &str)]) -> PartialObjectMeta<DynamicObject> {
        let metadata = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        };
        PartialObjectMeta {
            types: None,
            metadata,
            _phantom: std::marker::PhantomData,
        }
    }

    #[test]
    fn only_plain_equalities_are_shared() {
        let e = equalities("a/b=x,c=").unwrap();
        assert_eq!(e.into_iter().collect::<Vec<_>>(), [("a/b", "x"), ("c", "")]);
        for odd in ["a!=x", "a", "a in (x)", "a=x,b", "", "a==x", "a=x,a=y"] {
            assert_eq!(equalities(odd), None, "{odd}");
        }
    }

    #[test]
    fn each_lookup_picks_its_own_object_from_a_shared_list() {
        let list = [
            object("p1", &[("r", "a-0"), ("h", "0")]),
            object("p2", &[("r", "a-0"), ("h", "1")]),
            object("p3", &[("r", "a-1"), ("h", "0")]),
            object("other", &[("r", "a-0")]),
        ];
        let names = |sel: &str| -> Vec<String> {
            matching(&list, &equalities(sel).unwrap())
                .iter()
                .map(|o| o.metadata.name.clone().unwrap())
                .collect()
        };
        assert_eq!(names("r=a-0,h=1"), ["p2"]);
        assert_eq!(names("r=a-1,h=0"), ["p3"]);
        assert_eq!(names("r=a-0"), ["p1", "p2", "other"]);
        assert!(names("r=a-2,h=0").is_empty());
    }
}
