//! `rayshare check`: reads what an operator would look at with kubectl (the user's
//! kubeconfig, as `status` and `drain`) and has `domain::check` judge it, one line per
//! check. Every read that fails becomes a line; nothing here stops the others.

mod reads;

use kube::Client;
use serde_json::Value;

use crate::cli::CheckArgs;
use crate::domain::check::dry_run::{self, DryRun};
use crate::domain::check::operators::{self, Served};
use crate::domain::check::registration::{self, Target};
use crate::domain::check::service;
use crate::domain::check::{Line, Report};

/// Every check, in the order an operator would go: the registration, what it points at,
/// the operators, then a dry run through it all.
pub async fn run(client: &Client, args: &CheckArgs) -> Report {
    let mut lines = Vec::new();
    let mut namespaces = Vec::new();
    let mut pods_sent = false;
    match reads::list_all(reads::configurations(client), "").await {
        Err(e) => lines.push(Line::fail(
            "webhook",
            format!("cannot list MutatingWebhookConfigurations: {e}"),
            "you need `list mutatingwebhookconfigurations` (cluster-wide)",
        )),
        Ok(configurations) => match registration::pick(&configurations, args.instance.as_deref()) {
            Err(line) => lines.push(line),
            Ok(configuration) => {
                lines.extend(registration::lines(configuration));
                let webhook = registration::webhook(configuration);
                pods_sent = registration::resources(webhook).contains(&"pods");
                namespaces = selected_namespaces(client, webhook, &mut lines).await;
                lines.extend(serving(client, registration::target(webhook)).await);
            }
        },
    }
    let ray_jobs = reads::served_resource(client, "ray.io/v1", "rayjobs").await;
    let found = reads::list_all(reads::deployments(client), "")
        .await
        .map(|deployments| operators::operators(&deployments))
        .map_err(|e| e.to_string());
    let kuberay_volcano = operators::schedules_with_volcano(&found);
    lines.extend(operators::kuberay_lines(&ray_jobs, &found));
    let groups = reads::groups(client).await.map_err(|e| e.to_string());
    let served = |group| operators::served_group(&groups, group);
    lines.push(operators::volcano_line(
        &served("scheduling.volcano.sh"),
        pods_sent,
        kuberay_volcano,
    ));
    lines.push(operators::kueue_line(&served("kueue.x-k8s.io")));
    let namespace = args
        .namespace
        .clone()
        .or_else(|| namespaces.first().cloned());
    let dry = match namespace {
        Some(_) if ray_jobs != Served::Yes => DryRun::NotRun("RayJobs are not served".into()),
        Some(ns) => reads::dry_run_ray_job(client, &ns).await,
        None => DryRun::NotRun("no opted-in namespace".into()),
    };
    lines.extend(dry_run::lines(&dry, kuberay_volcano));
    Report::new(lines)
}

/// The namespaces the registration selects (and its line).
async fn selected_namespaces(
    client: &Client,
    webhook: &Value,
    lines: &mut Vec<Line>,
) -> Vec<String> {
    let selector = &webhook["namespaceSelector"];
    let Ok(query) = registration::selector_query(selector) else {
        return Vec::new();
    };
    match reads::list_all(reads::namespaces(client), &query).await {
        Ok(found) => {
            let names: Vec<String> = found
                .iter()
                .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
                .collect();
            lines.push(registration::namespaces_line(
                &names,
                &registration::enable_hint(selector),
            ));
            names
        }
        Err(e) => {
            lines.push(Line::warn(
                "namespaces",
                format!("cannot list namespaces: {e}"),
                "you need `list namespaces`",
            ));
            Vec::new()
        }
    }
}

/// The Service the registration points at: its endpoints, its pods, its /readyz and what
/// its /metrics say of the image.
async fn serving(client: &Client, target: Target) -> Vec<Line> {
    let (namespace, name) = match target {
        Target::Service {
            namespace, name, ..
        } => (namespace, name),
        Target::Url(url) => {
            return vec![Line::warn(
                "endpoints",
                format!("the API server calls {url} directly: no Service to check"),
                "the dry run below shows whether it answers",
            )];
        }
        Target::Missing => return Vec::new(),
    };
    let shown = format!("{namespace}/{name}");
    let svc = match reads::service(client, &namespace, &name).await {
        Ok(Some(svc)) => svc,
        Ok(None) => return vec![service::no_service_line(&shown)],
        Err(e) => {
            return vec![Line::warn(
                "endpoints",
                format!("cannot read service {shown}: {e}"),
                "you need `get services` in rayshare's namespace",
            )];
        }
    };
    let mut out = Vec::new();
    match reads::endpoint_slices(client, &namespace, &name).await {
        Ok(slices) => out.push(service::endpoints_line(&shown, &slices)),
        Err(e) => out.push(Line::warn(
            "endpoints",
            format!("cannot list EndpointSlices: {e}"),
            "you need `list endpointslices` in rayshare's namespace",
        )),
    }
    let selector =
        registration::selector_query(&serde_json::json!({"matchLabels": svc["spec"]["selector"]}));
    if let Some(selector) = selector.ok().filter(|s| !s.is_empty()) {
        match reads::list_all(reads::pods(client, &namespace), &selector).await {
            Ok(pods) => out.push(service::pods_line(&pods)),
            Err(e) => out.push(Line::warn(
                "pods",
                format!("cannot list pods: {e}"),
                "you need `list pods` in rayshare's namespace",
            )),
        }
    }
    let admin = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "admin")
        .and_then(|p| p["name"].as_str());
    if let Some(port) = admin {
        let readyz = reads::proxy(client, &namespace, &name, port, "readyz").await;
        out.push(service::readyz_line(&readyz));
        let metrics = reads::proxy(client, &namespace, &name, port, "metrics").await;
        out.extend(service::image_line(&metrics));
    }
    out
}
