//! API calls: bounded in time, errors mapped to [`WorldError`].

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::world::WorldError;

pub(super) fn to_world_error(e: kube::Error) -> WorldError {
    match e {
        kube::Error::Api(s) if s.code == 403 => WorldError::Forbidden(s.message),
        kube::Error::Api(s) if s.code == 409 => WorldError::Conflict(s.message),
        kube::Error::Api(s) => WorldError::Api(format!("{} ({})", s.message, s.code)),
        other => WorldError::Unreachable(other.to_string()),
    }
}

pub(super) fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
}

/// The API server's answer code, when it was the API server that refused.
fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// 404: the object (or its kind) is not there.
pub fn is_not_found(e: &kube::Error) -> bool {
    api_code(e) == Some(404)
}

/// 403: RBAC (or a policy) refused the call.
pub fn is_forbidden(e: &kube::Error) -> bool {
    api_code(e) == Some(403)
}

/// 409: a conflict (AlreadyExists, or a precondition or resourceVersion that no longer holds).
pub fn is_conflict(e: &kube::Error) -> bool {
    api_code(e) == Some(409)
}

/// What the API server said, as a person reads it (its message, not the whole response).
pub fn reason(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
        other => other.to_string(),
    }
}

pub(super) async fn bounded<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<Result<T, kube::Error>, WorldError> {
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| WorldError::Timeout)
}

/// The least an object's age now can be (`domain::time::least_age`).
pub fn least_age(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Duration {
    crate::domain::time::least_age(meta, Timestamp::now())
}
