//! Volcano pods at once under the real Volcano, floor first.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use serde_json::json;

use crate::harness::*;
use crate::{CONCURRENCY, Latencies, counting_by_verb, ms, per_pod, volcano, world};

/// The group a Volcano pod names (rayshare sets it during admission, Volcano's controller
/// after the pod is stored).
const GROUP_NAME: &str = "scheduling.k8s.io/group-name";
/// On a group rayshare's provisioner took up from the stored pod: the pod's uid.
const POD_UID: &str = "rayshare.io/pod-uid";
/// Where the floor's pods go: a namespace no rayshare registration selects (they select
/// their test's label), so only Volcano's webhooks are in the path.
const FLOOR_NAMESPACE: &str = "burst-volcano-floor";

/// deploy/samples/volcano-pod.yaml (queue `research`), named `task-<i>`.
fn volcano_pod(i: usize) -> Pod {
    let mut p = sample("volcano-pod.yaml");
    p["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("generateName");
    p["metadata"]["name"] = json!(format!("task-{i}"));
    serde_json::from_value(p).unwrap()
}

/// `n` Volcano pods created at once in one namespace, CONCURRENCY in flight.
struct Burst {
    /// Each create's, from its request sent to its answer (refusals included).
    latencies: Latencies,
    /// From the first create sent to the last answered.
    wall: Duration,
    stored: Vec<Pod>,
    /// Each refusal's message.
    refused: Vec<String>,
}

impl Burst {
    async fn run(client: &kube::Client, namespace: &str, n: usize) -> Self {
        let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let pods: Vec<Pod> = (0..n).map(volcano_pod).collect();
        let started = Instant::now();
        let answers: Vec<(Duration, Result<Pod, kube::Error>)> = stream::iter(pods)
            .map(|pod| {
                let api = &api;
                async move {
                    let sent = Instant::now();
                    let created = api.create(&PostParams::default(), &pod).await;
                    (sent.elapsed(), created)
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        let wall = started.elapsed();
        let latencies = Latencies::new(answers.iter().map(|(l, _)| *l).collect());
        let mut stored = Vec::new();
        let mut refused = Vec::new();
        for (_, answer) in answers {
            match answer {
                Ok(pod) => stored.push(pod),
                Err(e) => refused.push(e.to_string()),
            }
        }
        if !refused.is_empty() {
            eprintln!(
                "[bursts] {namespace}: {} of {n} creates refused, e.g. {:?}",
                refused.len(),
                &refused[..refused.len().min(3)]
            );
        }
        Self {
            latencies,
            wall,
            stored,
            refused,
        }
    }

    fn row(&self, label: &str, grouped: &str, calls: &BTreeMap<String, u64>) -> String {
        let n = self.stored.len() + self.refused.len();
        format!(
            "| {label} | {} | {grouped} | {} | {} | {} | {} | {} |",
            self.stored.len(),
            self.latencies.q(0.5),
            self.latencies.q(0.99),
            self.latencies.q(1.0),
            ms(self.wall),
            per_pod(calls, n),
        )
    }
}

/// Polls `check` every 250 ms for at most SLOW; says on stderr when it never held.
async fn settle<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        if started.elapsed() > world::SLOW {
            eprintln!(
                "[bursts] gave up waiting for {what} after {:?}",
                world::SLOW
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "[bursts] {what}: {:.1}s after the burst",
        started.elapsed().as_secs_f64()
    );
}

/// Deletes the namespace's pods and PodGroups, and waits until both are gone.
async fn clear(client: &kube::Client, namespace: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let groups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &pod_group_resource());
    let all = ListParams::default();
    pods.delete_collection(&DeleteParams::default(), &all)
        .await
        .unwrap();
    groups
        .delete_collection(&DeleteParams::default(), &all)
        .await
        .unwrap();
    settle(&format!("{namespace}'s pods and groups gone"), || async {
        let pods = pods.list(&all).await.map(|l| l.items.len());
        let groups = groups.list(&all).await.map(|l| l.items.len());
        matches!((pods, groups), (Ok(0), Ok(0)))
    })
    .await;
}

/// What rayshare says it did (its metrics) and its warnings by message, on stderr.
async fn report_rayshare(instance: &Rayshare) {
    let metrics = instance.metrics().await;
    let wanted = [
        "rayshare_objects_created_total",
        "rayshare_objects_reused_total",
        "rayshare_errors_total",
        "rayshare_admission_duration_seconds_sum{kind=\"Pod\"",
        "rayshare_admission_duration_seconds_count{kind=\"Pod\"",
    ];
    for line in metrics
        .lines()
        .filter(|l| wanted.iter().any(|m| l.starts_with(m)))
    {
        eprintln!("[bursts] rayshare: {line}");
    }
    let mut warnings: BTreeMap<String, usize> = BTreeMap::new();
    for line in instance.log_text().lines() {
        if let Some((_, rest)) = line.split_once(" WARN ") {
            let what: Vec<&str> = rest
                .split_whitespace()
                .take_while(|w| !w.contains('='))
                .collect();
            *warnings.entry(what.join(" ")).or_default() += 1;
        }
    }
    eprintln!("[bursts] rayshare's warnings: {warnings:?}");
}

/// `n` Volcano pods at once, under the real Volcano (tests/kit/src/volcano.rs): floor (a
/// namespace rayshare does not serve) first, its pods then deleted, then served.
async fn volcano_pods(n: usize) -> [String; 3] {
    let _volcano = &*volcano::VOLCANO;
    // Logging as in production (the tests' instances log at debug).
    let info = ["--log-level".to_string(), "info".to_string()];
    let env = TestEnv::with_args(&format!("burst-volcano-{n}"), DEFAULT_CONFIG, 1, &info).await;
    // The sample's queue, Open (Volcano's pods/validate refuses a pod in a queue that is
    // not), with room for none of its pods (2 CPUs each): nothing is bound, so the
    // scheduler and kwok do not run a thousand pods on these cores.
    volcano::open_queue(&env.admin, "research", Some(json!({"cpu": "1"}))).await;
    create_namespace(&env.admin, FLOOR_NAMESPACE, &[]).await;

    // Floor: Volcano's webhooks only; its pg-controller groups each pod once stored.
    let floor_pods: Api<Pod> = Api::namespaced(env.admin.clone(), FLOOR_NAMESPACE);
    let (floor, floor_calls) = counting_by_verb(&env.admin, "podgroups", async {
        let burst = Burst::run(&env.admin, FLOOR_NAMESPACE, n).await;
        settle("Volcano's controller to group every floor pod", || async {
            let Ok(list) = floor_pods.list(&ListParams::default()).await else {
                return false;
            };
            list.items
                .iter()
                .all(|p| p.annotations().contains_key(GROUP_NAME))
        })
        .await;
        burst
    })
    .await;
    clear(&env.admin, FLOOR_NAMESPACE).await;

    // Served: rayshare makes each pod's group during its admission, then Volcano's
    // webhooks see it; the provisioner takes each group up from the stored pod.
    let groups = env.api(&pod_group_resource(), &env.ns);
    let lists = std::sync::atomic::AtomicU64::new(0);
    let (served, mut served_calls) = counting_by_verb(&env.admin, "podgroups", async {
        let burst = Burst::run(&env.admin, &env.ns, n).await;
        settle("rayshare to take every group up", || async {
            lists.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Ok(list) = groups.list(&ListParams::default()).await else {
                return false;
            };
            let taken_up: BTreeMap<String, String> = list
                .items
                .iter()
                .filter_map(|g| Some((g.name_any(), g.annotations().get(POD_UID)?.clone())))
                .collect();
            burst.stored.iter().all(|p| {
                p.annotations()
                    .get(GROUP_NAME)
                    .is_none_or(|g| taken_up.get(g) == p.metadata.uid.as_ref())
            })
        })
        .await;
        burst
    })
    .await;
    // Not the workload's: this benchmark's own polls.
    if let Some(list) = served_calls.get_mut("LIST") {
        *list = list.saturating_sub(lists.into_inner());
    }
    let existing: BTreeSet<String> = groups
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|g| g.name_any())
        .collect();
    let grouped = served
        .stored
        .iter()
        .filter(|p| {
            p.annotations()
                .get(GROUP_NAME)
                .is_some_and(|g| existing.contains(g))
        })
        .count();

    report_rayshare(&env.instances[0]).await;

    let ratio = |s: Option<Duration>, f: Option<Duration>| match (s, f) {
        (Some(s), Some(f)) if !f.is_zero() => format!("{:.2}", s.as_secs_f64() / f.as_secs_f64()),
        _ => "-".into(),
    };
    let (s, f) = (&served.latencies, &floor.latencies);
    [
        served.row(
            &format!("served: {n} Volcano pods, rayshare + Volcano's webhooks"),
            &grouped.to_string(),
            &served_calls,
        ),
        floor.row(
            &format!("floor: {n} Volcano pods, Volcano's webhooks only"),
            "-",
            &floor_calls,
        ),
        format!(
            "| served / floor | | | {} | {} | | {} | |",
            ratio(s.at(0.5), f.at(0.5)),
            ratio(s.at(0.99), f.at(0.99)),
            ratio(Some(served.wall), Some(floor.wall)),
        ),
    ]
}

/// The Volcano bursts' table: 1,000 pods, floor first.
pub async fn table() -> Vec<String> {
    let mut out = vec![
        String::new(),
        format!("Volcano pods (deploy/samples/volcano-pod.yaml, each named; its queue `research` Open, room for none of them) created at once ({CONCURRENCY} creates in flight) under Volcano v1.10.0's scheduler, controller-manager and webhook-manager with its chart's webhooks, which serve every namespace. Floor first: a namespace rayshare does not serve, so only Volcano's webhooks are in the path (its controller groups each pod after it is stored); its pods and groups are then deleted. Then served: a namespace rayshare serves, which makes each pod's PodGroup during its admission, before Volcano's pods/validate looks for it."),
        String::new(),
        "Latency: each create, from its request sent to its answer (the pod stored, past every webhook in the path); wall: from the first create sent to the last answered. Grouped: the stored pod names a PodGroup that exists (a pod rayshare passes unchanged, overloaded say, is left to Volcano's controller). PodGroup calls: every client's (rayshare, Volcano's webhook, controller and scheduler; not WATCH) from the first create until every pod's group is settled (served: taken up by rayshare's provisioner; floor: made by Volcano's controller), per pod, by verb.".into(),
        String::new(),
        "| burst | accepted | grouped | p50 | p99 | max | wall | PodGroup calls / pod |".into(),
        "|---|---:|---:|---:|---:|---:|---:|---|".into(),
    ];
    out.extend(volcano_pods(1000).await);
    out
}
