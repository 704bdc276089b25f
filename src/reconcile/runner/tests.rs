use std::sync::Mutex;

use super::*;

fn key(name: &str) -> Key {
    ("ns".to_string(), name.to_string())
}

#[test]
fn backoff_doubles_up_to_five_minutes_and_clears() {
    let mut b = Backoff::up_to(Duration::from_secs(3600));
    let waits: Vec<u64> = (0..12).map(|_| b.failed(&key("c")).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
    assert!(b.waiting(&key("c")));
    b.clear(&key("c"));
    assert!(!b.waiting(&key("c")));
    assert_eq!(b.next_due(), None);
}

#[test]
fn backoff_stops_at_its_cap() {
    let mut b = Backoff::up_to(Duration::from_secs(10));
    let waits: Vec<u64> = (0..6).map(|_| b.failed(&key("c")).as_secs()).collect();
    assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
}

/// Fails `a` twice, then succeeds; `b` always succeeds.
#[derive(Default)]
struct Flaky {
    looks: Mutex<Vec<String>>,
}

impl Reconciler for Flaky {
    fn kind(&self) -> &'static str {
        "Test"
    }

    fn all(&self) -> Vec<Key> {
        vec![key("a"), key("b")]
    }

    async fn reconcile(&self, key: &Key) -> Result<(), Failure> {
        let mut looks = self.looks.lock().unwrap();
        looks.push(key.1.clone());
        let failures = looks.iter().filter(|k| *k == "a").count();
        if key.1 == "a" && failures <= 2 {
            return Err(Failure {
                cause: Cause::ReconcileList,
                error: "not yet".into(),
            });
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_key_is_retried_on_its_own_backoff_not_at_the_resync() {
    let flaky = Arc::new(Flaky::default());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let metrics = Arc::new(Metrics::default());
    let schedule = Schedule::every_replica(Duration::from_secs(3600), 4, MAX_BACKOFF);
    let task = spawn(flaky.clone(), schedule, Some(rx), metrics.clone());
    // The first resync tick looks at every key; then only `a`, at 1 s and 2 s later.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let looks = flaky.looks.lock().unwrap().clone();
    assert_eq!(looks.iter().filter(|k| *k == "a").count(), 3, "{looks:?}");
    assert_eq!(looks.iter().filter(|k| *k == "b").count(), 1, "{looks:?}");
    // A wake-up looks at once.
    tx.send(key("b")).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(flaky.looks.lock().unwrap().len(), 5);
    let text = metrics.encode();
    assert!(
        text.contains("rayshare_errors_total{cause=\"reconcile_list\"} 2"),
        "{text}"
    );
    task.abort();
}

/// `slow` takes a minute to look at; every look is recorded when it starts and ends.
#[derive(Default)]
struct Slow {
    looks: Mutex<Vec<String>>,
}

impl Reconciler for Slow {
    fn kind(&self) -> &'static str {
        "Test"
    }

    fn all(&self) -> Vec<Key> {
        vec![]
    }

    async fn reconcile(&self, key: &Key) -> Result<(), Failure> {
        self.looks.lock().unwrap().push(format!("{} start", key.1));
        if key.1 == "slow" {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        self.looks.lock().unwrap().push(format!("{} end", key.1));
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_woken_key_starts_at_once_beside_a_slow_one_and_never_twice_at_once() {
    let slow = Arc::new(Slow::default());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let schedule = Schedule::every_replica(Duration::from_secs(3600), 4, MAX_BACKOFF);
    let task = spawn(
        slow.clone(),
        schedule,
        Some(rx),
        Arc::new(Metrics::default()),
    );
    tx.send(key("slow")).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    tx.send(key("fast")).unwrap();
    tx.send(key("slow")).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    let seen = slow.looks.lock().unwrap().clone();
    assert_eq!(seen, ["slow start", "fast start", "fast end"]);
    // Woken during its look: looked at once more, after it.
    tokio::time::sleep(Duration::from_secs(61)).await;
    let seen = slow.looks.lock().unwrap().clone();
    assert_eq!(seen[3..], ["slow end", "slow start"]);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn a_follower_looks_at_nothing_until_it_leads() {
    let flaky = Arc::new(Flaky::default());
    let (_tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (lead, leading) = watch::channel(false);
    let schedule = Schedule::while_leading(Duration::from_secs(1), leading);
    let task = spawn(
        flaky.clone(),
        schedule,
        Some(rx),
        Arc::new(Metrics::default()),
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(flaky.looks.lock().unwrap().is_empty());
    lead.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(flaky.looks.lock().unwrap().contains(&"b".to_string()));
    task.abort();
}

/// Nothing to look at (`Slow` names no keys): each resync is a pass, on a follower none.
#[tokio::test(start_paused = true)]
async fn an_idle_reconciler_counts_its_passes_and_an_idle_follower_none() {
    let passes = |m: &Metrics| {
        m.reconcile_passes
            .get_or_create(&KindLabel { kind: "Test" })
            .get()
    };
    let every = Duration::from_secs(10);
    let (idle, follower) = (Arc::new(Metrics::default()), Arc::new(Metrics::default()));
    let (lead, leading) = watch::channel(false);
    let schedule = Schedule::every_replica(every, 1, MAX_BACKOFF);
    let a = spawn(Arc::new(Slow::default()), schedule, None, idle.clone());
    let schedule = Schedule::while_leading(every, leading);
    let b = spawn(Arc::new(Slow::default()), schedule, None, follower.clone());
    tokio::time::sleep(Duration::from_secs(35)).await;
    assert_eq!((passes(&idle), passes(&follower)), (4, 0));
    lead.send(true).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(passes(&follower), 1);
    a.abort();
    b.abort();
}
