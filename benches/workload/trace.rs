//! The trace: Flyte-like Ray task arrivals over a compressed day, drawn from a fixed seed.
//! Pure; times in trace seconds (the harness divides them by the speed-up).
//!
//! Three configs (a config is what makes a shared cluster: here its image and workers):
//! - `report`: a periodic schedule, one task every `period` seconds;
//! - `map`: a map task that fans out `fan_out` identical tasks at once, twice a day, the
//!   two far enough apart that the shared cluster idles out between them;
//! - `adhoc`: tasks arriving one by one at random (exponential gaps), so the gaps between
//!   them fall both under and over the idle TTL.
//!
//! Each task's driver runs for a time drawn uniformly from its config's range.

/// A config: its image (the part of the cluster spec that differs) and its workers.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub name: &'static str,
    pub image: &'static str,
    pub workers: u32,
    /// The driver's run time, drawn uniformly from this range (trace seconds).
    pub run: (f64, f64),
}

pub const CONFIGS: [Config; 3] = [
    Config {
        name: "report",
        image: "rayproject/ray:2.40.0",
        workers: 1,
        run: (60.0, 150.0),
    },
    Config {
        name: "map",
        image: "rayproject/ray:2.41.0",
        workers: 2,
        run: (120.0, 300.0),
    },
    Config {
        name: "adhoc",
        image: "rayproject/ray:2.42.0",
        workers: 2,
        run: (30.0, 240.0),
    },
];

/// The shape of a day.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Length of the day (trace seconds); no task arrives after it.
    pub day: f64,
    /// The periodic schedule's period.
    pub period: f64,
    /// Tasks of one map fan-out, and when (as fractions of the day) they fan out.
    pub fan_out: usize,
    pub fan_out_at: Vec<f64>,
    /// Mean gap between ad hoc arrivals.
    pub adhoc_mean_gap: f64,
    pub seed: u64,
}

impl Shape {
    pub fn new(day: f64, seed: u64) -> Self {
        Self {
            day,
            period: 300.0,
            fan_out: 16,
            fan_out_at: vec![0.175, 0.7],
            adhoc_mean_gap: 150.0,
            seed,
        }
    }
}

/// One task: when it arrives, its config (index into CONFIGS), its driver's run time.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub at: f64,
    pub config: usize,
    pub run: f64,
}

/// splitmix64: a fixed, dependency-free generator (the trace must not change with a
/// crate's version).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn uniform(&mut self, (lo, hi): (f64, f64)) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
}

/// `days` days of tasks, by arrival time: each day shaped alike (the schedule and the
/// map fan-outs at the same times of day), its ad hoc arrivals and run times drawn from
/// its own seed (`seed + day`).
pub fn days(shape: &Shape, days: u32) -> Vec<Task> {
    let mut out: Vec<Task> = (0..days)
        .flat_map(|d| {
            let day = Shape {
                seed: shape.seed + u64::from(d),
                ..shape.clone()
            };
            let offset = f64::from(d) * shape.day;
            tasks(&day).into_iter().map(move |t| Task {
                at: t.at + offset,
                ..t
            })
        })
        .collect();
    out.sort_by(|a, b| a.at.total_cmp(&b.at));
    out
}

/// The day's tasks, by arrival time.
pub fn tasks(shape: &Shape) -> Vec<Task> {
    let mut rng = Rng::new(shape.seed);
    let mut out = Vec::new();
    let task = |rng: &mut Rng, at: f64, config: usize| Task {
        at,
        config,
        run: rng.uniform(CONFIGS[config].run).round(),
    };
    let mut t = 0.0;
    while t < shape.day {
        out.push(task(&mut rng, t, 0));
        t += shape.period;
    }
    for at in &shape.fan_out_at {
        for _ in 0..shape.fan_out {
            out.push(task(&mut rng, (at * shape.day).round(), 1));
        }
    }
    let mut t = rng.exponential(shape.adhoc_mean_gap);
    while t < shape.day {
        out.push(task(&mut rng, t.round(), 2));
        t += rng.exponential(shape.adhoc_mean_gap);
    }
    out.sort_by(|a, b| a.at.total_cmp(&b.at));
    out
}

/// The trace in words, and the longest and shortest idle gap between tasks of a config
/// (from one task's end, ignoring the wait, to the next arrival), for the report.
pub fn describe(tasks: &[Task], idle_ttl: f64) -> Vec<String> {
    CONFIGS
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let of: Vec<&Task> = tasks.iter().filter(|t| t.config == i).collect();
            let mut busy_until = f64::MIN;
            let (mut over, mut under) = (0, 0);
            for t in &of {
                if busy_until > f64::MIN && t.at > busy_until {
                    if t.at - busy_until > idle_ttl {
                        over += 1;
                    } else {
                        under += 1;
                    }
                }
                busy_until = busy_until.max(t.at + t.run);
            }
            format!(
                "`{}` ({}, head + {} workers): {} tasks, runs {:.0} to {:.0} s; idle gaps under the TTL {under}, over it {over}",
                c.name,
                c.image,
                c.workers,
                of.len(),
                c.run.0,
                c.run.1
            )
        })
        .collect()
}
