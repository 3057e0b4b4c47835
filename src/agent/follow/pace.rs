//! The follower's pace under load: while events arrive faster than [`BUSY_RATE`] per second (a
//! fork storm: a build, a CI job, a crash-looping pod), it lets them gather for [`GATHER`] in the
//! socket before it wakes again, so that one wake-up (a context switch, `poll`, the look at the
//! cache files) serves a batch instead of a single event. Below that rate every event is handled
//! as soon as it arrives.
//!
//! Safety: no event is dropped or skipped; each is handled at most [`GATHER`] later than it would
//! be, and the socket's buffer holds about 100,000 events, 10 s of a 10,000 forks/s storm, so the
//! wait cannot make the kernel drop any. The cost is latency under load only: an exec'd process's
//! window grows by at most [`GATHER`] while the host forks faster than [`BUSY_RATE`].

use std::time::{Duration, Instant};

/// How long events gather before the follower wakes for them, under load.
pub const GATHER: Duration = Duration::from_millis(1);
/// Events per second from which the follower gathers them.
pub const BUSY_RATE: u64 = 2_000;
/// The period over which the rate is measured.
const PERIOD: Duration = Duration::from_millis(100);

/// The event rate of the last period, and whether it makes the follower gather events.
#[derive(Debug, Clone)]
pub struct Pace {
    since: Instant,
    count: u64,
    busy: bool,
}

impl Pace {
    /// Idle, as of `now`.
    pub fn new(now: Instant) -> Self {
        Self { since: now, count: 0, busy: false }
    }

    /// Notes `n` events read at `now`; at the end of each period the rate decides [`Pace::gather`].
    pub fn note(&mut self, n: usize, now: Instant) {
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= PERIOD {
            self.busy = self.count.saturating_mul(1_000_000) / (elapsed.as_micros().max(1) as u64) >= BUSY_RATE;
            self.since = now;
            self.count = 0;
        }
        self.count += n as u64;
    }

    /// How long to let events gather before the next wait: [`GATHER`] while busy, else nothing.
    pub fn gather(&self) -> Duration {
        if self.busy { GATHER } else { Duration::ZERO }
    }
}

#[cfg(test)]
#[path = "pace_tests.rs"]
mod tests;
