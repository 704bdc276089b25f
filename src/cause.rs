//! Why something went wrong: one enum, logged, answered, and counted as the `cause` label
//! of `rayshare_errors_total`.

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    // A request rayshare cannot read.
    NotJson,
    NotReview,
    NoRequest,
    NoUid,
    ContentType,
    TooLarge,
    BodyTimeout,
    BodyRead,
    NotFound,
    // An object rayshare cannot do its job for (it passes unchanged, or is denied).
    NoObject,
    OddObject,
    /// Tenant-written text past one of rayshare's bounds (depth, size, expansion).
    InputBound,
    /// More admissions in flight than `--max-in-flight` for longer than half of
    /// `admissionTimeoutMs`, request bodies past `--max-buffered-bytes`, or a connection
    /// past `--max-connections` (closed at once).
    Overloaded,
    /// A connection to the webhook port whose TLS handshake failed or timed out: a client
    /// that does not trust rayshare's CA (an API server with a stale `caBundle`), one
    /// without the client certificate `--client-ca` asks for, or not TLS at all.
    TlsHandshake,
    NameConflict,
    PoolExhausted,
    ClusterNotCached,
    /// A pod review for a namespace rayshare's own watch does not show as served: no
    /// side effect on a review's word (forged, or a namespace labelled a moment ago).
    NotServed,
    /// Too many PodGroups made at admission whose pods were not seen stored yet.
    UnconfirmedBound,
    Panic,
    // The API server.
    ApiTimeout,
    ApiForbidden,
    ApiUnreachable,
    ApiError,
    Conflict,
    // Background work.
    ProvisionRefused,
    ProvisionCreate,
    ProvisionStamp,
    ProvisionWake,
    ReconcileList,
    ReconcileDelete,
    LeaderElection,
    CertReload,
    // A shared cluster's Ray dashboard.
    Dashboard,
    RayJobStop,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotJson => "not_json",
            Self::NotReview => "not_review",
            Self::NoRequest => "no_request",
            Self::NoUid => "no_uid",
            Self::ContentType => "content_type",
            Self::TooLarge => "too_large",
            Self::BodyTimeout => "body_timeout",
            Self::BodyRead => "body_read",
            Self::NotFound => "not_found",
            Self::NoObject => "no_object",
            Self::OddObject => "odd_object",
            Self::InputBound => "input_bound",
            Self::Overloaded => "overloaded",
            Self::TlsHandshake => "tls_handshake",
            Self::NameConflict => "name_conflict",
            Self::PoolExhausted => "pool_exhausted",
            Self::ClusterNotCached => "cluster_not_cached",
            Self::NotServed => "not_served",
            Self::UnconfirmedBound => "unconfirmed_bound",
            Self::Panic => "panic",
            Self::ApiTimeout => "api_timeout",
            Self::ApiForbidden => "api_forbidden",
            Self::ApiUnreachable => "api_unreachable",
            Self::ApiError => "api_error",
            Self::Conflict => "conflict",
            Self::ProvisionRefused => "provision_refused",
            Self::ProvisionCreate => "provision_create",
            Self::ProvisionStamp => "provision_stamp",
            Self::ProvisionWake => "provision_wake",
            Self::ReconcileList => "reconcile_list",
            Self::ReconcileDelete => "reconcile_delete",
            Self::LeaderElection => "leader_election",
            Self::CertReload => "cert_reload",
            Self::Dashboard => "dashboard",
            Self::RayJobStop => "ray_job_stop",
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl EncodeLabelValue for Cause {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}
