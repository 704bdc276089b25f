//! Ray's job table on a long-lived shared cluster only grows, and every pass of the stopper
//! lists all of it (bounded in time and size). After its stops, a pass deletes the records
//! of finished Ray jobs whose RayJob is gone (`DELETE /api/jobs/<id>`), a bounded number
//! per pass, oldest first. See [`job_life::deletable`] for which.

use std::collections::{HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::Look;
use crate::cause::Cause;
use crate::domain::shared_cluster::job_life::{self, Submission};
use crate::world::background::{Kind, Scope};
use crate::world::{Background, WorldError};

impl<W: Background> Look<'_, W> {
    /// Deletes the records of `submissions` (the cluster's, as just listed) that are over
    /// and whose token no RayJob of namespace `ns` carries: neither in `cached` (this
    /// namespace's stored jobs by token) nor, read afresh, on the API server.
    pub(super) async fn clear_table(
        &self,
        base: &str,
        auth: Option<&str>,
        (ns, cluster): (&str, &str),
        submissions: &[Submission],
        cached: &HashMap<String, Vec<Value>>,
    ) {
        let instance = &self.config.instance;
        let in_cache = |token: &str| cached.contains_key(token);
        // Nothing to delete as the cache sees it: no call to the API server.
        if job_life::deletable(submissions, in_cache, instance, ns, 1).is_empty() {
            return;
        }
        // The cache may lag (a job just created): ask the API server before acting.
        let live = match self.tokens(ns).await {
            Ok(live) => live,
            Err(e) => {
                tracing::warn!(namespace = %ns, cluster, error = %e, "cannot list the RayJobs of a namespace; not deleting finished Ray jobs");
                self.metrics.error(Cause::ReconcileList);
                return;
            }
        };
        let held = |token: &str| in_cache(token) || live.contains(token);
        let gone = job_life::deletable(
            submissions,
            held,
            instance,
            ns,
            job_life::DELETIONS_PER_PASS,
        );
        for sub in gone {
            match self.world.delete_ray_job(base, &sub.id, auth).await {
                Ok(deleted) => {
                    tracing::debug!(namespace = %ns, cluster, submission = %sub.id, status = %sub.status, deleted, "deleted the record of a finished Ray job whose RayJob is gone");
                    if deleted {
                        self.metrics.ray_jobs_deleted.inc();
                    }
                }
                Err(e) => {
                    tracing::warn!(namespace = %ns, cluster, submission = %sub.id, error = %e, "cannot delete the record of a finished Ray job");
                    self.metrics.error(Cause::Dashboard);
                }
            }
        }
    }

    /// The tokens of every RayJob of `ns` that carries one, as the API server has them
    /// (metadata only, page by page).
    async fn tokens(&self, ns: &str) -> Result<HashSet<String>, WorldError> {
        let scope = Scope {
            kind: Kind::RayJob,
            namespace: Some(ns),
            labels: job_life::TOKEN_LABEL,
        };
        let mut tokens = HashSet::new();
        let mut note = |job: ObjectMeta| {
            let token = job
                .labels
                .as_ref()
                .and_then(|l| l.get(job_life::TOKEN_LABEL));
            if let Some(token) = token {
                tokens.insert(token.clone());
            }
        };
        self.world.for_each_metadata(scope, &mut note).await?;
        Ok(tokens)
    }
}
