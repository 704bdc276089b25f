//! Leader election over a `coordination.k8s.io/v1` Lease, with optimistic concurrency:
//! only one replica runs the reconcilers; another takes over when the holder releases the
//! lease at shutdown, or stops renewing it.
//!
//! "Stops renewing" is judged as client-go judges it: by this replica's own clock, from
//! when it saw the lease's record last change, never by comparing the holder's renew time
//! with this replica's clock (nodes' clocks differ; a clock ahead by more than a lease
//! would take a lease that is being renewed).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};

use crate::cause::Cause;
use crate::metrics::Metrics;
use crate::world::kube::calls::is_conflict;

pub const LEASE_NAME: &str = "rayshare-reconciler";

/// Longest a shutdown waits for the lease to be given up.
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(3);

/// Who competes for the lease, where, and for how long a lease lasts.
pub struct Election {
    pub namespace: String,
    pub identity: String,
    /// How long a leader's lease lasts without renewal (takeover time after a crash).
    pub lease: Duration,
}

pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    observed: Mutex<Observed>,
}

/// A lease's record as last seen (holder, renew time, transitions), and when it was first
/// seen so, by this replica's clock.
#[derive(Debug, Default)]
struct Observed {
    record: Option<(Option<String>, Option<MicroTime>, Option<i32>)>,
    since: Option<Instant>,
}

/// Whether another holder's lease may be taken at `now`: released (no holder), or its
/// record unchanged for its whole duration since this replica saw it change.
fn lapsed(spec: &LeaseSpec, observed: &mut Observed, now: Instant) -> bool {
    if spec.holder_identity.as_deref().is_none_or(str::is_empty) {
        return true;
    }
    let record = (
        spec.holder_identity.clone(),
        spec.renew_time.clone(),
        spec.lease_transitions,
    );
    if observed.record.as_ref() != Some(&record) {
        observed.record = Some(record);
        observed.since = Some(now);
        return false;
    }
    let secs = spec.lease_duration_seconds.unwrap_or(0).max(0);
    let since = observed.since.unwrap_or(now);
    now.duration_since(since) > Duration::from_secs(secs.unsigned_abs().into())
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
            observed: Mutex::default(),
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
        let may_take = || {
            let mut observed = self.observed.lock().expect("not poisoned");
            lapsed(&spec, &mut observed, Instant::now())
        };
        if !mine && !may_take() {
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

/// One attempt at the lease, as the loop saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// Acquired or renewed.
    Leads,
    /// Someone else holds it (or won a race for it).
    Lost,
    /// Errored or timed out: nothing is known.
    Failed,
}

/// How long a leader keeps leading through failed renewals: the renew deadline, measured
/// from the start of its last successful renewal (client-go's `RenewDeadline`, 10 s of a
/// 15 s lease). A standby takes over only after seeing the record unchanged for a whole
/// lease by its own clock, which starts no earlier than that renewal: the third left over
/// is the margin for clocks that run at different rates. Stepping down at the first failed
/// renewal instead flapped leadership all through a 1,000-pod burst, whenever one renewal
/// was slow, and restarted every leader-only controller each time.
#[derive(Debug, Default)]
struct Tenure {
    /// The start of the last successful attempt, while leading.
    renewed: Option<Instant>,
}

impl Tenure {
    fn deadline(lease: Duration) -> Duration {
        lease * 2 / 3
    }

    /// Whether this replica leads after an attempt that started at `started` and ended
    /// at `now`.
    fn after(&mut self, started: Instant, attempt: Attempt, now: Instant, lease: Duration) -> bool {
        match attempt {
            Attempt::Leads => self.renewed = Some(started),
            Attempt::Lost => self.renewed = None,
            Attempt::Failed => {
                self.renewed = self.renewed.filter(|at| now < *at + Self::deadline(lease));
            }
        }
        self.renewed.is_some()
    }

    /// The longest the next attempt may take: a leader's must end by its renew deadline,
    /// so that it steps down in time even when the call hangs.
    fn attempt_bound(&self, now: Instant, lease: Duration) -> Duration {
        let usual = lease / 3;
        match self.renewed {
            Some(at) => usual
                .min((at + Self::deadline(lease)).saturating_duration_since(now))
                .max(Duration::from_millis(1)),
            None => usual,
        }
    }

    /// When to try next: a lease's third after a success or as a standby, sooner while a
    /// leader's renewals fail (client-go's `RetryPeriod`, 2 s of a 15 s lease).
    fn next_in(&self, attempt: Attempt, lease: Duration) -> Duration {
        match (attempt, self.renewed) {
            (Attempt::Failed, Some(_)) => lease * 2 / 15,
            _ => lease / 3,
        }
    }
}

/// Holds (or tries to take) the lease, telling the reconcilers whether they lead. A
/// standby watches the lease, so one given up is taken at once; `stop` gives it up.
pub async fn lead(
    client: Client,
    election: Election,
    leading: tokio::sync::watch::Sender<bool>,
    metrics: Arc<Metrics>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};

    let elector = Elector::new(
        client.clone(),
        &election.namespace,
        LEASE_NAME,
        &election.identity,
        election.lease,
    );
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client, &election.namespace);
    let only_ours = watcher::Config::default().fields(&format!("metadata.name={LEASE_NAME}"));
    let changes = watcher(leases, only_ours).default_backoff();
    let mut changes = std::pin::pin!(changes);
    let mut tenure = Tenure::default();
    // The first attempt at once.
    let mut wait = Duration::ZERO;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            // The holder renewed or released it: a standby looks now.
            Some(_) = changes.next(), if !*leading.borrow() => {}
            _ = stop.changed() => {
                leading.send_replace(false);
                metrics.set_leading(false);
                match tokio::time::timeout(RELEASE_TIMEOUT, elector.release()).await {
                    Ok(Ok(())) => tracing::info!("reconciler lease released"),
                    Ok(Err(e)) => tracing::warn!(error = %e, "cannot release the reconciler lease"),
                    Err(_) => tracing::warn!("releasing the reconciler lease timed out"),
                }
                return;
            }
        }
        // Bounded by the renew deadline: a hung call must end this replica's lead before
        // another replica may take the expired lease.
        let started = Instant::now();
        let bound = tenure.attempt_bound(started, election.lease);
        let (attempt, error) = match tokio::time::timeout(bound, elector.try_lead()).await {
            Ok(Ok(true)) => (Attempt::Leads, None),
            Ok(Ok(false)) => (Attempt::Lost, None),
            Ok(Err(e)) => (Attempt::Failed, Some(e.to_string())),
            Err(_) => (Attempt::Failed, Some("timed out".to_string())),
        };
        let was_leading = *leading.borrow();
        let now_leading = tenure.after(started, attempt, Instant::now(), election.lease);
        wait = tenure.next_in(attempt, election.lease);
        if let Some(error) = error {
            // A leader within its renew deadline keeps leading and retries soon.
            tracing::warn!(%error, leading = now_leading, "leader election failed");
            metrics.error(Cause::LeaderElection);
            if was_leading && !now_leading {
                tracing::warn!("no renewal within the renew deadline: stepping down");
            }
        }
        leading.send_if_modified(|l| {
            let changed = *l != now_leading;
            if changed {
                tracing::info!(leading = now_leading, "reconciler leadership changed");
                metrics.set_leading(now_leading);
            }
            *l = now_leading;
            changed
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(by: &str, renewed: &str, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(by.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(renewed.parse().unwrap())),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let released = LeaseSpec::default();
        assert!(lapsed(&released, &mut Observed::default(), Instant::now()));
    }

    #[test]
    fn a_lease_renewed_long_ago_by_anothers_clock_is_not_taken_on_first_sight() {
        // The holder's clock may be far behind ours: its renew time says nothing.
        let lease = held("b", "2001-01-01T00:00:00Z", 3);
        let mut observed = Observed::default();
        let t0 = Instant::now();
        assert!(!lapsed(&lease, &mut observed, t0));
        assert!(!lapsed(&lease, &mut observed, t0 + Duration::from_secs(15)));
        assert!(lapsed(&lease, &mut observed, t0 + Duration::from_secs(16)));
    }

    #[test]
    fn a_renewal_starts_the_wait_again() {
        let mut observed = Observed::default();
        let t0 = Instant::now();
        assert!(!lapsed(
            &held("b", "2026-11-26T12:00:00Z", 3),
            &mut observed,
            t0
        ));
        let renewed = held("b", "2026-11-26T12:00:05Z", 3);
        let t1 = t0 + Duration::from_secs(14);
        assert!(!lapsed(&renewed, &mut observed, t1));
        assert!(!lapsed(
            &renewed,
            &mut observed,
            t1 + Duration::from_secs(15)
        ));
        assert!(lapsed(
            &renewed,
            &mut observed,
            t1 + Duration::from_secs(16)
        ));
    }

    #[test]
    fn a_new_holder_is_a_change_too() {
        let mut observed = Observed::default();
        let t0 = Instant::now();
        let same_time = "2026-11-26T12:00:00Z";
        assert!(!lapsed(&held("b", same_time, 3), &mut observed, t0));
        let later = t0 + Duration::from_secs(20);
        assert!(!lapsed(&held("c", same_time, 4), &mut observed, later));
    }

    const LEASE: Duration = Duration::from_secs(15);

    #[test]
    fn a_leader_rides_out_failed_renewals_until_its_renew_deadline() {
        let mut t = Tenure::default();
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert!(t.after(t0, Attempt::Leads, t0 + s(1), LEASE));
        // Renewals fail (a saturated API server): it still leads, and retries in 2 s.
        assert!(t.after(t0 + s(5), Attempt::Failed, t0 + s(6), LEASE));
        assert_eq!(t.next_in(Attempt::Failed, LEASE), s(2));
        assert!(t.after(t0 + s(7), Attempt::Failed, t0 + s(9), LEASE));
        // The next attempt must end by the deadline (10 s after the renewal began).
        assert_eq!(t.attempt_bound(t0 + s(9), LEASE), s(1));
        // A success starts the deadline again.
        assert!(t.after(t0 + s(9), Attempt::Leads, t0 + s(9), LEASE));
        assert_eq!(t.next_in(Attempt::Leads, LEASE), s(5));
        assert!(t.after(t0 + s(14), Attempt::Failed, t0 + s(18), LEASE));
        // Past it: down, well before a standby may take the lease (15 s unchanged).
        assert!(!t.after(t0 + s(18), Attempt::Failed, t0 + s(19), LEASE));
        assert_eq!(t.next_in(Attempt::Failed, LEASE), s(5));
    }

    #[test]
    fn a_lost_lease_ends_the_lead_at_once_and_a_standby_never_leads_on_failures() {
        let mut t = Tenure::default();
        let t0 = Instant::now();
        assert!(!t.after(t0, Attempt::Failed, t0, LEASE));
        assert_eq!(t.attempt_bound(t0, LEASE), Duration::from_secs(5));
        assert!(t.after(t0, Attempt::Leads, t0, LEASE));
        assert!(!t.after(t0, Attempt::Lost, t0, LEASE));
        assert!(!t.after(t0, Attempt::Failed, t0, LEASE));
    }
}
