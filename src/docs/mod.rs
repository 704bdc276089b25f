//! The reference pages generated from the code: every subcommand's flags from clap, the
//! metrics from the registry, the feature config's keys and defaults from `Config`. The
//! tests (`cargo test --lib docs::`) compare them with `docs/reference/*.md` and hold the
//! rest of the docs to the code; `RAYSHARE_UPDATE_DOCS=1` rewrites the generated parts.

use clap::CommandFactory;
use serde_json::Value;

use crate::metrics::{
    CauseLabel, ClusterLabels, KindLabel, LatencyLabels, Metrics, ProtocolLabel, ReasonLabel,
    ReloadLabel, RequestLabels, StateLabel,
};

#[cfg(test)]
mod check;
#[cfg(test)]
mod tests;

/// One table cell: on one line, with `|` escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// Every subcommand's flags, one table each, as `rayshare <subcommand> --help` has them.
pub fn cli_reference() -> String {
    let mut out = String::new();
    let root = crate::cli::Cli::command();
    for sub in root.get_subcommands().filter(|s| !s.is_hide_set()) {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        out += &format!("## `rayshare {}`\n\n{}\n\n", sub.get_name(), cell(&about));
        out += "| flag | env | default | meaning |\n|---|---|---|---|\n";
        for arg in sub.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if matches!(long, "help" | "version") {
                continue;
            }
            let flag = match arg.get_short() {
                Some(short) => format!("`-{short}`, `--{long}`"),
                None => format!("`--{long}`"),
            };
            let env = arg
                .get_env()
                .map(|e| format!("`{}`", e.to_string_lossy()))
                .unwrap_or_default();
            let defaults: Vec<_> = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            let default = if defaults.is_empty() {
                String::new()
            } else {
                format!("`{}`", defaults.join(","))
            };
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            let values: Vec<_> = arg
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| format!("`{}`", v.get_name()))
                .collect();
            let mut meaning = cell(&help);
            if !values.is_empty() && arg.get_action().takes_values() {
                meaning += &format!(" One of {}.", values.join(", "));
            }
            if arg.is_required_set() {
                meaning += " Required.";
            }
            out += &format!("| {flag} | {env} | {default} | {} |\n", meaning.trim());
        }
        out += "\n";
    }
    out
}

/// One metric as a scrape shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricDoc {
    /// As queried: counters with `_total`, histograms without `_bucket`.
    pub name: String,
    pub kind: String,
    pub labels: Vec<String>,
    pub help: String,
    /// Sample lines in the scrape: none for a family without a child, whose labels the
    /// scrape cannot show.
    pub samples: usize,
}

/// Every metric rayshare exports, from the registry: each family gets one child so that
/// the scrape shows its labels.
pub fn metrics() -> Vec<MetricDoc> {
    let m = Metrics::default();
    let (kind, operation, outcome, reason) = ("", "", "", "");
    drop(m.requests.get_or_create(&RequestLabels {
        kind,
        operation,
        outcome,
    }));
    drop(m.duration.get_or_create(&LatencyLabels { kind, outcome }));
    for family in [&m.patches, &m.created, &m.deleted, &m.reused, &m.planned] {
        drop(family.get_or_create(&KindLabel { kind }));
    }
    drop(m.reconcile_passes.get_or_create(&KindLabel { kind }));
    drop(m.errors.get_or_create(&CauseLabel {
        cause: crate::cause::Cause::Panic,
    }));
    drop(m.cert_reloads.get_or_create(&ReloadLabel { cause: "" }));
    drop(m.connections.get_or_create(&ProtocolLabel { protocol: "" }));
    drop(m.shared_clusters.get_or_create(&StateLabel { state: "" }));
    let cluster = ClusterLabels {
        cluster_namespace: String::new(),
        cluster: String::new(),
    };
    drop(m.cluster_jobs.get_or_create(&cluster));
    drop(m.ray_jobs_unattributed.get_or_create(&cluster));
    for family in [&m.ray_jobs_stopped, &m.events, &m.events_dropped] {
        drop(family.get_or_create(&ReasonLabel { reason }));
    }
    parse_exposition(&m.encode())
}

/// The metrics of a text exposition, in its order.
pub fn parse_exposition(text: &str) -> Vec<MetricDoc> {
    let mut out: Vec<MetricDoc> = Vec::new();
    let mut help = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = rest.split_once(' ').map(|(_, h)| h).unwrap_or("").into();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = match kind {
                "counter" if !name.ends_with("_total") => format!("{name}_total"),
                _ => name.to_string(),
            };
            out.push(MetricDoc {
                name,
                kind: kind.into(),
                labels: Vec::new(),
                help: help.trim_end_matches('.').to_string(),
                samples: 0,
            });
        } else if !line.starts_with('#')
            && let Some(last) = out.last_mut()
        {
            last.samples += 1;
            let Some((_, rest)) = line.split_once('{') else {
                continue;
            };
            for pair in rest.split("\",") {
                let Some((label, _)) = pair.split_once('=') else {
                    continue;
                };
                if label != "le" && !last.labels.iter().any(|l| l == label) {
                    last.labels.push(label.to_string());
                }
            }
        }
    }
    out
}

/// The metrics table of `docs/reference/metrics.md`.
pub fn metrics_reference() -> String {
    let mut out = String::from("| name | type | labels | help |\n|---|---|---|---|\n");
    for m in metrics() {
        let labels: Vec<_> = m.labels.iter().map(|l| format!("`{l}`")).collect();
        out += &format!(
            "| `{}` | {} | {} | {} |\n",
            m.name,
            m.kind,
            labels.join(", "),
            cell(&m.help)
        );
    }
    out
}

/// Every key of the feature config with its default, as compact JSON
/// (`sharedClusters.stopJobs.timeoutMs`, `3000`), sorted by key.
pub fn config_keys() -> Vec<(String, String)> {
    let value = serde_json::to_value(crate::config::Config::default())
        .expect("the config serializes to JSON");
    let mut out = Vec::new();
    flatten("", &value, &mut out);
    out
}

fn flatten(prefix: &str, value: &Value, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, v) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&path, v, out);
            }
        }
        _ => out.push((prefix.to_string(), value.to_string())),
    }
}
