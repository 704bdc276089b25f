//! API calls: bounded in time, errors mapped to [`WorldError`].

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::core::ObjectList;

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

/// 409: a conflict (AlreadyExists, or a precondition or resourceVersion that no longer holds).
pub fn is_conflict(e: &kube::Error) -> bool {
    api_code(e) == Some(409)
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

/// Lists in pages of 500, handing each item to `each` as its page arrives, so a large
/// cluster is never fetched (or held) in one piece.
pub async fn for_each_page<T, F, Fut>(
    params: ListParams,
    mut page: F,
    mut each: impl FnMut(T),
) -> Result<(), kube::Error>
where
    F: FnMut(ListParams) -> Fut,
    Fut: Future<Output = Result<ObjectList<T>, kube::Error>>,
    T: Clone,
{
    let mut params = params.limit(500);
    loop {
        let list = page(params.clone()).await?;
        list.items.into_iter().for_each(&mut each);
        match list.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
        // A long pass shares its runtime with the watches and the lease renewal.
        tokio::task::yield_now().await;
    }
}

/// Every item, collected (for lists that stay small: rayshare's own objects).
pub async fn list_all<T, F, Fut>(params: ListParams, page: F) -> Result<Vec<T>, kube::Error>
where
    F: FnMut(ListParams) -> Fut,
    Fut: Future<Output = Result<ObjectList<T>, kube::Error>>,
    T: Clone,
{
    let mut items = Vec::new();
    for_each_page(params, page, |item| items.push(item)).await?;
    Ok(items)
}
