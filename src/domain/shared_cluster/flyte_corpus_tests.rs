//! The Flyte corpus (tests/fixtures/flyte/, made by tests/flyte-corpus/generate.sh):
//! RayJobs as Flyte v1 builds them (its own plugin code) and as Flyte v2 does
//! (reproduced from its source). Jobs of one task config must share a cluster whatever
//! execution, run, retry, task version, runtime env or Go map order they come from; any
//! real config change must give another.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use super::{Plan, Rewrite, kuberay_yaml, plan};
use crate::config::SharedClusters;

fn corpus(generation: &str) -> BTreeMap<String, Value> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/flyte")
        .join(generation);
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            (name, serde_json::from_str(&text).unwrap())
        })
        .collect()
}

fn rewrite(job: &Value) -> Rewrite {
    let ns = job["metadata"]["namespace"].as_str().unwrap();
    match plan(
        job,
        ns,
        &SharedClusters::default(),
        "rayshare.io/skip",
        super::tests_by(),
    )
    .unwrap()
    {
        Plan::Rewrite(r) => *r,
        Plan::Skip(why) => panic!("skipped: {why:?}"),
    }
}

/// Which fixtures must land on one cluster: each inner list is one cluster.
const V1_CLUSTERS: &[&[&str]] = &[
    &[
        "exec1-attempt0",
        "exec1-attempt1",
        "exec2-attempt0",
        "exec3-shuffled",
        "new-task-version",
        "runtime-env-empty",
        "runtime-env-legacy-base64",
        "runtime-env-ambiguous-scalars",
    ],
    &["new-image"],
    &["more-replicas"],
    &["second-worker-group"],
    &["autoscaling"],
];
const V2_CLUSTERS: &[&[&str]] = &[
    &[
        "run1-attempt1",
        "run1-attempt2",
        "run2-attempt1",
        "run3-shuffled",
        "new-task-version",
        "runtime-env-empty",
        "runtime-env-legacy-base64",
        "runtime-env-ambiguous-scalars",
        "run-named-on",
    ],
    &["new-image"],
    &["more-replicas"],
    &["second-worker-group"],
    &["autoscaling"],
];

fn rewrites(generation: &str) -> BTreeMap<String, Rewrite> {
    corpus(generation)
        .into_iter()
        .map(|(name, fixture)| (name, rewrite(&fixture["rayJob"])))
        .collect()
}

fn check_clusters(generation: &str, expected: &[&[&str]]) {
    let rewrites = rewrites(generation);
    let listed: Vec<&str> = expected.iter().flat_map(|c| c.iter().copied()).collect();
    assert_eq!(
        rewrites.keys().map(String::as_str).collect::<Vec<_>>(),
        {
            let mut l = listed.clone();
            l.sort();
            l
        },
        "every fixture is classified"
    );
    for (i, a) in listed.iter().enumerate() {
        for b in &listed[i + 1..] {
            let together = expected.iter().any(|c| c.contains(a) && c.contains(b));
            let (ra, rb) = (&rewrites[*a], &rewrites[*b]);
            if together {
                assert_eq!(ra.name, rb.name, "{generation}: {a} and {b} must share");
            } else {
                assert_ne!(ra.name, rb.name, "{generation}: {a} and {b} must not share");
            }
        }
    }
}

#[test]
fn flyte_v1_jobs_share_exactly_when_their_config_is_equal() {
    check_clusters("v1", V1_CLUSTERS);
}

#[test]
fn flyte_v2_jobs_share_exactly_when_their_config_is_equal() {
    check_clusters("v2", V2_CLUSTERS);
}

/// The shuffled twins really differ in order (else the test above proves nothing).
#[rstest::rstest]
#[case("v1", "exec1-attempt0", "exec3-shuffled")]
#[case("v2", "run1-attempt1", "run3-shuffled")]
fn shuffled_twins_differ_in_list_order(#[case] generation: &str, #[case] a: &str, #[case] b: &str) {
    let corpus = corpus(generation);
    let order = |name: &str| {
        let head =
            &corpus[name]["rayJob"]["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"];
        let names: Vec<Value> = head["containers"][0]["env"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| !e["name"].as_str().unwrap().starts_with("FLYTE_INTERNAL"))
            .map(|e| e["name"].clone())
            .collect();
        (names, head["tolerations"].clone())
    };
    assert_ne!(order(a), order(b));
}

/// Each shared cluster is what the first job sent, minus the run-scoped parts: nothing
/// of the execution, run or attempt is left on it, and list order is the job's.
#[rstest::rstest]
#[case("v1")]
#[case("v2")]
fn the_cluster_keeps_the_first_jobs_spec_without_run_scoped_parts(#[case] generation: &str) {
    for (name, fixture) in corpus(generation) {
        let job = &fixture["rayJob"];
        let r = rewrite(job);
        let run = fixture["scenario"]["execution"]
            .as_str()
            .or(fixture["scenario"]["run"].as_str())
            .unwrap();
        let text = serde_json::to_string(&r.cluster["spec"]).unwrap();
        if run.len() > 3 {
            assert!(
                !text.contains(run),
                "{generation}/{name}: {run} on the cluster"
            );
        }
        for key in [
            "execution-id",
            "shard-key",
            "\"run\"",
            "\"attempt\"",
            "flyte.org/run",
        ] {
            assert!(
                !text.contains(key),
                "{generation}/{name}: {key} on the cluster"
            );
        }
        let sent = &job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"];
        let kept = &r.cluster["spec"]["headGroupSpec"]["template"]["spec"];
        assert_eq!(
            kept["tolerations"], sent["tolerations"],
            "{name}: order kept"
        );
        let env_names = |spec: &Value| -> Vec<String> {
            spec["containers"][0]["env"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["name"].as_str().unwrap().to_string())
                .collect()
        };
        let cfg = SharedClusters::default();
        let expected: Vec<String> = env_names(sent)
            .into_iter()
            .filter(|n| !super::identity::is_run_scoped_env(n, &cfg))
            .collect();
        assert_eq!(env_names(kept), expected, "{name}: env order kept");
        // Per-execution labels of the RayJob itself stay on the job, next to rayshare's
        // cluster and admission-uid labels.
        assert_eq!(r.job["metadata"]["labels"].as_object().unwrap().len(), {
            job["metadata"]["labels"].as_object().unwrap().len() + 2
        });
    }
}

/// The job carries its run's identity in its runtime env, readable by KubeRay exactly,
/// and the user's own runtime env reads as before (types and text).
#[rstest::rstest]
#[case("v1")]
#[case("v2")]
fn each_job_carries_its_run_and_keeps_the_users_runtime_env(#[case] generation: &str) {
    for (name, fixture) in corpus(generation) {
        let job = &fixture["rayJob"];
        let r = rewrite(job);
        let after = kuberay_yaml::read(r.job["spec"]["runtimeEnvYAML"].as_str().unwrap()).unwrap();
        let scenario = &fixture["scenario"];
        let env = &after["env_vars"];
        if generation == "v1" {
            assert_eq!(
                env["FLYTE_INTERNAL_EXECUTION_ID"], scenario["execution"],
                "{name}"
            );
            assert_eq!(
                env["FLYTE_ATTEMPT_NUMBER"],
                scenario["attempt"].to_string(),
                "{name}"
            );
            assert!(
                env["FLYTE_EXECUTION_URL"]
                    .as_str()
                    .unwrap()
                    .contains(scenario["execution"].as_str().unwrap())
            );
        } else {
            assert_eq!(env["RUN_NAME"], scenario["run"], "{name}");
            assert_eq!(env["ACTION_NAME"], scenario["action"], "{name}");
            assert_eq!(
                env["FLYTE_INTERNAL_EXECUTION_ID"], scenario["run"],
                "{name}"
            );
            let retry = scenario["attempts"].as_u64().unwrap() - 1;
            assert_eq!(env["FLYTE_ATTEMPT_NUMBER"], retry.to_string(), "{name}");
        }
        let before = match job["spec"]["runtimeEnvYAML"].as_str() {
            Some(text) => kuberay_yaml::read(text).unwrap(),
            None => Value::Null,
        };
        let users = before["env_vars"].as_object().cloned().unwrap_or_default();
        for (key, value) in env.as_object().unwrap() {
            if !users.contains_key(key) {
                assert!(value.is_string(), "{name}: {key}: {value}");
            }
        }
        // flytekit's yaml.dump (PyYAML) leaves `n` and `y` unquoted, which KubeRay's
        // YAML 1.1 reads as booleans: kept as KubeRay reads them, and the user is told.
        if users.values().any(|v| !v.is_string()) {
            assert!(
                r.warnings.iter().any(|w| w.contains("not strings")),
                "{name}"
            );
        }
        if let Some(before) = before.as_object() {
            for (key, value) in before {
                if key == "env_vars" {
                    for (k, v) in value.as_object().unwrap() {
                        assert_eq!(&env[k], v, "{name}: env_vars.{k}");
                    }
                } else {
                    assert_eq!(&after[key], value, "{name}: {key}");
                }
            }
        }
    }
}

/// The samples `rayshare mutate` is shown on (README): each file's two jobs share one
/// cluster, and the run names YAML 1.1 would read as booleans stay strings.
#[rstest::rstest]
#[case(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/samples/flyte-v1-rayjobs.yaml")))]
#[case(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/samples/flyte-v2-rayjobs.yaml")))]
fn the_flyte_samples_share_one_cluster(#[case] text: &str) {
    let jobs = crate::offline::documents(text).unwrap();
    let names: Vec<String> = jobs.iter().map(|j| rewrite(j).name).collect();
    assert_eq!(names.len(), 2);
    assert_eq!(names[0], names[1]);
    for job in &jobs {
        let r = rewrite(job);
        let env = kuberay_yaml::read(r.job["spec"]["runtimeEnvYAML"].as_str().unwrap()).unwrap();
        assert_eq!(env["env_vars"]["FEATURE_FLAG"], "on");
    }
}
