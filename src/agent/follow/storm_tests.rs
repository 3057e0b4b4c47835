//! The unit tests of `src/agent/follow/storm.rs`.

use super::*;

/// Forks `n` children of `parent` 100 µs apart from `t`, each found `outside` when read;
/// returns how many were read and the time after.
fn storm(s: &mut Storms, parent: Pid, t: u64, n: u32, outside: bool) -> (u32, u64) {
    let mut read = 0;
    let mut t = t;
    for _ in 0..n {
        t += 100_000;
        if s.must_read(parent, t) {
            read += 1;
            s.read(parent, t, outside);
        }
    }
    (read, t)
}

#[test]
fn a_parent_is_sampled_only_after_a_streak_of_children_outside() {
    let mut s = Storms::default();
    let (read, t) = storm(&mut s, 10, 0, STREAK, true);
    assert_eq!(read, STREAK, "the streak itself is read whole");
    let (read, t) = storm(&mut s, 10, t, 160, true);
    assert_eq!(read, 160 / SAMPLE_EVERY, "then one child in {SAMPLE_EVERY}");
    assert_eq!(s.skipped, 160 - u64::from(read));
    // Another parent (a runtime forking its helper) is read whole meanwhile.
    assert_eq!(storm(&mut s, 20, t, 5, true).0, 5);
}

#[test]
fn a_child_inside_a_member_or_a_pause_ends_the_storm() {
    let mut s = Storms::default();
    let (_, t) = storm(&mut s, 10, 0, STREAK + 40, true);
    // The next sampled child is inside a member cgroup: every child is read again.
    let (_, t) = storm(&mut s, 10, t, SAMPLE_EVERY, false);
    assert_eq!(storm(&mut s, 10, t, STREAK, true).0, STREAK, "the streak starts over");
    // A gap longer than GAP_NS: the next child is read, and the streak starts over.
    let late = t + STREAK as u64 * 100_000 + GAP_NS + 1;
    assert!(s.must_read(10, late));
    s.read(10, late, true);
    assert_eq!(storm(&mut s, 10, late, STREAK - 1, true).0, STREAK - 1);
}

#[test]
fn a_slow_forker_is_never_sampled() {
    let mut s = Storms::default();
    let mut t = 0;
    for _ in 0..10 * STREAK {
        t += GAP_NS + 1;
        assert!(s.must_read(30, t));
        s.read(30, t, true);
    }
    assert_eq!(s.skipped, 0);
}
