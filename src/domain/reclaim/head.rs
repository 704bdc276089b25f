//! The head's word before an idle shared cluster goes (pure). "Idle" in [`super::decide`]
//! means no active RayJob selects the cluster; the head may still run work no RayJob
//! stands for: a Ray job submitted to its dashboard directly, a KubeRay submission whose
//! RayJob is gone but whose stop has not landed, a script's `ray.init` on the head, a Ray
//! Client session. So the reclaimer also asks the head (the dashboard's job list, the
//! one the job stopper reads: [`JobList`]):
//!
//! - **Mark**: held while the head's latest answer, at most [`SILENCE`] old, lists a
//!   PENDING or RUNNING job or a running driver. Marking alone deletes nothing.
//! - **Delete**: only on a list read *after the mark* that shows no such work; one that
//!   shows work takes the mark off again (the cluster is kept, and re-marked only once the
//!   head lists nothing). Without such a list (the head does not answer, or lists more
//!   than rayshare reads), the delete waits, but for at most [`SILENCE`] after the mark:
//!   a dead or hostile head cannot keep its cluster forever.
//!
//! What is left: a job submitted to the dashboard directly between the list read after
//! the mark and the delete (at most one stopper interval) goes with the cluster. RayJobs
//! cannot hit that window: admission sends none to a marked cluster.
//!
//! Ray Client: a client session runs its driver on the cluster through `ray.init`, a job
//! of the cluster's GCS without a submission id, which Ray lists as type `DRIVER`,
//! `RUNNING` until it ends (Ray's `get_driver_jobs`; not yet measured against a real
//! client), so it holds the cluster like a submission does (counted in
//! [`JobList::drivers_running`]). A session that is connected but idle counts as work all
//! the same. The idle TTL counts RayJobs only: past it, the cluster goes about a quiet
//! period after the last session ends.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::Step;
use crate::domain::shared_cluster::job_life::job_list::JobList;
use crate::domain::time::elapsed;

/// The default of `reclaim.headSilenceSeconds`: how long the head's silence can hold a
/// deletion (after the mark), and how old an
/// answer that lists work may be to hold a mark: ten of the job stopper's default
/// 30-second passes, each of which reads the list.
pub const SILENCE: Duration = Duration::from_secs(300);

/// What the head said about its work, as of `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Said {
    pub at: Timestamp,
    /// PENDING or RUNNING submissions, any submitter's.
    pub jobs: usize,
    /// Running drivers without a submission (`ray.init`, Ray Client).
    pub drivers: usize,
    /// The list went on past what rayshare reads: "nothing running" is not proven.
    pub truncated: bool,
}

impl Said {
    pub fn of(list: &JobList, at: Timestamp) -> Self {
        Self {
            at,
            jobs: list.submissions.iter().filter(|s| s.active()).count(),
            drivers: list.drivers_running,
            truncated: list.truncated,
        }
    }

    fn working(&self) -> bool {
        self.jobs + self.drivers > 0
    }

    fn work(&self) -> String {
        format!(
            "its head lists {} running Ray job(s) and {} driver(s) no RayJob stands for",
            self.jobs, self.drivers
        )
    }
}

/// What the reclaimer knows of a cluster's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    /// Not asked (the job stopper is off): the RayJobs alone decide, as before.
    NotAsked,
    /// No answer yet, or none since it stopped answering.
    Unheard,
    /// The latest answer.
    Said(Said),
}

/// The step to take, and what the head had to do with it (for the log and status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heard {
    pub step: Step,
    pub note: Option<String>,
}

/// The reclaim step (from the RayJobs, [`super::step`]) once the head is heard.
pub fn check(
    step: Step,
    head: &Head,
    marked: Option<Timestamp>,
    silence: Duration,
    now: Timestamp,
) -> Heard {
    let as_is = Heard { step, note: None };
    let said = match head {
        Head::NotAsked => return as_is,
        Head::Said(said) => Some(said),
        Head::Unheard => None,
    };
    match step {
        Step::Keep | Step::Unmark => as_is,
        Step::Mark => match said {
            Some(s) if s.working() && elapsed(now, s.at) <= silence => Heard {
                step: Step::Keep,
                note: Some(s.work()),
            },
            _ => as_is,
        },
        Step::Delete => {
            let marked = marked.unwrap_or(now);
            let since_mark = said.filter(|s| s.at >= marked);
            match since_mark {
                Some(s) if s.working() => Heard {
                    step: Step::Unmark,
                    note: Some(s.work()),
                },
                Some(s) if !s.truncated => as_is,
                _ if elapsed(now, marked) >= silence => Heard {
                    step: Step::Delete,
                    note: Some(format!(
                        "its head said nothing it could be judged by for {}s after the mark",
                        elapsed(now, marked).as_secs()
                    )),
                },
                _ => Heard {
                    step: Step::Keep,
                    note: Some("waiting for its head's job list, read after the mark".into()),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests;
