//! Benchmark-only phase timing (`make bench-breakdown`): `timing::mark("phase")` notes the time a
//! phase of a hook run ended, and [`report`] writes one line
//! `och-timing: <phase>=<µs since the previous mark>; …; total=<µs>` to stderr when `OCH_TIMING`
//! is set, which `benches/process.rs` turns into the table of where the time goes.
//!
//! The recording code exists only with the non-default `phase-timing` feature; in every other
//! build [`mark`] and [`report`] are empty inline functions and `OCH_TIMING` is never read.

/// The variable that turns the report on.
#[cfg(feature = "phase-timing")]
pub const ENV: &str = "OCH_TIMING";

#[cfg(feature = "phase-timing")]
static MARKS: std::sync::Mutex<Vec<(&'static str, std::time::Instant)>> = std::sync::Mutex::new(Vec::new());

/// Notes that phase `name` ends now.
#[cfg(feature = "phase-timing")]
pub fn mark(name: &'static str) {
    let now = std::time::Instant::now();
    MARKS.lock().unwrap_or_else(|e| e.into_inner()).push((name, now));
}

/// Writes the phases to stderr when `OCH_TIMING` is set.
#[cfg(feature = "phase-timing")]
pub fn report() {
    use std::fmt::Write as _;
    if std::env::var_os(ENV).is_none() {
        return;
    }
    let marks = MARKS.lock().unwrap_or_else(|e| e.into_inner());
    let mut line = String::from("och-timing:");
    for w in marks.windows(2) {
        let _ = write!(line, " {}={};", w[1].0, (w[1].1 - w[0].1).as_micros());
    }
    if let (Some(first), Some(last)) = (marks.first(), marks.last()) {
        let _ = write!(line, " total={}", (last.1 - first.1).as_micros());
    }
    eprintln!("{line}");
}

/// Does nothing: phase timing is not compiled into this build.
#[cfg(not(feature = "phase-timing"))]
#[inline(always)]
pub fn mark(_name: &'static str) {}

/// Does nothing: phase timing is not compiled into this build.
#[cfg(not(feature = "phase-timing"))]
#[inline(always)]
pub fn report() {}
