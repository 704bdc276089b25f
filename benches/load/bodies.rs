//! AdmissionReview bodies as kube-apiserver sends them: the object as stored after
//! defaulting (from a server-side dry run against the local control plane), the request
//! metadata, userInfo and CreateOptions, a fresh uid per request.

use bytes::Bytes;
use serde_json::{Value, json};

/// Stands for the request's uid in a template.
const UID: &str = "__UID__";
/// Stands for a per-request number (object names).
pub const N: &str = "__N__";

/// A serialised AdmissionReview with holes for the uid and a per-request number.
pub struct Template {
    parts: Vec<Vec<u8>>,
    holes: Vec<bool>,
    seed: u64,
}

impl Template {
    pub fn new(review: &Value, seed: u64) -> Self {
        let text = serde_json::to_string(review).expect("serialisable");
        let mut parts = Vec::new();
        let mut holes = Vec::new();
        let mut rest = text.as_str();
        loop {
            let next = [(rest.find(UID), true), (rest.find(N), false)]
                .into_iter()
                .filter_map(|(at, is_uid)| Some((at?, is_uid)))
                .min();
            let Some((at, is_uid)) = next else {
                parts.push(rest.as_bytes().to_vec());
                break;
            };
            parts.push(rest.as_bytes()[..at].to_vec());
            holes.push(is_uid);
            rest = &rest[at + if is_uid { UID.len() } else { N.len() }..];
        }
        Self { parts, holes, seed }
    }

    pub fn size(&self) -> usize {
        self.render(0).len()
    }

    pub fn render(&self, n: u64) -> Bytes {
        let uid = uid(self.seed, n);
        let num = n.to_string();
        let mut out = Vec::with_capacity(self.parts.iter().map(Vec::len).sum::<usize>() + 64);
        for (i, part) in self.parts.iter().enumerate() {
            out.extend_from_slice(part);
            if let Some(&is_uid) = self.holes.get(i) {
                out.extend_from_slice(if is_uid {
                    uid.as_bytes()
                } else {
                    num.as_bytes()
                });
            }
        }
        Bytes::from(out)
    }
}

/// A UUID-shaped uid, unique per (seed, n).
pub fn uid(seed: u64, n: u64) -> String {
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        seed >> 32,
        (seed >> 16) & 0xffff,
        seed & 0xfff,
        (n >> 48) & 0xfff,
        n & 0xffff_ffff_ffff
    )
}

/// The AdmissionReview for a CREATE of `object` (defaulted, as stored) in `namespace`.
pub fn review(object: &Value, resource: &str, namespace: &str, dry_run: bool) -> Value {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = json!({"group": group, "version": version, "kind": object["kind"]});
    let resource = json!({"group": group, "version": version, "resource": resource});
    json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": UID,
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "name": object["metadata"]["name"].as_str().unwrap_or(""),
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:flyte:flytepropeller",
                "uid": "6f1c1f0e-1d5e-4c4b-9a51-0b1f3d6e2a11",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:flyte", "system:authenticated"],
                "extra": {
                    "authentication.kubernetes.io/credential-id": ["JTI=0b7d3c2e-5f7a-4c1e-8d2b-6a9e4f1c3b5d"],
                    "authentication.kubernetes.io/node-name": ["ip-10-0-12-34.ec2.internal"],
                    "authentication.kubernetes.io/pod-name": ["flytepropeller-7c9d8b6f5-x2k4j"],
                    "authentication.kubernetes.io/pod-uid": ["3e2a1b4c-9d8e-4f7a-b6c5-1d2e3f4a5b6c"]
                }
            },
            "object": object,
            "oldObject": null,
            "dryRun": dry_run,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "flytepropeller"}
        }
    })
}

/// What a webhook sees of a CREATE: defaulted and with managedFields, but before the
/// registry has given it a uid, a creation time or (for `generateName`) a name.
pub fn as_admitted(mut stored: Value) -> Value {
    let meta = stored["metadata"]
        .as_object_mut()
        .expect("object with metadata");
    for key in ["uid", "creationTimestamp", "resourceVersion", "generation"] {
        meta.remove(key);
    }
    if meta.contains_key("generateName") {
        meta.remove("name");
    }
    if let Some(fields) = meta.get_mut("managedFields").and_then(Value::as_array_mut) {
        for f in fields {
            f["time"] = json!("2026-01-01T00:00:00Z");
        }
    }
    stored.as_object_mut().expect("object").remove("status");
    stored
}
