//! Micro-benchmarks of the pure mutation code on the samples (criterion).
//!
//!     cargo bench --bench mutate
//!     cargo bench --bench mutate -- --instructions    # one call per kind, under callgrind
//!
//! Under `cargo test` (no `--bench` argument) each case runs once, as a smoke test.

use std::hint::black_box;

// The server's allocator: its cost is part of every request.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::Criterion;
use serde_json::{Value, json};

use rayshare::admission::{self, AdmissionRequest};
use rayshare::config::Config;
use rayshare::domain::cluster::ClusterInfo;
use rayshare::domain::{indices, pod_group, shared_cluster};
use rayshare::world::MemoryWorld;

const RAYJOB_A: &str = include_str!("../deploy/samples/rayjob-run-a.yaml");
const RAYJOB_B: &str = include_str!("../deploy/samples/rayjob-run-b.yaml");
const VOLCANO_POD: &str = include_str!("../deploy/samples/volcano-pod.yaml");
const WORKER_POD: &str = include_str!("../tests/bench/ray-worker-pod.yaml");

fn yaml(text: &str) -> Value {
    rayshare::offline::documents(text).expect("sample YAML")[0].clone()
}

fn worker_pod(cluster: &str, group: &str) -> Value {
    yaml(
        &WORKER_POD
            .replace("{{cluster}}", cluster)
            .replace("{{group}}", group)
            .replace("{{namespace}}", "team"),
    )
}

fn cluster_info(hosts: u32) -> ClusterInfo {
    ClusterInfo::from_value(&json!({
        "metadata": {"uid": "2f7b9a1c", "labels": {}, "annotations": {}},
        "spec": {"workerGroupSpecs": [{"groupName": "cpu", "numOfHosts": hosts}]},
    }))
}

fn review(object: &Value, dry_run: bool) -> Vec<u8> {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "6f1c1f0e-1d5e-4c4b-9a51-0b1f3d6e2a11",
            "kind": {"group": group, "version": version, "kind": object["kind"]},
            "name": object["metadata"]["name"].as_str().unwrap_or(""),
            "namespace": "team", "operation": "CREATE", "dryRun": dry_run,
            "userInfo": {"username": "system:serviceaccount:flyte:flytepropeller"},
            "object": object,
        }
    }))
    .expect("serialisable")
}

fn request(object: &Value, dry_run: bool) -> AdmissionRequest {
    admission::parse_review(review(object, dry_run)).expect("a valid review")
}

/// Parse, admit, answer: the whole per-request work outside HTTP and TLS.
fn handle(body: &[u8], cfg: &Config, world: &MemoryWorld) -> Vec<u8> {
    let request =
        admission::parse_review(bytes::Bytes::copy_from_slice(body)).expect("a valid review");
    let admission = futures::executor::block_on(admission::admit(&request, cfg, world, None));
    admission.verdict.review_bytes(&request.uid)
}

type Case = (&'static str, Box<dyn FnMut()>);

/// A world in which `job`'s shared cluster exists (the first job of a config made it).
/// A world where `job` was admitted and stored, so its shared cluster exists.
fn world_with_shared_cluster(job: &Value, cfg: &Config) -> MemoryWorld {
    let world = MemoryWorld::default();
    let req = request(job, false);
    let admitted = futures::executor::block_on(admission::admit(&req, cfg, &world, None));
    let mut stored = admitted.object.expect("the job was rewritten");
    stored["metadata"]["namespace"] = serde_json::json!(req.namespace);
    world
        .store(&stored, cfg)
        .expect("the provisioner makes its cluster");
    world
}

/// A world holding the shared cluster of `job`'s config, and that cluster's name.
fn world_and_cluster_name(job: &Value, cfg: &Config) -> (MemoryWorld, String) {
    let world = world_with_shared_cluster(job, cfg);
    let name = world.created()[0]["metadata"]["name"]
        .as_str()
        .expect("cluster name")
        .to_string();
    (world, name)
}

fn admit_case(
    name: &'static str,
    req: AdmissionRequest,
    cfg: &Config,
    world: MemoryWorld,
    expected: admission::Outcome,
) -> Case {
    let cfg = cfg.clone();
    let run = move || {
        let a = futures::executor::block_on(admission::admit(black_box(&req), &cfg, &world, None));
        assert_eq!(a.outcome, expected);
    };
    (name, Box::new(run))
}

fn handle_case(name: &'static str, body: Vec<u8>, cfg: &Config, world: MemoryWorld) -> Case {
    let cfg = cfg.clone();
    (
        name,
        Box::new(move || {
            black_box(handle(black_box(&body), &cfg, &world));
        }),
    )
}

fn cases() -> Vec<Case> {
    let cfg = Config::default();
    let rayjob_a = yaml(RAYJOB_A);
    let rayjob_b = yaml(RAYJOB_B);
    let pod = yaml(VOLCANO_POD);
    let worker = worker_pod("ray-shared", "cpu");
    let single_host = cluster_info(1);
    let multi_host = cluster_info(4);
    let mut cases: Vec<Case> = Vec::new();

    // The pure planners.
    {
        let (job, cfg) = (rayjob_a.clone(), cfg.clone());
        cases.push((
            "shared_cluster::plan rayjob-run-a",
            Box::new(move || {
                let plan = shared_cluster::plan(
                    black_box(&job),
                    "team",
                    &cfg.shared_clusters,
                    &cfg.opt_out_annotation,
                    shared_cluster::Admitter {
                        instance: "rayshare",
                        request_uid: "uid-1",
                    },
                );
                assert!(matches!(plan, Ok(shared_cluster::Plan::Rewrite(_))));
            }),
        ));
    }
    {
        let (pod, cfg) = (pod.clone(), cfg.clone());
        cases.push((
            "pod_group::plan+group volcano-pod",
            Box::new(move || {
                let uid = "6f1c1f0e-1d5e-4c4b-9a51-0b1f3d6e2a11";
                let plan = pod_group::plan(black_box(&pod), uid, &cfg.pod_groups, "skip");
                let Ok(pod_group::Plan::Create { name }) = plan else {
                    panic!("expected a group, got {plan:?}");
                };
                let group = pod_group::group(&pod, "team", uid, &name, None, &cfg.pod_groups);
                black_box(group.expect("a group"));
            }),
        ));
    }
    {
        let (pod, cfg, info) = (worker.clone(), cfg.clone(), single_host.clone());
        cases.push((
            "indices::plan worker single-host (skip)",
            Box::new(move || {
                let plan = indices::plan(
                    black_box(&pod),
                    Some(&info),
                    &cfg.indices,
                    &cfg.opt_out_annotation,
                );
                assert_eq!(plan, indices::Plan::Skip(None));
            }),
        ));
    }
    {
        let (pod, cfg, info) = (worker.clone(), cfg.clone(), multi_host.clone());
        cases.push((
            "indices::plan+apply worker 4-host",
            Box::new(move || {
                let plan = indices::plan(
                    black_box(&pod),
                    Some(&info),
                    &cfg.indices,
                    &cfg.opt_out_annotation,
                );
                let indices::Plan::Claim {
                    cluster,
                    group,
                    shape,
                } = plan
                else {
                    panic!("expected a claim, got {plan:?}");
                };
                let slot = indices::Slot {
                    replica: 1,
                    host: 2,
                };
                black_box(indices::apply(
                    &pod,
                    &cluster,
                    &group,
                    shape.hosts,
                    slot,
                    &cfg.indices,
                ));
            }),
        ));
    }

    // The wire format.
    for (name, object) in [
        ("admission::parse_review volcano-pod", pod.clone()),
        ("admission::parse_review rayjob-run-a", rayjob_a.clone()),
    ] {
        // A refcounted body, so cloning it per call is not part of what is measured.
        let body = bytes::Bytes::from(review(&object, false));
        cases.push((
            name,
            Box::new(move || {
                black_box(admission::parse_review(black_box(body.clone())).expect("valid"));
            }),
        ));
    }

    // admission::admit against an in-memory world, as the server runs it.
    cases.push(admit_case(
        "admission::admit rayjob-run-b (cluster exists)",
        request(&rayjob_b, false),
        &cfg,
        world_with_shared_cluster(&rayjob_a, &cfg),
        admission::Outcome::Mutated,
    ));
    cases.push(admit_case(
        "admission::admit volcano-pod (dry run)",
        request(&pod, true),
        &cfg,
        MemoryWorld::default(),
        admission::Outcome::Mutated,
    ));
    {
        let (world, name) = world_and_cluster_name(&rayjob_a, &cfg);
        cases.push(admit_case(
            "admission::admit worker pod single-host",
            request(&worker_pod(&name, "cpu"), false),
            &cfg,
            world,
            admission::Outcome::Unchanged,
        ));
    }

    // Body in, body out: the cases `--instructions` counts, with their baselines.
    let mut plain = pod.clone();
    plain["spec"]["schedulerName"] = json!("default-scheduler");
    for (name, object) in [
        ("baseline: parse pod review as a JSON tree", &pod),
        ("baseline: parse rayjob review as a JSON tree", &rayjob_b),
    ] {
        let body = review(object, false);
        cases.push((
            name,
            Box::new(move || {
                let tree: Value = serde_json::from_slice(black_box(&body)).expect("JSON");
                black_box(tree);
            }),
        ));
    }
    cases.push(handle_case(
        "handle plain pod review, no change (parse+admit+answer)",
        review(&plain, false),
        &cfg,
        MemoryWorld::default(),
    ));
    cases.push(handle_case(
        "handle volcano-pod review (parse+admit+answer)",
        review(&pod, true),
        &cfg,
        MemoryWorld::default(),
    ));
    {
        let (world, name) = world_and_cluster_name(&rayjob_a, &cfg);
        cases.push(handle_case(
            "handle worker pod review, single-host (parse+admit+answer)",
            review(&worker_pod(&name, "cpu"), false),
            &cfg,
            world,
        ));
    }
    cases.push(handle_case(
        "handle rayjob-run-b review (parse+admit+answer)",
        review(&rayjob_b, false),
        &cfg,
        world_with_shared_cluster(&rayjob_a, &cfg),
    ));
    // The worst a tenant can write into a RayJob: each refused at a bound, unchanged.
    let hostile = shared_cluster::kuberay_yaml::hostile::runtime_envs().into_iter();
    let accepted = shared_cluster::kuberay_yaml::hostile::largest_accepted().into_iter();
    let worst = hostile
        .map(|(kind, text)| (format!("refused, {kind}"), text))
        .chain(accepted.map(|(kind, text)| (format!("accepted, {kind}"), text)));
    for (kind, text) in worst {
        let mut job = rayjob_b.clone();
        job["spec"]["runtimeEnvYAML"] = json!(text);
        let name: &'static str = format!("handle hostile rayjob review ({kind})").leak();
        cases.push(handle_case(
            name,
            review(&job, false),
            &cfg,
            world_with_shared_cluster(&rayjob_a, &cfg),
        ));
    }
    cases
}

/// The one call callgrind counts (`--toggle-collect`).
#[inline(never)]
fn measured(f: &mut dyn FnMut()) {
    f();
}

/// `--one NAME`: runs case NAME a few times to warm up, then once in `measured`.
fn run_one(name: &str) {
    let (_, mut f) = cases()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no case {name}"));
    for _ in 0..3 {
        f();
    }
    measured(&mut f);
}

/// Instructions of one call of each body-in/body-out case, counted by callgrind in a child
/// process; a ratio to the baseline of the same kind (the review parsed as a JSON tree),
/// counted in the same run.
fn count_instructions() {
    let exe = std::env::current_exe().expect("own path");
    let dir = std::env::var("RAYSHARE_BENCH_OUT").unwrap_or_else(|_| "target/bench".into());
    std::fs::create_dir_all(&dir).expect("output directory");
    let counted = |name: &str| -> Option<u64> {
        let out = format!("{dir}/callgrind.out.one");
        let status = std::process::Command::new("valgrind")
            .args(["--tool=callgrind", "--toggle-collect=*measured*"])
            .arg(format!("--callgrind-out-file={out}"))
            .arg(&exe)
            .args(["--one", name])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        let text = std::fs::read_to_string(&out).ok()?;
        let _ = std::fs::remove_file(&out);
        if !status.success() {
            return None;
        }
        text.lines()
            .find_map(|l| l.strip_prefix("totals: ").or(l.strip_prefix("summary: ")))
            .and_then(|n| n.trim().parse().ok())
    };
    // Each case counted once, baselines first.
    let mut counts: Vec<(&str, u64)> = Vec::new();
    for (name, _) in cases() {
        if !(name.starts_with("handle ") || name.starts_with("baseline:")) {
            continue;
        }
        let Some(n) = counted(name) else {
            eprintln!(
                "instructions: skipped (valgrind's callgrind is not available, or {name} failed)"
            );
            return;
        };
        counts.push((name, n));
    }
    let base = |kind: &str| {
        counts
            .iter()
            .find(|(n, _)| n.starts_with("baseline:") && n.contains(kind))
            .map_or(1, |(_, c)| *c)
    };
    let mut rows = vec![
        "| one request, in process | instructions | / baseline (review parsed as a JSON tree) |"
            .to_string(),
        "|---|---:|---:|".into(),
    ];
    for (name, n) in &counts {
        let kind = if name.contains("rayjob") {
            "rayjob"
        } else {
            "pod review"
        };
        let ratio = *n as f64 / base(kind) as f64;
        rows.push(format!("| {name} | {n} | {ratio:.2} |"));
    }
    let text = rows.join("\n");
    println!("{text}");
    std::fs::write(format!("{dir}/instructions.md"), text + "\n").expect("instructions.md");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--one") {
        run_one(&args[i + 1]);
        return;
    }
    if args.iter().any(|a| a == "--instructions") {
        count_instructions();
        return;
    }
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --benches`: run each case once.
        for (name, mut f) in cases() {
            f();
            eprintln!("mutate bench case ok: {name}");
        }
        return;
    }
    let mut c = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
        .configure_from_args();
    for (name, mut f) in cases() {
        c.bench_function(name, |b| b.iter(&mut f));
    }
    c.final_summary();
}
