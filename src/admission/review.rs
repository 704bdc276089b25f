//! The `admission.k8s.io/v1` AdmissionReview wire format.
//!
//! Hand-written rather than kube's `DynamicObject`-based types: the mutations work on plain
//! `serde_json::Value`s and a review must never fail to parse because of an odd object.
//! The review is read in one pass that builds only what triage needs of the object (see
//! `triage`); the object is parsed in full later, only when a mutation needs it. Most
//! objects need none, and building a tree of a whole pod was the largest cost of a
//! request (see README, Benchmarks).

use data_encoding::BASE64;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::tree_cost::tree_cost;

use crate::admission::triage::{Head, LazyHead};
use crate::cause::Cause;

/// `H`: how the object is read (see [`parse_review`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", bound = "H: Deserialize<'de>")]
pub struct AdmissionReview<H = Head> {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    pub request: Option<AdmissionRequest<H>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", bound = "H: Deserialize<'de>")]
pub struct AdmissionRequest<H = Head> {
    pub uid: String,
    pub kind: GroupVersionKind,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    pub operation: String,
    #[serde(default)]
    pub dry_run: bool,
    /// What triage reads of `object`; `None` when there is none (or it is `null`).
    #[serde(default, rename = "object")]
    pub head: Option<H>,
    /// The review as received, for [`AdmissionRequest::parse_object`].
    #[serde(skip)]
    pub(crate) body: bytes::Bytes,
    /// What the body would cost as a tree ([`tree_cost`]); past [`MAX_TREE_BYTES`] the
    /// object was not read (`head` is `None`) and the request is answered unchanged.
    #[serde(skip)]
    pub tree_cost: u64,
}

/// The largest tree one review may build: far above any object the API server stores
/// (etcd takes at most about 1.5 MB), far below the memory a few such reviews at once
/// may take.
pub const MAX_TREE_BYTES: u64 = 32 << 20;

impl<H> AdmissionRequest<H> {
    /// The same request, its object read as `head` makes of it.
    fn map_head(self, head: impl FnOnce(Option<H>) -> Option<Head>) -> AdmissionRequest {
        AdmissionRequest {
            uid: self.uid,
            kind: self.kind,
            sub_resource: self.sub_resource,
            name: self.name,
            namespace: self.namespace,
            operation: self.operation,
            dry_run: self.dry_run,
            head: head(self.head),
            body: self.body,
            tree_cost: self.tree_cost,
        }
    }
}

impl AdmissionRequest {
    /// A request carrying `object` (for `rayshare mutate` and tests).
    pub fn with_object(mut self, object: &Value) -> Self {
        self.head = Head::deserialize(object).ok();
        self.body = serde_json::to_vec(&serde_json::json!({ "request": { "object": object } }))
            .expect("a Value always serialises")
            .into();
        self
    }

    /// The object, parsed in full. The review's own pass skipped what triage does not
    /// read, so this is where a malformed part of the object (a lone surrogate, a number
    /// out of range, nesting beyond serde_json's limit) shows.
    pub fn parse_object(&self) -> Result<Option<Value>, ReviewError> {
        #[derive(Deserialize)]
        struct Review {
            request: Request,
        }
        #[derive(Deserialize)]
        struct Request {
            #[serde(default)]
            object: Option<Value>,
        }
        let review: Review = serde_json::from_slice(&self.body)
            .map_err(|e| ReviewError::OddObject(e.to_string()))?;
        Ok(review.request.object)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    pub version: String,
    pub kind: String,
}

/// Why a body is not a usable AdmissionReview (answered with HTTP 400).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ReviewError {
    #[error("body is not valid JSON: {0}")]
    NotJson(String),
    #[error("body is not an admission.k8s.io/v1 AdmissionReview: {0}")]
    NotReview(String),
    #[error("AdmissionReview has no request")]
    NoRequest,
    #[error("AdmissionReview request has no uid")]
    NoUid,
    /// The object, parsed in full, is not what the review's own pass let through.
    #[error("{0}")]
    OddObject(String),
}

impl ReviewError {
    pub fn cause(&self) -> Cause {
        match self {
            Self::NotJson(_) => Cause::NotJson,
            Self::NotReview(_) => Cause::NotReview,
            Self::NoRequest => Cause::NoRequest,
            Self::NoUid => Cause::NoUid,
            Self::OddObject(_) => Cause::OddObject,
        }
    }
}

/// Parses a review body; every failure says what is wrong.
pub fn parse_review(body: impl Into<bytes::Bytes>) -> Result<AdmissionRequest, ReviewError> {
    let body = body.into();
    let cost = tree_cost(&body);
    parse_review_costing(body, cost)
}

/// [`parse_review`] of a body whose [`tree_cost`] is known (the server reserves it first).
pub fn parse_review_costing(
    body: bytes::Bytes,
    cost: u64,
) -> Result<AdmissionRequest, ReviewError> {
    let classify = |e: serde_json::Error| match e.classify() {
        serde_json::error::Category::Data => ReviewError::NotReview(e.to_string()),
        _ => ReviewError::NotJson(e.to_string()),
    };
    // Too costly to build: only the envelope is read, so the request can still be
    // answered (unchanged) by its uid.
    let review = if cost > MAX_TREE_BYTES {
        let bare: AdmissionReview<IgnoredAny> = serde_json::from_slice(&body).map_err(classify)?;
        AdmissionReview {
            api_version: bare.api_version,
            kind: bare.kind,
            request: bare.request.map(|r| r.map_head(|_| None)),
        }
    } else {
        // One pass straight into the typed review (this is the hot path). A RayJob is read
        // whole in it (see `triage::Head`); when a leaf of it is one serde_json cannot
        // build (a lone surrogate, a number out of range), the review is read again
        // without building the object, so the request still fails open naming the leaf.
        match serde_json::from_slice::<AdmissionReview>(&body) {
            Ok(review) => review,
            Err(_) => {
                let lazy: AdmissionReview<LazyHead> =
                    serde_json::from_slice(&body).map_err(classify)?;
                AdmissionReview {
                    api_version: lazy.api_version,
                    kind: lazy.kind,
                    request: lazy.request.map(|r| r.map_head(|h| h.map(|LazyHead(h)| h))),
                }
            }
        }
    };
    let (kind, api_version) = (review.kind.as_deref(), review.api_version.as_deref());
    if kind != Some("AdmissionReview") || api_version != Some("admission.k8s.io/v1") {
        return Err(ReviewError::NotReview(format!(
            "apiVersion {api_version:?}, kind {kind:?}"
        )));
    }
    let mut request = review.request.ok_or(ReviewError::NoRequest)?;
    if request.uid.is_empty() {
        return Err(ReviewError::NoUid);
    }
    request.body = body;
    request.tree_cost = cost;
    Ok(request)
}

/// The answer to one request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    pub allowed: bool,
    pub patch: Option<json_patch::Patch>,
    pub warnings: Vec<String>,
    /// Shown to the user when `allowed` is false.
    pub message: Option<String>,
}

impl Verdict {
    pub fn allow(warnings: Vec<String>) -> Self {
        Self {
            allowed: true,
            warnings,
            ..Self::default()
        }
    }

    pub fn deny(message: String, warnings: Vec<String>) -> Self {
        Self {
            allowed: false,
            message: Some(message),
            warnings,
            ..Self::default()
        }
    }

    /// The AdmissionReview answering request `uid`, as sent. Written by hand: the patch's
    /// base64 needs no escaping, and a serializer scanned each of its bytes for some (a
    /// sixth of a rewritten RayJob's answer).
    pub fn review_bytes(&self, uid: &str) -> Vec<u8> {
        let patch = self
            .patch
            .as_ref()
            .filter(|p| !p.0.is_empty())
            .map(|p| serde_json::to_vec(p).expect("a JSON patch always serialises"));
        let patch_len = patch.as_ref().map_or(0, |p| BASE64.encode_len(p.len()));
        let mut out = Vec::with_capacity(160 + uid.len() + patch_len);
        out.extend_from_slice(
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"#,
        );
        write_json(&mut out, uid);
        out.extend_from_slice(if self.allowed {
            br#","allowed":true"#
        } else {
            br#","allowed":false"#
        });
        if let Some(patch) = patch {
            out.extend_from_slice(br#","patchType":"JSONPatch","patch":""#);
            let start = out.len();
            out.resize(start + patch_len, 0);
            BASE64.encode_mut(&patch, &mut out[start..]);
            out.push(b'"');
        }
        if !self.warnings.is_empty() {
            out.extend_from_slice(br#","warnings":"#);
            write_json(&mut out, &self.warnings);
        }
        if let Some(message) = &self.message {
            out.extend_from_slice(br#","status":{"code":403,"message":"#);
            write_json(&mut out, message);
            out.push(b'}');
        }
        out.extend_from_slice(b"}}");
        out
    }

    pub fn review(&self, uid: &str) -> Value {
        serde_json::from_slice(&self.review_bytes(uid)).expect("a review is JSON")
    }
}

/// Appends `value` as JSON.
fn write_json(out: &mut Vec<u8>, value: &(impl Serialize + ?Sized)) {
    serde_json::to_writer(out, value).expect("writing JSON to a Vec cannot fail");
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn review(request: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request,
        }))
        .unwrap()
    }

    #[rstest]
    #[case(b"not json".to_vec(), "not_json")]
    #[case(br#"{"kind":"Pod","apiVersion":"v1"}"#.to_vec(), "not_review")]
    #[case(br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1beta1"}"#.to_vec(), "not_review")]
    #[case(br#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}"#.to_vec(), "no_request")]
    #[case(review(json!({"uid":"", "kind":{"version":"v1","kind":"Pod"}, "operation":"CREATE"})), "no_uid")]
    #[case(review(json!({"uid":"u", "operation":"CREATE"})), "not_review")]
    fn bad_reviews_say_why(#[case] body: Vec<u8>, #[case] cause: &str) {
        assert_eq!(parse_review(body).unwrap_err().cause().as_str(), cause);
    }

    #[test]
    fn good_review_parses() {
        let body = review(json!({
            "uid": "abc", "kind": {"group":"","version":"v1","kind":"Pod"},
            "operation": "CREATE", "namespace": "ns", "dryRun": true,
            "object": {"metadata": {"generateName": "p-"}}
        }));
        let r = parse_review(body).unwrap();
        assert_eq!(r.uid, "abc");
        assert!(r.dry_run);
        assert_eq!(r.name, "");
        assert_eq!(
            r.parse_object(),
            Ok(Some(json!({"metadata": {"generateName": "p-"}})))
        );
    }

    #[rstest]
    #[case(json!(null), None)]
    #[case(json!([1, "a"]), Some(json!([1, "a"])))]
    fn object_stays_raw_whatever_it_is(#[case] object: Value, #[case] expected: Option<Value>) {
        let body = review(json!({
            "uid": "u", "kind": {"version":"v1","kind":"Pod"}, "operation": "CREATE",
            "object": object,
        }));
        assert_eq!(parse_review(body).unwrap().parse_object(), Ok(expected));
    }

    /// 3 MB of tiny objects would be hundreds of MB as a tree: the review is read without
    /// its object and answered unchanged, naming the bound.
    #[test]
    fn a_review_too_costly_to_build_is_answered_unchanged() {
        let mut body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"ray.io","version":"v1","kind":"RayJob"},"operation":"CREATE","namespace":"ns","object":{"apiVersion":"ray.io/v1","kind":"RayJob","spec":{"rayClusterSpec":{},"x":["#.to_vec();
        for i in 0..380_000 {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(br#"{"a":0}"#);
        }
        body.extend_from_slice(b"]}}}}");
        let r = parse_review(body).unwrap();
        assert!(r.tree_cost > MAX_TREE_BYTES, "{}", r.tree_cost);
        assert!(r.head.is_none());
        let cfg = crate::config::Config::default();
        let world = crate::world::MemoryWorld::default();
        let a = futures::executor::block_on(crate::admission::admit(&r, &cfg, &world, None));
        assert_eq!(
            a.outcome,
            crate::admission::Outcome::Failed(Cause::InputBound)
        );
        assert!(a.verdict.allowed);
        assert!(
            a.verdict.warnings[0].contains("MiB"),
            "{:?}",
            a.verdict.warnings
        );
    }

    #[test]
    fn answer_bytes_are_the_review() {
        let mut verdict = Verdict::deny("no".into(), vec!["w".into()]);
        verdict.patch = Some(json_patch::Patch(vec![]));
        let parsed: Value = serde_json::from_slice(&verdict.review_bytes("u3")).unwrap();
        assert_eq!(
            parsed,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "response": {"uid": "u3", "allowed": false, "warnings": ["w"],
                                "status": {"code": 403, "message": "no"}}})
        );
    }

    proptest::proptest! {
        /// Whatever the texts, the hand-written answer is the JSON it means.
        #[test]
        fn any_answer_is_its_json(
            uid in "\\PC{0,8}[\"\\\\\u{7f}\u{2028}]?",
            message in proptest::option::of("\\PC{0,12}"),
            warnings in proptest::collection::vec("\\PC{0,12}", 0..3),
            value in "\\PC{0,12}",
            patched in proptest::bool::ANY,
        ) {
            let mut verdict = match message.clone() {
                Some(m) => Verdict::deny(m, warnings.clone()),
                None => Verdict::allow(warnings.clone()),
            };
            let ops = json!([{"op": "add", "path": "/a~1b", "value": value}]);
            verdict.patch = patched.then(|| serde_json::from_value(ops.clone()).unwrap());
            let parsed: Value = serde_json::from_slice(&verdict.review_bytes(&uid)).unwrap();
            let mut response = json!({"uid": uid, "allowed": message.is_none()});
            if patched {
                let patch = BASE64.encode(&serde_json::to_vec(&ops).unwrap());
                response["patchType"] = json!("JSONPatch");
                response["patch"] = json!(patch);
            }
            if !warnings.is_empty() {
                response["warnings"] = json!(warnings);
            }
            if let Some(m) = message {
                response["status"] = json!({"code": 403, "message": m});
            }
            proptest::prop_assert_eq!(parsed, json!({"apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview", "response": response}));
        }
    }

    #[test]
    fn response_has_patch_only_when_there_is_one() {
        let v = Verdict::allow(vec![]).review("u1");
        assert_eq!(v["response"]["uid"], "u1");
        assert!(v["response"].get("patch").is_none());
        assert!(v["response"].get("warnings").is_none());

        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op":"add","path":"/a","value":1}])).unwrap();
        let mut verdict = Verdict::allow(vec!["w".into()]);
        verdict.patch = Some(patch);
        let v = verdict.review("u2");
        assert_eq!(v["response"]["patchType"], "JSONPatch");
        let decoded = BASE64
            .decode(v["response"]["patch"].as_str().unwrap().as_bytes())
            .unwrap();
        let ops: Value = serde_json::from_slice(&decoded).unwrap();
        assert_eq!(ops[0]["path"], "/a");
        assert_eq!(v["response"]["warnings"][0], "w");
    }
}
