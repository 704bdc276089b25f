//! API calls: bounded in time, errors mapped to [`WorldError`].

use std::time::Duration;

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

pub(super) async fn bounded<T>(
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<Result<T, kube::Error>, WorldError> {
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| WorldError::Timeout)
}
