//! `gc`: drops cached members whose init is gone (dead, or its pid reused by another process) and
//! groups left without members. The caller holds the state lock and wraps the call in one cache
//! transaction.
//!
//! Only `/proc` is consulted, never the kernel: a member is identified by pid + start time, and a
//! member whose identity cannot be read (an I/O error other than "no such process") is kept and
//! reported, never dropped on a guess.
//!
//! [`gc_members`] is the same rule for the members the follower saw gone, one log line each.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;

use crate::cookies::membership::{self, Liveness};
use crate::host::procfs::ProcFs;
use crate::store::{StoreError, Txn};
use crate::values::Pid;

/// Why a member was removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GcReason {
    /// No process has the pid any more.
    Dead,
    /// The pid now belongs to a different process (its start time changed).
    Reused,
}

/// A member that was removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Removed {
    /// Container id.
    pub container_id: String,
    /// Its group.
    pub group: String,
    /// Its cached init pid.
    pub pid: Pid,
    /// Why.
    pub reason: GcReason,
}

/// A member kept because `/proc` could not be read for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    /// Container id.
    pub container_id: String,
    /// Its cached init pid.
    pub pid: Pid,
    /// The read error.
    pub error: String,
}

/// What `gc` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// Members removed, in cache order (by group, then age).
    pub removed: Vec<Removed>,
    /// Groups deleted because they had no members left (or never had any), sorted.
    pub groups_dropped: Vec<String>,
    /// Members kept because their `/proc` entry could not be read.
    pub unreadable: Vec<Unreadable>,
}

impl GcReport {
    /// True when nothing was removed.
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.groups_dropped.is_empty()
    }

    /// Human-readable text, one line per change (and per member that could not be checked).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for r in &self.removed {
            let why = match r.reason {
                GcReason::Dead => format!("pid {} exited", r.pid),
                GcReason::Reused => format!("pid {} now belongs to another process", r.pid),
            };
            let _ = writeln!(out, "removed {} from group {} ({why})", r.container_id, r.group);
        }
        for g in &self.groups_dropped {
            let _ = writeln!(out, "dropped empty group {g}");
        }
        for u in &self.unreadable {
            let _ = writeln!(out, "kept {} (pid {}): failed to read /proc: {}", u.container_id, u.pid, u.error);
        }
        if self.is_empty() {
            out.insert_str(0, "nothing to remove\n");
        }
        out
    }
}

/// Removes dead and reused members and empty groups. See the module documentation.
pub fn gc(store: &Txn<'_>, proc: &ProcFs) -> Result<GcReport, StoreError> {
    let report = collect(store, proc, None)?;
    for r in &report.removed {
        log::info!("gc: removing {} from group {} (pid {}: {:?})", r.container_id, r.group, r.pid, r.reason);
    }
    Ok(report)
}

/// [`gc`] of the members `ids` only (those `reconcile --follow` saw without a live init), by the
/// same rule; the caller logs what was removed.
pub fn gc_members(store: &Txn<'_>, proc: &ProcFs, ids: &BTreeSet<String>) -> Result<GcReport, StoreError> {
    collect(store, proc, Some(ids))
}

fn collect(store: &Txn<'_>, proc: &ProcFs, only: Option<&BTreeSet<String>>) -> Result<GcReport, StoreError> {
    let mut report = GcReport::default();
    let before: BTreeSet<String> = store.groups()?.into_iter().map(|g| g.key).collect();
    for m in store.all_members()? {
        if only.is_some_and(|ids| !ids.contains(&m.container_id)) {
            continue;
        }
        let reason = match membership::liveness(proc, m.init()) {
            Liveness::Dead => GcReason::Dead,
            Liveness::Alive => continue,
            Liveness::Reused => GcReason::Reused,
            Liveness::Unreadable(e) => {
                log::warn!("gc: keeping {} (pid {}): failed to read /proc: {e}", m.container_id, m.pid);
                report.unreadable.push(Unreadable { container_id: m.container_id, pid: m.pid, error: e.to_string() });
                continue;
            }
        };
        store.remove_member(&m.container_id)?;
        report.removed.push(Removed { container_id: m.container_id, group: m.group, pid: m.pid, reason });
    }
    store.drop_empty_groups()?;
    if only.is_none() {
        let stale = store.drop_stale_idle()? + store.drop_stale_forced_idle()?;
        if stale > 0 {
            log::debug!("gc: dropped {stale} cpu.idle and forced idle records of members no longer cached");
        }
    }
    let after: BTreeSet<String> = store.groups()?.into_iter().map(|g| g.key).collect();
    report.groups_dropped = before.difference(&after).cloned().collect();
    Ok(report)
}

#[cfg(test)]
#[path = "gc_tests.rs"]
mod tests;
