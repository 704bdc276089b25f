//! One config's arrivals, remembered in a few numbers (pure): an exponentially weighted
//! rate of *episodes*, the size of recent bursts, and which slots of the previous period
//! (a day by default) saw an episode begin after a gap longer than the idle TTL.
//!
//! Why an exponentially weighted rate: it needs two numbers per config whatever the
//! traffic (a list of arrival times would grow with it), it forgets at a known pace (the
//! half-life), and it falls on its own when arrivals stop: a config nobody uses lets its
//! members go without anyone telling it so. Each episode counts 1 at its last arrival and
//! halves every half-life; the rate is `ln 2 / half-life` times that weight, which for
//! arrivals at a steady rate is that rate on average, so `1 / rate` is the expected time
//! to the next episode.
//!
//! Why episodes rather than tasks: a map task fans out many identical tasks within
//! seconds; counted one by one they would read as a rate of hundreds an hour, and keep
//! the config warm for hours after a single fan-out. Arrivals less than the burst window
//! after the previous one join its episode; the episode's size is remembered apart (a
//! peak that decays with the same half-life), to size the pool for the next burst.
//!
//! Why a time-of-day memory as well: a schedule that runs every few hours, or a fan-out
//! at 09:00 every day, comes back after a gap far longer than any idle TTL, so its rate
//! never says "soon". The previous period's arrivals, one bit per slot (96 slots: 15
//! minutes of a day), say when it came yesterday. Only those after a gap longer than the
//! idle TTL (the ones that found no warm cluster) are kept: steady traffic keeps its
//! cluster warm by itself, and remembering every random arrival would keep an ad hoc
//! config warm all day for nothing.

use std::time::Duration;

use super::pauses::Pauses;

/// Slots of one period in the time-of-day memory (15 minutes each for a day).
pub const SLOTS: u32 = 96;

/// How arrivals are remembered (the same for every config).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Memory {
    /// The weight of an episode halves every this long.
    pub half_life: Duration,
    /// An arrival at most this long after the previous one joins its episode.
    pub burst_window: Duration,
    /// The period of the time-of-day memory (zero: no such memory).
    pub period: Duration,
    /// The time-of-day memory keeps only episodes that come after a gap longer than this
    /// (the idle TTL): those that find no warm cluster. Steady traffic keeps its cluster
    /// warm by itself, and remembering each random arrival would keep a config warm all
    /// day for nothing.
    pub cold_gap: Duration,
}

/// One config's arrivals in a few numbers (bounded whatever the traffic).
#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    /// Sum over episodes of 2^(-age / half-life), ages counted to `last`.
    weight: f64,
    /// The latest arrival seen (ms since the epoch).
    last: i64,
    /// Tasks in the current (latest) episode.
    episode: u32,
    /// The largest episode, decayed like the weight, as of `last`.
    peak: f64,
    /// The latest episode came after a gap longer than [`Memory::cold_gap`].
    cold: bool,
    /// At the latest arrival the rate said a task was due within [`Memory::cold_gap`].
    steady: bool,
    /// The latest gaps between episodes, each at most the half-life.
    pauses: Pauses,
    season: Season,
}

/// Which slots saw an arrival in period `index` (`current`) and the one before, and the
/// largest burst of each.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Season {
    index: i64,
    current: u128,
    previous: u128,
    current_burst: u32,
    previous_burst: u32,
}

/// What a config's arrivals say at a moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outlook {
    /// Episodes an hour, as the weighted rate has it now.
    pub per_hour: f64,
    /// Expected time to the next episode by the rate (`None`: no rate at all).
    pub by_rate: Option<Duration>,
    /// Time until a slot of the previous period, from now up to the horizon asked for,
    /// that saw an arrival then (`None`: none, or no time-of-day memory).
    pub by_time_of_day: Option<Duration>,
    /// The largest burst of the period that slot belongs to (0 without one).
    pub burst_then: u32,
    /// Tasks of the largest recent burst (decayed; at least 1 once anything arrived).
    pub burst: f64,
    /// A steady config in a pause shorter than its longest recent one (`None`: not
    /// steady at its last arrival, no pause remembered, or quiet longer than all).
    pub pause: Option<Pause>,
}

/// A pause the config has come back after before (see [`super::pauses`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pause {
    /// Since its latest arrival.
    pub quiet: Duration,
    /// Its longest recent pause.
    pub longest: Duration,
}

fn decay(ms: i64, half_life: Duration) -> f64 {
    let h = half_life.as_millis().max(1) as f64;
    (-(ms.max(0) as f64) / h).exp2()
}

impl Rate {
    /// The memory of a first arrival at `at_ms`.
    pub fn first(at_ms: i64, memory: &Memory) -> Self {
        let mut rate = Self {
            weight: 1.0,
            last: at_ms,
            episode: 1,
            peak: 1.0,
            cold: true,
            steady: false,
            pauses: Pauses::default(),
            season: Season::default(),
        };
        rate.steady = rate.due_within_cold_gap(memory);
        rate.season.record(at_ms, memory.period, 1);
        rate
    }

    /// The latest arrival seen (ms since the epoch).
    pub fn last_ms(&self) -> i64 {
        self.last
    }

    /// Folds in one arrival (a RayJob's creation) at `at_ms`; late ones count too.
    pub fn record(&mut self, at_ms: i64, memory: &Memory) {
        if let Some(episode) = self.fold(at_ms, memory) {
            self.season.record(at_ms, memory.period, episode);
        }
    }

    /// [`Self::record`] but the time-of-day memory; the size of the episode the arrival
    /// joined, when the time-of-day memory keeps it (a late arrival of an episode of its
    /// own: its gap is unknown, so it is kept).
    fn fold(&mut self, at_ms: i64, memory: &Memory) -> Option<u32> {
        let window = memory.burst_window.as_millis() as i64;
        if at_ms < self.last {
            // Seen late (a watch relist): part of the latest episode if close to it,
            // else an older episode of its own.
            if self.last - at_ms <= window {
                self.episode = self.episode.saturating_add(1);
                self.peak = self.peak.max(f64::from(self.episode));
                return self.cold.then_some(self.episode);
            }
            self.weight += decay(self.last - at_ms, memory.half_life);
            return Some(1);
        }
        let d = decay(at_ms - self.last, memory.half_life);
        self.peak *= d;
        if at_ms - self.last <= window {
            // The latest episode goes on: it now counts 1 at this arrival.
            self.weight = (self.weight - 1.0) * d + 1.0;
            self.episode = self.episode.saturating_add(1);
        } else {
            self.pauses
                .push((at_ms - self.last).min(memory.half_life.as_millis() as i64));
            self.weight = self.weight * d + 1.0;
            self.episode = 1;
            self.cold = at_ms - self.last > memory.cold_gap.as_millis() as i64;
        }
        self.peak = self.peak.max(f64::from(self.episode));
        self.last = at_ms;
        self.steady = self.due_within_cold_gap(memory);
        self.cold.then_some(self.episode)
    }

    /// Episodes a second by the weight `decayed` to a moment.
    fn per_second(decayed: f64, memory: &Memory) -> f64 {
        std::f64::consts::LN_2 / memory.half_life.as_secs_f64().max(0.001) * decayed
    }

    /// The rate at the latest arrival expects the next episode within the cold gap.
    fn due_within_cold_gap(&self, memory: &Memory) -> bool {
        Self::per_second(self.weight, memory) * memory.cold_gap.as_secs_f64() >= 1.0
    }

    /// What the arrivals say at `now_ms`, looking `horizon` ahead in the time-of-day memory.
    pub fn outlook(&self, now_ms: i64, horizon: Duration, memory: &Memory) -> Outlook {
        let d = decay(now_ms - self.last, memory.half_life);
        let per_second = Self::per_second(self.weight * d, memory);
        let then = self.season.next_within(now_ms, horizon, memory.period);
        let by_rate = (per_second > 0.0)
            .then(|| Duration::try_from_secs_f64(1.0 / per_second).ok())
            .flatten();
        Outlook {
            per_hour: per_second * 3600.0,
            by_rate,
            by_time_of_day: then.map(|(d, _)| d),
            burst_then: then.map_or(0, |(_, b)| b),
            burst: (self.peak * d).max(1.0),
            pause: self.pause(now_ms),
        }
    }

    fn pause(&self, now_ms: i64) -> Option<Pause> {
        let quiet = Duration::from_millis((now_ms - self.last).max(0) as u64);
        let longest = self.pauses.longest()?;
        (self.steady && quiet < longest).then_some(Pause { quiet, longest })
    }
}

impl Season {
    fn slot(at_ms: i64, period_ms: i64) -> (i64, u32) {
        let index = at_ms.div_euclid(period_ms);
        let into = at_ms.rem_euclid(period_ms) as i128;
        let slot = (into * i128::from(SLOTS) / i128::from(period_ms)) as u32;
        (index, slot.min(SLOTS - 1))
    }

    fn record(&mut self, at_ms: i64, period: Duration, episode: u32) {
        let period_ms = period.as_millis() as i64;
        if period_ms == 0 {
            return;
        }
        let (index, slot) = Self::slot(at_ms, period_ms);
        let bit = 1u128 << slot;
        if self.current == 0 && self.previous == 0 {
            self.index = index;
        }
        match index - self.index {
            0 => {
                self.current |= bit;
                self.current_burst = self.current_burst.max(episode);
            }
            -1 => {
                self.previous |= bit;
                self.previous_burst = self.previous_burst.max(episode);
            }
            d if d > 0 => {
                (self.previous, self.previous_burst) = match d {
                    1 => (self.current, self.current_burst),
                    _ => (0, 0),
                };
                (self.current, self.current_burst) = (bit, episode);
                self.index = index;
            }
            // Older than the previous period: nothing to remember it by.
            _ => {}
        }
    }

    /// The time from `now_ms` to the start of the first slot in `[now, now + horizon]`
    /// that saw an arrival a period earlier (zero when now's own slot did), and the largest
    /// burst of that period.
    fn next_within(
        &self,
        now_ms: i64,
        horizon: Duration,
        period: Duration,
    ) -> Option<(Duration, u32)> {
        let period_ms = period.as_millis() as i64;
        if period_ms == 0 || self.current == 0 && self.previous == 0 {
            return None;
        }
        let (index, slot) = Self::slot(now_ms, period_ms);
        let slot_ms = (period_ms / i64::from(SLOTS)).max(1);
        // A period before now's slots: the period before now's; a period before the
        // slots past the period's end (tomorrow's): now's own.
        let mask_of = |i: i64| match i - self.index {
            0 => (self.current, self.current_burst),
            -1 => (self.previous, self.previous_burst),
            _ => (0, 0),
        };
        let (before, before_next) = (mask_of(index - 1), mask_of(index));
        let into = now_ms.rem_euclid(period_ms);
        let horizon_ms = horizon.as_millis().min(period.as_millis()) as i64;
        let last = (into + horizon_ms) / slot_ms;
        (i64::from(slot)..=last).find_map(|s| {
            let ((mask, burst), bit) = if s < i64::from(SLOTS) {
                (before, s)
            } else {
                (before_next, s - i64::from(SLOTS))
            };
            if bit >= i64::from(SLOTS) || mask & (1u128 << bit) == 0 {
                return None;
            }
            let wait = Duration::from_millis((s * slot_ms - into).max(0) as u64);
            Some((wait, burst))
        })
    }
}
