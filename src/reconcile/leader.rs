//! Leader election over a `coordination.k8s.io/v1` Lease, with optimistic concurrency:
//! only one replica runs the reconcilers; another takes over when the holder releases the
//! lease at shutdown, or stops renewing it.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, PostParams};

use super::is_conflict;

pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
}

impl Elector {
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.into(),
            identity: identity.into(),
            duration,
        }
    }

    fn spec(&self, transitions: i32) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.duration.as_secs() as i32),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// Acquires or renews the lease; `Ok(true)` while this replica leads.
    pub async fn try_lead(&self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec(0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(e) if is_conflict(&e) => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let mine = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        // Released (no holder), or not renewed in time.
        let released = spec.holder_identity.as_deref().is_none_or(str::is_empty);
        let expired = released
            || match (&spec.renew_time, spec.lease_duration_seconds) {
                (Some(MicroTime(t)), Some(secs)) => {
                    Timestamp::now() > *t + SignedDuration::from_secs(i64::from(secs))
                }
                _ => true,
            };
        if !mine && !expired {
            return Ok(false);
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!mine);
        let mut new_spec = self.spec(transitions);
        if mine {
            new_spec.acquire_time = spec.acquire_time;
        }
        lease.spec = Some(new_spec);
        // `replace` carries the resourceVersion we read: a racing replica gets a 409.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up if this replica holds it (as client-go's `ReleaseOnCancel`
    /// does), so a standby takes over at once rather than when it would have expired.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            // Someone else's already.
            Err(e) if is_conflict(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
