use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::SignedDuration;
use rstest::rstest;

use super::*;

fn now() -> Timestamp {
    "2026-11-26T12:00:00Z".parse().expect("a time")
}

fn ago(secs: i64) -> Timestamp {
    now() - SignedDuration::from_secs(secs)
}

fn cfg() -> Reclaim {
    Reclaim {
        idle_ttl_seconds: 600,
        quiet_seconds: 40,
        ..Reclaim::default()
    }
}

/// A shared cluster made `age` seconds ago, with these annotations.
fn cluster(age: i64, annotations: &[(&str, String)]) -> ObjectMeta {
    ObjectMeta {
        namespace: Some("team".into()),
        name: Some("rs-abc".into()),
        uid: Some("u1".into()),
        resource_version: Some("42".into()),
        creation_timestamp: Some(Time(ago(age))),
        annotations: Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

fn busy(active: usize) -> Usage {
    Usage {
        active,
        last_end: None,
    }
}

fn act(meta: &ObjectMeta, usage: Usage, cfg: &Reclaim) -> Act {
    judge(meta, usage, cfg, now()).expect("judged").act
}

#[test]
fn a_busy_cluster_gets_its_pool_labels_and_nothing_else() {
    let look = judge(&cluster(3600, &[]), busy(2), &cfg(), now()).expect("judged");
    assert_eq!(look.decision, Decision::Busy { active_jobs: 2 });
    let Act::Labels(l) = look.act else {
        panic!("expected a label patch, got {:?}", look.act)
    };
    assert_eq!(l[labels::POOL_ACTIVE_JOBS], "2");
    // Busy: no reclaim time to show (and none to remove).
    assert!(!l.contains_key(labels::POOL_RECLAIMABLE_AT));
}

#[test]
fn labels_that_agree_are_not_written_again() {
    let mut meta = cluster(3600, &[]);
    let Act::Labels(l) = act(&meta, busy(1), &cfg()) else {
        panic!("expected a label patch")
    };
    let current: BTreeMap<String, String> = l
        .into_iter()
        .filter_map(|(k, v)| Some((k, v.as_str()?.to_string())))
        .collect();
    meta.labels = Some(current);
    assert_eq!(act(&meta, busy(1), &cfg()), Act::Nothing);
}

#[test]
fn an_idle_cluster_past_its_ttl_is_marked_conditioned_on_what_was_judged() {
    let Act::Patch(patch) = act(&cluster(601, &[]), busy(0), &cfg()) else {
        panic!("expected a mark")
    };
    assert_eq!(patch["metadata"]["resourceVersion"], "42");
    assert_eq!(
        patch["metadata"]["annotations"][labels::RECLAIM_MARKED],
        now().to_string()
    );
}

#[rstest]
#[case::within_the_quiet_period(39, false)]
#[case::after_the_quiet_period(40, true)]
fn a_marked_cluster_is_deleted_only_after_the_quiet_period(
    #[case] marked_for: i64,
    #[case] deleted: bool,
) {
    let mark = [(labels::RECLAIM_MARKED, ago(marked_for).to_string())];
    let act = act(&cluster(3600, &mark), busy(0), &cfg());
    let delete = Act::Delete {
        uid: Some("u1".into()),
        resource_version: Some("42".into()),
    };
    assert_eq!(act == delete, deleted, "{act:?}");
}

/// A cluster idle by its RayJobs, marked 60 s ago, whose head answered `age` s ago.
fn heard(jobs: usize, drivers: usize, age: i64) -> Look {
    let mark = [(labels::RECLAIM_MARKED, ago(60).to_string())];
    let said = crate::domain::reclaim::head::Said {
        at: ago(age),
        jobs,
        drivers,
        truncated: false,
    };
    let beyond = Beyond {
        head: crate::domain::reclaim::head::Head::Said(said),
        kept_warm: None,
    };
    judge_with(&cluster(3600, &mark), busy(0), &beyond, &cfg(), now()).expect("judged")
}

#[test]
fn a_cluster_kept_warm_is_not_marked_and_loses_its_mark() {
    let kept = Beyond {
        kept_warm: Some("kept warm: about 6.0 tasks an hour".into()),
        ..Beyond::default()
    };
    // Idle past its TTL: kept (its pool labels only), and the log says why.
    let look = judge_with(&cluster(3600, &[]), busy(0), &kept, &cfg(), now()).expect("judged");
    assert!(matches!(look.act, Act::Labels(_)), "{:?}", look.act);
    assert!(
        look.reason()
            .ends_with("kept warm: about 6.0 tasks an hour")
    );
    // Marked already, and now kept: the mark comes off before the quiet period ends.
    for marked_for in [10, 60] {
        let mark = [(labels::RECLAIM_MARKED, ago(marked_for).to_string())];
        let look =
            judge_with(&cluster(3600, &mark), busy(0), &kept, &cfg(), now()).expect("judged");
        let Act::Patch(patch) = &look.act else {
            panic!("expected an unmark, got {:?}", look.act)
        };
        assert_eq!(
            patch["metadata"]["annotations"][labels::RECLAIM_MARKED],
            Value::Null
        );
    }
}

#[test]
fn work_the_head_lists_after_the_mark_keeps_the_cluster() {
    // A Ray Client session (a driver, no RayJob): the mark comes off, with why.
    let look = heard(0, 1, 5);
    let Act::Patch(patch) = &look.act else {
        panic!("expected an unmark, got {:?}", look.act)
    };
    assert_eq!(
        patch["metadata"]["annotations"][labels::RECLAIM_MARKED],
        Value::Null
    );
    assert!(
        look.reason().ends_with("1 driver(s) no RayJob stands for"),
        "{}",
        look.reason()
    );
    // Nothing running, read after the mark: deleted as without the head.
    assert!(matches!(heard(0, 0, 5).act, Act::Delete { .. }));
    // Read before the mark: not proof enough yet (kept, its labels brought up to date).
    let waiting = heard(0, 0, 90);
    assert!(matches!(waiting.act, Act::Labels(_)), "{:?}", waiting.act);
    assert!(waiting.reason().contains("waiting for its head's job list"));
}

#[test]
fn a_marked_cluster_in_use_again_is_unmarked() {
    let mark = [(labels::RECLAIM_MARKED, ago(10).to_string())];
    let look = judge(&cluster(3600, &mark), busy(1), &cfg(), now()).expect("judged");
    let Act::Patch(patch) = &look.act else {
        panic!("expected an unmark")
    };
    assert_eq!(
        patch["metadata"]["annotations"][labels::RECLAIM_MARKED],
        Value::Null
    );
    assert_eq!(look.reason(), "in use again");
}

#[test]
fn a_job_that_ended_lately_keeps_an_old_cluster() {
    let ended = Usage {
        active: 0,
        last_end: Some(ago(60)),
    };
    let look = judge(&cluster(3600, &[]), ended, &cfg(), now()).expect("judged");
    assert_eq!(
        look.decision,
        Decision::Idle {
            remaining: Duration::from_secs(540)
        }
    );
    assert!(matches!(look.act, Act::Labels(_)));
}

#[test]
fn the_ttl_a_job_asked_for_holds() {
    let ttl = [(labels::IDLE_TTL, "7200".to_string())];
    let look = judge(&cluster(3600, &ttl), busy(0), &cfg(), now()).expect("judged");
    assert_eq!(look.ttl, Duration::from_secs(7200));
    assert!(matches!(look.decision, Decision::Idle { .. }));
}

#[test]
fn a_dry_run_writes_nothing() {
    let dry = Reclaim {
        dry_run: true,
        ..cfg()
    };
    assert_eq!(
        act(&cluster(601, &[]), busy(0), &dry),
        Act::DryRun(Step::Mark)
    );
    assert_eq!(act(&cluster(60, &[]), busy(1), &dry), Act::Nothing);
}

#[test]
fn a_cluster_being_deleted_is_counted_but_left_alone() {
    let mut meta = cluster(3600, &[]);
    meta.deletion_timestamp = Some(Time(ago(1)));
    let look = judge(&meta, busy(0), &cfg(), now()).expect("judged");
    assert_eq!(look.decision.state(), "expired");
    assert_eq!(look.act, Act::Nothing);
}

#[test]
fn namespaces_left_out_are_not_judged() {
    let only = Reclaim {
        namespaces: vec!["other".into()],
        ..cfg()
    };
    assert_eq!(judge(&cluster(3600, &[]), busy(0), &only, now()), None);
}

fn job(cluster: Option<&str>, state: &str, end: Option<Timestamp>) -> Value {
    let mut job = json!({
        "metadata": { "namespace": "team", "name": "j" },
        "status": { "jobDeploymentStatus": state },
    });
    if let Some(c) = cluster {
        job["spec"]["clusterSelector"][labels::RAY_CLUSTER] = json!(c);
    }
    if let Some(end) = end {
        job["status"]["endTime"] = json!(end.to_string());
    }
    job
}

#[test]
fn jobs_count_as_active_or_by_their_latest_end() {
    let mut usage = HashMap::new();
    for j in [
        job(Some("a"), "Running", None),
        job(Some("a"), "Initializing", None),
        job(Some("a"), "Complete", Some(ago(300))),
        job(Some("b"), "Failed", Some(ago(30))),
        job(Some("b"), "Complete", Some(ago(90))),
        job(None, "Running", None),
    ] {
        count(&mut usage, &j);
    }
    let of = |c: &str| usage[&("team".to_string(), c.to_string())].clone();
    assert_eq!(of("a").active, 2);
    assert_eq!(of("a").last_end, Some(ago(300)));
    assert_eq!(
        of("b"),
        Usage {
            active: 0,
            last_end: Some(ago(30))
        }
    );
    assert_eq!(usage.len(), 2);
}

proptest::proptest! {
    /// A member kept warm is never deleted nor marked, whatever its age, idle time, mark,
    /// head and jobs.
    #[test]
    fn a_kept_member_is_never_marked_nor_deleted(
        age in 0i64..10_000,
        marked_for in proptest::option::of(0i64..1_000),
        active in 0usize..3,
        heard in proptest::option::of((0i64..1_000, 0usize..2)),
    ) {
        let mark: Vec<(&str, String)> = marked_for
            .map(|m| (labels::RECLAIM_MARKED, ago(m).to_string()))
            .into_iter()
            .collect();
        let head = heard.map_or(crate::domain::reclaim::head::Head::Unheard, |(at, jobs)| {
            crate::domain::reclaim::head::Head::Said(crate::domain::reclaim::head::Said {
                at: ago(at),
                jobs,
                drivers: 0,
                truncated: false,
            })
        });
        let beyond = Beyond { head, kept_warm: Some("kept warm".into()) };
        let look = judge_with(&cluster(age, &mark), busy(active), &beyond, &cfg(), now()).expect("judged");
        match look.act {
            Act::Delete { .. } => proptest::prop_assert!(false, "deleted"),
            Act::Patch(p) => proptest::prop_assert!(p["metadata"]["annotations"][labels::RECLAIM_MARKED].is_null()),
            _ => {}
        }
    }
}
