//! The pools the policy plans for, built from what the caches hold (pure): per namespace,
//! every config the tracker remembers or that has members, its members' states (from its
//! clusters and their active jobs), whether it is opted in, and what its arrivals say now.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::Value;

use super::{Pool, Tracker, inputs, opted_in};
use crate::config::Config;
use crate::domain::labels::{self, Meta};
use crate::domain::reclaim::is_terminal;
use crate::domain::shared_cluster::pool_place;

/// Each namespace's pools, and for each config the newest stored job (what a member made
/// ahead is built from).
pub struct Pools<'a> {
    pub by_namespace: BTreeMap<String, Vec<Pool>>,
    pub newest_job: HashMap<(String, String), &'a Value>,
}

/// The pools of `clusters` (this installation's shared clusters) and `jobs` (the stored
/// RayJobs it rewrote) at `now_ms`.
pub fn pools<'a>(
    tracker: &Tracker,
    jobs: &'a [Value],
    clusters: &[Value],
    cfg: &Config,
    now_ms: i64,
) -> Pools<'a> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let mut active: HashMap<(String, String), u32> = HashMap::new();
    let mut newest_job: HashMap<(String, String), &Value> = HashMap::new();
    let mut opted: HashMap<(String, String), bool> = HashMap::new();
    for job in jobs {
        let ns = text(&job["metadata"]["namespace"]);
        let Some(cluster) = labels::selected_cluster(job) else {
            continue;
        };
        if !is_terminal(job) {
            *active.entry((ns.clone(), cluster.to_string())).or_default() += 1;
        }
        let Some((base, _)) = pool_place(cluster) else {
            continue;
        };
        let config = (ns.clone(), base.to_string());
        let annotation = labels::get(job, Meta::Annotations, &cfg.warm_ahead.opt_in_annotation);
        *opted.entry(config.clone()).or_default() |= opted_in(&cfg.warm_ahead, &ns, annotation);
        let created = |j: &Value| text(&j["metadata"]["creationTimestamp"]);
        let newer = newest_job
            .get(&config)
            .is_none_or(|n| created(job) >= created(n));
        if newer {
            newest_job.insert(config, job);
        }
    }
    let mut members: HashMap<(String, String), Vec<super::Member>> = HashMap::new();
    for cluster in clusters {
        let ns = text(&cluster["metadata"]["namespace"]);
        let name = text(&cluster["metadata"]["name"]);
        let jobs = active
            .get(&(ns.clone(), name.clone()))
            .copied()
            .unwrap_or(0);
        let (Some(member), Some((base, _))) = (inputs::member(cluster, jobs), pool_place(&name))
        else {
            continue;
        };
        members
            .entry((ns, base.to_string()))
            .or_default()
            .push(member);
    }
    let horizon = Duration::from_secs(cfg.reclaim.idle_ttl_seconds);
    let mut configs: Vec<(String, String)> = tracker.configs().map(|(k, _)| k.clone()).collect();
    configs.extend(members.keys().cloned());
    configs.sort();
    configs.dedup();
    let mut by_namespace: BTreeMap<String, Vec<Pool>> = BTreeMap::new();
    for key in configs {
        let mut pool_members = members.remove(&key).unwrap_or_default();
        pool_members.sort_by_key(|m| m.index);
        let outlook = tracker
            .rate(&key)
            .map(|r| r.outlook(now_ms, horizon, tracker.memory()));
        let pool = Pool {
            digest: key.1.clone(),
            opted_in: opted.get(&key).copied().unwrap_or(false)
                || opted_in(&cfg.warm_ahead, &key.0, None),
            outlook,
            members: pool_members,
        };
        by_namespace.entry(key.0).or_default().push(pool);
    }
    Pools {
        by_namespace,
        newest_job,
    }
}
