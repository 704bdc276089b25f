//! `rayshare mutate`: the server's mutation code, run offline against an in-memory world.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::admission;
use crate::admission::review::{self, AdmissionRequest, GroupVersionKind};
use crate::config::Config;
use crate::world::MemoryWorld;

/// One input document's result.
#[derive(Debug)]
pub struct Mutated {
    pub object: Value,
    pub patch: Value,
    pub creates: Vec<Value>,
    pub warnings: Vec<String>,
    pub allowed: bool,
}

/// Why the input could not be run.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    #[error("cannot parse input: {0}")]
    Parse(#[from] serde_norway::Error),
    #[error("{0}")]
    Review(#[from] review::ReviewError),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    #[error("object has no apiVersion")]
    NoApiVersion,
    #[error("object has no kind")]
    NoKind,
}

/// Reads every YAML/JSON document of `text` (objects or AdmissionReviews).
pub fn documents(text: &str) -> Result<Vec<Value>, OfflineError> {
    let mut out = Vec::new();
    for doc in serde_norway::Deserializer::from_str(text) {
        let value = Value::deserialize(doc)?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

fn request_for(
    object: &Value,
    namespace: &str,
    index: usize,
) -> Result<AdmissionRequest, OfflineError> {
    if object["kind"] == "AdmissionReview" {
        let bytes = serde_json::to_vec(object)?;
        return Ok(review::parse_review(bytes)?);
    }
    let api_version = object["apiVersion"]
        .as_str()
        .ok_or(OfflineError::NoApiVersion)?;
    let kind = object["kind"].as_str().ok_or(OfflineError::NoKind)?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or(namespace);
    let mut object = object.clone();
    object["metadata"]["namespace"] = json!(namespace);
    Ok(AdmissionRequest {
        uid: format!("rayshare-mutate-{index}"),
        kind: GroupVersionKind {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        },
        name: object["metadata"]["name"].as_str().unwrap_or("").into(),
        namespace: namespace.into(),
        operation: "CREATE".into(),
        ..AdmissionRequest::default()
    }
    .with_object(&object))
}

/// Runs each document through `admission::admit`, in order, against one in-memory world
/// (so a second job of the same config finds the first one's cluster).
pub async fn run(
    text: &str,
    namespace: &str,
    config: &Config,
) -> Result<Vec<Mutated>, OfflineError> {
    let world = MemoryWorld::default();
    let mut results = Vec::new();
    for (index, doc) in documents(text)?.iter().enumerate() {
        let request = request_for(doc, namespace, index)?;
        let before = world.created().len();
        let admission = admission::admit(&request, config, &world, None).await;
        // The object as stored: admission's, or (when it planned from the fields triage
        // read) the request's object with the patch applied.
        let stored = admission.object.clone().or_else(|| {
            let mut object = request.parse_object().ok().flatten()?;
            if let Some(patch) = &admission.verdict.patch {
                json_patch::patch(&mut object, patch).ok()?;
            }
            Some(object)
        });
        let provisioned = stored
            .clone()
            .filter(|_| admission.verdict.allowed)
            .and_then(|mut stored| {
                if stored["metadata"]["namespace"]
                    .as_str()
                    .is_none_or(str::is_empty)
                {
                    stored["metadata"]["namespace"] = json!(request.namespace);
                }
                world.store(&stored, config)
            });
        let creates = world.created();
        let patch = admission
            .verdict
            .patch
            .clone()
            .map(|p| json!(p))
            .unwrap_or(json!([]));
        results.push(Mutated {
            object: stored.unwrap_or(Value::Null),
            patch,
            creates: if creates.len() > before {
                provisioned.map_or(admission.ensured, |c| vec![c])
            } else {
                vec![]
            },
            warnings: admission.verdict.warnings,
            allowed: admission.verdict.allowed,
        });
    }
    Ok(results)
}

pub fn render_yaml(results: &[Mutated]) -> String {
    let mut out = String::new();
    for r in results {
        for w in &r.warnings {
            out.push_str(&format!("# {w}\n"));
        }
        if !r.allowed {
            out.push_str("# DENIED\n");
        }
        out.push_str("---\n");
        out.push_str(&serde_norway::to_string(&r.object).unwrap_or_default());
        for c in &r.creates {
            out.push_str("--- # rayshare would create:\n");
            out.push_str(&serde_norway::to_string(c).unwrap_or_default());
        }
    }
    out
}

pub fn render_json(results: &[Mutated]) -> String {
    let docs: Vec<Value> = results
        .iter()
        .map(|r| json!({"object": r.object, "patch": r.patch, "creates": r.creates, "warnings": r.warnings}))
        .collect();
    let value = if docs.len() == 1 {
        docs[0].clone()
    } else {
        Value::Array(docs)
    };
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn two_runs_one_cluster_offline() {
        let text = [
            include_str!("../deploy/samples/rayjob-run-a.yaml"),
            include_str!("../deploy/samples/rayjob-run-b.yaml"),
        ]
        .join("\n---\n");
        let results = run(&text, "demo", &Config::default()).await.unwrap();
        assert_eq!(results.len(), 2);
        assert_eq!(
            results[0].creates.len(),
            1,
            "the first job creates the cluster"
        );
        assert!(results[1].creates.is_empty(), "the second reuses it");
        let name = &results[0].creates[0]["metadata"]["name"];
        assert_eq!(
            results[1].object["spec"]["clusterSelector"]["ray.io/cluster"],
            *name
        );
        let json = render_json(&results[..1]);
        let v: Value = serde_json::from_str(&json).unwrap();
        assert!(
            v["patch"]
                .as_array()
                .unwrap()
                .iter()
                .any(|op| op["path"] == "/spec/rayClusterSpec")
        );
        assert!(render_yaml(&results).contains("rayshare would create"));
    }

    #[tokio::test]
    async fn admission_review_input_is_accepted() {
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
            "namespace": "n", "object": serde_norway::from_str::<Value>(include_str!("../deploy/samples/volcano-pod.yaml")).unwrap()}});
        let results = run(&review.to_string(), "x", &Config::default())
            .await
            .unwrap();
        assert_eq!(results[0].creates[0]["kind"], "PodGroup");
        assert_eq!(results[0].creates[0]["metadata"]["namespace"], "n");
    }

    /// The preview lists exactly what the server and the provisioners would make.
    #[rstest::rstest]
    #[case::volcano_pod("", true, 1)]
    #[case::made_from_the_stored_pod("", false, 1)]
    #[case::names_its_group_already("scheduling.k8s.io/group-name: mine", true, 0)]
    #[case::names_its_group_already_stored("scheduling.k8s.io/group-name: mine", false, 0)]
    #[case::opted_out("rayshare.io/skip: 'true'", true, 0)]
    #[tokio::test]
    async fn a_pods_preview_creates_what_the_cluster_would(
        #[case] annotation: &str,
        #[case] at_admission: bool,
        #[case] groups: usize,
    ) {
        let mut pod: Value =
            serde_norway::from_str(include_str!("../deploy/samples/volcano-pod.yaml")).unwrap();
        if let Some((k, v)) = annotation.split_once(": ") {
            let v: Value = serde_norway::from_str(v).unwrap();
            pod["metadata"]["annotations"][k] = v;
        }
        let mut config = Config::default();
        config.pod_groups.create_at_admission = at_admission;
        let results = run(&pod.to_string(), "n", &config).await.unwrap();
        assert_eq!(results[0].creates.len(), groups, "{:?}", results[0].creates);
    }

    #[tokio::test]
    async fn garbage_is_a_clear_error() {
        assert!(run("kind: [", "x", &Config::default()).await.is_err());
        assert!(
            run("a: 1", "x", &Config::default())
                .await
                .unwrap_err()
                .to_string()
                .contains("apiVersion")
        );
    }
}
