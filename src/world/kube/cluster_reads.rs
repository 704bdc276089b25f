//! Admission's reads of RayClusters its cache does not hold, shared: during a burst of
//! one new config every job's admission asks whether the cluster exists; one read answers
//! them all (reads in flight are joined), and an absence stands for a moment (while the
//! watch does not show the cluster). A burst of fifty jobs of five new configs made fifty
//! reads before, each as costly to the API server as a create, and each in an admission.
//!
//! What a cached absence risks is what the read itself risks: a cluster made under the
//! name since then, not yet seen by the watch (a squatter's is refused by the provisioner
//! and named in an Event; admission then passes the jobs that follow it unchanged).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt, Shared};
use tokio::time::Instant;

use crate::domain::cluster::ClusterInfo;
use crate::world::WorldError;

/// How long "absent" stands: well beyond the watch's lag, well within the time a cluster
/// takes to be made and seen.
const ABSENT_FOR: Duration = Duration::from_secs(1);

type Key = (String, String);
type Read = Shared<BoxFuture<'static, Result<Option<ClusterInfo>, WorldError>>>;

#[derive(Default)]
pub struct ClusterReads {
    in_flight: Mutex<HashMap<Key, Read>>,
    absent: Mutex<HashMap<Key, Instant>>,
}

impl ClusterReads {
    /// The cluster `key` as `read` finds it, joining a read in flight, or `None` at once
    /// when a read found it absent less than [`ABSENT_FOR`] ago.
    pub async fn get(
        &self,
        key: Key,
        read: impl FnOnce() -> BoxFuture<'static, Result<Option<ClusterInfo>, WorldError>>,
    ) -> Result<Option<ClusterInfo>, WorldError> {
        {
            let mut absent = self.absent.lock().expect("not poisoned");
            absent.retain(|_, at| at.elapsed() < ABSENT_FOR);
            if absent.contains_key(&key) {
                return Ok(None);
            }
        }
        let shared = {
            let mut in_flight = self.in_flight.lock().expect("not poisoned");
            in_flight
                .entry(key.clone())
                .or_insert_with(|| read().shared())
                .clone()
        };
        let found = shared.clone().await;
        // Only this read's entry: a later read of the key may have taken its place.
        let mut in_flight = self.in_flight.lock().expect("not poisoned");
        if in_flight.get(&key).is_some_and(|r| r.ptr_eq(&shared)) {
            in_flight.remove(&key);
        }
        drop(in_flight);
        if matches!(found, Ok(None)) {
            let mut absent = self.absent.lock().expect("not poisoned");
            absent.insert(key, Instant::now());
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn counted(
        reads: &Arc<AtomicUsize>,
        answer: Option<ClusterInfo>,
    ) -> impl FnOnce() -> BoxFuture<'static, Result<Option<ClusterInfo>, WorldError>> {
        let reads = reads.clone();
        move || {
            async move {
                reads.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(answer)
            }
            .boxed()
        }
    }

    fn key() -> Key {
        ("ns".into(), "ray-x".into())
    }

    #[tokio::test(start_paused = true)]
    async fn reads_in_flight_are_joined_and_an_absence_stands_a_moment() {
        let cache = ClusterReads::default();
        let reads = Arc::new(AtomicUsize::new(0));
        let all =
            futures::future::join_all((0..10).map(|_| cache.get(key(), counted(&reads, None))));
        assert!(all.await.iter().all(|r| matches!(r, Ok(None))));
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        // Within the moment: no read.
        assert_eq!(cache.get(key(), counted(&reads, None)).await, Ok(None));
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        // After it: read again.
        tokio::time::advance(ABSENT_FOR + Duration::from_millis(1)).await;
        let found = Some(ClusterInfo::default());
        assert_eq!(
            cache.get(key(), counted(&reads, found.clone())).await,
            Ok(found)
        );
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cluster_found_or_a_failed_read_is_not_remembered() {
        let cache = ClusterReads::default();
        let reads = Arc::new(AtomicUsize::new(0));
        let found = Some(ClusterInfo::default());
        assert_eq!(
            cache.get(key(), counted(&reads, found.clone())).await,
            Ok(found.clone())
        );
        assert_eq!(
            cache
                .get(key(), counted(&reads, found))
                .await
                .map(|f| f.is_some()),
            Ok(true)
        );
        assert_eq!(reads.load(Ordering::SeqCst), 2);
        let failing = || async { Err(WorldError::Timeout) }.boxed();
        assert_eq!(cache.get(key(), failing).await, Err(WorldError::Timeout));
        assert_eq!(cache.get(key(), counted(&reads, None)).await, Ok(None));
        assert_eq!(reads.load(Ordering::SeqCst), 3);
    }
}
