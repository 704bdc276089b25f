//! What must hold for every input, checked on one request body.
//!
//! - No panic; the answer is an AdmissionReview echoing the uid.
//! - Fail-open: with the default config every review that parses is allowed.
//! - A patch applies to the object it was made for.
//! - Idempotence: the API server may call a webhook again with the object as mutated
//!   (`reinvocationPolicy`); that admission changes nothing more.
//! - A dry run makes nothing: the world records no object, claim, job or event.
//! - Each case ends within the admission budget (`admissionTimeoutMs`): a case that does
//!   not is failed (and shrunk) while its thread is left behind.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Value, json};

use rayshare::admission::{self, AdmissionRequest};
use rayshare::config::Config;
use rayshare::domain::indices::Slot;
use rayshare::world::MemoryWorld;

/// All a world has recorded.
#[derive(Debug, PartialEq)]
struct Snapshot {
    objects: HashMap<(String, String, String), Value>,
    claims: BTreeMap<(String, String, String), BTreeSet<Slot>>,
    jobs: HashMap<(String, String), usize>,
    events: usize,
}

fn snapshot(world: &MemoryWorld) -> Snapshot {
    Snapshot {
        objects: world.objects.lock().unwrap().clone(),
        claims: world.claims.lock().unwrap().clone(),
        jobs: world.jobs.lock().unwrap().clone(),
        events: world.events.lock().unwrap().len(),
    }
}

/// `req` again, carrying `object` instead (through the same bytes -> parse path).
fn again(req: &AdmissionRequest, object: &Value) -> AdmissionRequest {
    let gvk = &req.kind;
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": req.uid, "kind": gvk, "operation": req.operation,
        "namespace": req.namespace, "name": req.name, "dryRun": req.dry_run,
        "object": object}});
    let body = serde_json::to_vec(&review).unwrap();
    admission::parse_review(bytes::Bytes::from(body)).expect("a mutated object still parses")
}

fn fail(what: String) -> TestCaseError {
    TestCaseError::fail(what)
}

/// The properties of the whole path, for one body.
fn check(body: Vec<u8>, world: &MemoryWorld) -> Result<(), TestCaseError> {
    let Ok(req) = admission::parse_review(bytes::Bytes::from(body)) else {
        return Ok(()); // answered 400 by the handler
    };
    let cfg = Config::default();
    let before = snapshot(world);
    let a = futures::executor::block_on(admission::admit(&req, &cfg, world, None));
    let answer: Value = serde_json::from_slice(&a.verdict.review_bytes(&req.uid))
        .map_err(|e| fail(format!("the answer is not JSON: {e}")))?;
    prop_assert_eq!(&answer["response"]["uid"], &json!(req.uid));
    prop_assert_eq!(answer["kind"].as_str(), Some("AdmissionReview"));
    prop_assert!(a.verdict.allowed, "denied: {:?}", a.verdict.warnings);
    if req.dry_run {
        prop_assert_eq!(&snapshot(world), &before, "a dry run wrote");
    }
    let Some(patch) = &a.verdict.patch else {
        return Ok(());
    };
    // Damaged bytes inside fields triage skips (a lone surrogate, say) show only in a
    // full parse; a pod that only gets a group is planned without one. The API server
    // never sends such an object, so there is nothing to apply the patch to.
    let Ok(object) = req.parse_object() else {
        return Ok(());
    };
    let mut object = object.ok_or_else(|| fail("a patch for no object".into()))?;
    json_patch::patch(&mut object, patch)
        .map_err(|e| fail(format!("the patch does not apply: {e}")))?;
    let between = snapshot(world);
    let b = futures::executor::block_on(admission::admit(&again(&req, &object), &cfg, world, None));
    prop_assert!(b.verdict.allowed, "denied again: {:?}", b.verdict.warnings);
    prop_assert!(
        b.verdict.patch.is_none(),
        "admitted again, it changed again: {:?} (first {:?})",
        b.verdict.patch,
        patch
    );
    if req.dry_run {
        prop_assert_eq!(
            &snapshot(world),
            &between,
            "a dry run wrote, admitted again"
        );
    }
    Ok(())
}

/// [`check`] on a fresh [`super::corpus::world`], failed past `admissionTimeoutMs`.
pub fn check_request_path(body: Vec<u8>) -> Result<(), TestCaseError> {
    let bound = Duration::from_millis(Config::default().admission_timeout_ms);
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("fuzz-case".into())
        .spawn(move || {
            let world = super::corpus::world();
            // A panic drops `tx`: reported below as a disconnect.
            let _ = tx.send(check(body, &world));
        })
        .unwrap();
    match rx.recv_timeout(bound) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(fail(format!("the case ran past {bound:?}"))),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(fail("the case panicked".into())),
    }
}
