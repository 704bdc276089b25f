//! Reading the config file and checking it: every error names its field by its path.

use std::path::Path;

use super::*;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid config: field `{field}`: {message}")]
    Invalid { field: String, message: String },
}

impl Config {
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let Some(path) = path else {
            return Ok(Self::default());
        };
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Parses and validates; errors name the offending field by its path.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let de = serde_norway::Deserializer::from_str(text);
        let config: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            ConfigError::Invalid {
                field: if field == "." { "(root)".into() } else { field },
                message: e.into_inner().to_string(),
            }
        })?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |field: &str, message: &str| {
            Err(ConfigError::Invalid {
                field: field.into(),
                message: message.into(),
            })
        };
        let label_value = |v: &str| {
            (1..=63).contains(&v.len())
                && v.starts_with(|c: char| c.is_ascii_alphanumeric())
                && v.ends_with(|c: char| c.is_ascii_alphanumeric())
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        if !label_value(&self.instance) {
            return invalid(
                "instance",
                "must be a label value (1-63 alphanumerics, '-', '_', '.')",
            );
        }
        if self.opt_out_annotation.is_empty() {
            return invalid("optOutAnnotation", "must not be empty");
        }
        if self.served_namespaces.label_key.is_empty() {
            return invalid(
                "servedNamespaces.labelKey",
                "must name the label the webhook registration selects namespaces by",
            );
        }
        let timeouts = [
            ("admissionTimeoutMs", self.admission_timeout_ms),
            (
                "sharedClusters.createTimeoutMs",
                self.shared_clusters.create_timeout_ms,
            ),
            (
                "podGroups.createTimeoutMs",
                self.pod_groups.create_timeout_ms,
            ),
            ("indices.claimTimeoutMs", self.indices.claim_timeout_ms),
        ];
        for (field, ms) in timeouts {
            if !(1..=29_000).contains(&ms) {
                return invalid(
                    field,
                    "must be between 1 and 29000 (inside the webhook timeout)",
                );
            }
        }
        if self.pod_groups.enabled && self.pod_groups.scheduler_names.is_empty() {
            return invalid(
                "podGroups.schedulerNames",
                "must name at least one scheduler",
            );
        }
        if self.pod_groups.default_queue.is_empty() {
            return invalid("podGroups.defaultQueue", "must not be empty");
        }
        if self.pod_groups.reconcile_interval_seconds == 0 {
            return invalid("podGroups.reconcileIntervalSeconds", "must be positive");
        }
        let root = &self.shared_clusters.job_workdir_root;
        let plain_path = |c: char| c.is_ascii_alphanumeric() || "/_.-".contains(c);
        if !root.is_empty() && (!root.starts_with('/') || !root.chars().all(plain_path)) {
            return invalid(
                "sharedClusters.jobWorkdirRoot",
                "must be empty or an absolute path of alphanumerics, '/', '_', '.', '-'",
            );
        }
        let stop = &self.shared_clusters.stop_jobs;
        if let Some(problem) = dashboard_template_problem(&stop.dashboard_url) {
            return invalid("sharedClusters.stopJobs.dashboardUrl", &problem);
        }
        if !(1..=60_000).contains(&stop.timeout_ms) {
            return invalid(
                "sharedClusters.stopJobs.timeoutMs",
                "must be between 1 and 60000",
            );
        }
        if stop.interval_seconds == 0 {
            return invalid(
                "sharedClusters.stopJobs.intervalSeconds",
                "must be positive",
            );
        }
        if self.reclaim.interval_seconds == 0 {
            return invalid("reclaim.intervalSeconds", "must be positive");
        }
        if self.reclaim.idle_ttl_seconds == 0 {
            return invalid("reclaim.idleTtlSeconds", "must be positive");
        }
        if self.indices.reconcile_interval_seconds == 0 {
            return invalid("indices.reconcileIntervalSeconds", "must be positive");
        }
        // Zero would release a claim, or delete a marked cluster, while the admission that
        // relies on it is still on its way to the API server.
        if self.indices.claim_in_flight_seconds == 0 {
            return invalid("indices.claimInFlightSeconds", "must be positive");
        }
        // The sweep would release a claim whose pod is still on its way: two pods, one slot.
        if self.indices.claim_grace_seconds < self.indices.claim_in_flight_seconds {
            return invalid(
                "indices.claimGraceSeconds",
                "must be at least indices.claimInFlightSeconds",
            );
        }
        if self.indices.claim_takeover_ms == 0 {
            return invalid("indices.claimTakeoverMs", "must be positive");
        }
        if self.reclaim.quiet_seconds == 0 {
            return invalid("reclaim.quietSeconds", "must be positive");
        }
        if let Some((field, message)) = self.warm_ahead.problem() {
            return invalid(field, message);
        }
        if self
            .shared_clusters
            .run_scoped_env_prefixes
            .iter()
            .any(String::is_empty)
        {
            return invalid(
                "sharedClusters.runScopedEnvPrefixes",
                "an empty prefix would match every variable",
            );
        }
        Ok(())
    }
}

impl WarmAhead {
    /// What is wrong with the section, if anything: (field, message).
    fn problem(&self) -> Option<(&'static str, &'static str)> {
        if self.opt_in_annotation.is_empty() {
            return Some(("warmAhead.optInAnnotation", "must not be empty"));
        }
        if self.max_per_config < self.min_warm {
            return Some((
                "warmAhead.maxPerConfig",
                "must be at least warmAhead.minWarm",
            ));
        }
        if self.half_life_seconds == 0 {
            return Some(("warmAhead.halfLifeSeconds", "must be positive"));
        }
        // A window as long as the half-life would read steady traffic as one endless burst.
        if self.burst_window_seconds >= self.half_life_seconds {
            return Some((
                "warmAhead.burstWindowSeconds",
                "must be below warmAhead.halfLifeSeconds",
            ));
        }
        // 96 slots of at least a second each.
        if self.period_seconds != 0 && self.period_seconds < 96 {
            return Some(("warmAhead.periodSeconds", "must be 0 (none) or at least 96"));
        }
        if self.max_configs == 0 {
            return Some(("warmAhead.maxConfigs", "must be positive"));
        }
        None
    }
}

/// The placeholders a `dashboardUrl` template may hold (filled in by
/// `job_life::dashboard_url`).
const DASHBOARD_PLACEHOLDERS: [&str; 4] = ["{headIP}", "{port}", "{namespace}", "{cluster}"];

/// What is wrong with a `dashboardUrl` template, if anything: an `http://` URL whose
/// `{...}` are all known placeholders. `{service}` (a name the tenant's spec chooses) is
/// refused.
fn dashboard_template_problem(template: &str) -> Option<String> {
    if !template.starts_with("http://") {
        return Some("must be an http:// URL template (Ray's dashboard serves plain HTTP)".into());
    }
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        let end = rest[start..].find('}').map(|e| start + e + 1);
        let Some(end) = end else {
            return Some("has an unclosed '{'".into());
        };
        let placeholder = &rest[start..end];
        if placeholder == "{service}" {
            return Some(
                "{service} is a name the tenant's RayJob chooses (it can name an ExternalName \
                 Service); use {headIP}, the IP of the head pod KubeRay made"
                    .into(),
            );
        }
        if !DASHBOARD_PLACEHOLDERS.contains(&placeholder) {
            return Some(format!(
                "unknown placeholder {placeholder} (known: {})",
                DASHBOARD_PLACEHOLDERS.join(", ")
            ));
        }
        rest = &rest[end..];
    }
    None
}
