//! Fork storms outside every member: a parent that forks child after child outside every member
//! cgroup (a build, a test suite, a shell loop, a crash-looping agent) makes most of a busy
//! node's process events, and each costs the follower one open and read of `/proc/PID/cgroup`.
//! [`Storms`] lets the follower read only a sample of such a parent's children.
//!
//! The rule, per parent (thread group):
//! - every fork is read until the parent has had [`STREAK`] children in a row, each within
//!   [`GAP_NS`] of the one before, all of them read and found outside every member cgroup;
//! - from then on one child in [`SAMPLE_EVERY`] is read; a read child found inside a member
//!   cgroup, or a gap longer than [`GAP_NS`], ends the storm and every child is read again.
//!
//! Exec events are always read, and so is every fork of a parent that is not storming: the runtimes
//! (`runc`, `crun`, conmon, a containerd shim) fork one helper per exec, far from a streak, so the
//! fork that usually wins the exec race is never skipped. What a skipped child can miss is a move
//! into a member cgroup without an exec of its own (a `clone3(CLONE_INTO_CGROUP)` child of a
//! storming parent, or one moved by a third process); it keeps the storming parent's cookie, an
//! outside process's, until its own exec event or the next sweep, as any process moved into a
//! container's cgroup without an exec does.

use std::collections::HashMap;

use crate::values::Pid;

/// Children in a row, all read outside every member cgroup, that make a parent a storm.
pub const STREAK: u32 = 64;
/// While a parent storms, one child in this many is read.
pub const SAMPLE_EVERY: u32 = 16;
/// The longest gap between two forks of a storming parent (10 ms: at least 100 forks/s).
pub const GAP_NS: u64 = 10_000_000;
/// Parents tracked at most; beyond this the table is cleared (a storm is then read anew).
const MAX_PARENTS: usize = 1024;

#[derive(Debug, Clone, Copy, Default)]
struct Parent {
    /// Children in a row read and found outside.
    streak: u32,
    /// Children since the last one read, while storming.
    since_read: u32,
    /// When its last child forked.
    last_ns: u64,
}

/// The parents that storm, and the sampling of their children.
#[derive(Debug, Default)]
pub struct Storms {
    parents: HashMap<Pid, Parent>,
    /// Children not read, over the follower's life.
    pub skipped: u64,
}

impl Storms {
    /// Whether the child `parent` forked at `at_ns` must be read; a `false` is counted as skipped.
    pub fn must_read(&mut self, parent: Pid, at_ns: u64) -> bool {
        let Some(p) = self.parents.get_mut(&parent) else { return true };
        if at_ns.saturating_sub(p.last_ns) > GAP_NS {
            *p = Parent { last_ns: at_ns, ..Parent::default() };
            return true;
        }
        p.last_ns = at_ns;
        if p.streak < STREAK {
            return true;
        }
        p.since_read += 1;
        if p.since_read >= SAMPLE_EVERY {
            p.since_read = 0;
            return true;
        }
        self.skipped += 1;
        false
    }

    /// Notes what reading a child of `parent` forked at `at_ns` showed: `outside` every member
    /// cgroup, or not (inside one, or unreadable), which ends the parent's streak.
    pub fn read(&mut self, parent: Pid, at_ns: u64, outside: bool) {
        if !outside {
            self.parents.remove(&parent);
            return;
        }
        if self.parents.len() >= MAX_PARENTS && !self.parents.contains_key(&parent) {
            self.parents.clear();
        }
        let p = self.parents.entry(parent).or_insert(Parent { last_ns: at_ns, ..Parent::default() });
        p.last_ns = at_ns;
        p.streak = p.streak.saturating_add(1);
    }
}

#[cfg(test)]
#[path = "storm_tests.rs"]
mod tests;
