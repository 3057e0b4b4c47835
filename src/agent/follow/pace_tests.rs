//! The unit tests of `src/agent/follow/pace.rs`.

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
