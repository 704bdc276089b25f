//! Shared clusters at admission: pick the pool member, make sure it exists, stamp it.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::work::Work;
use crate::domain::shared_cluster::{self, Rewrite};
use crate::domain::{labels, reclaim};
use crate::world::{ClusterInfo, Created, Touched, World, WorldError};

/// Most clusters one config may spread over (`maxJobsPerCluster`).
const MAX_POOL: u32 = 100;

/// Why a shared cluster could not be used.
struct Failure {
    cause: &'static str,
    message: String,
    deny: bool,
}

impl Failure {
    fn conflict(name: &str) -> Self {
        Self {
            cause: "name_conflict",
            message: format!(
                "rayshare: RayJob left unchanged: a RayCluster named {name} exists that rayshare did not create for this config"
            ),
            deny: false,
        }
    }

    fn deleting(name: &str) -> Self {
        Self {
            cause: "cluster_deleting",
            message: format!(
                "rayshare: RayJob left unchanged (it gets its own cluster): shared RayCluster {name} is being reclaimed"
            ),
            deny: false,
        }
    }

    fn api(e: &WorldError, name: &str, deny: bool) -> Self {
        Self {
            cause: e.cause(),
            message: format!(
                "rayshare: RayJob left unchanged (it gets its own cluster): cannot ensure shared RayCluster {name}: {e}"
            ),
            deny,
        }
    }
}

impl<W: World> Work<'_, W> {
    pub(super) async fn shared_cluster(&mut self) {
        let cfg = &self.cfg.shared_clusters;
        let plan = shared_cluster::plan(
            self.object(),
            &self.namespace,
            cfg,
            &self.cfg.opt_out_annotation,
        );
        let rewrite = match plan {
            Err(why) => {
                let msg =
                    format!("rayshare: RayJob left unchanged, its shape was not understood: {why}");
                return self.fail("odd_object", msg, cfg.deny_on_error);
            }
            Ok(shared_cluster::Plan::Skip(warning)) => {
                self.warnings.extend(warning);
                return;
            }
            Ok(shared_cluster::Plan::Rewrite(r)) => r,
        };
        let now = Timestamp::now();
        // The TTL a job asks for (capped), else the default; written on the cluster so
        // every replica judges it by the same TTL.
        let reclaim_cfg = &self.cfg.reclaim;
        let job_ttl = labels::get(self.object(), "annotations", &reclaim_cfg.ttl_annotation)
            .and_then(|v| v.parse::<u64>().ok())
            .map(|t| t.min(reclaim_cfg.max_idle_ttl_seconds));
        let initial_ttl = job_ttl.unwrap_or(reclaim_cfg.idle_ttl_seconds).to_string();
        for index in 0..MAX_POOL {
            let mut member = rewrite.pooled(index);
            let cluster = &mut member.cluster;
            labels::set(
                cluster,
                "annotations",
                reclaim::LAST_ADMITTED,
                &now.to_string(),
            );
            labels::set(cluster, "annotations", labels::IDLE_TTL, &initial_ttl);
            match self.ensure_member(&member, now, job_ttl).await {
                Ok(false) => continue,
                Ok(true) => {
                    if !self.req.dry_run {
                        let job = self.req.name.as_str();
                        self.world.note_admitted(&self.namespace, &member.name, job);
                    }
                    self.changed = Some(member.job);
                    self.warnings.extend(member.warnings);
                    self.ensured.push(member.cluster);
                    return;
                }
                Err(Failure {
                    cause,
                    message,
                    deny,
                }) => return self.fail(cause, message, deny),
            }
        }
        let msg = format!(
            "rayshare: RayJob left unchanged: all {MAX_POOL} shared clusters of its config are full"
        );
        self.fail("pool_exhausted", msg, false)
    }

    /// Makes one pool member usable for this job: `Ok(false)` when it is full.
    async fn ensure_member(
        &self,
        member: &Rewrite,
        now: Timestamp,
        job_ttl: Option<u64>,
    ) -> Result<bool, Failure> {
        let cfg = &self.cfg.shared_clusters;
        let info = match self.world.ray_cluster(&self.namespace, &member.name) {
            Some(info) => info,
            None => match self.create_member(member).await? {
                None => return Ok(true),
                // The cache had not seen it yet: treat it like a cached one (stamp it).
                Some(found) => found,
            },
        };
        if !info.serves(&member.digest) {
            return Err(Failure::conflict(&member.name));
        }
        let max = cfg.max_jobs_per_cluster as usize;
        if max > 0 && self.world.active_jobs(&self.namespace, &member.name) >= max {
            return Ok(false);
        }
        if info.deleting {
            return Err(Failure::deleting(&member.name));
        }
        // Refresh the last-admitted stamp (see `reclaim`): this is what keeps the
        // reclaimer from deleting a cluster a job was just admitted onto.
        let ttl = reclaim::ttl(info.idle_ttl.as_deref(), self.cfg.reclaim.idle_ttl_seconds);
        let wants_longer = job_ttl.is_some_and(|t| Duration::from_secs(t) > ttl);
        let reference = info.last_admitted.max(info.created);
        if !self.req.dry_run && (wants_longer || reclaim::stamp_due(reference, ttl, now)) {
            let mut stamp = json!({ reclaim::LAST_ADMITTED: now.to_string() });
            if let Some(t) = job_ttl.filter(|_| wants_longer) {
                stamp[labels::IDLE_TTL] = json!(t.to_string());
            }
            let patch = json!({ "metadata": { "annotations": stamp } });
            let timeout = self.budget(cfg.create_timeout_ms);
            match self.world.touch(&member.cluster, &patch, timeout).await {
                Ok(Touched::Alive) => {}
                // Reclaimed meanwhile: make it again (a racing deletion only ever wins
                // against an unstamped cluster, so what we create now is fresh).
                Ok(Touched::Gone) => {
                    return match self.create_member(member).await? {
                        None => Ok(true),
                        Some(found) if found.serves(&member.digest) && !found.deleting => Ok(true),
                        Some(_) => Err(Failure::deleting(&member.name)),
                    };
                }
                Ok(Touched::Deleting) => return Err(Failure::deleting(&member.name)),
                Err(e) => return Err(Failure::api(&e, &member.name, cfg.deny_on_error)),
            }
        }
        self.count(|m| &m.reused, "RayCluster");
        Ok(true)
    }

    /// Creates a pool member: `None` when this request created it, else what exists.
    async fn create_member(&self, member: &Rewrite) -> Result<Option<ClusterInfo>, Failure> {
        let cfg = &self.cfg.shared_clusters;
        match self.create(&member.cluster, cfg.create_timeout_ms).await {
            Ok(Created::Created) => {
                if !self.req.dry_run {
                    self.count(|m| &m.created, "RayCluster");
                }
                Ok(None)
            }
            Ok(Created::Exists(found)) => Ok(Some(ClusterInfo::from_value(&found))),
            Err(e) => Err(Failure::api(&e, &member.name, cfg.deny_on_error)),
        }
    }
}
