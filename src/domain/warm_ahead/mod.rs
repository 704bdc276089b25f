//! Warm ahead of demand (pure; `reconcile::warm_ahead` carries it out): from the arrivals a config
//! has seen ([`rate`]), how many of its pool members to keep warm past the idle TTL, which
//! to make before any job asks, and which to let go, with a reason for each one kept.
//!
//! The rule: a config is kept warm only while its next task is expected within the idle
//! TTL, by its rate ([`rate::Outlook::by_rate`]) or by the time of day a period ago
//! ([`rate::Outlook::by_time_of_day`]), or while a steady config is quiet for less than
//! its longest recent pause ([`pauses`]); a cluster kept longer than that costs more than
//! the cold start it would save. Then it wants `minWarm` members that can take a job, or
//! as many as its last burst needs at `maxJobsPerCluster` (a busy member with room counts,
//! a full one does not), never more than `maxPerConfig`. A namespace's configs share
//! `maxPerNamespace` warm members (kept idle or made ahead), the config expected soonest
//! first. Off unless enabled, and only for configs opted in.
//!
//! Members are walked in pool order (`<name>`, `<name>-1`, ...) because admission sends a
//! job to the first member that is not full or going, *an absent one included*: a warm
//! `<name>-1` serves nobody while `<name>` is absent, so an absent member before the ones
//! kept is made ahead rather than skipped.

use std::cmp::Ordering;
use std::time::Duration;

use crate::domain::events::human;
use crate::domain::shared_cluster::MAX_POOL;

pub mod ahead;
pub mod inputs;
pub mod pauses;
pub mod pools;
pub mod rate;
pub mod tracker;

pub use rate::{Memory, Outlook, Pause, Rate};
pub use tracker::{ConfigKey, Tracker};

/// The limits the decision works within.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub enabled: bool,
    /// A member idle this long is reclaimed unless kept.
    pub idle_ttl: Duration,
    /// Members that can take a job, kept while a task is expected within the TTL.
    pub min_warm: u32,
    pub max_per_config: u32,
    /// Warm members (idle kept, or made ahead) of all configs of one namespace.
    pub max_per_namespace: u32,
    /// `sharedClusters.maxJobsPerCluster` (0: no limit, one member takes any burst).
    pub jobs_per_member: u32,
}

impl Limits {
    /// From the config: `warmAhead`, the idle TTL and `maxJobsPerCluster`.
    pub fn from_config(cfg: &crate::config::Config) -> Self {
        let w = &cfg.warm_ahead;
        Self {
            enabled: w.enabled,
            idle_ttl: Duration::from_secs(cfg.reclaim.idle_ttl_seconds),
            min_warm: w.min_warm,
            max_per_config: w.max_per_config,
            max_per_namespace: w.max_per_namespace,
            jobs_per_member: cfg.shared_clusters.max_jobs_per_cluster,
        }
    }
}

impl Memory {
    /// From the config: `warmAhead`, and the idle TTL as the gap that makes a cold start.
    pub fn from_config(cfg: &crate::config::Config) -> Self {
        let w = &cfg.warm_ahead;
        Self {
            half_life: Duration::from_secs(w.half_life_seconds),
            burst_window: Duration::from_secs(w.burst_window_seconds),
            period: Duration::from_secs(w.period_seconds),
            cold_gap: Duration::from_secs(cfg.reclaim.idle_ttl_seconds),
        }
    }
}

/// Whether a config is opted in: its namespace is listed, or a job of it carries the
/// opt-in annotation with "true" (`annotation`: that value, if any).
pub fn opted_in(w: &crate::config::WarmAhead, namespace: &str, annotation: Option<&str>) -> bool {
    w.enabled && (w.namespaces.iter().any(|n| n == namespace) || annotation == Some("true"))
}

/// A pool member as the caches see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Running this many active jobs.
    Busy { jobs: u32 },
    /// Ready, no active job.
    Idle,
    /// Made, not ready yet, no active job (made ahead, or its job went).
    Warming,
    /// Marked for reclaim or being deleted: admission passes it by.
    Going,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its place in the pool: 0 for `<name>`, n for `<name>-n`.
    pub index: u32,
    pub name: String,
    pub state: State,
}

/// One config's pool in a namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    /// The config (the second half of its [`ConfigKey`]: the pool's base name).
    pub digest: String,
    /// Opted in (its namespace, or its jobs' annotation).
    pub opted_in: bool,
    /// What its arrivals say now (`None`: none remembered).
    pub outlook: Option<Outlook>,
    pub members: Vec<Member>,
}

/// What says a task is coming.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cause {
    /// The weighted rate: the next task is expected within the idle TTL.
    Rate { per_hour: f64 },
    /// A task came at this time of day a period ago.
    TimeOfDay,
    /// A steady config, quiet for less than its longest recent pause.
    Pause(Pause),
}

/// Why a config is kept warm (the same for each of its members kept).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reason {
    pub cause: Cause,
    /// When the next task is expected.
    pub next_in: Duration,
    /// Tasks of the largest recent burst (decayed, rounded up), and the members that takes.
    pub burst: u32,
    pub members: u32,
    pub idle_ttl: Duration,
}

impl Reason {
    /// A label value: `rate`, `time-of-day` or `pause`.
    pub fn label(&self) -> &'static str {
        match self.cause {
            Cause::Rate { .. } => "rate",
            Cause::TimeOfDay => "time-of-day",
            Cause::Pause(_) => "pause",
        }
    }

    /// For people (`rayshare status`, an annotation).
    pub fn describe(&self) -> String {
        let why = match self.cause {
            Cause::Rate { per_hour } => format!("about {per_hour:.1} tasks an hour"),
            Cause::TimeOfDay => "tasks came at this time of day a period ago".into(),
            Cause::Pause(p) => format!(
                "quiet for {}, it came back after pauses up to {} before",
                human(p.quiet),
                human(p.longest)
            ),
        };
        let next = match self.cause {
            Cause::Pause(_) => format!("kept at most {} more", human(self.next_in)),
            _ => format!("next expected in {}", human(self.next_in)),
        };
        let mut text = format!(
            "kept warm: {why}, {next} (idle TTL {})",
            human(self.idle_ttl)
        );
        if self.burst > 1 {
            let s = if self.members == 1 { "" } else { "s" };
            text.push_str(&format!(
                "; its last burst of {} tasks takes {} member{s}",
                self.burst, self.members
            ));
        }
        text
    }
}

/// What to do with one config's pool.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolPlan {
    pub digest: String,
    /// Idle or warming members kept past the TTL, each with why.
    pub keep: Vec<(String, Reason)>,
    /// Pool places to make a member at now, before any job asks.
    pub create: Vec<u32>,
    /// Idle or warming members not kept: the ordinary idle TTL applies.
    pub let_go: Vec<String>,
}

impl PoolPlan {
    /// Warm members this plan holds (kept and made ahead).
    pub fn warm(&self) -> usize {
        self.keep.len() + self.create.len()
    }
}

/// How many members a config wants to be able to take a job now, and why (`None`: no
/// task is expected within the TTL, or warm-ahead is off).
pub fn want(outlook: &Outlook, limits: &Limits) -> Option<(u32, Reason)> {
    if !limits.enabled {
        return None;
    }
    let by_rate = outlook.by_rate.filter(|d| *d <= limits.idle_ttl);
    let (cause, next_in) = match (by_rate, outlook.by_time_of_day) {
        (Some(r), Some(t)) if t < r => (Cause::TimeOfDay, t),
        (Some(r), _) => (
            Cause::Rate {
                per_hour: outlook.per_hour,
            },
            r,
        ),
        (None, Some(t)) => (Cause::TimeOfDay, t),
        // Due by nothing else: a pause it has come back from before has this long to go.
        (None, None) => {
            let p = outlook.pause?;
            (Cause::Pause(p), p.longest.saturating_sub(p.quiet))
        }
    };
    // A burst a period ago at this time of day is expected again with it.
    let then = outlook.by_time_of_day.map_or(0, |_| outlook.burst_then);
    let burst = (outlook.burst.ceil().clamp(1.0, f64::from(u32::MAX)) as u32).max(then);
    let members = match limits.jobs_per_member {
        0 => 1,
        per => burst.div_ceil(per),
    };
    let n = limits.min_warm.max(members).min(limits.max_per_config);
    let reason = Reason {
        cause,
        next_in,
        burst,
        members,
        idle_ttl: limits.idle_ttl,
    };
    (n > 0).then_some((n, reason))
}

/// The plans for every config of one namespace: each config's wants, the soonest
/// expected first, within the namespace's cap.
pub fn plan(pools: &[Pool], limits: &Limits) -> Vec<PoolPlan> {
    let wants: Vec<Option<(u32, Reason)>> = pools
        .iter()
        .map(|p| {
            let outlook = p.outlook.as_ref().filter(|_| p.opted_in)?;
            want(outlook, limits)
        })
        .collect();
    let mut order: Vec<usize> = (0..pools.len()).collect();
    let soonest = |i: &usize| wants[*i].map(|(_, r)| r.next_in);
    order.sort_by(|a, b| {
        match (soonest(a), soonest(b)) {
            (Some(x), Some(y)) => x.cmp(&y),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        }
        .then_with(|| pools[*a].digest.cmp(&pools[*b].digest))
    });
    let mut budget = limits.max_per_namespace;
    let mut plans: Vec<(usize, PoolPlan)> = order
        .into_iter()
        .map(|i| {
            let plan = walk(&pools[i], wants[i], limits.jobs_per_member, budget);
            budget = budget.saturating_sub(plan.warm() as u32);
            (i, plan)
        })
        .collect();
    plans.sort_by_key(|(i, _)| *i);
    plans.into_iter().map(|(_, p)| p).collect()
}

/// One pool walked in admission's order until `want` members can take a job, spending at
/// most `budget` warm members.
fn walk(pool: &Pool, want: Option<(u32, Reason)>, per_member: u32, budget: u32) -> PoolPlan {
    let mut plan = PoolPlan {
        digest: pool.digest.clone(),
        ..PoolPlan::default()
    };
    let at = |i: u32| pool.members.iter().find(|m| m.index == i);
    let (target, reason) = want.map_or((0, None), |(n, r)| (n, Some(r)));
    // Each place is a member (at most all of them) or absent (made ahead, at most `target`).
    let places = pool.members.len() as u64 + u64::from(target);
    let mut ready = 0;
    let mut i = 0u32;
    while let Some(reason) = reason.filter(|_| ready < target) {
        let spend = (plan.warm() as u32) < budget;
        match at(i).map(|m| (m, m.state)) {
            // Past the pool's last place admission never goes either.
            None if i >= MAX_POOL => break,
            None if spend => {
                plan.create.push(i);
                ready += 1;
            }
            Some((m, State::Idle | State::Warming)) if spend => {
                plan.keep.push((m.name.clone(), reason));
                ready += 1;
            }
            Some((_, State::Busy { jobs })) if per_member == 0 || jobs < per_member => ready += 1,
            Some((_, State::Busy { .. } | State::Going)) => {}
            // Out of budget: a member further on serves only after this one.
            _ => break,
        }
        i += 1;
        if u64::from(i) >= places {
            break;
        }
    }
    plan.let_go = pool
        .members
        .iter()
        .filter(|m| matches!(m.state, State::Idle | State::Warming))
        .filter(|m| !plan.keep.iter().any(|(k, _)| *k == m.name))
        .map(|m| m.name.clone())
        .collect();
    plan
}

#[cfg(test)]
mod day;
#[cfg(test)]
mod props;
#[cfg(test)]
mod replay;
#[cfg(test)]
mod tests;
