//! Shared RayClusters: rewrite a RayJob's embedded cluster into a `clusterSelector`
//! reference to a hash-named RayCluster (pure; the shell creates the cluster).

mod canonical;
mod canonical_bytes;
pub mod copied;
pub mod identity;
pub mod job_life;
pub mod kuberay_yaml;
pub mod kueue;
pub mod provision;
pub mod provision_step;
pub mod runtime_env;
pub mod wake;

use serde_json::{Map, Value, json};

use crate::config::SharedClusters;
use crate::domain::labels;
use crate::domain::labels::Meta;

pub use identity::{cluster_name, digest};
pub use provision::{MAX_POOL, Refusal, cluster_for_job, member_name, pool_place};

/// What to do with one RayJob.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Leave it unchanged; the reason is a warning for the user when worth telling.
    Skip(Option<String>),
    Rewrite(Box<Rewrite>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rewrite {
    /// The mutated RayJob.
    pub job: Value,
    /// The RayCluster to ensure (create when missing).
    pub cluster: Value,
    pub name: String,
    pub digest: String,
    pub warnings: Vec<String>,
}

/// Why a RayJob was not planned: a shape rayshare does not understand, or a part of it
/// past rayshare's bounds on tenant-written text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("{0}")]
    Odd(String),
    #[error("{0}")]
    Bound(String),
}

impl From<kuberay_yaml::ReadError> for PlanError {
    fn from(e: kuberay_yaml::ReadError) -> Self {
        match e {
            kuberay_yaml::ReadError::Invalid(why) => Self::Odd(format!("runtimeEnvYAML: {why}")),
            kuberay_yaml::ReadError::Bound(why) => Self::Bound(format!("runtimeEnvYAML {why}")),
        }
    }
}

/// The API server's limit on one object's annotations, keys and values together.
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

fn skip(reason: impl Into<String>) -> Result<Plan, PlanError> {
    Ok(Plan::Skip(Some(reason.into())))
}

/// Why KubeRay would reject or mishandle this job in selector form, if it would.
fn selector_form_blocker(job: &Value, cfg: &SharedClusters) -> Option<String> {
    let spec = &job["spec"];
    let queue = labels::get(job, Meta::Labels, labels::KUEUE_QUEUE);
    if let Some(reason) = kueue::blocker(job, cfg) {
        return Some(reason);
    }
    if spec["submissionMode"] == "SidecarMode" {
        return Some("submissionMode SidecarMode cannot use an existing cluster".into());
    }
    // Under Kueue its webhook suspends the job; the shared cluster is what waits instead.
    if spec["suspend"] == true && queue.is_none() {
        return Some("a suspended RayJob cannot use an existing cluster".into());
    }
    if spec["backoffLimit"].as_i64().is_some_and(|n| n > 0) {
        return Some("backoffLimit > 0 cannot use an existing cluster".into());
    }
    // KubeRay hands `spec.metadata` to Ray only with an embedded cluster: v1.5+ drop it for
    // an existing one (the job runs without it), v1.4 fails the job on it.
    if spec["metadata"].as_object().is_some_and(|m| !m.is_empty()) {
        return Some("spec.metadata reaches Ray only on a cluster of the job's own".into());
    }
    let deletes = |p: &Value| p == "DeleteCluster" || p == "DeleteWorkers";
    // v1.4's single `deletionPolicy` (v1.5+ have no such field; the API server prunes it).
    if deletes(&spec["deletionPolicy"]) {
        return Some("its deletionPolicy deletes the cluster or its workers".into());
    }
    let strategy = &spec["deletionStrategy"];
    let rules = strategy["deletionRules"].as_array().into_iter().flatten();
    if deletes(&strategy["onSuccess"]["policy"])
        || deletes(&strategy["onFailure"]["policy"])
        || rules.into_iter().any(|r| deletes(&r["policy"]))
    {
        return Some("its deletionStrategy deletes the cluster or its workers".into());
    }
    if let Some(manager) = spec["managedBy"].as_str()
        && manager != "ray.io/kuberay-operator"
    {
        return Some(format!("it is managed by {manager}, not KubeRay"));
    }
    None
}

/// Who admits a job: the installation and the admission request.
#[derive(Debug, Clone, Copy)]
pub struct Admitter<'a> {
    pub instance: &'a str,
    pub request_uid: &'a str,
}

/// Plans the rewrite of a RayJob CREATE. `Err` means the object has a shape rayshare
/// does not understand (the caller passes it unchanged with a warning).
pub fn plan(
    job: &Value,
    namespace: &str,
    cfg: &SharedClusters,
    opt_out: &str,
    by: Admitter,
) -> Result<Plan, PlanError> {
    let Some(spec) = job.get("spec").and_then(Value::as_object) else {
        return Err(PlanError::Odd("RayJob has no spec object".into()));
    };
    if spec.get("clusterSelector").is_some_and(|s| !s.is_null()) {
        let requeued = kueue::queued_after_rewrite(job, namespace, cfg);
        return Ok(requeued.unwrap_or(Plan::Skip(None)));
    }
    let Some(cluster_spec) = spec.get("rayClusterSpec").filter(|s| !s.is_null()) else {
        return Ok(Plan::Skip(None));
    };
    // Only a job that would be rewritten hears that it was not.
    if labels::get(job, Meta::Annotations, opt_out) == Some("true") {
        return skip(format!(
            "rayshare: shared cluster skipped: annotation {opt_out}=true"
        ));
    }
    if !cluster_spec.is_object() || cluster_spec.get("headGroupSpec").is_none() {
        return Err(PlanError::Odd("rayClusterSpec has no headGroupSpec".into()));
    }
    if let Some(reason) = selector_form_blocker(job, cfg) {
        return skip(format!("rayshare: shared cluster skipped: {reason}"));
    }

    let mut stripped_spec = cluster_spec.clone();
    let stripped = identity::strip_run_scoped(&mut stripped_spec, cfg);
    if cfg.autoscaling.enabled {
        stripped_spec["enableInTreeAutoscaling"] = json!(true);
        let options = &mut stripped_spec["autoscalerOptions"];
        if options.is_null() {
            *options = json!({});
        }
        let options = options
            .as_object_mut()
            .ok_or_else(|| PlanError::Odd("autoscalerOptions is not an object".into()))?;
        options
            .entry("idleTimeoutSeconds")
            .or_insert(json!(cfg.autoscaling.idle_timeout_seconds));
    }
    let spec_text = serde_json::to_string(&stripped_spec).expect("JSON values serialise");
    // The spec travels on the job as an annotation: past the API server's limit on a
    // job's annotations, the rewritten job would be refused where the original is not.
    // Checked before the digest, which costs more than this for a large spec.
    let annotations: usize = job["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if annotations + labels::CLUSTER_SPEC.len() + spec_text.len() > MAX_ANNOTATIONS_BYTES {
        return skip(format!(
            "rayshare: shared cluster skipped: its cluster spec ({} bytes) is too large to travel on the RayJob (annotations are limited to {MAX_ANNOTATIONS_BYTES} bytes)",
            spec_text.len()
        ));
    }
    let copied = copied::Copied::of(job, cfg);
    let digest = identity::digest(&stripped_spec, &copied);
    let name = identity::cluster_name(&digest);

    let mut warnings = Vec::new();
    // Literal values travel in the runtime env, the head's first; valueFrom ones stay.
    let mut carried: Vec<(String, String)> = Vec::new();
    let mut ordered = stripped.clone();
    ordered.sort_by_key(|s| !s.on_head);
    for var in &ordered {
        match &var.value {
            Some(value) if !carried.iter().any(|(n, _)| n == &var.name) => {
                carried.push((var.name.clone(), value.clone()))
            }
            Some(_) => {}
            None => warnings.push(format!(
                "rayshare: env {} uses valueFrom and stays on the shared cluster; it cannot travel in the job's runtime env",
                var.name
            )),
        }
    }
    warnings.dedup();

    let cluster = provision::cluster_object(&name, namespace, stripped_spec, &copied, &digest);

    let mut new_job = without_cluster_spec(job);
    let job_spec = new_job["spec"].as_object_mut().expect("checked above");
    if let Some(stand_in) = stand_in_spec(cluster_spec, cfg) {
        job_spec.insert("rayClusterSpec".into(), stand_in);
    }
    job_spec.insert(
        "clusterSelector".into(),
        json!({ labels::RAY_CLUSTER: name }),
    );
    job_spec.insert("shutdownAfterJobFinishes".into(), json!(false));
    job_spec.insert("ttlSecondsAfterFinished".into(), json!(0));
    let token = job_life::token(by.request_uid);
    let reserved: Vec<(String, String)> = token
        .map(|t| {
            (
                job_life::TOKEN_ENV.to_string(),
                job_life::token_env(by.instance, namespace, t),
            )
        })
        .into_iter()
        .collect();
    if !carried.is_empty() || !reserved.is_empty() {
        let current = job_spec.get("runtimeEnvYAML").and_then(Value::as_str);
        let merged = runtime_env::merge_env_vars(current, &carried, &reserved)?;
        job_spec.insert("runtimeEnvYAML".into(), json!(merged.text));
        if !merged.kept.is_empty() {
            warnings.push(format!(
                "rayshare: kept your runtime env value for {}",
                merged.kept.join(", ")
            ));
        }
        if !merged.replaced.is_empty() {
            warnings.push(format!(
                "rayshare: replaced runtime env {} (reserved: it ties the Ray job to this RayJob)",
                merged.replaced.join(", ")
            ));
        }
        if !merged.not_strings.is_empty() {
            warnings.push(format!(
                "rayshare: runtimeEnvYAML env_vars {} are not strings as KubeRay reads them (YAML 1.1: quote on/off/yes/no); Ray will reject the job",
                merged.not_strings.join(", ")
            ));
        }
    }
    if let Some(token) = token {
        let root = &cfg.job_workdir_root;
        let entrypoint = job_spec.get("entrypoint").and_then(Value::as_str);
        if let Some(entrypoint) = entrypoint
            && !root.is_empty()
            && job_life::downloads_code_into_cwd(entrypoint)
        {
            let own = job_life::in_own_directory(entrypoint, root, token);
            job_spec.insert("entrypoint".into(), json!(own));
            warnings.push(format!(
                "rayshare: the entrypoint runs in {root}/{token}: it downloads code into its working directory, which jobs on a shared cluster would otherwise share"
            ));
        }
        labels::set(&mut new_job, Meta::Labels, job_life::TOKEN_LABEL, token);
    }
    labels::set(&mut new_job, Meta::Labels, labels::JOB_CLUSTER, &name);
    labels::set(
        &mut new_job,
        Meta::Annotations,
        labels::CLUSTER_SPEC,
        &spec_text,
    );
    if let Some(queue) = copied::kueue_queue(job, cfg) {
        kueue::into_kueue_cluster(&mut new_job, queue);
        warnings.push(format!(
            "rayshare: Kueue admits the shared cluster in queue {queue}; the job waits for it and is not charged again"
        ));
    }
    warnings.insert(0, format!("rayshare: runs on shared RayCluster {name}"));

    Ok(Plan::Rewrite(Box::new(Rewrite {
        job: new_job,
        cluster,
        name,
        digest,
        warnings,
    })))
}

/// A copy of `job` (a map with a `spec` map) without `spec.rayClusterSpec`: the rewrite
/// keeps everything else, and copying the embedded cluster only to drop it was a sixth
/// of a RayJob admission's cost.
fn without_cluster_spec(job: &Value) -> Value {
    let mut copy = Map::new();
    for (key, value) in job.as_object().into_iter().flatten() {
        let value = match (key.as_str(), value) {
            ("spec", Value::Object(spec)) => Value::Object(
                spec.iter()
                    .filter(|(k, _)| *k != "rayClusterSpec")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            _ => value.clone(),
        };
        copy.insert(key.clone(), value);
    }
    Value::Object(copy)
}

impl Rewrite {
    /// Moves the job to member `index` of its config's pool: `<name>` for 0, else
    /// `<name>-<index>` (same spec and digest).
    pub fn into_member(mut self, index: u32) -> Rewrite {
        if index == 0 {
            return self;
        }
        let name = provision::member_name(&self.name, index);
        self.cluster["metadata"]["name"] = json!(name);
        self.job["spec"]["clusterSelector"] = json!({ labels::RAY_CLUSTER: name });
        labels::set(&mut self.job, Meta::Labels, labels::JOB_CLUSTER, &name);
        self.warnings[0] = format!("rayshare: runs on shared RayCluster {name}");
        self.name = name;
        self
    }
}

/// A head-only spec with no resources, for KubeRay's Volcano integration: it needs a
/// spec to be present, and sizes the submitter's gang from it (see README).
fn stand_in_spec(original: &Value, cfg: &SharedClusters) -> Option<Value> {
    if !cfg.volcano_stand_in_spec {
        return None;
    }
    let head = original.pointer("/headGroupSpec/template/spec/containers/0");
    let name = head.and_then(|c| c["name"].as_str()).unwrap_or("ray-head");
    let image = head
        .and_then(|c| c["image"].as_str())
        .unwrap_or("rayproject/ray");
    Some(json!({
        "headGroupSpec": {
            "rayStartParams": {},
            "template": { "spec": { "containers": [{ "name": name, "image": image }] } },
        },
    }))
}

#[cfg(test)]
fn tests_by() -> Admitter<'static> {
    Admitter {
        instance: "rayshare",
        request_uid: "uid-1",
    }
}

#[cfg(test)]
mod flyte_corpus_tests;
#[cfg(test)]
mod tests;
