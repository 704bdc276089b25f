//! Properties of the decision over any pools and arrivals: never above a cap, nothing
//! when off, and more demand never keeps fewer warm.

use std::time::Duration;

use proptest::prelude::*;

use super::tests::{limits, memory, periodic, seen};
use super::*;

fn state() -> impl Strategy<Value = State> {
    prop_oneof![
        (0u32..6).prop_map(|jobs| State::Busy { jobs }),
        Just(State::Idle),
        Just(State::Warming),
        Just(State::Going),
    ]
}

fn members() -> impl Strategy<Value = Vec<Member>> {
    proptest::collection::btree_map(0u32..8, state(), 0..6).prop_map(|m| {
        m.into_iter()
            .map(|(index, state)| Member {
                index,
                name: format!("m{index}"),
                state,
            })
            .collect()
    })
}

fn outlook() -> impl Strategy<Value = Outlook> {
    (
        0.0f64..50.0,
        proptest::option::of(0u64..7200),
        proptest::option::of(0u64..1800),
        1.0f64..40.0,
        0u32..40,
        proptest::option::of((0u64..3600, 1u64..3600)),
    )
        .prop_map(
            |(per_hour, by_rate, by_time_of_day, burst, burst_then, pause)| Outlook {
                per_hour,
                by_rate: by_rate.map(Duration::from_secs),
                by_time_of_day: by_time_of_day.map(Duration::from_secs),
                burst_then,
                burst,
                pause: pause.map(|(quiet, more)| Pause {
                    quiet: Duration::from_secs(quiet),
                    longest: Duration::from_secs(quiet + more),
                }),
            },
        )
}

fn pools() -> impl Strategy<Value = Vec<Pool>> {
    proptest::collection::vec(
        (proptest::option::of(outlook()), members(), any::<bool>()),
        0..5,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (outlook, members, opted_in))| Pool {
                digest: format!("d{i}"),
                opted_in,
                outlook,
                members,
            })
            .collect()
    })
}

fn any_limits() -> impl Strategy<Value = Limits> {
    (0u32..4, 0u32..6, 0u32..10, 0u32..5).prop_map(|(min_warm, per_config, per_ns, per)| Limits {
        min_warm,
        max_per_config: per_config,
        max_per_namespace: per_ns,
        jobs_per_member: per,
        ..limits()
    })
}

proptest! {
    #[test]
    fn never_above_a_cap_and_only_idle_members_kept(pools in pools(), l in any_limits()) {
        let plans = plan(&pools, &l);
        prop_assert_eq!(plans.len(), pools.len());
        let total: usize = plans.iter().map(PoolPlan::warm).sum();
        prop_assert!(total <= l.max_per_namespace as usize);
        for (pool, p) in pools.iter().zip(&plans) {
            prop_assert!(p.warm() <= l.max_per_config as usize);
            for (name, _) in &p.keep {
                let m = pool.members.iter().find(|m| m.name == *name).unwrap();
                prop_assert!(matches!(m.state, State::Idle | State::Warming));
            }
            for i in &p.create {
                prop_assert!(pool.members.iter().all(|m| m.index != *i));
            }
            let idle = pool.members.iter().filter(|m| matches!(m.state, State::Idle | State::Warming));
            prop_assert_eq!(idle.count(), p.keep.len() + p.let_go.len());
        }
    }

    #[test]
    fn nothing_when_off(pools in pools(), l in any_limits()) {
        let off = Limits { enabled: false, ..l };
        for p in plan(&pools, &off) {
            prop_assert_eq!(p.warm(), 0);
        }
    }

    /// A sooner next task, or a bigger burst, never wants fewer members.
    #[test]
    fn more_demand_never_wants_fewer(o in outlook(), l in any_limits(), sooner in 0u64..3600, more in 0.0f64..20.0) {
        let busier = Outlook {
            by_rate: o.by_rate.map(|d| d.saturating_sub(Duration::from_secs(sooner))),
            burst: o.burst + more,
            burst_then: o.burst_then + more as u32,
            ..o
        };
        let n = |o: &Outlook| want(o, &l).map_or(0, |(n, _)| n);
        prop_assert!(n(&busier) >= n(&o));
        // And with room to spare, the pool's warm members follow.
        let roomy = Limits { max_per_namespace: 100, ..l };
        let warm = |o: Outlook| plan(&[Pool { digest: "d".into(), opted_in: true, outlook: Some(o), members: vec![] }], &roomy)[0].warm();
        prop_assert!(warm(busier) >= warm(o));
    }

    /// Arrivals at a steady period: a shorter period is never kept less by its rate. (Not
    /// by its pauses: a config quiet for longer than its period is overdue and let go, where
    /// one with a longer period is not yet.)
    #[test]
    fn a_shorter_period_is_never_kept_less(short in 60i64..7200, extra in 0i64..7200, n in 2i64..30, after in 0i64..7200) {
        let long = short + extra;
        let end = 1_795_996_800_000i64;
        let times = |every: i64| -> Vec<i64> { (0..n).rev().map(|k| end - k * every * 1000).collect() };
        let now = end + after * 1000;
        let horizon = Duration::from_secs(1800);
        let no_day = Memory { period: Duration::ZERO, ..memory() };
        let o = |every| {
            let t = times(every);
            let mut r = Rate::first(t[0], &no_day);
            t[1..].iter().for_each(|x| r.record(*x, &no_day));
            Outlook { pause: None, ..r.outlook(now, horizon, &no_day) }
        };
        let n = |o: &Outlook| want(o, &limits()).map_or(0, |(n, _)| n);
        prop_assert!(n(&o(short)) >= n(&o(long)), "{:?} {:?}", o(short), o(long));
    }

    /// A steady config is kept through any quiet shorter than a recent pause it came back
    /// from, up to the half-life.
    #[test]
    fn a_steady_config_is_kept_through_a_pause_it_has_come_back_from(every in 60i64..900, n in 4i64..20, pause in 60i64..7200, share in 0.0f64..1.0) {
        let memory = memory();
        let longest = pause.max(every).min(memory.half_life.as_secs() as i64);
        let quiet = (longest as f64 * share) as i64;
        let mut times = periodic(1_795_996_800_000, every * 1000, n);
        let after = times.last().unwrap() + pause * 1000;
        times.extend(periodic(after, every * 1000, 4));
        let now = times.last().unwrap() + quiet * 1000;
        let o = seen(&times).outlook(now, Duration::from_secs(1800), &memory);
        prop_assert!(want(&o, &limits()).is_some(), "{o:?}");
    }

    /// One more arrival, after the others and apart from them, never lowers the rate.
    #[test]
    fn another_arrival_never_lowers_the_rate(gaps in proptest::collection::vec(11i64..5000, 1..20), gap in 11i64..5000, after in 0i64..20_000) {
        let mut times = vec![1_795_996_800_000i64];
        for g in &gaps {
            times.push(times.last().unwrap() + g * 1000);
        }
        let mut more = times.clone();
        more.push(times.last().unwrap() + gap * 1000);
        let now = more.last().unwrap() + after * 1000;
        let h = Duration::from_secs(1800);
        let (a, b) = (seen(&times).outlook(now, h, &memory()), seen(&more).outlook(now, h, &memory()));
        prop_assert!(b.per_hour >= a.per_hour);
    }
}
