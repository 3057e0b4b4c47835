//! The one way a test waits for something to happen: poll it until it holds or a deadline passes,
//! then fail saying what it waited for. No fixed sleeps: a sleep long enough for a loaded CI host
//! is time wasted on an idle one, and one short enough for an idle host fails on a loaded one.
//!
//! A test that must show that something does *not* happen has no condition to wait for; it keeps
//! a bounded observation window of its own and says so in a comment.

use std::fmt::Display;
use std::time::{Duration, Instant};

/// How often [`wait_for`] and [`wait_until`] look.
pub const POLL: Duration = Duration::from_millis(20);

/// Calls `probe` until it gives `Ok`, every `every`, for at most `timeout`: its `Ok`, or the
/// `Err` of its last call, made once the deadline has passed. It is always called at least once.
pub fn poll<T, E>(timeout: Duration, every: Duration, mut probe: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    let end = Instant::now() + timeout;
    loop {
        let result = probe();
        let left = end.saturating_duration_since(Instant::now());
        if result.is_ok() || left.is_zero() {
            return result;
        }
        std::thread::sleep(every.min(left));
    }
}

/// Waits (polling every [`POLL`]) until `probe` gives `Ok`, and returns its value. When `timeout`
/// passes first, panics with `what` (what the test waited for) and the last `Err` (how things
/// stood then: a log, a listing).
#[track_caller]
pub fn wait_for<T, E: Display>(what: &str, timeout: Duration, probe: impl FnMut() -> Result<T, E>) -> T {
    match poll(timeout, POLL, probe) {
        Ok(value) => value,
        Err(last) => panic!("gave up after {timeout:?} waiting for {what}; last look:\n{last}"),
    }
}

/// Waits (polling every [`POLL`]) until `cond` holds; when `timeout` passes first, panics with
/// `what`.
#[track_caller]
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    if poll(timeout, POLL, || if cond() { Ok(()) } else { Err(()) }).is_err() {
        panic!("gave up after {timeout:?} waiting for {what}");
    }
}
