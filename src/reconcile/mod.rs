//! Background reconcilers, run by one replica at a time (see `leader`): they delete what
//! rayshare created for objects that never appeared or are gone.

pub mod clusters;
pub mod index_claims;
pub mod leader;
pub mod pod_groups;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Preconditions};
use kube::core::ApiResource;

use crate::config::Config;
use crate::metrics::{KindLabel, Metrics};

pub const LEASE_NAME: &str = "rayshare-reconciler";

pub struct Election {
    pub namespace: String,
    pub identity: String,
    /// How long a leader's lease lasts without renewal (takeover time after a crash).
    pub lease: Duration,
}

/// Age of an object from its creationTimestamp (zero when unknown).
pub fn age(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Duration {
    meta.creation_timestamp
        .as_ref()
        .and_then(|t| Timestamp::now().duration_since(t.0).try_into().ok())
        .unwrap_or_default()
}

/// Deletes an object only if it is still the one we looked at (uid precondition).
pub async fn delete_exact(
    client: &Client,
    resource: &ApiResource,
    object: &kube::core::PartialObjectMeta<DynamicObject>,
    kind: &'static str,
    reason: &str,
    metrics: &Metrics,
) {
    let (Some(ns), Some(name)) = (&object.metadata.namespace, &object.metadata.name) else {
        return;
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, resource);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: object.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => {
            tracing::info!(kind, namespace = %ns, name = %name, reason, "deleted");
            metrics.deleted.get_or_create(&KindLabel { kind }).inc();
        }
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
        Err(e) => {
            tracing::warn!(kind, namespace = %ns, name = %name, error = %e, "delete failed");
            metrics.error("reconcile_delete");
        }
    }
}

/// Runs the enabled reconcilers forever, each pass only while this replica leads.
pub fn spawn_all(client: Client, config: Arc<Config>, metrics: Arc<Metrics>, election: Election) {
    let interval = [
        config
            .pod_groups
            .enabled
            .then_some(config.pod_groups.reconcile_interval_seconds),
        config
            .indices
            .enabled
            .then_some(config.indices.reconcile_interval_seconds),
    ]
    .into_iter()
    .flatten()
    .min();
    let Some(interval) = interval else {
        return;
    };
    let elector = leader::Elector::new(
        client.clone(),
        &election.namespace,
        LEASE_NAME,
        &election.identity,
        election.lease,
    );
    let lease = election.lease;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(interval).min(lease / 3));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut leading = false;
        loop {
            tick.tick().await;
            match elector.try_lead().await {
                Ok(now_leading) => {
                    if now_leading != leading {
                        tracing::info!(leading = now_leading, "reconciler leadership changed");
                    }
                    leading = now_leading;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "leader election failed");
                    metrics.error("leader_election");
                    leading = false;
                }
            }
            if !leading {
                continue;
            }
            if config.pod_groups.enabled {
                pod_groups::pass(&client, &config.pod_groups, &metrics).await;
            }
            if config.indices.enabled {
                index_claims::pass(&client, &config.indices, &metrics).await;
            }
            if config.reclaim.enabled && config.shared_clusters.enabled {
                clusters::pass(&client, &config, &metrics).await;
            }
        }
    });
}
