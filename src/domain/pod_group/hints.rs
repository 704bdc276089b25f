//! The scheduling hints Volcano's own pg-controller copies from a pod onto its PodGroup
//! (volcano.sh/volcano v1.10.0, `createNormalPodPGIfNotExist`), copied the same way (pure;
//! checked against the running controller in tests/volcano/volcano_groups.rs).

use serde_json::{Map, Value};

use crate::domain::labels::{self, Meta};

const PREEMPTABLE: &str = "volcano.sh/preemptable";
const COOLDOWN_TIME: &str = "volcano.sh/cooldown-time";
const REVOCABLE_ZONE: &str = "volcano.sh/revocable-zone";
const JDB_MIN_AVAILABLE: &str = "volcano.sh/jdb-min-available";
const JDB_MAX_UNAVAILABLE: &str = "volcano.sh/jdb-max-unavailable";

/// Annotations copied from the pod's annotations.
const ANNOTATIONS: [&str; 3] = [PREEMPTABLE, COOLDOWN_TIME, REVOCABLE_ZONE];
/// Labels copied from the pod's labels.
const LABELS: [&str; 2] = [PREEMPTABLE, COOLDOWN_TIME];

/// The group's labels and annotations taken from the pod: the preemptable, cooldown and
/// revocable-zone hints, and one job disruption budget (min-available wins over
/// max-unavailable, as in Volcano).
pub fn copied(pod: &Value) -> (Map<String, Value>, Map<String, Value>) {
    let take = |meta, keys: &[&str]| -> Map<String, Value> {
        keys.iter()
            .filter_map(|k| Some((k.to_string(), Value::from(labels::get(pod, meta, k)?))))
            .collect()
    };
    let mut annotations = take(Meta::Annotations, &ANNOTATIONS);
    let budget = [JDB_MIN_AVAILABLE, JDB_MAX_UNAVAILABLE]
        .into_iter()
        .find_map(|k| Some((k, labels::get(pod, Meta::Annotations, k)?)));
    if let Some((key, value)) = budget {
        annotations.insert(key.into(), value.into());
    }
    (take(Meta::Labels, &LABELS), annotations)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn copies_what_volcano_copies_and_nothing_else() {
        let pod = json!({"metadata": {
            "annotations": {
                PREEMPTABLE: "false", COOLDOWN_TIME: "600s", REVOCABLE_ZONE: "*",
                JDB_MIN_AVAILABLE: "2", JDB_MAX_UNAVAILABLE: "1",
                "volcano.sh/other": "x", "scheduling.volcano.sh/queue-name": "q",
            },
            "labels": {PREEMPTABLE: "true", COOLDOWN_TIME: "60s", REVOCABLE_ZONE: "z", "app": "a"},
        }});
        let (labels, annotations) = copied(&pod);
        assert_eq!(
            Value::Object(annotations),
            json!({PREEMPTABLE: "false", COOLDOWN_TIME: "600s", REVOCABLE_ZONE: "*", JDB_MIN_AVAILABLE: "2"})
        );
        assert_eq!(
            Value::Object(labels),
            json!({PREEMPTABLE: "true", COOLDOWN_TIME: "60s"})
        );
    }

    #[test]
    fn max_unavailable_when_no_min_available_and_nothing_from_a_bare_pod() {
        let pod = json!({"metadata": {"annotations": {JDB_MAX_UNAVAILABLE: "25%"}}});
        assert_eq!(
            Value::Object(copied(&pod).1),
            json!({JDB_MAX_UNAVAILABLE: "25%"})
        );
        let (l, a) = copied(&json!({"metadata": {}}));
        assert!(l.is_empty() && a.is_empty());
    }
}
