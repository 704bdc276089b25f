//! The head's word against each reclaim step (case tables) and the promise that work the
//! head lists after the mark is never deleted (property).

use k8s_openapi::jiff::SignedDuration;
use proptest::prelude::*;
use rstest::rstest;

use super::*;

fn now() -> Timestamp {
    "2026-11-28T12:00:00Z".parse().expect("a time")
}

fn ago(secs: i64) -> Timestamp {
    now() - SignedDuration::from_secs(secs)
}

/// The head's answer `age` seconds ago.
fn said(age: i64, jobs: usize, drivers: usize, truncated: bool) -> Head {
    Head::Said(Said {
        at: ago(age),
        jobs,
        drivers,
        truncated,
    })
}

/// Marked 60 s ago; the silence bound 300 s.
fn heard(step: Step, head: Head) -> Step {
    check(step, &head, Some(ago(60)), SILENCE, now()).step
}

#[rstest]
#[case::not_asked_deletes_as_before(Step::Delete, Head::NotAsked, Step::Delete)]
#[case::not_asked_marks_as_before(Step::Mark, Head::NotAsked, Step::Mark)]
#[case::keep_stays(Step::Keep, said(5, 3, 0, false), Step::Keep)]
#[case::unmark_stays(Step::Unmark, Head::Unheard, Step::Unmark)]
// Marking: held by fresh work only.
#[case::mark_held_by_a_job(Step::Mark, said(5, 1, 0, false), Step::Keep)]
#[case::mark_held_by_a_ray_client(Step::Mark, said(5, 0, 1, false), Step::Keep)]
#[case::mark_not_held_by_stale_work(Step::Mark, said(301, 1, 0, false), Step::Mark)]
#[case::mark_an_idle_head(Step::Mark, said(5, 0, 0, false), Step::Mark)]
#[case::mark_an_unheard_head(Step::Mark, Head::Unheard, Step::Mark)]
// Deleting: only on a list read after the mark that shows nothing running.
#[case::delete_an_idle_head(Step::Delete, said(5, 0, 0, false), Step::Delete)]
#[case::a_job_after_the_mark_unmarks(Step::Delete, said(5, 2, 0, false), Step::Unmark)]
#[case::a_driver_after_the_mark_unmarks(Step::Delete, said(5, 0, 1, false), Step::Unmark)]
#[case::work_listed_past_the_cap_unmarks(Step::Delete, said(5, 1, 0, true), Step::Unmark)]
#[case::a_list_from_before_the_mark_waits(Step::Delete, said(90, 0, 0, false), Step::Keep)]
#[case::a_cut_list_proves_nothing(Step::Delete, said(5, 0, 0, true), Step::Keep)]
#[case::an_unheard_head_waits(Step::Delete, Head::Unheard, Step::Keep)]
fn the_head_is_heard(#[case] step: Step, #[case] head: Head, #[case] want: Step) {
    assert_eq!(heard(step, head), want);
}

#[test]
fn a_silent_head_holds_the_delete_for_the_bound_only() {
    let silent = |marked_ago: i64| {
        check(
            Step::Delete,
            &Head::Unheard,
            Some(ago(marked_ago)),
            SILENCE,
            now(),
        )
    };
    assert_eq!(silent(299).step, Step::Keep);
    let gone = silent(300);
    assert_eq!(gone.step, Step::Delete);
    assert!(gone.note.unwrap().contains("for 300s after the mark"));
    // Its last word, from before the mark, listing work, does not hold it either.
    let stale = check(
        Step::Delete,
        &said(400, 5, 0, false),
        Some(ago(300)),
        SILENCE,
        now(),
    );
    assert_eq!(stale.step, Step::Delete);
}

#[test]
fn the_note_says_what_the_head_runs() {
    let h = check(Step::Mark, &said(1, 2, 1, false), None, SILENCE, now());
    assert_eq!(
        h.note.as_deref(),
        Some("its head lists 2 running Ray job(s) and 1 driver(s) no RayJob stands for")
    );
}

#[test]
fn said_counts_active_submissions_and_running_drivers() {
    let body = serde_json::json!([
        {"submission_id": "a", "status": "RUNNING"},
        {"submission_id": "b", "status": "PENDING"},
        {"submission_id": "c", "status": "SUCCEEDED"},
        {"type": "DRIVER", "status": "RUNNING"},
    ]);
    let list = crate::domain::shared_cluster::job_life::job_list::read(&body).unwrap();
    let s = Said::of(&list, now());
    assert_eq!((s.jobs, s.drivers, s.truncated), (2, 1, false));
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Keep),
        Just(Step::Mark),
        Just(Step::Unmark),
        Just(Step::Delete)
    ]
}

fn head() -> impl Strategy<Value = Head> {
    prop_oneof![
        Just(Head::NotAsked),
        Just(Head::Unheard),
        (0i64..1000, 0usize..3, 0usize..3, any::<bool>())
            .prop_map(|(age, jobs, drivers, cut)| said(age, jobs, drivers, cut)),
    ]
}

proptest! {
    /// Work the head lists after the mark is never deleted, nothing but a Delete ever
    /// becomes one, and a head that said nothing since the mark holds it for the bound only.
    #[test]
    fn work_is_never_deleted_and_silence_is_bounded(
        s in step(), h in head(), marked_ago in 0i64..1000, silence in 1u64..600,
    ) {
        let marked = ago(marked_ago);
        let silence = Duration::from_secs(silence);
        let out = check(s, &h, Some(marked), silence, now()).step;
        if let Head::Said(said) = h
            && said.at >= marked
            && said.jobs + said.drivers > 0
        {
            prop_assert_ne!(out, Step::Delete);
        }
        if s != Step::Delete {
            prop_assert_ne!(out, Step::Delete);
        }
        let unproven = match h {
            Head::Unheard => true,
            Head::Said(said) => said.at < marked,
            Head::NotAsked => false,
        };
        if s == Step::Delete && unproven {
            let bounded = marked_ago as u64 >= silence.as_secs();
            prop_assert_eq!(out == Step::Delete, bounded);
        }
    }
}
