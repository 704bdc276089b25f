//! The corpus the fuzzer starts from, and the world it admits into: the shared clusters the
//! corpus's RayJobs land on (stored as the provisioner would make them), a multi-host
//! worker group on each, claims already taken, and a worker pod of every such group, so
//! that pool selection, worker indexing and claims are all reached.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use serde_json::{Value, json};

use rayshare::admission;
use rayshare::config::Config;
use rayshare::domain::shared_cluster::kuberay_yaml;
use rayshare::world::MemoryWorld;

/// The namespace every fuzzed review is for.
pub const NAMESPACE: &str = "team";

/// A review of `object` in [`NAMESPACE`].
pub fn review(object: &Value, dry_run: bool) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    // As the API server sends it: empty for an object with only a `generateName`.
    let name = object["metadata"]["name"].as_str().unwrap_or("");
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "fuzz-uid", "kind": {"group": group, "version": version, "kind": object["kind"]},
        "resource": {"group": group, "version": version, "resource": "x"},
        "operation": "CREATE", "namespace": NAMESPACE, "name": name,
        "dryRun": dry_run, "object": object}})
}

fn root() -> &'static str {
    env!("CARGO_MANIFEST_DIR")
}

fn yaml_docs(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_norway::Deserializer::from_str(text)
        .filter_map(|d| Value::deserialize(d).ok())
        .filter(Value::is_object)
        .collect()
}

/// The objects of the repository's samples and fixtures.
fn files() -> Vec<Value> {
    let root = root();
    let mut seeds = Vec::new();
    for dir in ["deploy/samples", "tests/bench"] {
        for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                let text = std::fs::read_to_string(&path).unwrap();
                seeds.extend(yaml_docs(&text.replace("{{", "x").replace("}}", "x")));
            }
        }
    }
    for generation in ["v1", "v2"] {
        let dir = format!("{root}/tests/fixtures/flyte/{generation}");
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let fixture: Value = serde_json::from_str(&text).unwrap();
            let jobs = fixture["rayJobs"].as_array().cloned().unwrap_or_default();
            seeds.extend(jobs.into_iter().chain([fixture["rayJob"].clone()]));
        }
    }
    seeds.retain(|s| s.get("kind").is_some());
    seeds
}

/// The clusters the corpus's RayJobs are sent to, as the provisioner makes them from the
/// stored jobs, each with its first worker group made multi-host (2 hosts), plus the
/// bench pod's own cluster (`xclusterx`, group `xgroupx` of 4 hosts and 2 replicas).
pub static CLUSTERS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    let cfg = Config::default();
    let world = MemoryWorld::default();
    for job in files().iter().filter(|s| s["kind"] == "RayJob") {
        let body = serde_json::to_vec(&review(job, false)).unwrap();
        let req = admission::parse_review(bytes::Bytes::from(body)).unwrap();
        let a = futures::executor::block_on(admission::admit(&req, &cfg, &world, None));
        if let Some(admitted) = a.object {
            world.store(&admitted, &cfg);
        }
    }
    let mut clusters: Vec<Value> = world
        .created()
        .into_iter()
        .filter(|o| o["kind"] == "RayCluster")
        .collect();
    assert!(clusters.len() >= 2, "the corpus's jobs make clusters");
    for (i, cluster) in clusters.iter_mut().enumerate() {
        cluster["metadata"]["namespace"] = json!(NAMESPACE);
        cluster["metadata"]["uid"] = json!(format!("cluster-uid-{i}"));
        let first = &mut cluster["spec"]["workerGroupSpecs"][0];
        assert!(first["groupName"].is_string(), "{cluster}");
        first["numOfHosts"] = json!(2);
    }
    clusters.push(json!({
    "apiVersion": "ray.io/v1", "kind": "RayCluster",
    // The uid tests/bench/ray-worker-pod.yaml's owner reference names.
    "metadata": {"name": "xclusterx", "namespace": NAMESPACE,
        "uid": "2f7b9a1c-4d3e-4b8a-9c6f-1e2d3a4b5c6d"},
    "spec": {"workerGroupSpecs": [
        {"groupName": "xgroupx", "numOfHosts": 4, "replicas": 2},
        {"groupName": "single", "replicas": 3},
    ]}}));
    clusters
});

/// A worker pod KubeRay makes for each worker group of each of [`CLUSTERS`].
fn worker_pods() -> Vec<Value> {
    let path = format!("{}/tests/bench/ray-worker-pod.yaml", root());
    let template = std::fs::read_to_string(path).unwrap();
    let mut pods = Vec::new();
    for cluster in CLUSTERS.iter() {
        let name = cluster["metadata"]["name"].as_str().unwrap();
        // KubeRay's pods name their cluster's uid: rayshare claims slots only for it.
        let uid = &cluster["metadata"]["uid"];
        for group in cluster["spec"]["workerGroupSpecs"].as_array().unwrap() {
            let text = template
                .replace("{{cluster}}", name)
                .replace("{{group}}", group["groupName"].as_str().unwrap())
                .replace("{{namespace}}", NAMESPACE);
            for mut pod in yaml_docs(&text) {
                for owner in pod["metadata"]["ownerReferences"]
                    .as_array_mut()
                    .into_iter()
                    .flatten()
                {
                    owner["uid"] = uid.clone();
                }
                pods.push(pod);
            }
        }
    }
    pods
}

/// Every object the corpus holds.
pub static SEEDS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    let mut seeds = files();
    seeds.extend(worker_pods());
    let job = seeds
        .iter()
        .find(|s| s["kind"] == "RayJob")
        .unwrap()
        .clone();
    for (_, text) in kuberay_yaml::hostile::runtime_envs() {
        let mut hostile = job.clone();
        hostile["spec"]["runtimeEnvYAML"] = json!(text);
        seeds.push(hostile);
    }
    assert!(seeds.len() > 10, "the corpus is there: {}", seeds.len());
    seeds
});

/// A fresh world holding [`CLUSTERS`], a queue for [`NAMESPACE`], and on every multi-host
/// group the first host of replica 0 and the last of replica 1 claimed already.
pub fn world() -> MemoryWorld {
    let world = MemoryWorld {
        namespace_queues: [(NAMESPACE.to_string(), "team-queue".to_string())].into(),
        ..MemoryWorld::default()
    };
    let mut objects = world.objects.lock().unwrap();
    let mut claims = world.claims.lock().unwrap();
    for cluster in CLUSTERS.iter() {
        let name = cluster["metadata"]["name"].as_str().unwrap();
        let key = ("RayCluster".into(), NAMESPACE.into(), name.into());
        objects.insert(key, cluster.clone());
        for group in cluster["spec"]["workerGroupSpecs"].as_array().unwrap() {
            let Some(hosts) = group["numOfHosts"].as_u64().filter(|&h| h > 1) else {
                continue;
            };
            let taken: BTreeSet<_> = [(0, 0), (1, hosts as u32 - 1)]
                .into_iter()
                .map(|(replica, host)| rayshare::domain::indices::Slot { replica, host })
                .collect();
            let group = group["groupName"].as_str().unwrap().to_string();
            claims.insert((NAMESPACE.into(), name.into(), group), taken);
        }
    }
    drop((objects, claims));
    world
}
