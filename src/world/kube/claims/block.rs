//! Block claims: one Lease for a whole replica of a multi-host group, made by its first
//! pod; the webhook replica that made it hands the replica's other hosts to its next pods
//! from memory. A slice burst then costs one API write per replica, not one per pod.
//!
//! Only the block's maker hands out its hosts, only for a moment after making it
//! ([`OpenBlock::usable`]), then it seals the block with how many it handed out; the rest
//! go to per-host claims. A block is never deleted before its cluster: it is what keeps
//! per-host claims in its replica apart from its maker's hand-outs.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::KnownClaims;
use crate::domain::indices::Slot;
use crate::domain::indices::claims::Claim;
use crate::domain::labels;
use crate::world::IndexRequest;
use crate::world::kube::calls::bounded;
use crate::world::kube::resources::lease_resource;

/// A seal runs in the background, well after the admission that made its block: its own
/// bound, not what was left of that admission's.
const SEAL_TIMEOUT: Duration = Duration::from_secs(5);

/// A block is sealed once no pod asked for a host this long (counted from its create's
/// answer, then from each hand-out), so its free hosts go to per-host claims soon after
/// a burst ends.
const IDLE: Duration = Duration::from_millis(200);

/// A block this replica made and still hands out hosts from.
#[derive(Debug)]
pub(super) struct OpenBlock {
    pub replica: u32,
    pub hosts: u32,
    /// The next host to hand out.
    pub next: u32,
    pub name: String,
    pub resource_version: String,
    opened: Instant,
    last: Instant,
    /// How long after its create it may hand out hosts: well inside the takeover wait,
    /// so whoever takes a block over never races its maker.
    open_for: Duration,
}

impl OpenBlock {
    /// A block asked for at `asked` (its time to hand out counts from there, so it ends
    /// before a takeover can start whatever the create took) and made at `made`.
    pub fn new(
        replica: u32,
        hosts: u32,
        name: String,
        resource_version: String,
        open_for: Duration,
        (asked, made): (Instant, Instant),
    ) -> Self {
        Self {
            replica,
            hosts,
            next: 0,
            name,
            resource_version,
            opened: asked,
            last: made,
            open_for,
        }
    }

    fn closes_at(&self) -> Instant {
        (self.last + IDLE).min(self.opened + self.open_for)
    }

    /// It may still hand out a host.
    pub fn usable(&self, now: Instant) -> bool {
        self.next < self.hosts && now < self.closes_at()
    }

    /// The next host, if the block may still hand it out.
    pub fn take(&mut self, now: Instant) -> Option<Slot> {
        if !self.usable(now) {
            return None;
        }
        let slot = Slot {
            replica: self.replica,
            host: self.next,
        };
        self.next += 1;
        self.last = now;
        Some(slot)
    }
}

/// Deterministic per (cluster, group, replica); a per-host claim's name has the host
/// after it, so the two never meet.
pub(super) fn block_name(r: &IndexRequest, replica: u32) -> String {
    format!("{}-{replica}", super::group_prefix(r))
}

/// A block Lease for `replica`; `assigned` set for a gate (a block that hands out
/// nothing, made so per-host claims may go in its replica).
pub(super) fn block_object(r: &IndexRequest, replica: u32, assigned: Option<u32>) -> Value {
    let mut lease = super::lease_object(r, &block_name(r, replica));
    let meta = &mut lease["metadata"];
    meta["labels"][labels::REPLICA_INDEX] = json!(replica.to_string());
    meta["labels"][labels::CLAIM_HOSTS] = json!(r.shape.hosts.to_string());
    if let Some(n) = assigned {
        meta["annotations"][labels::HOSTS_ASSIGNED] = json!(n.to_string());
    }
    lease
}

fn timeout_error() -> kube::Error {
    kube::Error::Service("index claim timed out".into())
}

/// Says how many of its hosts a block handed out, exactly on the version judged (a
/// block sealed or taken over meanwhile keeps what the other writer said).
pub(super) async fn seal(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    resource_version: &str,
    assigned: u32,
    timeout: Duration,
) -> Result<(), kube::Error> {
    let leases: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &lease_resource());
    let patch = json!({"metadata": {
        "resourceVersion": resource_version,
        "annotations": {labels::HOSTS_ASSIGNED: assigned.to_string()},
    }});
    bounded(
        timeout,
        leases.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await
    .map_err(|_| timeout_error())?
    .map(|_| ())
}

/// Takes over a block whose handed-out hosts' pods never came: only live pods count in
/// it from now on.
pub(super) async fn take_over(
    client: &kube::Client,
    namespace: &str,
    claim: &Claim,
    timeout: Duration,
) {
    if let Err(e) = seal(
        client,
        namespace,
        &claim.name,
        &claim.resource_version,
        0,
        timeout,
    )
    .await
    {
        tracing::debug!(namespace, claim = %claim.name, error = %e, "block not taken over");
    }
}

/// Makes `replica`'s block, books it (no longer on its way, waiters woken, open here) and
/// takes its first host for the pod that asked: `None` when another replica made it
/// first. Run as a task of its own, so the booking happens even if that pod's admission
/// is dropped; its create is bounded by the admission's `deadline`.
pub(super) async fn open(
    client: kube::Client,
    (r, replica): (IndexRequest, u32),
    open_for: Duration,
    known: Arc<tokio::sync::Mutex<KnownClaims>>,
    deadline: std::time::Instant,
) -> Result<Option<Slot>, crate::world::WorldError> {
    let asked = Instant::now();
    let object = block_object(&r, replica, None);
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    let made = crate::world::kube::try_create(&client, &object, left).await;
    let answered = Instant::now();
    let mut booked = known.lock().await;
    booked.making.remove(&replica);
    booked.made.notify_waiters();
    let Some(resource_version) = made? else {
        return Ok(None);
    };
    let name = block_name(&r, replica);
    let block = OpenBlock::new(
        replica,
        r.shape.hosts,
        name.clone(),
        resource_version,
        open_for,
        (asked, answered),
    );
    booked.add_open(block);
    let slot = booked.take_open();
    drop(booked);
    seal_when_closed(client, r.namespace, known, name);
    Ok(slot)
}

/// Seals open block `name` once it may hand out no more, unless it handed out every host
/// (nothing left to say).
pub(super) fn seal_when_closed(
    client: kube::Client,
    namespace: String,
    known: Arc<tokio::sync::Mutex<KnownClaims>>,
    name: String,
) {
    tokio::spawn(async move {
        loop {
            let closes_at = match known.lock().await.open.iter().find(|b| b.name == name) {
                Some(b) => b.closes_at(),
                None => return,
            };
            tokio::time::sleep_until(closes_at).await;
            let block = {
                let mut known = known.lock().await;
                match known.open.iter().find(|b| b.name == name) {
                    Some(b) if b.usable(Instant::now()) => continue,
                    Some(_) => known.close(&name),
                    None => return,
                }
            };
            if let Some(block) = block {
                seal_closed(&client, &namespace, &block, SEAL_TIMEOUT).await;
            }
            return;
        }
    });
}

/// Seals a block taken out of use (one that handed out every host needs nothing).
pub(super) async fn seal_closed(
    client: &kube::Client,
    namespace: &str,
    block: &OpenBlock,
    timeout: Duration,
) {
    if block.next >= block.hosts {
        return;
    }
    match seal(
        client,
        namespace,
        &block.name,
        &block.resource_version,
        block.next,
        timeout,
    )
    .await
    {
        Ok(()) => {
            tracing::debug!(namespace, claim = %block.name, handed_out = block.next, "block sealed")
        }
        // Others count all its hosts taken until its pods come or it leaves the
        // in-flight window: slower, never wrong.
        Err(e) => tracing::warn!(namespace, claim = %block.name, error = %e, "block not sealed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::WorkerGroup;

    /// A client whose API server answers every call with `status` (201: the Lease made).
    fn answering(status: u16) -> kube::Client {
        let service = tower::service_fn(move |_: axum::http::Request<kube::client::Body>| {
            let body = if status == 201 {
                json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": "b", "namespace": "ns", "resourceVersion": "7"}})
            } else {
                json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
                    "reason": "AlreadyExists", "code": 409, "message": "exists"})
            };
            let response = axum::http::Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(kube::client::Body::from(body.to_string().into_bytes()));
            async move { response }
        });
        kube::Client::new(service, "ns")
    }

    /// Makes block 3 of a group whose `known` has it on its way.
    async fn open_in(status: u16, known: &Arc<tokio::sync::Mutex<KnownClaims>>) -> Option<Slot> {
        let request = IndexRequest {
            namespace: "ns".into(),
            cluster: "c".into(),
            cluster_uid: "u".into(),
            group: "g".into(),
            shape: WorkerGroup {
                hosts: 4,
                replicas: 16,
            },
            admission_uid: "a".into(),
            dry_run: false,
            instance: "rs".into(),
        };
        known.lock().await.making.insert(3, 4);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let made = open(
            answering(status),
            (request, 3),
            Duration::from_secs(1),
            known.clone(),
            deadline,
        );
        made.await.expect("answered")
    }

    #[tokio::test]
    async fn a_block_made_is_booked_open_and_gives_its_first_host() {
        let known = Arc::default();
        let slot = open_in(201, &known).await;
        assert_eq!(
            slot,
            Some(Slot {
                replica: 3,
                host: 0
            })
        );
        let known = known.lock().await;
        assert!(known.making.is_empty(), "no longer on its way");
        assert_eq!(known.open.len(), 1);
    }

    #[tokio::test]
    async fn a_block_another_replica_made_wakes_the_waiters_with_nothing_open() {
        let known: Arc<tokio::sync::Mutex<KnownClaims>> = Arc::default();
        let made = known.lock().await.made.clone();
        // Registered now, as a waiting pod's is before it lets the lock go.
        let woken = made.notified();
        assert_eq!(open_in(409, &known).await, None);
        tokio::time::timeout(Duration::from_secs(1), woken)
            .await
            .expect("the waiters woken");
        let known = known.lock().await;
        assert!(known.making.is_empty() && known.open.is_empty());
    }

    fn block(open_for_ms: u64, at: Instant) -> OpenBlock {
        OpenBlock::new(
            3,
            2,
            "b".into(),
            "1".into(),
            Duration::from_millis(open_for_ms),
            (at, at),
        )
    }

    #[test]
    fn a_slow_create_leaves_the_block_usable() {
        // The create took longer than the idle time, well within the time to hand out.
        let asked = Instant::now();
        let made = asked + IDLE * 2;
        let mut b = OpenBlock::new(0, 4, "b".into(), "1".into(), IDLE * 5, (asked, made));
        assert!(b.take(made).is_some());
        assert!(b.take(made + IDLE / 2).is_some());
        // Yet it closes when its time since the ask is up, however busy.
        assert_eq!(b.take(asked + IDLE * 5), None);
    }

    #[test]
    fn a_block_hands_out_each_host_once_then_nothing() {
        let t = Instant::now();
        let mut b = block(1000, t);
        assert_eq!(
            b.take(t),
            Some(Slot {
                replica: 3,
                host: 0
            })
        );
        assert_eq!(
            b.take(t + Duration::from_millis(50)),
            Some(Slot {
                replica: 3,
                host: 1
            })
        );
        assert_eq!(b.take(t + Duration::from_millis(60)), None);
        assert!(!b.usable(t));
    }

    #[test]
    fn a_block_closes_when_idle_or_old() {
        let t = Instant::now();
        let mut idle = block(1000, t);
        idle.take(t);
        assert!(idle.usable(t + IDLE - Duration::from_millis(1)));
        assert!(!idle.usable(t + IDLE));
        assert_eq!(idle.take(t + IDLE), None);
        // Kept busy, it still closes when its time is up.
        let mut busy = OpenBlock {
            hosts: 100,
            ..block(150, t)
        };
        assert!(busy.take(t + Duration::from_millis(90)).is_some());
        assert!(busy.take(t + Duration::from_millis(149)).is_some());
        assert_eq!(busy.take(t + Duration::from_millis(150)), None);
    }
}
