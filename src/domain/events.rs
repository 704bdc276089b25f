//! Kubernetes Events rayshare records, in the style KubeRay and Volcano use (a PascalCase
//! reason, one sentence of note), so the people whose workloads rayshare changed see it in
//! `kubectl describe` (pure: what to say and about which object; the shell records them).

use serde_json::Value;

/// An event about one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub regarding: Regarding,
    pub warning: bool,
    pub reason: Reason,
    /// What rayshare did (`action` of `events.k8s.io/v1`).
    pub action: &'static str,
    pub note: String,
}

/// Why an Event is recorded: its `reason`, as `kubectl describe` shows it and
/// `rayshare_events_total{reason}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A RayJob moved to a shared cluster.
    SharedCluster,
    SharedClusterSkipped,
    SharedClusterFailed,
    IndicesAssigned,
    PodGroupCreated,
    /// A shared cluster made.
    Created,
    SharedClusterNotMade,
    Reclaimed,
    StoppedRayJob,
    SharedClusterSuspended,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SharedCluster => "SharedCluster",
            Self::SharedClusterSkipped => "SharedClusterSkipped",
            Self::SharedClusterFailed => "SharedClusterFailed",
            Self::IndicesAssigned => "IndicesAssigned",
            Self::PodGroupCreated => "PodGroupCreated",
            Self::Created => "Created",
            Self::SharedClusterNotMade => "SharedClusterNotMade",
            Self::Reclaimed => "Reclaimed",
            Self::StoppedRayJob => "StoppedRayJob",
            Self::SharedClusterSuspended => "SharedClusterSuspended",
        }
    }
}

impl Regarding {
    /// Every name the event is found by.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        let (a, b, c) = match self {
            Self::Stored(o) => (Some(o.namespace.as_str()), Some(o.name.as_str()), None),
            Self::Admitted {
                namespace,
                name,
                selector,
                ..
            } => (
                Some(namespace.as_str()),
                name.as_deref(),
                selector.as_deref(),
            ),
        };
        [a, b, c].into_iter().flatten()
    }
}

/// The object an event is about.
#[derive(Debug, Clone, PartialEq)]
pub enum Regarding {
    /// A stored object (read from the API server or a watch).
    Stored(ObjectRef),
    /// An object being admitted: recorded only once the API server shows it stored, created
    /// after the admission (a review alone, or a dry run, records nothing). Found by name,
    /// or for `generateName` objects by a label selector that only it matches.
    Admitted {
        api_version: &'static str,
        kind: &'static str,
        namespace: String,
        name: Option<String>,
        selector: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl ObjectRef {
    /// The reference of a stored object (`None` without name or uid).
    pub fn of(object: &Value) -> Option<Self> {
        let meta = &object["metadata"];
        Some(Self {
            api_version: object["apiVersion"].as_str()?.to_string(),
            kind: object["kind"].as_str()?.to_string(),
            namespace: meta["namespace"].as_str().unwrap_or("default").to_string(),
            name: meta["name"].as_str()?.to_string(),
            uid: meta["uid"].as_str()?.to_string(),
        })
    }
}

/// The name of an object being admitted, if it has one yet.
pub fn admitted_name(object: &Value) -> Option<String> {
    object["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

/// On a RayJob moved onto a shared cluster.
pub fn moved_to_shared_cluster(cluster: &str, exists: bool, others: usize) -> String {
    if !exists {
        return format!(
            "Runs on shared RayCluster {cluster}, created for this job's config; later jobs of the same config join it"
        );
    }
    match others {
        0 => format!("Runs on shared RayCluster {cluster} (warm; no other job running on it)"),
        1 => format!("Runs on shared RayCluster {cluster} (warm; shared with 1 other running job)"),
        n => format!(
            "Runs on shared RayCluster {cluster} (warm; shared with {n} other running jobs)"
        ),
    }
}

/// Admission warnings, without rayshare's `rayshare: ` prefix, as an event note.
pub fn note_of(warning: &str) -> String {
    let text = warning.strip_prefix("rayshare: ").unwrap_or(warning);
    let mut note: String = text.chars().take(1000).collect();
    if let Some(first) = note.get(..1) {
        let upper = first.to_uppercase();
        note.replace_range(..1, &upper);
    }
    note
}

/// On a pod whose replica/host indices rayshare assigned.
pub fn indices_assigned(group: &str, replica: u32, host: u32, hosts: u32) -> String {
    format!("Assigned worker group {group} replica {replica}, host {host} of {hosts}")
}

/// On a pod whose PodGroup rayshare made.
pub fn pod_group_created(group: &str, queue: &str, priority: Option<&str>) -> String {
    match priority {
        Some(p) => format!("Created PodGroup {group} in queue {queue} with priority class {p}"),
        None => format!("Created PodGroup {group} in queue {queue}"),
    }
}

/// On a stored RayJob whose shared cluster rayshare could not make (it keeps trying).
pub fn cluster_not_made(cluster: &str, why: &str) -> String {
    let note = format!("Shared RayCluster {cluster} could not be made (retried): {why}");
    note.chars().take(1000).collect()
}

/// On a shared cluster rayshare made.
pub fn cluster_created(digest: &str, job: &str) -> String {
    format!("Created shared RayCluster for config digest {digest}, first used by RayJob {job}")
}

/// On a shared cluster rayshare deleted.
pub fn cluster_reclaimed(idle: std::time::Duration, ttl: std::time::Duration) -> String {
    format!(
        "Deleted after {} idle (idle TTL {})",
        human(idle),
        human(ttl)
    )
}

/// On a shared cluster where rayshare stopped a Ray job.
pub fn ray_job_stopped(submission: &str, why: &str) -> String {
    format!("Stopped Ray job {submission}: {why}")
}

/// On a RayJob that ran on a shared cluster when the cluster was suspended.
pub fn suspended_under(cluster: &str) -> String {
    format!(
        "Shared RayCluster {cluster} was suspended while this job ran on it (Kueue preempted or deactivated it): its pods, and the Ray job with them, are gone; the cluster starts again when Kueue admits it"
    )
}

/// `90s` -> `1m30s`, `3600s` -> `1h`.
pub fn human(d: std::time::Duration) -> String {
    let s = d.as_secs();
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;
    use std::time::Duration;

    #[rstest]
    #[case(false, 0, "created for this job's config")]
    #[case(true, 0, "no other job running on it")]
    #[case(true, 1, "shared with 1 other running job)")]
    #[case(true, 7, "shared with 7 other running jobs")]
    fn shared_cluster_notes(#[case] exists: bool, #[case] others: usize, #[case] says: &str) {
        let note = moved_to_shared_cluster("ray-abc", exists, others);
        assert!(
            note.starts_with("Runs on shared RayCluster ray-abc"),
            "{note}"
        );
        assert!(note.contains(says), "{note}");
    }

    #[rstest]
    #[case(
        "rayshare: shared cluster skipped: annotation x=true",
        "Shared cluster skipped: annotation x=true"
    )]
    #[case("plain", "Plain")]
    #[case("", "")]
    fn warnings_become_notes(#[case] warning: &str, #[case] note: &str) {
        assert_eq!(note_of(warning), note);
    }

    #[test]
    fn notes_stay_within_the_api_limit() {
        assert_eq!(note_of(&"x".repeat(5000)).len(), 1000);
    }

    #[rstest]
    #[case(0, "0s")]
    #[case(90, "1m30s")]
    #[case(3600, "1h")]
    #[case(5430, "1h30m30s")]
    fn durations(#[case] secs: u64, #[case] text: &str) {
        assert_eq!(human(Duration::from_secs(secs)), text);
    }

    #[test]
    fn references_need_name_and_uid() {
        let c = json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1"}});
        assert_eq!(ObjectRef::of(&c).unwrap().uid, "u1");
        assert!(
            ObjectRef::of(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}))
                .is_none()
        );
    }
}
