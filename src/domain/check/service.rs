//! The webhook's Service: its ready endpoints, its pods, and what its admin port answers
//! through the API server's service proxy.

use serde_json::Value;

use super::Line;
use crate::domain::build;

/// Ready addresses over the Service's EndpointSlices (a missing `ready` counts as ready,
/// as the EndpointSlice API says).
pub fn endpoints_line(service: &str, slices: &[Value]) -> Line {
    let endpoints = slices
        .iter()
        .flat_map(|s| s["endpoints"].as_array().into_iter().flatten());
    let (mut ready, mut total) = (0, 0);
    for e in endpoints {
        total += 1;
        if e["conditions"]["ready"].as_bool().unwrap_or(true) {
            ready += 1;
        }
    }
    if ready > 0 {
        Line::ok("endpoints", format!("{service}: {ready} of {total} ready"))
    } else {
        Line::fail(
            "endpoints",
            format!("{service}: none ready ({total} not ready)"),
            "rayshare's pods are not Ready: see the pods line, `kubectl -n <ns> describe pods` and their logs",
        )
    }
}

/// The Service itself is missing.
pub fn no_service_line(service: &str) -> Line {
    Line::fail(
        "endpoints",
        format!("service {service} does not exist"),
        "the registration points at a Service that is gone: reinstall, or delete the stale registration",
    )
}

/// rayshare's pods (those the Service selects): why any is not running.
pub fn pods_line(pods: &[Value]) -> Line {
    if pods.is_empty() {
        return Line::fail(
            "pods",
            "none: the Service selects no pod",
            "is the Deployment scaled to zero, or its pods refused (`kubectl -n <ns> get deploy,rs,events`)?",
        );
    }
    let mut pull = Vec::new();
    let mut waiting = Vec::new();
    let mut ready = 0;
    for pod in pods {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let conditions = pod["status"]["conditions"].as_array().into_iter().flatten();
        if conditions
            .into_iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
        {
            ready += 1;
        }
        for c in pod["status"]["containerStatuses"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let reason = c["state"]["waiting"]["reason"].as_str();
            match reason {
                Some("ImagePullBackOff" | "ErrImagePull" | "InvalidImageName") => {
                    let image = c["image"].as_str().unwrap_or_default();
                    pull.push(format!("{name} ({image})"));
                }
                Some(other) => waiting.push(format!("{name} ({other})")),
                None => {}
            }
        }
    }
    if !pull.is_empty() {
        return Line::fail(
            "pods",
            format!("cannot pull the image: {}", pull.join(", ")),
            format!(
                "the chart's default image ({}:<version>) exists only once that version is released; from a checkout, build one and set image.repository and image.tag",
                build::RELEASE_REPOSITORY
            ),
        );
    }
    if !waiting.is_empty() {
        return Line::fail(
            "pods",
            format!(
                "{ready} of {} Ready; waiting: {}",
                pods.len(),
                waiting.join(", ")
            ),
            "see `kubectl -n <ns> describe pods` and their logs",
        );
    }
    if ready == 0 {
        return Line::fail(
            "pods",
            format!("none of {} Ready", pods.len()),
            "rayshare reports ready once its watches listed: are KubeRay's CRDs installed? see its logs",
        );
    }
    Line::ok("pods", format!("{ready} of {} Ready", pods.len()))
}

/// What a GET through the API server's service proxy came back with.
#[derive(Debug, Clone, PartialEq)]
pub enum Proxied {
    Answered {
        status: u16,
        body: String,
    },
    /// RBAC does not let the user proxy to services.
    Forbidden,
    Failed(String),
}

/// Why the client reports a proxied GET as failed (`reason` as the client read it: a
/// body that is not a JSON Status, as rayshare's admin answers are, comes as "Failed to
/// parse error data"): the pod's own answer (the proxy passes it on with its status),
/// else the API server's refusal or its failure to reach a pod.
pub fn proxied_error(code: u16, reason: &str, message: &str) -> Proxied {
    if reason == NOT_A_STATUS {
        Proxied::Answered {
            status: code,
            body: message.to_string(),
        }
    } else if code == 403 {
        Proxied::Forbidden
    } else {
        Proxied::Failed(message.to_string())
    }
}

/// kube's reason for an error body that is not a JSON `Status`.
pub const NOT_A_STATUS: &str = "Failed to parse error data";

pub fn readyz_line(readyz: &Proxied) -> Line {
    match readyz {
        Proxied::Answered { status: 200, .. } => Line::ok(
            "readyz",
            "answered 200 through the API server's service proxy",
        ),
        Proxied::Answered { status, body } => Line::fail(
            "readyz",
            format!("answered {status}: {}", body.trim()),
            "not ready: see rayshare's logs",
        ),
        Proxied::Forbidden => Line::warn(
            "readyz",
            "not checked: RBAC does not allow you `get services/proxy`",
            "the endpoints line above says whether pods are Ready",
        ),
        Proxied::Failed(e) => Line::warn(
            "readyz",
            format!("not reached through the API server's service proxy: {e}"),
            "the API server may have no route to pod addresses; the endpoints line says whether pods are Ready",
        ),
    }
}

/// What the replica answering `/metrics` says of its build and image.
pub fn image_line(metrics: &Proxied) -> Option<Line> {
    let Proxied::Answered { status: 200, body } = metrics else {
        return None;
    };
    let version = metric_label(body, "rayshare_build_info{", "version");
    let placeholder = body.lines().find_map(|l| {
        let rest = l.strip_prefix("rayshare_image_placeholder{")?;
        let (labels, value) = rest.rsplit_once("} ")?;
        Some((labels.to_string(), value.trim() == "1"))
    });
    let version = version.unwrap_or_else(|| "unknown".into());
    Some(match placeholder {
        Some((labels, true)) => Line::warn(
            "image",
            format!("rayshare {version} runs under the placeholder image ({labels})"),
            "see rayshare's start-up warning; name an image you built (image.repository, image.tag), or run the release's own",
        ),
        _ => Line::ok("image", format!("rayshare {version}")),
    })
}

fn metric_label(body: &str, prefix: &str, label: &str) -> Option<String> {
    let line = body.lines().find(|l| l.starts_with(prefix))?;
    let start = line.find(&format!("{label}=\""))? + label.len() + 2;
    let end = line[start..].find('"')? + start;
    Some(line[start..end].to_string())
}
