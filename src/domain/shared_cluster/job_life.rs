//! A job's life on a shared cluster ends with its RayJob (pure).
//!
//! With an embedded cluster, deleting a RayJob deletes its cluster and the Ray job dies
//! with it; on a shared cluster nothing would stop it (Flyte clears KubeRay's stop-job
//! finalizer when it aborts a run). So admission ties each rewritten job's Ray
//! submission to its RayJob with a token, the admission request's uid: a label on the
//! RayJob and an env var in its runtime env (KubeRay does not pass `spec.metadata` to Ray
//! for a job that selects a cluster, but it always passes the runtime env, and Ray lists
//! it with the job). A submission is stopped only when no live RayJob carries its token,
//! or that RayJob is over on KubeRay's side.

use std::collections::HashMap;

use serde_json::Value;

use crate::domain::labels;
use crate::domain::labels::Meta;

/// Runtime-env variable naming the installation, the namespace and the admission that made
/// a Ray submission, `<instance>/<namespace>/<request uid>` (reserved: rayshare sets it even
/// over a copied value, which would point at another RayJob).
pub const TOKEN_ENV: &str = "RAYSHARE_ADMISSION";
/// Label on the rewritten RayJob with the same token.
pub const TOKEN_LABEL: &str = labels::ADMISSION_UID;

/// The token for a job admitted by request `uid`, when it can be a label value.
pub fn token(request_uid: &str) -> Option<&str> {
    labels::is_label_value(request_uid).then_some(request_uid)
}

/// The value of [`TOKEN_ENV`] for a job that installation `instance` admitted in
/// `namespace`: a submission is judged only by the stored jobs of that namespace, on a
/// cluster of that namespace.
pub fn token_env(instance: &str, namespace: &str, token: &str) -> String {
    format!("{instance}/{namespace}/{token}")
}

/// Flyte's fast-registered entrypoints download the task's code into the current
/// directory (flytekit `pyflyte-fast-execute --dest-dir .`, flyte v2 `--tgz|--pkl ...
/// --dest .`). Every driver on a Ray head starts in the same directory, so two such
/// jobs on one shared cluster would overwrite each other's code.
pub fn downloads_code_into_cwd(entrypoint: &str) -> bool {
    let words: Vec<&str> = entrypoint.split_whitespace().collect();
    let relative = |flag: &str| {
        let value = words
            .iter()
            .position(|w| *w == flag)
            .map(|i| words.get(i + 1));
        match value {
            None => true,
            Some(v) => v.is_none_or(|v| !v.starts_with('/')),
        }
    };
    let v1 = words.iter().any(|w| w.ends_with("pyflyte-fast-execute"));
    let v2 = words.iter().any(|w| *w == "--tgz" || *w == "--pkl");
    (v1 && relative("--dest-dir")) || (v2 && relative("--dest"))
}

/// The entrypoint run in a directory of its own, removed when the driver ends or is
/// stopped, with that directory first on the Python path the way the pod's working
/// directory was. Jobs sharing a head are other tenants' code: the directory is made
/// fresh by `mktemp -d` (mode 0700, a name no other job can guess: the token is a public
/// label), so no job can plant a `sitecustomize.py` where another's driver will start.
/// One quoted `sh -c` word: KubeRay's submitter pastes the entrypoint unquoted into a
/// bash command line, where a bare `&&` or `;` would run on the submitter instead of the
/// head. (`root` and `token` hold no shell metacharacters: config validation and
/// [`token`].)
pub fn in_own_directory(entrypoint: &str, root: &str, token: &str) -> String {
    let root = root.trim_end_matches('/');
    let script = format!(
        "mkdir -p {root} && d=$(mktemp -d {root}/{token}.XXXXXXXXXX) && cd $d || exit 1; \
         trap \"cd / && rm -rf $d\" EXIT; trap \"exit 143\" TERM INT; \
         export PYTHONPATH=\"$d${{PYTHONPATH:+:$PYTHONPATH}}\"; {entrypoint}"
    );
    format!("sh -c '{}'", script.replace('\'', r"'\''"))
}

/// A Ray job as the dashboard's job API lists it (`GET /api/jobs/`).
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    pub id: String,
    pub status: String,
    /// What [`TOKEN_ENV`] says about it.
    pub tie: Option<Tie>,
    /// When it ended (Ray's `end_time`, ms since the epoch; set once it is over).
    pub end_time: Option<u64>,
}

/// A submission's [`TOKEN_ENV`]: which installation admitted its RayJob, in which
/// namespace (`None`: a token written before tokens named one), with which token.
#[derive(Debug, Clone, PartialEq)]
pub struct Tie {
    pub instance: String,
    pub namespace: Option<String>,
    pub token: String,
}

impl Tie {
    fn parse(value: &str) -> Option<Self> {
        let parts: Vec<&str> = value.split('/').collect();
        let (instance, namespace, token) = match parts[..] {
            [i, n, t] => (i, Some(n.to_string()), t),
            [i, t] => (i, None, t),
            _ => return None,
        };
        Some(Self {
            instance: instance.to_string(),
            namespace,
            token: token.to_string(),
        })
    }

    /// Whether installation `instance` may judge it on a cluster in `namespace`.
    pub fn judged_by(&self, instance: &str, namespace: &str) -> bool {
        self.instance == instance && self.namespace.as_deref().is_none_or(|n| n == namespace)
    }
}

impl Submission {
    /// Still able to run (PENDING or RUNNING); the others are over.
    pub fn active(&self) -> bool {
        active_status(&self.status)
    }

    /// Over for good (SUCCEEDED, FAILED or STOPPED): the only records Ray deletes.
    pub fn terminal(&self) -> bool {
        matches!(self.status.as_str(), "SUCCEEDED" | "FAILED" | "STOPPED")
    }

    /// An id Ray would take for a driver's job id: Ray looks an id up as a job id
    /// (hex) before it looks it up as a submission id, so a request naming this one could
    /// reach another job. KubeRay's own ids (`<rayjob>-<random>`) never are; only a
    /// `spec.jobId` someone chose can be.
    pub fn reads_as_job_id(&self) -> bool {
        self.id.bytes().all(|b| b.is_ascii_hexdigit())
    }
}

/// A Ray job status of one still able to run (PENDING or RUNNING).
pub fn active_status(status: &str) -> bool {
    status == "PENDING" || status == "RUNNING"
}

/// The submissions of a job list answer (see [`job_list`]).
pub fn parse_submissions(body: &Value) -> Result<Vec<Submission>, String> {
    job_list::read(body)
        .map(|list| list.submissions)
        .map_err(|e| e.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Over already, or its RayJob still wants it.
    Leave,
    /// Not a submission of a RayJob rayshare rewrote: never touched.
    Unattributed,
    Stop(StopReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Its RayJob is gone, or being deleted.
    Deleted,
    /// Its RayJob is over on KubeRay's side (failed, deadline exceeded, complete).
    Finished,
    /// Its RayJob now runs a newer submission (a KubeRay retry).
    Superseded,
}

impl StopReason {
    /// For people: an event's note.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Deleted => "its RayJob was deleted",
            Self::Finished => "its RayJob is over on KubeRay's side",
            Self::Superseded => "its RayJob runs a newer submission",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deleted => "rayjob_deleted",
            Self::Finished => "rayjob_finished",
            Self::Superseded => "superseded",
        }
    }
}

/// Whether installation `instance` stops `sub`, found on a cluster in `namespace`, given
/// every stored RayJob of that namespace that carries its token (none: deleted). Another
/// installation's or another namespace's submissions are not this one's to judge. A copy of
/// a rewritten RayJob (`kubectl get -o yaml`, renamed, created again) keeps its original's
/// token, so a submission is stopped only when none of them still wants it.
pub fn verdict_of_all(
    sub: &Submission,
    jobs: &[Value],
    instance: &str,
    namespace: &str,
) -> Verdict {
    if sub
        .tie
        .as_ref()
        .is_none_or(|t| !t.judged_by(instance, namespace))
    {
        return Verdict::Unattributed;
    }
    if jobs.is_empty() {
        return judge(sub, None);
    }
    let mut stop = None;
    for job in jobs {
        match judge(sub, Some(job)) {
            Verdict::Stop(reason) => {
                stop.get_or_insert(reason);
            }
            other => return other,
        }
    }
    stop.map_or(Verdict::Leave, Verdict::Stop)
}

/// The verdict for one RayJob carrying the token (`None`: none does).
fn judge(sub: &Submission, job: Option<&Value>) -> Verdict {
    if !sub.active() {
        return Verdict::Leave;
    }
    let Some(job) = job else {
        return Verdict::Stop(StopReason::Deleted);
    };
    if job["metadata"]["deletionTimestamp"].is_string() {
        return Verdict::Stop(StopReason::Deleted);
    }
    if crate::domain::reclaim::is_terminal(job) {
        return Verdict::Stop(StopReason::Finished);
    }
    match job["status"]["jobId"].as_str() {
        Some(current) if !current.is_empty() && current != sub.id => {
            Verdict::Stop(StopReason::Superseded)
        }
        _ => Verdict::Leave,
    }
}

/// What one look at a cluster's job list finds: the submissions the cache says to stop
/// (each stopped only after a fresh read of its RayJobs agrees), and how many active ones
/// are not this installation's to judge (counted, never touched).
#[derive(Debug, Default, PartialEq)]
pub struct Triage<'a> {
    pub suspects: Vec<(&'a Submission, &'a str)>,
    pub unattributed: i64,
}

/// Triage of `subs`, found on a cluster in `namespace`, given the cached RayJobs of that
/// namespace by token and the submissions asked to stop a moment ago (a stop takes a
/// moment to show in the list: one request per submission).
pub fn triage<'a>(
    subs: &'a [Submission],
    cached: &HashMap<String, Vec<Value>>,
    stopping: impl Fn(&str) -> bool,
    instance: &str,
    namespace: &str,
) -> Triage<'a> {
    let mut triage = Triage::default();
    // An id Ray would read as a driver's job id could stop someone else's job.
    let active = subs
        .iter()
        .filter(|s| s.active() && !s.reads_as_job_id() && !stopping(&s.id));
    for sub in active {
        let token = match &sub.tie {
            Some(tie) if tie.judged_by(instance, namespace) => tie.token.as_str(),
            _ => {
                triage.unattributed += 1;
                continue;
            }
        };
        let jobs = cached.get(token).map_or(&[][..], Vec::as_slice);
        if matches!(
            verdict_of_all(sub, jobs, instance, namespace),
            Verdict::Stop(_)
        ) {
            triage.suspects.push((sub, token));
        }
    }
    triage
}

/// The RayJobs of `namespace` that carry a token, by token.
pub fn by_token(
    jobs: impl IntoIterator<Item = Value>,
    namespace: &str,
) -> HashMap<String, Vec<Value>> {
    let mut known: HashMap<String, Vec<Value>> = HashMap::new();
    for job in jobs {
        if job["metadata"]["namespace"].as_str() != Some(namespace) {
            continue;
        }
        if let Some(token) = job_token(&job).map(str::to_string) {
            known.entry(token).or_default().push(job);
        }
    }
    known
}

/// The RayJobs a suspended shared cluster cut off: Kueue suspends a cluster it preempts or
/// that is deactivated, KubeRay then deletes its pods, and the Ray job of each RayJob
/// running there goes with them. Jobs still waiting for the cluster just go on waiting.
pub fn suspended_under<'a>(cluster: &Value, jobs: &'a [Value]) -> Vec<&'a Value> {
    if cluster["spec"]["suspend"] != true {
        return Vec::new();
    }
    let (ns, name) = (
        &cluster["metadata"]["namespace"],
        &cluster["metadata"]["name"],
    );
    jobs.iter()
        .filter(|j| &j["metadata"]["namespace"] == ns)
        .filter(|j| labels::selected_cluster(j) == name.as_str())
        .filter(|j| j["status"]["jobDeploymentStatus"] == "Running")
        .filter(|j| !crate::domain::reclaim::is_terminal(j))
        .collect()
}

/// At most this many records of finished Ray jobs are deleted per cluster and pass (one
/// request each to the head); the rest wait for the next pass.
pub const DELETIONS_PER_PASS: usize = 32;

/// The submissions whose records installation `instance` deletes from a cluster in
/// `namespace` (Ray's job table only grows otherwise), oldest end first, at most `limit`:
/// over for good, tied to this installation and namespace, and with no RayJob carrying
/// their token (`held`: whether one does). Someone else's are never touched, nor one whose
/// RayJob is still there (its owner may still read its status and logs through KubeRay).
pub fn deletable<'a>(
    subs: &'a [Submission],
    held: impl Fn(&str) -> bool,
    instance: &str,
    namespace: &str,
    limit: usize,
) -> Vec<&'a Submission> {
    let mut gone: Vec<&Submission> = subs
        .iter()
        .filter(|s| s.terminal() && !s.reads_as_job_id())
        .filter(|s| {
            s.tie
                .as_ref()
                .is_some_and(|t| t.judged_by(instance, namespace) && !held(&t.token))
        })
        .collect();
    // Ray sets `end_time` on every job that is over; one without it goes last.
    gone.sort_by(|a, b| {
        (a.end_time.is_none(), a.end_time, &a.id).cmp(&(b.end_time.is_none(), b.end_time, &b.id))
    });
    gone.truncate(limit);
    gone
}

/// The token of a stored RayJob, if rayshare tied it to its submission.
pub fn job_token(job: &Value) -> Option<&str> {
    labels::get(job, Meta::Labels, TOKEN_LABEL)
}

mod dashboard;
pub mod job_list;
pub use dashboard::*;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod suspended_tests;
