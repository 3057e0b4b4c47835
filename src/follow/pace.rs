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
mod tests {
    use super::*;

    /// `rate` events per second in batches of `batch` for `ms` milliseconds from `t0`.
    fn feed(p: &mut Pace, t0: Instant, rate: u64, batch: u64, ms: u64) -> Instant {
        let every = Duration::from_micros(1_000_000 * batch / rate);
        let mut t = t0;
        while t < t0 + Duration::from_millis(ms) {
            t += every;
            p.note(batch as usize, t);
        }
        t
    }

    #[test]
    fn events_gather_only_while_they_come_faster_than_the_busy_rate() {
        let t0 = Instant::now();
        let mut p = Pace::new(t0);
        assert_eq!(p.gather(), Duration::ZERO);
        let t = feed(&mut p, t0, 500, 1, 1_000);
        assert_eq!(p.gather(), Duration::ZERO, "500 events/s: each at once");
        let t = feed(&mut p, t, 10_000, 10, 300);
        assert_eq!(p.gather(), GATHER, "a storm of 10,000/s");
        // The storm ends: the next event, seconds later, ends the period and finds the rate low.
        p.note(1, t + Duration::from_secs(3));
        assert_eq!(p.gather(), Duration::ZERO);
        let t = feed(&mut p, t + Duration::from_secs(3), 1_000, 1, 500);
        assert_eq!(p.gather(), Duration::ZERO, "1,000/s (a busy node's execs) stays immediate");
        feed(&mut p, t, BUSY_RATE * 2, 2, 300);
        assert_eq!(p.gather(), GATHER);
    }
}
