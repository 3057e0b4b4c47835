//! Test-only fault points: `fault::point("after_lock")` kills the process with SIGKILL when the
//! environment variable `OCH_FAULT` names that point, so tests can show that a hook dying at any
//! step of an ensure (lock taken, cache read, prctl done, cache written but not committed, …)
//! never wedges the lock, loses the cache or leaves it disagreeing with the kernel
//! (`tests/it/faults.rs`).
//!
//! The killing code exists only with the non-default `fault-injection` feature (which implies
//! `fake-kernel`); in every other build [`point`] is an empty inline function and `OCH_FAULT` is
//! never read.
//!
//! Points, in the order an ensure reaches them:
//!
//! | point | where |
//! |---|---|
//! | `after_lock` | `Session::open`: the state lock is held, the cache not yet opened |
//! | `after_read` | `Engine::ensure`: the group's members were read and verified |
//! | `after_prctl` | `Engine::ensure`: the kernel has the cookie, the cache knows nothing yet |
//! | `mid_write` | `Engine::ensure`: the member row is written, the transaction still open |
//! | `before_commit` | `Session::write`: the work is done, `COMMIT` not yet run |
//! | `after_commit` | `Session::write`: committed, the lock still held |
//!
//! And one of poststop, which takes no lock: `stop_recorded` ([`STOP_RECORDED`]), after the
//! container's stop was recorded for the next opener of the cache (`crate::cookies::stopped`).

/// Every fault point, in the order an ensure reaches them.
pub const POINTS: [&str; 6] = ["after_lock", "after_read", "after_prctl", "mid_write", "before_commit", "after_commit"];

/// The poststop point: the stop is recorded, the hook has not exited.
pub const STOP_RECORDED: &str = "stop_recorded";

/// The variable naming the point at which to die.
pub const ENV: &str = "OCH_FAULT";

/// Dies with SIGKILL here when `OCH_FAULT` names `name` (feature `fault-injection` only).
#[cfg(feature = "fault-injection")]
pub fn point(name: &str) {
    if std::env::var_os(ENV).is_some_and(|v| v == name) {
        log::warn!("fault point {name}: killing the process (OCH_FAULT)");
        // SIGKILL cannot be caught, so the process ends here exactly as if the OOM killer or an
        // admin had killed it (kill(getpid()): for SIGKILL the same as raise, which rustix lacks).
        let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// Does nothing: fault injection is not compiled into this build.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn point(_name: &str) {}
