//! `rayshare status`: the pool and the objects rayshare manages, per namespace, from the
//! listed objects (pure: the shell lists, this summarizes and renders).

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use crate::domain::events::human;
use crate::domain::labels::{self, Meta};
use crate::domain::reclaim::pool;
use crate::domain::reclaim::{self, Decision};

/// What the shell listed: shared RayClusters, RayJobs on them, PodGroups and index
/// claims rayshare made (each as its JSON object).
#[derive(Debug, Default)]
pub struct Listed {
    pub clusters: Vec<Value>,
    pub jobs: Vec<Value>,
    pub pod_groups: Vec<Value>,
    pub claims: Vec<Value>,
}

#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Status {
    pub namespaces: BTreeMap<String, Namespace>,
}

#[derive(Debug, Default, Serialize, PartialEq)]
pub struct Namespace {
    pub clusters: Vec<Cluster>,
    pub pod_groups: Vec<PodGroup>,
    pub index_claims: Vec<Claim>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Cluster {
    pub name: String,
    pub digest: String,
    pub image: String,
    /// `cpu/memory[/gpu]` of the head's first container (requests, else limits).
    pub head: String,
    pub workers: Vec<WorkerGroup>,
    /// `busy`, `idle`, `expired` (past its TTL), `marked` (about to go), `deleting`, or
    /// `missing`: active jobs select it but it is not there (being made, or refused: the
    /// jobs' `SharedClusterNotMade` events say why).
    pub state: String,
    pub active_jobs: Vec<String>,
    pub idle_seconds: Option<u64>,
    pub reclaimable_in_seconds: Option<u64>,
    /// Why warm-ahead keeps this member past its idle TTL (`rayshare.io/kept-warm`): an
    /// idle member with it is `warm`, not reclaimable while warm-ahead is on.
    pub kept_warm: Option<String>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct WorkerGroup {
    pub name: String,
    pub replicas: u64,
    pub hosts: u64,
    pub resources: String,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct PodGroup {
    pub name: String,
    pub pod: String,
    /// Whether it has an owner (taken up by the group provisioner: it goes with its pod
    /// or the pod's owner); a group made at admission has none until then.
    pub owned: bool,
    pub queue: String,
    pub priority_class: String,
    pub min_member: u64,
    pub phase: String,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Claim {
    pub cluster: String,
    pub group: String,
    pub replica: String,
    pub host: String,
    pub age_seconds: Option<u64>,
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

fn namespace_of(o: &Value) -> String {
    text(&o["metadata"]["namespace"])
}

fn seconds(d: Duration) -> u64 {
    d.as_secs()
}

fn age(o: &Value, now: Timestamp) -> Option<u64> {
    let created = crate::domain::time::parse_time(&o["metadata"]["creationTimestamp"])?;
    Some(now.duration_since(created).as_secs().max(0) as u64)
}

/// `cpu/memory[/gpu]` of a pod template's first container.
fn resources(template: &Value) -> String {
    let r = &template["spec"]["containers"][0]["resources"];
    let pick = |key: &str| {
        r["requests"][key]
            .as_str()
            .or_else(|| r["limits"][key].as_str())
            .map(str::to_string)
            .or_else(|| r["requests"][key].as_i64().map(|n| n.to_string()))
            .or_else(|| r["limits"][key].as_i64().map(|n| n.to_string()))
    };
    let mut parts = vec![
        pick("cpu").unwrap_or_else(|| "-".into()),
        pick("memory").unwrap_or_else(|| "-".into()),
    ];
    if let Some(gpu) = pick("nvidia.com/gpu") {
        parts.push(format!("{gpu} gpu"));
    }
    parts.join("/")
}

fn cluster(c: &Value, jobs: &[&Value], default_ttl: u64, now: Timestamp) -> Cluster {
    let spec = &c["spec"];
    let head = &spec["headGroupSpec"]["template"];
    let mut active: Vec<String> = Vec::new();
    let mut last_end = None;
    for job in jobs {
        if reclaim::is_terminal(job) {
            last_end = last_end.max(crate::domain::time::parse_time(&job["status"]["endTime"]));
        } else {
            active.push(text(&job["metadata"]["name"]));
        }
    }
    active.sort();
    let info = crate::domain::cluster::ClusterInfo::from_value(c);
    let since = reclaim::idle_since(&info, last_end).unwrap_or(now);
    let ttl = reclaim::ttl(info.idle_ttl.as_deref(), default_ttl);
    let decision = reclaim::decide(active.len(), since, ttl, now);
    let kept_warm = labels::get(c, Meta::Annotations, labels::KEPT_WARM).map(String::from);
    let kept = kept_warm.is_some() && !matches!(decision, Decision::Busy { .. });
    let state = if info.deleting {
        "deleting"
    } else if info.marked.is_some() {
        "marked"
    } else if kept {
        "warm"
    } else {
        decision.state()
    };
    let (idle, remaining) = match decision {
        Decision::Busy { .. } => (None, None),
        Decision::Idle { .. } | Decision::Reclaim { .. } if kept => {
            (Some(now.duration_since(since).unsigned_abs()), None)
        }
        Decision::Idle { remaining } => (Some(ttl - remaining), Some(remaining)),
        Decision::Reclaim { idle_for } => (Some(idle_for), Some(Duration::ZERO)),
    };
    let workers = spec["workerGroupSpecs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| WorkerGroup {
            name: text(&g["groupName"]),
            replicas: g["replicas"].as_u64().unwrap_or(0),
            hosts: g["numOfHosts"].as_u64().unwrap_or(1),
            resources: resources(&g["template"]),
        })
        .collect();
    Cluster {
        name: text(&c["metadata"]["name"]),
        digest: info
            .digest
            .map(|d| d.chars().take(pool::DIGEST_CHARS).collect())
            .unwrap_or_default(),
        image: text(&head["spec"]["containers"][0]["image"]),
        head: resources(head),
        workers,
        state: state.into(),
        active_jobs: active,
        idle_seconds: idle.map(seconds),
        reclaimable_in_seconds: remaining.map(seconds),
        kept_warm,
    }
}

/// Summarizes what was listed, per namespace (clusters, groups and claims by name).
pub fn summarize(listed: &Listed, default_ttl: u64, now: Timestamp) -> Status {
    let mut status = Status::default();
    let mut by_cluster: BTreeMap<(String, String), Vec<&Value>> = BTreeMap::new();
    for job in &listed.jobs {
        if let Some(c) = labels::selected_cluster(job) {
            by_cluster
                .entry((namespace_of(job), c.to_string()))
                .or_default()
                .push(job);
        }
    }
    for c in &listed.clusters {
        let ns = namespace_of(c);
        let key = (ns.clone(), text(&c["metadata"]["name"]));
        let jobs = by_cluster.remove(&key).unwrap_or_default();
        let row = cluster(c, &jobs, default_ttl, now);
        status.namespaces.entry(ns).or_default().clusters.push(row);
    }
    // Clusters active jobs select that are not there: being made, or refused.
    for ((ns, name), jobs) in by_cluster {
        let mut active: Vec<String> = jobs
            .iter()
            .filter(|j| !reclaim::is_terminal(j))
            .map(|j| text(&j["metadata"]["name"]))
            .collect();
        if active.is_empty() {
            continue;
        }
        active.sort();
        let row = Cluster {
            name,
            digest: String::new(),
            image: String::new(),
            head: String::new(),
            workers: Vec::new(),
            state: "missing".into(),
            active_jobs: active,
            idle_seconds: None,
            reclaimable_in_seconds: None,
            kept_warm: None,
        };
        status.namespaces.entry(ns).or_default().clusters.push(row);
    }
    for g in &listed.pod_groups {
        let row = PodGroup {
            name: text(&g["metadata"]["name"]),
            pod: labels::get(g, Meta::Labels, labels::FOR_POD)
                .unwrap_or("")
                .into(),
            owned: g["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|o| !o.is_empty()),
            queue: text(&g["spec"]["queue"]),
            priority_class: text(&g["spec"]["priorityClassName"]),
            min_member: g["spec"]["minMember"].as_u64().unwrap_or(0),
            phase: text(&g["status"]["phase"]),
        };
        let ns = status.namespaces.entry(namespace_of(g)).or_default();
        ns.pod_groups.push(row);
    }
    for l in &listed.claims {
        let label = |k| labels::get(l, Meta::Labels, k).unwrap_or("").to_string();
        let row = Claim {
            cluster: label(labels::RAY_CLUSTER),
            group: label(labels::RAY_GROUP),
            replica: label(labels::REPLICA_INDEX),
            host: label(labels::HOST_INDEX),
            age_seconds: age(l, now),
        };
        let ns = status.namespaces.entry(namespace_of(l)).or_default();
        ns.index_claims.push(row);
    }
    for ns in status.namespaces.values_mut() {
        ns.clusters.sort_by(|a, b| a.name.cmp(&b.name));
        ns.pod_groups.sort_by(|a, b| a.name.cmp(&b.name));
        ns.index_claims.sort_by(|a, b| {
            let key = |c: &Claim| {
                let n = |s: &str| s.parse::<u64>().unwrap_or(u64::MAX);
                (
                    c.cluster.clone(),
                    c.group.clone(),
                    n(&c.replica),
                    n(&c.host),
                )
            };
            key(a).cmp(&key(b))
        });
    }
    status
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

fn duration(seconds: Option<u64>) -> String {
    seconds.map_or("-".into(), |s| human(Duration::from_secs(s)))
}

/// Rows under a header, columns aligned (as kubectl aligns them), indented two spaces.
fn section(out: &mut String, header: &str, rows: impl Iterator<Item = String>) {
    let mut w = tabwriter::TabWriter::new(Vec::new()).padding(3);
    let _ = writeln!(w, "  {header}");
    for row in rows {
        let _ = writeln!(w, "  {}", printable(&row));
    }
    let _ = w.flush();
    out.push_str(&String::from_utf8_lossy(
        &w.into_inner().unwrap_or_default(),
    ));
}

/// A row with every control character but its column tabs escaped: names come from
/// tenants' objects, and a terminal must not take them for commands.
fn printable(row: &str) -> String {
    let mut out = String::with_capacity(row.len());
    for c in row.chars() {
        if c.is_control() && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

fn worker_text(w: &WorkerGroup) -> String {
    let hosts = if w.hosts > 1 {
        format!("x{}h", w.hosts)
    } else {
        String::new()
    };
    format!("{}={}{hosts} {}", w.name, w.replicas, w.resources)
}

/// The status as kubectl-style tables, one block per namespace.
pub fn render_table(status: &Status) -> String {
    let mut out = String::new();
    if status.namespaces.is_empty() {
        out.push_str("No shared clusters, PodGroups or index claims found.\n");
    }
    for (name, ns) in &status.namespaces {
        out.push_str(&format!("NAMESPACE {name}\n"));
        if !ns.clusters.is_empty() {
            let rows = ns.clusters.iter().map(|c| {
                let workers: Vec<String> = c.workers.iter().map(worker_text).collect();
                format!(
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    c.name,
                    or_dash(&c.digest),
                    c.state,
                    c.active_jobs.len(),
                    duration(c.idle_seconds),
                    duration(c.reclaimable_in_seconds),
                    or_dash(&c.image),
                    or_dash(&c.head),
                    or_dash(&workers.join(", ")),
                    or_dash(c.kept_warm.as_deref().unwrap_or("")),
                )
            });
            let header = "SHARED CLUSTER\tDIGEST\tSTATE\tJOBS\tIDLE\tRECLAIMABLE IN\tIMAGE\tHEAD\tWORKERS\tWHY KEPT";
            section(&mut out, header, rows);
        }
        if !ns.pod_groups.is_empty() {
            let rows = ns.pod_groups.iter().map(|g| {
                format!(
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    g.name,
                    or_dash(&g.pod),
                    or_dash(&g.queue),
                    or_dash(&g.priority_class),
                    g.min_member,
                    or_dash(&g.phase),
                )
            });
            let header = "POD GROUP\tPOD\tQUEUE\tPRIORITY CLASS\tMIN\tPHASE";
            section(&mut out, header, rows);
        }
        if !ns.index_claims.is_empty() {
            let rows = ns.index_claims.iter().map(|c| {
                format!(
                    "{}\t{}\t{}\t{}\t{}",
                    c.cluster,
                    c.group,
                    c.replica,
                    c.host,
                    duration(c.age_seconds),
                )
            });
            section(&mut out, "INDEX CLAIMS ON\tGROUP\tREPLICA\tHOST\tAGE", rows);
        }
    }
    out
}

mod selectors;
pub use selectors::{Selectors, selectors};

#[cfg(test)]
mod tests;
