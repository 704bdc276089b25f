//! The decision on synthetic arrival sequences and pools (case tables); the properties
//! are in `props.rs`.

use std::time::Duration;

use rstest::rstest;

use super::*;
use crate::domain::shared_cluster::MAX_POOL;

pub(super) const MIN: i64 = 60_000;
pub(super) const HOUR: i64 = 60 * MIN;
pub(super) const DAY: i64 = 24 * HOUR;
/// A Monday, 00:00 UTC (ms since the epoch).
pub(super) const T0: i64 = 1_795_996_800_000;

pub(super) fn memory() -> Memory {
    Memory {
        half_life: Duration::from_secs(3600),
        burst_window: Duration::from_secs(10),
        period: Duration::from_secs(86_400),
        cold_gap: Duration::from_secs(1800),
    }
}

pub(super) fn limits() -> Limits {
    Limits {
        enabled: true,
        idle_ttl: Duration::from_secs(1800),
        min_warm: 1,
        max_per_config: 4,
        max_per_namespace: 8,
        jobs_per_member: 0,
    }
}

/// The rate after arrivals at these times (ms).
pub(super) fn seen(times: &[i64]) -> Rate {
    let memory = memory();
    let mut rate = Rate::first(times[0], &memory);
    for t in &times[1..] {
        rate.record(*t, &memory);
    }
    rate
}

fn outlook(times: &[i64], now: i64) -> Outlook {
    seen(times).outlook(now, Duration::from_secs(1800), &memory())
}

/// Arrivals every `every` ms from `from`, `n` of them.
pub(super) fn periodic(from: i64, every: i64, n: i64) -> Vec<i64> {
    (0..n).map(|k| from + k * every).collect()
}

/// A fan-out of `n` tasks, one a second from `at`.
pub(super) fn fan_out(at: i64, n: i64) -> Vec<i64> {
    (0..n).map(|k| at + k * 1000).collect()
}

fn wants(times: &[i64], now: i64) -> u32 {
    want(&outlook(times, now), &limits()).map_or(0, |(n, _)| n)
}

#[rstest]
// Every 10 minutes for 3 hours: the next is expected within the 30-minute TTL.
#[case::every_10_minutes(periodic(T0, 10 * MIN, 18), T0 + 175 * MIN, 1)]
// Every 20 minutes, just before the next one: still within the TTL.
#[case::every_20_minutes(periodic(T0, 20 * MIN, 9), T0 + 179 * MIN, 1)]
// Every 2 hours, with no day behind it: never within the TTL by the rate.
#[case::every_2_hours(periodic(T0, 2 * HOUR, 5), T0 + 8 * HOUR + 30 * MIN, 0)]
// A busy hour, then nothing: the rate falls, and with it the config.
#[case::falls_to_zero_soon(periodic(T0, 5 * MIN, 12), T0 + 70 * MIN, 1)]
#[case::falls_to_zero_later(periodic(T0, 5 * MIN, 12), T0 + 5 * HOUR, 0)]
// One fan-out of 16 is one episode: no rate to speak of.
#[case::one_fan_out(fan_out(T0, 16), T0 + 5 * MIN, 0)]
fn arrival_sequences(#[case] times: Vec<i64>, #[case] now: i64, #[case] want: u32) {
    assert_eq!(wants(&times, now), want, "{:?}", outlook(&times, now));
}

/// Every 20 minutes, with one 50-minute pause (`paused`) or none, then quiet.
fn every_20_minutes(paused: bool) -> Vec<i64> {
    let mut times = periodic(T0, 20 * MIN, 9);
    let gap = if paused { 50 * MIN } else { 20 * MIN };
    times.extend(periodic(times[8] + gap, 20 * MIN, 4));
    times
}

#[rstest]
// 30 minutes quiet: the rate alone still expects the next within the TTL.
#[case::rate_alone(false, 30, Some("rate"))]
// 45 minutes: the rate has fallen past the TTL, and no pause that long was seen.
#[case::rate_fell(false, 45, None)]
// The same 45 minutes after a 50-minute pause it came back from: kept.
#[case::a_pause_it_came_back_from(true, 45, Some("pause"))]
// 55 minutes: longer than any pause it came back from.
#[case::longer_than_any_pause(true, 55, None)]
fn a_steady_config_through_a_quiet_spell(
    #[case] paused: bool,
    #[case] quiet_min: i64,
    #[case] kept: Option<&str>,
) {
    let times = every_20_minutes(paused);
    let o = outlook(&times, times.last().unwrap() + quiet_min * MIN);
    let got = want(&o, &limits()).map(|(_, r)| r);
    assert_eq!(got.map(|r| r.label()), kept, "{o:?}");
    if let Some(r) = got.filter(|r| r.label() == "pause") {
        assert_eq!(
            r.describe(),
            "kept warm: quiet for 45m, it came back after pauses up to 50m before, kept at \
             most 5m more (idle TTL 30m)"
        );
    }
}

#[test]
fn a_config_that_comes_twice_a_day_is_not_kept_by_its_pauses() {
    // Two fan-outs 5 hours apart: the pause is remembered (up to the half-life), but the
    // rate at its last task never said "due within the TTL".
    let mut times = fan_out(T0, 16);
    times.extend(fan_out(T0 + 5 * HOUR, 16));
    let o = outlook(&times, T0 + 5 * HOUR + 40 * MIN);
    assert_eq!(o.pause, None, "{o:?}");
}

#[test]
fn the_rate_reads_a_steady_period_about_right() {
    // Every 12 minutes for 5 hours: 5 an hour, the next in about 12 minutes.
    let o = outlook(&periodic(T0, 12 * MIN, 25), T0 + 288 * MIN + 6 * MIN);
    assert!((3.5..6.5).contains(&o.per_hour), "{o:?}");
    let next = o.by_rate.unwrap().as_secs();
    assert!((540..1100).contains(&next), "{o:?}");
}

#[test]
fn a_fan_out_counts_once_and_is_remembered_by_its_size() {
    let mut times = periodic(T0, 10 * MIN, 6);
    times.extend(fan_out(T0 + 55 * MIN, 16));
    let with = outlook(&times, T0 + 60 * MIN);
    let without = outlook(&times[..6], T0 + 60 * MIN);
    // Sixteen tasks, one more episode: the rate moves as for one task.
    assert!(
        with.per_hour < without.per_hour * 1.5,
        "{with:?} {without:?}"
    );
    assert!((15.0..=16.0).contains(&with.burst), "{with:?}");
    // At 4 jobs a member the fan-out takes 4 members, within the cap.
    let capped = Limits {
        jobs_per_member: 4,
        ..limits()
    };
    let (n, reason) = want(&with, &capped).unwrap();
    assert_eq!((n, reason.members, reason.burst), (4, 4, 16));
    assert!(
        reason
            .describe()
            .contains("burst of 16 tasks takes 4 members")
    );
    // Two hours on, the burst has halved and no task is expected: nothing.
    let later = outlook(&times, T0 + 3 * HOUR);
    assert!((3.0..9.0).contains(&later.burst), "{later:?}");
    assert_eq!(want(&later, &capped), None);
}

#[rstest]
// A fan-out at 09:00 every day: on day 2, from 08:30 (the TTL ahead) it is expected.
#[case::before_the_window(DAY + 8 * HOUR, None)]
#[case::ttl_ahead(DAY + 8 * HOUR + 31 * MIN, Some(29 * 60))]
#[case::at_the_slot(DAY + 9 * HOUR + 5 * MIN, Some(0))]
#[case::slot_over(DAY + 9 * HOUR + 20 * MIN, None)]
// Two days without it: the memory holds one period back only.
#[case::forgotten(3 * DAY + 8 * HOUR + 45 * MIN, None)]
fn a_daily_fan_out_is_expected_at_its_time_of_day(
    #[case] now: i64,
    #[case] next_in_s: Option<u64>,
) {
    let times = fan_out(T0 + 9 * HOUR, 16);
    let o = outlook(&times, T0 + now);
    assert_eq!(o.by_time_of_day.map(|d| d.as_secs()), next_in_s, "{o:?}");
    let w = want(&o, &limits());
    assert_eq!(w.is_some(), next_in_s.is_some());
    if let Some((_, reason)) = w {
        assert_eq!(reason.label(), "time-of-day");
    }
}

#[rstest]
// Every 10 minutes from 10:00 to 12:00: only the first came after a gap longer than the
// TTL (it found no warm cluster); the others kept their cluster warm by themselves.
#[case::the_first(DAY + 9 * HOUR + 40 * MIN, Some(20 * 60))]
#[case::not_the_steady_rest(DAY + 11 * HOUR, None)]
fn only_arrivals_after_a_long_gap_are_remembered_by_time_of_day(
    #[case] now: i64,
    #[case] next_in_s: Option<u64>,
) {
    let o = outlook(&periodic(T0 + 10 * HOUR, 10 * MIN, 13), T0 + now);
    assert_eq!(o.by_time_of_day.map(|d| d.as_secs()), next_in_s, "{o:?}");
}

#[test]
fn the_time_of_day_window_runs_over_midnight() {
    // Yesterday's 00:05 is expected from today's 23:40 (the window runs into tomorrow).
    let o = outlook(&[T0 + DAY + 5 * MIN], T0 + DAY + 23 * HOUR + 40 * MIN);
    assert_eq!(o.by_time_of_day, Some(Duration::from_secs(20 * 60)));
    // A late arrival (a relist) from the day before still counts for that day.
    let mut rate = seen(&[T0 + DAY + 10 * HOUR]);
    rate.record(T0 + 9 * HOUR, &memory());
    let ttl = Duration::from_secs(1800);
    let o = rate.outlook(T0 + DAY + 8 * HOUR + 50 * MIN, ttl, &memory());
    assert_eq!(o.by_time_of_day, Some(Duration::from_secs(10 * 60)));
}

pub(super) fn member(index: u32, state: State) -> Member {
    let name = if index == 0 {
        "ray-a".to_string()
    } else {
        format!("ray-a-{index}")
    };
    Member { index, name, state }
}

fn soon(per_hour: f64, burst: f64) -> Outlook {
    Outlook {
        per_hour,
        by_rate: Some(Duration::from_secs_f64(3600.0 / per_hour)),
        by_time_of_day: None,
        burst_then: 0,
        burst,
        pause: None,
    }
}

fn pool(digest: &str, outlook: Option<Outlook>, members: Vec<Member>) -> Pool {
    Pool {
        digest: digest.into(),
        opted_in: true,
        outlook,
        members,
    }
}

use State::{Busy, Going, Idle, Warming};

#[rstest]
#[case::nothing_yet_makes_the_first(vec![], 0, 1.0, vec![], vec![0], vec![])]
#[case::keeps_the_idle_one(vec![member(0, Idle)], 0, 1.0, vec!["ray-a"], vec![], vec![])]
#[case::a_busy_member_takes_the_next(
    vec![member(0, Busy { jobs: 3 }), member(1, Idle)], 0, 1.0, vec![], vec![], vec!["ray-a-1"]
)]
#[case::a_full_one_does_not(
    vec![member(0, Busy { jobs: 4 }), member(1, Warming)], 4, 1.0, vec!["ray-a-1"], vec![], vec![]
)]
#[case::a_burst_takes_the_pool(
    vec![member(0, Busy { jobs: 4 }), member(1, Idle), member(3, Idle)], 4, 16.0,
    vec!["ray-a-1", "ray-a-3"], vec![2, 4], vec![]
)]
#[case::a_going_member_is_passed_by(
    vec![member(0, Going), member(1, Idle), member(2, Idle)], 0, 1.0, vec!["ray-a-1"], vec![],
    vec!["ray-a-2"]
)]
#[case::an_absent_first_place_is_made(
    vec![member(1, Idle)], 0, 1.0, vec![], vec![0], vec!["ray-a-1"]
)]
fn pools_walked_in_admission_order(
    #[case] members: Vec<Member>,
    #[case] per_member: u32,
    #[case] burst: f64,
    #[case] keep: Vec<&str>,
    #[case] create: Vec<u32>,
    #[case] let_go: Vec<&str>,
) {
    let l = Limits {
        jobs_per_member: per_member,
        ..limits()
    };
    let plans = plan(&[pool("a", Some(soon(6.0, burst)), members)], &l);
    let p = &plans[0];
    let kept: Vec<&str> = p.keep.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        (kept, &p.create, &p.let_go),
        (
            keep,
            &create,
            &let_go.iter().map(|s| s.to_string()).collect()
        )
    );
    for (_, reason) in &p.keep {
        assert!(
            reason
                .describe()
                .starts_with("kept warm: about 6.0 tasks an hour")
        );
    }
}

#[test]
fn nothing_is_made_past_the_pools_last_place() {
    let full: Vec<Member> = (0..MAX_POOL).map(|i| member(i, Busy { jobs: 4 })).collect();
    let l = Limits {
        jobs_per_member: 4,
        ..limits()
    };
    let plans = plan(&[pool("a", Some(soon(6.0, 1.0)), full)], &l);
    assert_eq!(plans[0].warm(), 0);
}

#[rstest]
#[case::off(false, true, Some(soon(6.0, 1.0)))]
#[case::not_opted_in(true, false, Some(soon(6.0, 1.0)))]
#[case::nothing_seen(true, true, None)]
#[case::too_rare(true, true, Some(soon(1.0, 1.0)))]
fn nothing_is_kept_unless_a_task_is_due(
    #[case] enabled: bool,
    #[case] opted_in: bool,
    #[case] outlook: Option<Outlook>,
) {
    let l = Limits {
        enabled,
        ..limits()
    };
    let mut p = pool("a", outlook, vec![member(0, Idle), member(1, Warming)]);
    p.opted_in = opted_in;
    let plans = plan(&[p], &l);
    assert_eq!(plans[0].warm(), 0);
    assert_eq!(plans[0].let_go, vec!["ray-a", "ray-a-1"]);
}

#[test]
fn the_namespace_cap_goes_to_the_config_expected_soonest() {
    let l = Limits {
        min_warm: 2,
        max_per_namespace: 3,
        ..limits()
    };
    let pools = [
        pool(
            "later",
            Some(soon(3.0, 1.0)),
            vec![member(0, Idle), member(1, Idle)],
        ),
        pool("sooner", Some(soon(30.0, 1.0)), vec![]),
    ];
    let plans = plan(&pools, &l);
    assert_eq!(
        plans[0].digest, "later",
        "plans come in the order of the pools"
    );
    assert_eq!(plans[1].create, vec![0, 1]);
    assert_eq!(plans[0].keep.len(), 1);
    assert_eq!(plans[0].let_go, vec!["ray-a-1"]);
}

#[test]
fn the_tracker_is_bounded_and_a_crowded_namespace_evicts_its_own() {
    let mut tracker = Tracker::new(memory(), 4);
    let key = |ns: &str, d: &str| (ns.to_string(), d.to_string());
    tracker.arrived(&key("quiet", "q"), T0);
    for (i, d) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        tracker.arrived(&key("loud", d), T0 + (i as i64 + 1) * MIN);
    }
    assert_eq!(tracker.len(), 4);
    assert!(
        tracker.rate(&key("quiet", "q")).is_some(),
        "the stalest of all stays"
    );
    assert!(tracker.rate(&key("loud", "a")).is_none());
    assert!(tracker.rate(&key("loud", "f")).is_some());
    // A known config only moves on.
    tracker.arrived(&key("loud", "f"), T0 + HOUR);
    assert_eq!(tracker.len(), 4);
}

#[rstest]
#[case::off(false, &[], Some("true"), false)]
#[case::listed_namespace(true, &["team"], None, true)]
#[case::other_namespace(true, &["other"], None, false)]
#[case::annotated(true, &[], Some("true"), true)]
#[case::annotated_otherwise(true, &[], Some("yes"), false)]
fn opting_in(
    #[case] enabled: bool,
    #[case] namespaces: &[&str],
    #[case] annotation: Option<&str>,
    #[case] want: bool,
) {
    let w = crate::config::WarmAhead {
        enabled,
        namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    };
    assert_eq!(opted_in(&w, "team", annotation), want);
}

#[test]
fn the_config_gives_the_limits_and_the_memory() {
    let mut cfg = crate::config::Config::default();
    cfg.shared_clusters.max_jobs_per_cluster = 4;
    let l = Limits::from_config(&cfg);
    assert!(!l.enabled);
    assert_eq!(
        (l.idle_ttl.as_secs(), l.jobs_per_member, l.max_per_namespace),
        (1800, 4, 4)
    );
    let m = Memory::from_config(&cfg);
    assert_eq!(m, memory());
}

#[test]
fn a_template_is_kept_per_config_remembered_and_goes_with_it() {
    let mut tracker = Tracker::new(memory(), 1);
    let key = |ns: &str, d: &str| (ns.to_string(), d.to_string());
    let job = |image: &str| serde_json::json!({"metadata": {"namespace": "a"}, "spec": {"clusterSelector": {"ray.io/cluster": image}}});
    // Not remembered yet: nothing kept.
    tracker.remember(&key("a", "x"), "u1", &job("x"));
    assert!(tracker.template(&key("a", "x")).is_none());
    tracker.arrived(&key("a", "x"), T0);
    tracker.remember(&key("a", "x"), "u1", &job("x"));
    let kept = tracker.template(&key("a", "x")).cloned().unwrap();
    assert_eq!(kept, ahead::template(&job("x")));
    // Another config past the cap evicts the first, template and all.
    tracker.arrived(&key("a", "y"), T0 + MIN);
    assert!(tracker.template(&key("a", "x")).is_none());
}
