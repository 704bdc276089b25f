//! Shared clusters at admission: pick the pool member from what the caches know.
//!
//! No API writes here: the rewritten job carries its cluster's spec, and the provisioner
//! (`reconcile::make_clusters`) creates a missing cluster once the API server has stored the
//! job. An admission review alone, which anyone who reaches the port can forge, makes
//! nothing.

use super::work::Work;
use crate::cause::Cause;
use crate::domain::cluster::ClusterInfo;
use crate::domain::events::{self, Event, Reason, Regarding};
use crate::domain::labels;
use crate::domain::labels::Meta;
use crate::domain::shared_cluster::{self, MAX_POOL, PlanError, job_life, member_name};
use crate::world::World;

/// Missing members in a row after which no further member is looked for.
const LOOK_PAST_MISSING: u32 = 4;

/// What admission makes of one pool member.
enum Member {
    /// Use it (`true` when it exists already).
    Use(bool),
    /// Full, or on its way out: try the next one.
    Next,
    /// A cluster of that name that rayshare did not make for this config.
    Conflict,
}

impl<W: World> Work<'_, W> {
    pub(super) async fn shared_cluster(&mut self) {
        let cfg = &self.cfg.shared_clusters;
        let plan = shared_cluster::plan(
            self.object(),
            &self.namespace,
            cfg,
            &self.cfg.opt_out_annotation,
            shared_cluster::Admitter {
                instance: &self.cfg.instance,
                request_uid: &self.req.uid,
            },
        );
        let rewrite = match plan {
            Err(why) => {
                let (cause, what) = match &why {
                    PlanError::Odd(_) => (Cause::OddObject, "its shape was not understood"),
                    PlanError::Bound(_) => (Cause::InputBound, "past rayshare's bounds"),
                };
                let msg = format!("rayshare: RayJob left unchanged, {what}: {why}");
                self.job_event(true, Reason::SharedClusterFailed, &msg, None);
                return self.fail(cause, msg, cfg.deny_on_error);
            }
            Ok(shared_cluster::Plan::Skip(warning)) => {
                if let Some(w) = &warning {
                    self.job_event(false, Reason::SharedClusterSkipped, w, None);
                }
                self.warnings.extend(warning);
                return;
            }
            Ok(shared_cluster::Plan::Rewrite(r)) => r,
        };
        // The lowest member that exists and has room; else the lowest missing one (made
        // once the job is stored). A warm member is worth more than a low index: with
        // member 0 reclaimed and member 1 idle, the job goes to 1, not to a cold start.
        let mut missing = None;
        let mut misses = 0;
        for index in 0..MAX_POOL {
            let name = member_name(&rewrite.name, index);
            // Past a missing member only the cache is asked: no API read per index.
            let member = match missing {
                None => self.judge(&name, &rewrite.digest).await,
                Some(_) => self.judge_cached(&name, &rewrite.digest),
            };
            match member {
                Member::Next => misses = 0,
                Member::Conflict if missing.is_some() => misses = 0,
                Member::Conflict => {
                    let msg = format!(
                        "rayshare: RayJob left unchanged: a RayCluster named {name} exists that rayshare did not create for this config"
                    );
                    self.job_event(true, Reason::SharedClusterFailed, &msg, None);
                    return self.fail(Cause::NameConflict, msg, false);
                }
                Member::Use(true) => return self.use_member(*rewrite, index, true),
                Member::Use(false) => {
                    missing.get_or_insert(index);
                    misses += 1;
                    if misses >= LOOK_PAST_MISSING {
                        break;
                    }
                }
            }
        }
        if let Some(index) = missing {
            return self.use_member(*rewrite, index, false);
        }
        let msg = format!(
            "rayshare: RayJob left unchanged: all {MAX_POOL} shared clusters of its config are full"
        );
        self.job_event(true, Reason::SharedClusterFailed, &msg, None);
        self.fail(Cause::PoolExhausted, msg, false)
    }

    /// Sends the job to pool member `index` (`exists`: it is there already).
    fn use_member(&mut self, rewrite: shared_cluster::Rewrite, index: u32, exists: bool) {
        let member = rewrite.into_member(index);
        if !self.req.dry_run {
            let others = self.world.active_jobs(&self.namespace, &member.name);
            let note = events::moved_to_shared_cluster(&member.name, exists, others);
            let token = job_life::job_token(&member.job).map(str::to_string);
            self.job_event(false, Reason::SharedCluster, &note, token);
            let job = self.req.name.as_str();
            self.world.note_admitted(&self.namespace, &member.name, job);
            if exists {
                self.count(|m| &m.reused, "RayCluster");
            } else {
                self.count(|m| &m.planned, "RayCluster");
            }
        }
        let mut job = member.job;
        labels::set(&mut job, Meta::Labels, labels::INSTANCE, &self.cfg.instance);
        // The TTL travels with the job, so whichever replica makes the cluster gives it
        // the TTL this configuration meant.
        let reclaim = &self.cfg.reclaim;
        if labels::get(&job, Meta::Annotations, &reclaim.ttl_annotation).is_none() {
            let ttl = reclaim.idle_ttl_seconds.to_string();
            labels::set(&mut job, Meta::Annotations, &reclaim.ttl_annotation, &ttl);
        }
        self.changed = Some(job);
        self.warnings.extend(member.warnings);
        self.ensured.push(member.cluster);
    }

    /// An event on the RayJob being admitted, recorded once it is stored (found by name,
    /// or by its admission-uid label when it has only a `generateName`).
    fn job_event(&self, warning: bool, reason: Reason, note: &str, token: Option<String>) {
        if self.req.dry_run {
            return;
        }
        self.world.record(Event {
            regarding: Regarding::Admitted {
                api_version: "ray.io/v1",
                kind: "RayJob",
                namespace: self.namespace.clone(),
                name: events::admitted_name(self.original),
                selector: token.map(|t| format!("{}={t}", job_life::TOKEN_LABEL)),
            },
            warning,
            reason,
            action: "Admit",
            note: events::note_of(note),
        });
    }

    /// What pool member `name` of the config `digest` is to this job.
    async fn judge(&mut self, name: &str, digest: &str) -> Member {
        // Counted with the jobs admitted to it but not yet seen, so a burst that arrives
        // before the member exists spreads over the pool as a slow trickle would.
        let full = self.full(name);
        // Not made yet (as far as this job can tell): it goes here unless full.
        let absent = if full {
            Member::Next
        } else {
            Member::Use(false)
        };
        let info = match self.world.ray_cluster(&self.namespace, name) {
            Some(info) => info,
            // Not cached (new, or the watch is behind): ask, so a cluster someone else
            // made under this name a moment ago is never selected. When the read fails
            // the provisioner still refuses to touch a cluster it did not make.
            None => match self
                .read_cluster(name, self.cfg.shared_clusters.create_timeout_ms)
                .await
            {
                Ok(Some(info)) => info,
                Ok(None) => return absent,
                Err(e) => {
                    self.warnings.push(format!(
                        "rayshare: could not check shared RayCluster {name} ({e}); it is made once this job is stored, if missing"
                    ));
                    return absent;
                }
            },
        };
        Self::judge_known(&info, full, digest)
    }

    /// [`Self::judge`] from the cache alone: a member it does not hold counts as missing.
    fn judge_cached(&self, name: &str, digest: &str) -> Member {
        let full = self.full(name);
        match self.world.ray_cluster(&self.namespace, name) {
            Some(info) => Self::judge_known(&info, full, digest),
            None if full => Member::Next,
            None => Member::Use(false),
        }
    }

    /// At `maxJobsPerCluster`, counting the jobs admitted to it but not yet seen.
    fn full(&self, name: &str) -> bool {
        let max = self.cfg.shared_clusters.max_jobs_per_cluster as usize;
        max > 0 && self.world.active_jobs(&self.namespace, name) >= max
    }

    fn judge_known(info: &ClusterInfo, full: bool, digest: &str) -> Member {
        if !info.serves(digest) {
            return Member::Conflict;
        }
        // A cluster marked for reclaim may be deleted before this job is stored (the
        // reclaimer would not see it in time), and one being deleted would make the job
        // wait for its recreation: a sibling is safe, and ready sooner.
        if full || info.deleting || info.marked.is_some() {
            return Member::Next;
        }
        Member::Use(true)
    }
}
