//! The scheduler's effective request of a pod: a PodGroup's `minResources` (pure).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::domain::quantity::{self, Milli};

type Resources = BTreeMap<String, Milli>;

/// A container's requests, limits standing in where a request is absent.
fn container_requests(container: &Value) -> Resources {
    let mut out = Resources::new();
    for field in ["limits", "requests"] {
        let Some(map) = container["resources"][field].as_object() else {
            continue;
        };
        for (name, q) in map {
            let text = match q {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => continue,
            };
            if let Some(q) = quantity::parse(&text) {
                out.insert(name.clone(), q);
            }
        }
    }
    out
}

fn add(into: &mut Resources, other: &Resources) {
    for (k, v) in other {
        let slot = into.entry(k.clone()).or_default();
        *slot = *slot + *v;
    }
}

fn max_into(into: &mut Resources, other: &Resources) {
    for (k, v) in other {
        let slot = into.entry(k.clone()).or_default();
        *slot = (*slot).max(*v);
    }
}

/// The scheduler's effective request of a pod (k8s `PodRequests`): app containers and
/// sidecars summed, each regular init container (plus the sidecars started before it)
/// as a floor, then pod overhead.
pub fn min_resources(spec: &Value) -> Value {
    let mut total = Resources::new();
    for c in spec["containers"].as_array().into_iter().flatten() {
        add(&mut total, &container_requests(c));
    }
    let mut sidecars = Resources::new();
    let mut init_floor = Resources::new();
    for c in spec["initContainers"].as_array().into_iter().flatten() {
        let mut reqs = container_requests(c);
        if c["restartPolicy"] == "Always" {
            add(&mut total, &reqs);
            add(&mut sidecars, &reqs);
            reqs = sidecars.clone();
        } else {
            add(&mut reqs, &sidecars);
        }
        max_into(&mut init_floor, &reqs);
    }
    max_into(&mut total, &init_floor);
    if let Some(overhead) = spec.get("overhead") {
        add(
            &mut total,
            &container_requests(&json!({"resources": {"requests": overhead}})),
        );
    }
    Value::Object(
        total
            .into_iter()
            .map(|(k, v)| (k, json!(quantity::format(v))))
            .collect(),
    )
}
