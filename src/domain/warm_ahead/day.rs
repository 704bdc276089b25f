//! Two days of arrivals through the tracker and the plan, end to end.

use super::tests::{DAY, HOUR, MIN, T0, fan_out, limits, member, memory, periodic};
use super::*;

/// Two days of two configs: a map task fanning out 16 tasks at 09:00, and a report every
/// 10 minutes from 10:00 to 12:00; 4 jobs a member, the TTL 30 minutes.
#[test]
fn a_day_after_a_day() {
    let l = Limits {
        jobs_per_member: 4,
        ..limits()
    };
    let mut tracker = Tracker::new(memory(), 10);
    let (map, report) = (
        ("team".to_string(), "map".to_string()),
        ("team".to_string(), "report".to_string()),
    );
    let day_one = |tracker: &mut Tracker, until: i64| {
        for t in fan_out(T0 + 9 * HOUR, 16)
            .into_iter()
            .filter(|t| *t < until)
        {
            tracker.arrived(&map, t);
        }
        for t in periodic(T0 + 10 * HOUR, 10 * MIN, 13)
            .into_iter()
            .filter(|t| *t < until)
        {
            tracker.arrived(&report, t);
        }
    };
    day_one(&mut tracker, T0 + DAY);
    let plans = |tracker: &Tracker, now: i64, report_members: Vec<Member>| {
        let pool = |key: &ConfigKey, members| Pool {
            digest: key.1.clone(),
            opted_in: true,
            outlook: tracker
                .rate(key)
                .map(|r| r.outlook(now, l.idle_ttl, tracker.memory())),
            members,
        };
        plan(&[pool(&map, vec![]), pool(&report, report_members)], &l)
    };
    // Day two, 08:00: nothing is due.
    let early = plans(&tracker, T0 + DAY + 8 * HOUR, vec![]);
    assert_eq!(early.iter().map(PoolPlan::warm).sum::<usize>(), 0);
    // 08:35: yesterday's fan-out is 25 minutes off: the 4 members it took are made ahead.
    let ahead = plans(&tracker, T0 + DAY + 8 * HOUR + 35 * MIN, vec![]);
    assert_eq!(ahead[0].create, vec![0, 1, 2, 3]);
    let (_, reason) = want(
        &tracker.rate(&map).unwrap().outlook(
            T0 + DAY + 8 * HOUR + 35 * MIN,
            l.idle_ttl,
            tracker.memory(),
        ),
        &l,
    )
    .unwrap();
    assert_eq!(reason.label(), "time-of-day");
    // Yesterday's report came at 10:00 too: from 09:30 one member is made for it.
    let report_ahead = plans(&tracker, T0 + DAY + 9 * HOUR + 35 * MIN, vec![]);
    assert_eq!(report_ahead[1].create, vec![0]);
    // Day two's reports come late, from 14:00: at 15:15 their rate alone keeps the idle
    // member (yesterday had none then).
    for t in periodic(T0 + DAY + 14 * HOUR, 10 * MIN, 8) {
        tracker.arrived(&report, t);
    }
    let idle = vec![member(0, State::Idle)];
    let kept = plans(&tracker, T0 + DAY + 15 * HOUR + 15 * MIN, idle.clone());
    assert_eq!(kept[1].keep.len(), 1);
    assert_eq!(kept[1].keep[0].1.label(), "rate");
    // They stopped at 15:10: by 17:30 neither the rate nor yesterday says one is coming.
    let late = plans(&tracker, T0 + DAY + 17 * HOUR + 30 * MIN, idle);
    assert_eq!(late[1].warm(), 0);
    assert_eq!(late[1].let_go, vec!["ray-a"]);
}
