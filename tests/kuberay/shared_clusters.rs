//! Flyte-shaped RayJobs through rayshare and the real KubeRay operator, in every config
//! mode: KubeRay brings up exactly rayshare's shared clusters, binds each job to its
//! cluster and submits it with that job's own runtime env.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::harness::*;
use crate::world::*;

/// (sample, job name, its run).
pub const JOBS: [(&str, &str, &str); 3] = [
    ("rayjob-run-a.yaml", "a0-0", "a1b2c3"),
    ("rayjob-run-b.yaml", "a0-1", "z9y8x7"),
    ("rayjob-other-config.yaml", "a0-2", "q5w6e7"),
];

pub fn selected(job: &Value) -> Option<String> {
    job["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .map(String::from)
}

pub async fn create_job(env: &TestEnv, file: &str, name: &str) -> Value {
    let mut job = sample(file);
    job["metadata"]["name"] = json!(name);
    create_in(&env.admin, &env.ns, job, false).await
}

pub async fn ray_job(env: &TestEnv, name: &str) -> Value {
    serde_json::to_value(
        env.api(&ray_job_resource(), &env.ns)
            .get(name)
            .await
            .unwrap(),
    )
    .unwrap()
}

pub async fn ray_clusters(env: &TestEnv) -> BTreeMap<String, Value> {
    list_json(&env.admin, &ray_cluster_resource(), &env.ns, "")
        .await
        .into_iter()
        .map(|c| (c["metadata"]["name"].as_str().unwrap().to_string(), c))
        .collect()
}

/// The runtime env the submitter hands to `ray job submit --runtime-env-json`.
pub fn submitted_runtime_env(submitter: &Job) -> Value {
    let spec = submitter
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    let container = &spec.containers[0];
    let line = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(line.contains("ray job submit"), "{line}");
    // KubeRay passes the JSON as one Go-quoted word (strconv.Quote): a JSON string.
    let rest = line
        .split_once("--runtime-env-json ")
        .unwrap_or_else(|| panic!("no --runtime-env-json in {line}"))
        .1;
    let mut de = serde_json::Deserializer::from_str(rest).into_iter::<String>();
    let quoted = de.next().unwrap().expect("a quoted JSON word");
    serde_json::from_str(&quoted).unwrap()
}

/// KubeRay's verdicts on what rayshare made: no validation failure of any job or cluster.
pub async fn assert_no_validation_failures(env: &TestEnv) {
    for kind in ["RayJob", "RayCluster"] {
        let bad: Vec<String> = describe(&events(&env.admin, &env.ns, kind).await)
            .into_iter()
            .filter(|e| e.contains(" Invalid") || e.contains("Validation"))
            .collect();
        assert!(bad.is_empty(), "KubeRay refused {kind}s: {bad:?}");
    }
    for job in list_json(&env.admin, &ray_job_resource(), &env.ns, "").await {
        assert_ne!(
            job["status"]["jobDeploymentStatus"], "ValidationFailed",
            "{}",
            job["status"]
        );
    }
}

/// (sample, job name, its run) of each job a scenario creates, in order.
pub type Jobs<'a> = &'a [(&'a str, &'a str, &'a str)];

/// The jobs of [`JOBS`] that share a cluster: the two runs of one config.
pub const SHARING: &[&[&str]] = &[&["a0-0", "a0-1"], &["a0-2"]];

/// A scenario run to the end: its env, the operator, each job's cluster.
pub struct Ran {
    pub env: TestEnv,
    pub cluster_of: BTreeMap<String, String>,
    _kuberay: KubeRay,
}

/// Creates `jobs` in order under `config`; `sharing` lists which jobs share a cluster
/// (one list per cluster, every job in one). KubeRay must bring up exactly those
/// clusters, bind each job to its own and submit it with its run's runtime env.
pub async fn jobs_run_on_shared_clusters(
    name: &str,
    config: &str,
    jobs: Jobs<'_>,
    sharing: &[&[&str]],
) -> Ran {
    let env = TestEnv::new(name, config, 1).await;
    let kuberay = KubeRay::start(name, &[&env.ns], &KubeRayOptions::default()).await;
    let mut cluster_of = BTreeMap::new();
    for &(file, job, _) in jobs {
        let stored = create_job(&env, file, job).await;
        let cluster = selected(&stored).unwrap_or_else(|| panic!("{job} was not rewritten"));
        cluster_of.insert(job.to_string(), cluster);
    }
    let clusters_of = |list: &[&str]| -> BTreeSet<String> {
        list.iter().map(|j| cluster_of[*j].clone()).collect()
    };
    for list in sharing {
        assert_eq!(
            clusters_of(list).len(),
            1,
            "{list:?} share one: {cluster_of:?}"
        );
    }
    let firsts: Vec<&str> = sharing.iter().map(|l| l[0]).collect();
    assert_eq!(clusters_of(&firsts).len(), sharing.len(), "{cluster_of:?}");
    assert_eq!(sharing.concat().len(), jobs.len(), "every job in one list");
    let shared: BTreeSet<String> = cluster_of.values().cloned().collect();

    // KubeRay brings both shared clusters up, from their pods made Running by kwok.
    wait_for_within(SLOW, "both shared clusters to be ready", || async {
        let clusters = ray_clusters(&env).await;
        shared
            .iter()
            .all(|c| {
                clusters
                    .get(c)
                    .is_some_and(|c| c["status"]["state"] == "ready")
            })
            .then_some(())
    })
    .await;
    let pods = ray_pods(&env.admin, &env.ns).await;
    assert_eq!(
        pods.keys().cloned().collect::<BTreeSet<_>>(),
        shared,
        "Ray pods of other clusters"
    );
    let clusters = ray_clusters(&env).await;
    for (cluster, pods) in &pods {
        let spec = &clusters[cluster]["spec"];
        let workers: u64 = spec["workerGroupSpecs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["replicas"].as_u64().unwrap() * g["numOfHosts"].as_u64().unwrap_or(1))
            .sum();
        assert_eq!(pods.len() as u64, 1 + workers, "pods of {cluster}");
        assert!(
            pods.iter().all(pod_ready),
            "pods of {cluster} not all ready"
        );
        let text = serde_json::to_string(pods).unwrap();
        for (_, _, run) in jobs {
            assert!(
                !text.contains(run),
                "run {run} leaked into {cluster}'s pods"
            );
        }
    }

    // Each job: bound to its shared cluster, past Initializing, submitted by KubeRay's
    // submitter Job with its own run's runtime env; the submitter's pod runs.
    let submitters: Api<Job> = Api::namespaced(env.admin.clone(), &env.ns);
    let job_pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    for &(_, job, run) in jobs {
        let status = wait_for_within(SLOW, &format!("{job} to leave Initializing"), || async {
            let status = ray_job(&env, job).await["status"].clone();
            let state = status["jobDeploymentStatus"].as_str().unwrap_or("");
            (!["", "New", "Initializing"].contains(&state)).then_some(status)
        })
        .await;
        assert_eq!(status["rayClusterName"], json!(cluster_of[job]), "{status}");
        assert_ne!(
            status["jobDeploymentStatus"], "ValidationFailed",
            "{status}"
        );
        let submitter = wait_for(&format!("{job}'s submitter Job"), || async {
            submitters.get_opt(job).await.ok()?
        })
        .await;
        let runtime_env = submitted_runtime_env(&submitter);
        assert_eq!(runtime_env["env_vars"]["RUN_NAME"], run, "{runtime_env}");
        assert_eq!(runtime_env["pip"][0], "numpy==2.1.0", "{runtime_env}");
        let phase = wait_for_within(SLOW, &format!("{job}'s submitter pod to run"), || async {
            let list = job_pods
                .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
                .await
                .ok()?;
            let phase = pod_phase(list.items.first()?).to_string();
            ["Running", "Succeeded"]
                .contains(&phase.as_str())
                .then_some(phase)
        })
        .await;
        eprintln!(
            "[{name}] {job} (run {run}) -> {}: {}, submitter pod {phase}",
            cluster_of[job], status["jobDeploymentStatus"]
        );
    }

    // No RayCluster of a job's own, now or ever: KubeRay never created one.
    assert_eq!(
        ray_clusters(&env)
            .await
            .keys()
            .cloned()
            .collect::<BTreeSet<_>>(),
        shared
    );
    let created: Vec<String> = describe(&events(&env.admin, &env.ns, "RayJob").await)
        .into_iter()
        .filter(|e| e.contains("CreatedRayCluster"))
        .collect();
    assert!(created.is_empty(), "{created:?}");
    assert_no_validation_failures(&env).await;
    Ran {
        env,
        cluster_of,
        _kuberay: kuberay,
    }
}

/// KubeRay hands `spec.metadata` to Ray only for a job with a cluster of its own (v1.5+
/// drop it for an existing cluster, v1.4 fails the job on it): such a job stays as
/// written, KubeRay makes its cluster and submits the job with its metadata.
#[tokio::test]
async fn a_job_with_ray_metadata_keeps_its_own_cluster() {
    let env = TestEnv::new("kr-metadata", DEFAULT_CONFIG, 1).await;
    let _kuberay = KubeRay::start(&env.name, &[&env.ns], &KubeRayOptions::default()).await;
    let (file, job, _) = JOBS[0];
    let mut object = sample(file);
    object["metadata"]["name"] = json!(job);
    object["spec"]["metadata"] = json!({"owner": "team-a"});
    let stored = create_in(&env.admin, &env.ns, object, false).await;
    assert_eq!(selected(&stored), None, "{stored}");
    let jobs: Api<Job> = Api::namespaced(env.admin.clone(), &env.ns);
    let submitter = wait_for_within(SLOW, "KubeRay's submitter of the job", || async {
        jobs.get_opt(job).await.ok().flatten()
    })
    .await;
    let command = format!(
        "{:?}",
        submitter.spec.unwrap().template.spec.unwrap().containers[0]
    );
    assert!(
        command.contains("--metadata-json") && command.contains("team-a"),
        "{command}"
    );
    let owners: Vec<String> = ray_clusters(&env)
        .await
        .values()
        .map(|c| c["metadata"]["ownerReferences"][0]["name"].to_string())
        .collect();
    assert_eq!(owners, vec![format!("\"{job}\"")]);
    wait_for_within(SLOW, "an Event naming spec.metadata", || async {
        let events = describe(&events(&env.admin, &env.ns, "RayJob").await);
        events
            .iter()
            .any(|e| e.contains("spec.metadata"))
            .then_some(())
    })
    .await;
}
