//! Which MutatingWebhookConfiguration is this installation's, what it says, and which
//! namespaces it selects.

use serde_json::Value;

use super::Line;
use crate::domain::labels::INSTANCE;

/// The chart's webhook name; a registration of several rayshare webhooks names each
/// `<something>.rayshare.rayshare.io`.
pub const WEBHOOK: &str = "rayshare.rayshare.io";

fn is_rayshare_webhook(w: &Value) -> bool {
    w["name"]
        .as_str()
        .is_some_and(|n| n == WEBHOOK || n.ends_with(&format!(".{WEBHOOK}")))
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

/// The registration of `instance` among every MutatingWebhookConfiguration: the one
/// labelled `rayshare.io/instance=<instance>`, else the one named `<instance>` (the
/// chart names it after its full name, the default instance). Without an instance, the
/// only one holding a rayshare webhook.
pub fn pick<'a>(configurations: &'a [Value], instance: Option<&str>) -> Result<&'a Value, Line> {
    let ours: Vec<&Value> = configurations
        .iter()
        .filter(|c| {
            c["webhooks"]
                .as_array()
                .is_some_and(|ws| ws.iter().any(is_rayshare_webhook))
        })
        .collect();
    let hint_disabled = "install rayshare, or set webhook.enabled=true (false removes the registration: admission is off)";
    match instance {
        Some(instance) => ours
            .iter()
            .find(|c| c["metadata"]["labels"][INSTANCE] == instance)
            .or_else(|| ours.iter().find(|c| name(c) == instance))
            .copied()
            .ok_or_else(|| {
                let others: Vec<&str> = ours.iter().map(|c| name(c)).collect();
                Line::fail(
                    "webhook",
                    format!(
                        "no MutatingWebhookConfiguration of instance {instance:?} (rayshare's: {})",
                        list_or_none(&others)
                    ),
                    hint_disabled,
                )
            }),
        None => match ours.as_slice() {
            [one] => Ok(one),
            [] => Err(Line::fail(
                "webhook",
                format!("no MutatingWebhookConfiguration has a {WEBHOOK} webhook"),
                hint_disabled,
            )),
            several => {
                let names: Vec<&str> = several.iter().map(|c| name(c)).collect();
                Err(Line::fail(
                    "webhook",
                    format!("several installations: {}", names.join(", ")),
                    "name one with --instance",
                ))
            }
        },
    }
}

fn list_or_none(names: &[&str]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// Where the API server sends the reviews.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Service {
        namespace: String,
        name: String,
        port: i64,
    },
    Url(String),
    Missing,
}

/// The configuration's first rayshare webhook.
pub fn webhook(configuration: &Value) -> &Value {
    configuration["webhooks"]
        .as_array()
        .and_then(|ws| ws.iter().find(|w| is_rayshare_webhook(w)))
        .unwrap_or(&Value::Null)
}

pub fn target(webhook: &Value) -> Target {
    let config = &webhook["clientConfig"];
    let service = &config["service"];
    match (service["namespace"].as_str(), service["name"].as_str()) {
        (Some(namespace), Some(name)) => Target::Service {
            namespace: namespace.into(),
            name: name.into(),
            port: service["port"].as_i64().unwrap_or(443),
        },
        _ => match config["url"].as_str() {
            Some(url) => Target::Url(url.into()),
            None => Target::Missing,
        },
    }
}

/// The resources the webhook's rules send (`rayjobs`, `pods`).
pub fn resources(webhook: &Value) -> Vec<&str> {
    webhook["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["resources"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect()
}

/// What the registration says: that it is there, and for which resources; its caBundle;
/// its failurePolicy; its namespaceSelector.
pub fn lines(configuration: &Value) -> Vec<Line> {
    let webhook = webhook(configuration);
    let resources = resources(webhook);
    let to = match target(webhook) {
        Target::Service {
            namespace,
            name,
            port,
        } => format!("service {namespace}/{name}:{port}"),
        Target::Url(url) => format!("url {url}"),
        Target::Missing => "nowhere".into(),
    };
    let registered = format!(
        "{} ({}) sends {} to {to}",
        name(configuration),
        webhook["name"].as_str().unwrap_or_default(),
        list_or_none(&resources),
    );
    let mut out = vec![if resources.is_empty() {
        Line::fail(
            "webhook",
            registered,
            "no rules: config.sharedClusters, podGroups and indices are all off",
        )
    } else {
        Line::ok("webhook", registered)
    }];
    let ca = webhook["clientConfig"]["caBundle"]
        .as_str()
        .unwrap_or_default();
    out.push(if !ca.is_empty() {
        Line::ok("caBundle", format!("set ({} bytes, base64)", ca.len()))
    } else if matches!(target(webhook), Target::Url(ref u) if !u.starts_with("https://")) {
        Line::fail(
            "caBundle",
            "empty, and the url is not https",
            "the API server calls webhooks over https only",
        )
    } else {
        Line::fail(
            "caBundle",
            "empty: the API server cannot trust rayshare's certificate (unless rayshare's is signed by a CA the API server trusts)",
            "certs.mode=certManager: is cert-manager's cainjector running? provided: set certs.caBundle",
        )
    });
    out.push(match webhook["failurePolicy"].as_str().unwrap_or("Fail") {
        "Ignore" => Line::ok(
            "failurePolicy",
            "Ignore: while rayshare cannot be reached, objects are admitted unchanged",
        ),
        other => Line::ok(
            "failurePolicy",
            format!("{other}: while rayshare cannot be reached, creating RayJobs and pods in opted-in namespaces is refused"),
        ),
    });
    let selector = &webhook["namespaceSelector"];
    out.push(match selector_query(selector) {
        Ok(query) if query.is_empty() => Line::warn(
            "namespaceSelector",
            "empty: every namespace, rayshare's own and the system ones too",
            "select namespaces by label (the chart's webhook.enableLabel)",
        ),
        Ok(query) => Line::ok("namespaceSelector", query),
        Err(e) => Line::warn("namespaceSelector", e, "check the registration by hand"),
    });
    out
}

/// A label selector (`matchLabels`, `matchExpressions`) in the list API's `labelSelector`
/// syntax, for the API server to apply.
pub fn selector_query(selector: &Value) -> Result<String, String> {
    let mut terms = Vec::new();
    if let Some(labels) = selector["matchLabels"].as_object() {
        for (key, value) in labels {
            terms.push(format!("{key}={}", value.as_str().unwrap_or_default()));
        }
    }
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        terms.push(match e["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => return Err(format!("unknown selector operator {other:?}")),
        });
    }
    Ok(terms.join(","))
}

/// The namespaces the selector picks (as the API server listed them).
pub fn namespaces_line(selected: &[String], enable_hint: &str) -> Line {
    const SHOWN: usize = 10;
    match selected {
        [] => Line::warn(
            "namespaces",
            "none opted in: rayshare is called for nothing",
            enable_hint.to_string(),
        ),
        names => {
            let mut said = names
                .iter()
                .take(SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            if names.len() > SHOWN {
                said.push_str(&format!(" and {} more", names.len() - SHOWN));
            }
            Line::ok("namespaces", format!("{} opted in: {said}", names.len()))
        }
    }
}

/// `kubectl label namespace NAME key=value`, from the selector's first `In` term (or its
/// first matchLabels).
pub fn enable_hint(selector: &Value) -> String {
    let from_labels = selector["matchLabels"]
        .as_object()
        .and_then(|m| m.iter().next())
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()));
    let from_expressions = || {
        selector["matchExpressions"]
            .as_array()?
            .iter()
            .find(|e| e["operator"] == "In")
            .map(|e| {
                format!(
                    "{}={}",
                    e["key"].as_str().unwrap_or_default(),
                    e["values"][0].as_str().unwrap_or_default()
                )
            })
    };
    match from_labels.or_else(from_expressions) {
        Some(label) => format!("kubectl label namespace NAME {label}"),
        None => "label a namespace to match the registration's namespaceSelector".into(),
    }
}
