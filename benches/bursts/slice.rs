//! A multi-host slice: every worker pod of a `numOfHosts: 4` group with 64 replicas
//! created at once, indexed by one and by two rayshare replicas, against the floor: the
//! same burst into a namespace rayshare does not serve, in the same run.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::harness::*;

use crate::{CONCURRENCY, Latencies, ms, per_pod};

mod probes;
use probes::{events_settled, pods_reviewed, profiled};

const REPLICAS: usize = 64;
const HOSTS: usize = 4;
const PODS: usize = REPLICAS * HOSTS;

/// One burst of the slice's pods.
struct Burst {
    latencies: Latencies,
    wall: Duration,
    /// CPU time of the whole machine during the burst: API server, etcd, rayshare, client.
    cpu: Duration,
    /// The busiest commands' CPU time during the burst.
    cpu_by: Vec<(String, Duration)>,
    indexed: usize,
    duplicates: usize,
    /// Slots whose replica is past the group's replicas (KubeRay's count).
    past_group: usize,
    lease_calls: BTreeMap<String, u64>,
    /// Calls on Events (rayshare records one per indexed pod), for stderr.
    event_calls: BTreeMap<String, u64>,
    /// The last pods answered: when, their slot, the rayshare replica that served them.
    slowest: Vec<String>,
}

impl Burst {
    /// Creates `pods` in `namespace`, CONCURRENCY at a time, counting Lease calls.
    async fn run(client: &kube::Client, namespace: &str, pods: Vec<Value>) -> Self {
        let started = Instant::now();
        let cpu_before = crate::sys::system_cpu_ns();
        let by_before = crate::sys::cpu_ns_by_command();
        let calls_before = crate::cluster::api_requests(client).await;
        let created = async {
            stream::iter(pods)
                .map(|o| async move {
                    let stored = create_in(client, namespace, o, false).await;
                    (Instant::now(), stored)
                })
                .buffer_unordered(CONCURRENCY)
                .collect::<Vec<_>>()
                .await
        }
        .await;
        let wall = started.elapsed();
        let calls =
            crate::cluster::delta(&calls_before, &crate::cluster::api_requests(client).await);
        let on = |resource: &str| -> BTreeMap<String, u64> {
            let suffix = format!(" {resource}");
            calls
                .iter()
                .filter_map(|(k, v)| Some((k.strip_suffix(&suffix)?.to_string(), *v)))
                .collect()
        };
        let lease_calls = on("leases");
        let event_calls = on("events");
        let cpu = Duration::from_nanos(crate::sys::system_cpu_ns().saturating_sub(cpu_before));
        let mut cpu_by: Vec<(String, Duration)> = crate::sys::cpu_ns_by_command()
            .into_iter()
            .map(|(command, ns)| {
                let was = by_before.get(&command).copied().unwrap_or(0);
                (command, Duration::from_nanos(ns.saturating_sub(was)))
            })
            .filter(|(_, d)| !d.is_zero())
            .collect();
        cpu_by.sort_by_key(|(_, d)| std::cmp::Reverse(*d));
        cpu_by.truncate(5);
        let mut slots = BTreeSet::new();
        let mut indexed = 0;
        let mut latencies = Vec::new();
        let mut answered = Vec::new();
        for (at, pod) in &created {
            let labels = &pod["metadata"]["labels"];
            let replica = labels["ray.io/worker-group-replica-index"].as_str();
            let host = labels["ray.io/replica-host-index"].as_str();
            if let (Some(r), Some(h)) = (replica, host) {
                indexed += 1;
                slots.insert((r.to_string(), h.to_string()));
            }
            let after = at.saturating_duration_since(started);
            latencies.push(after);
            answered.push((after, labels));
        }
        answered.sort_by_key(|(after, _)| std::cmp::Reverse(*after));
        let label = |labels: &Value, key: &str| labels[key].as_str().unwrap_or("-").to_string();
        let slowest = answered
            .into_iter()
            .take(8)
            .map(|(after, l)| {
                let slot = format!(
                    "{}/{}",
                    label(l, "ray.io/worker-group-replica-index"),
                    label(l, "ray.io/replica-host-index")
                );
                format!("{} {slot} by {}", ms(after), label(l, SHARD_LABEL))
            })
            .collect();
        Self {
            latencies: Latencies::new(latencies),
            wall,
            cpu,
            cpu_by,
            indexed,
            duplicates: indexed - slots.len(),
            past_group: slots
                .iter()
                .filter(|(r, _)| r.parse::<usize>().is_ok_and(|r| r >= REPLICAS))
                .count(),
            lease_calls,
            event_calls,
            slowest,
        }
    }

    fn row(&self, label: &str, floor: &Floor) -> String {
        format!(
            "| {label} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {} | {} |",
            self.latencies.0.len(),
            self.indexed,
            self.latencies.q(0.5),
            self.latencies.q(0.99),
            ms(self.wall),
            floor.wall_ratio(self),
            floor.cpu_ratio(self),
            self.duplicates,
            per_pod(&self.lease_calls, PODS),
        )
    }
}

/// The busiest commands' CPU time in a burst, for stderr.
fn cpu_by(b: &Burst) -> String {
    let parts: Vec<String> = b
        .cpu_by
        .iter()
        .map(|(command, d)| format!("{command} {}", ms(*d)))
        .collect();
    format!(
        "{} in all: {}; Event calls / pod {}; last answered (replica/host by rayshare replica): {}",
        ms(b.cpu),
        parts.join(", "),
        per_pod(&b.event_calls, PODS),
        b.slowest.join(", ")
    )
}

/// The same burst into a namespace no webhook serves: the mean of one just before and one
/// just after.
struct Floor {
    wall: Duration,
    cpu: Duration,
}

impl Floor {
    fn of(before: &Burst, after: &Burst) -> Self {
        Self {
            wall: (before.wall + after.wall) / 2,
            cpu: (before.cpu + after.cpu) / 2,
        }
    }

    fn wall_ratio(&self, b: &Burst) -> f64 {
        b.wall.as_secs_f64() / self.wall.as_secs_f64()
    }

    /// Whether a slower burst waited or worked: the machine's CPU time against the floor's.
    fn cpu_ratio(&self, b: &Burst) -> f64 {
        b.cpu.as_secs_f64() / self.cpu.as_secs_f64().max(1e-9)
    }
}

/// Deletes the namespace's pods and waits until they are gone.
async fn clear(client: &kube::Client, namespace: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let all = ListParams::default();
    pods.delete_collection(&DeleteParams::default().grace_period(0), &all)
        .await
        .unwrap();
    wait_for("the burst's pods to go", || async {
        pods.list(&all).await.ok()?.items.is_empty().then_some(())
    })
    .await;
}

/// Rounds per replica count (RAYSHARE_SLICE_ROUNDS): one burst's wall moves by a third
/// between runs on a shared 2-core VM, so a ratio is judged on the median of several.
pub fn rounds() -> usize {
    std::env::var("RAYSHARE_SLICE_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5)
}

/// A shared cluster of its own for `round` (block claims stay with their cluster), known
/// to every replica: its name and worker group.
async fn slice_cluster(env: &TestEnv, replicas: usize, round: usize) -> (String, String) {
    let mut job = sample("rayjob-run-a.yaml");
    let group = &mut job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0];
    group["numOfHosts"] = json!(HOSTS);
    group["replicas"] = json!(REPLICAS);
    group["maxReplicas"] = json!(REPLICAS);
    // Another config each round, so another cluster.
    let head = &mut job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"];
    head["containers"][0]["env"] = json!([{"name": "BENCH_ROUND", "value": round.to_string()}]);
    job["metadata"]["labels"] = json!({SHARD_LABEL: "0"});
    job["metadata"]["name"] = json!(format!("slice-{round}"));
    let stored = create_in(&env.admin, &env.ns, job, false).await;
    let cluster = stored["spec"]["clusterSelector"]["ray.io/cluster"]
        .as_str()
        .expect("rewritten")
        .to_string();
    let clusters = env.api(&ray_cluster_resource(), &env.ns);
    let shared = wait_for("the shared cluster", || async {
        clusters.get_opt(&cluster).await.ok().flatten()
    })
    .await;
    let group = shared.data["spec"]["workerGroupSpecs"][0]["groupName"]
        .as_str()
        .unwrap()
        .to_string();
    // Every replica must know the cluster's hosts before the burst: a probe per replica.
    let pods: Api<Pod> = Api::namespaced(env.admin.clone(), &env.ns);
    for i in 0..replicas {
        let probe: Pod = serde_json::from_value(worker(&cluster, &group, replicas, i)).unwrap();
        let dry = PostParams {
            dry_run: true,
            ..Default::default()
        };
        wait_for("each replica to know the cluster's hosts", || async {
            let p = pods.create(&dry, &probe).await.ok()?;
            p.metadata
                .labels?
                .contains_key("ray.io/replica-host-index")
                .then_some(())
        })
        .await;
    }
    (cluster, group)
}

/// Worker pod `i` of the burst, as KubeRay makes it, sent to rayshare replica `i % replicas`.
fn worker(cluster: &str, group: &str, replicas: usize, i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": format!("{cluster}-worker-"), "labels": {
            "ray.io/cluster": cluster, "ray.io/group": group,
            "ray.io/node-type": "worker", SHARD_LABEL: (i % replicas).to_string()}},
        "spec": {"containers": [{"name": "ray-worker", "image": "rayproject/ray"}]}})
}

/// "lowest to highest" of `values`.
fn range(values: &[f64]) -> String {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    format!("{lo:.2} to {hi:.2}")
}

/// The median of `values` (sorted here).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// One build and replica count's rounds: the floor (the same burst into a namespace no
/// webhook serves, just before and just after), the webhook call alone, indexed; the
/// table's rows as they come, then the medians of the rounds' ratios (`rows`).
pub struct Series {
    env: TestEnv,
    build: String,
    replicas: usize,
    floor_ns: String,
    label: String,
    out: Vec<String>,
    plain_ratios: Vec<f64>,
    served_ratios: Vec<f64>,
    cpu_ratios: Vec<f64>,
    calls: Vec<f64>,
    duplicates: usize,
    past_group: usize,
}

impl Series {
    /// Starts `replicas` rayshare replicas of `build` in a namespace of their own.
    pub async fn new(build: &str, replicas: usize) -> Self {
        let name = format!("burst-slice-{build}-{replicas}");
        let env = TestEnv::new(&name, DEFAULT_CONFIG, replicas).await;
        let floor_ns = format!("{}-floor", env.ns);
        create_namespace(&env.admin, &floor_ns, &[]).await;
        Self {
            env,
            build: build.to_string(),
            replicas,
            floor_ns,
            label: format!("rayshare ({build}), {replicas} replica(s)"),
            out: Vec::new(),
            plain_ratios: vec![],
            served_ratios: vec![],
            cpu_ratios: vec![],
            calls: vec![],
            duplicates: 0,
            past_group: 0,
        }
    }

    /// One round on a new cluster.
    pub async fn round(&mut self, round: usize) {
        let (env, replicas, label) = (&self.env, self.replicas, &self.label);
        let floor_ns = &self.floor_ns;
        let (cluster, group) = slice_cluster(env, replicas, round).await;
        let all = || {
            (0..PODS)
                .map(|i| worker(&cluster, &group, replicas, i))
                .collect::<Vec<_>>()
        };
        let tag = |burst: &str| format!("{round}-{replicas}-{burst}");
        let before = profiled(
            &env.admin,
            tag("floor-before"),
            Burst::run(&env.admin, floor_ns, all()),
        )
        .await;
        clear(&env.admin, floor_ns).await;
        // The webhook call alone: the same pods without KubeRay's labels, which
        // rayshare lets through unchanged (no claim).
        let plain = all()
            .into_iter()
            .map(|mut pod| {
                // As KubeRay >= 1.5 labels them: rayshare is called and leaves them be.
                // (Without KubeRay's labels the webhook's matchConditions skip the call.)
                pod["metadata"]["labels"]["ray.io/worker-group-replica-index"] = json!("0");
                pod["metadata"]["generateName"] = json!("plain-");
                pod
            })
            .collect();
        let reviewed = pods_reviewed(env).await;
        let passed = profiled(
            &env.admin,
            tag("call-only"),
            Burst::run(&env.admin, &env.ns, plain),
        )
        .await;
        let reviewed = pods_reviewed(env).await - reviewed;
        assert_eq!(
            reviewed, PODS as u64,
            "every pod of the call-only burst reviewed"
        );
        clear(&env.admin, &env.ns).await;
        let settled = events_settled(env).await;
        let calls_before = crate::cluster::api_requests(&env.admin).await;
        let served = profiled(
            &env.admin,
            tag("indexed"),
            Burst::run(&env.admin, &env.ns, all()),
        )
        .await;
        // Each indexed pod's Event, recorded (or dropped) a second or more after its
        // admission: what it cost the API server, lookups included.
        wait_for("the burst's events", || async {
            (events_settled(env).await >= settled + PODS as u64).then_some(())
        })
        .await;
        let with_events = crate::cluster::delta(
            &calls_before,
            &crate::cluster::api_requests(&env.admin).await,
        );
        let per = |key: &str| with_events.get(key).copied().unwrap_or(0) as f64 / PODS as f64;
        eprintln!(
            "[slice] round {round}, {label}: burst and its events: LIST pods {:.2}, GET pods {:.2}, POST events {:.2} per pod",
            per("LIST pods"),
            per("GET pods"),
            per("POST events")
        );
        let after = profiled(
            &env.admin,
            tag("floor-after"),
            Burst::run(&env.admin, floor_ns, all()),
        )
        .await;
        clear(&env.admin, floor_ns).await;
        // The next round starts from as many stored pods as this one did: the control
        // plane's cost per create grows with them, and the floor must not drift from it.
        clear(&env.admin, &env.ns).await;
        let floor = Floor::of(&before, &after);
        self.plain_ratios.push(floor.wall_ratio(&passed));
        self.served_ratios.push(floor.wall_ratio(&served));
        self.cpu_ratios.push(floor.cpu_ratio(&served));
        self.calls
            .push(served.lease_calls.values().sum::<u64>() as f64 / PODS as f64);
        self.duplicates += served.duplicates;
        self.past_group += served.past_group;
        self.out.extend([
            format!(
                "| round {round}: floor (no webhook), mean of before and after | {PODS} | 0 | - | - | {} | 1 | 1 | 0 | - |",
                ms(floor.wall)
            ),
            passed.row(&format!("round {round}: {label}, webhook call only"), &floor),
            served.row(&format!("round {round}: {label}"), &floor),
        ]);
        eprintln!(
            "[slice] round {round}, {label}, CPU by command:\n  floor before: {}\n  webhook call only: {}\n  indexed: {}\n  floor after: {}",
            cpu_by(&before),
            cpu_by(&passed),
            cpu_by(&served),
            cpu_by(&after)
        );
    }

    /// Two replicas against one of the same build, round by round (the two ran one after
    /// the other, so the machine's drift cancels): the medians of the wall and CPU ratios.
    pub fn paired(two: &Series, one: &Series) -> String {
        let per_round =
            |a: &[f64], b: &[f64]| -> Vec<f64> { a.iter().zip(b).map(|(a, b)| a / b).collect() };
        let wall = per_round(&two.served_ratios, &one.served_ratios);
        let cpu = per_round(&two.cpu_ratios, &one.cpu_ratios);
        format!(
            "| **{} against {}, paired by round** | | | | | | **{:.2}** ({}) | {:.2} ({}) | | |",
            two.label,
            one.label,
            median(wall.clone()),
            range(&wall),
            median(cpu.clone()),
            range(&cpu),
        )
    }

    pub fn build_and_replicas(&self) -> (&str, usize) {
        (&self.build, self.replicas)
    }

    /// The rounds' rows, then their medians.
    pub fn rows(mut self) -> Vec<String> {
        let (served, plain, cpu) = (&self.served_ratios, &self.plain_ratios, &self.cpu_ratios);
        self.out.push(format!(
            "| **{}, median of {} rounds** | | | | | | **{:.2}** ({}); webhook call only {:.2} ({}) | {:.2} ({}) | {}; {} past the group's {REPLICAS} replicas | {:.2} |",
            self.label,
            served.len(),
            median(served.clone()),
            range(served),
            median(plain.clone()),
            range(plain),
            median(cpu.clone()),
            range(cpu),
            self.duplicates,
            self.past_group,
            median(self.calls.clone()),
        ));
        self.out
    }
}
