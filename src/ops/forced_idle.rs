//! The cost of isolation, per group: the forced idle of core scheduling. While a task of one
//! cookie runs on an SMT sibling, the other sibling may not run a task of another cookie and is
//! held idle; the kernel charges that time to the cgroup of the task that ran
//! (`core_sched.force_idle_usec` in a cgroup v2 `cpu.stat`, counted while
//! `kernel.sched_schedstats` is 1). It is the capacity a group's isolation costs the node.
//!
//! A group's figure is a counter kept in the cache: each reading of a live member's cgroup adds
//! what the cgroup grew since that member's last reading ([`sample`], in the caller's
//! transaction), so it never goes down when members come and go (what a member's cgroup grew
//! after its last reading and before it exited is not counted: the follower reads every 10 s). A
//! cgroup members of two groups share is read for neither; one that members of one group share is
//! counted once. The node's figure is the root cgroup's. On a node without cgroup v2 there is no
//! such figure, and none is shown (never a zero that would be wrong).

use std::fmt::Write as _;
use std::path::Path;

use crate::cookies::membership::{self, Liveness};
use crate::host::cgroup;
use crate::host::procfs::ProcFs;
use crate::store::{Store, Txn};

use super::OpsError;
use crate::exposition::{family, sample};

/// The sysctl that turns the counting on, relative to the `/proc` tree.
pub const SCHEDSTATS: &str = "sys/kernel/sched_schedstats";

/// What the node and the cache say about forced idle.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct ForcedIdle {
    /// cgroup v2 is mounted: the only hierarchy that counts forced idle.
    pub available: bool,
    /// `kernel.sched_schedstats` (`None`: the kernel has no such setting).
    pub schedstats: Option<bool>,
    /// Each group's total, seconds, by group.
    pub groups: Vec<(String, f64)>,
    /// The node's total (the root cgroup's), seconds.
    pub node: Option<f64>,
}

impl ForcedIdle {
    /// The group's total, seconds; `None` where there is no such figure (cgroup v1).
    pub fn of(&self, group: &str) -> Option<f64> {
        if !self.available {
            return None;
        }
        Some(self.groups.iter().find(|(g, _)| g == group).map_or(0.0, |(_, s)| *s))
    }

    /// One line saying why forced idle is not counted, and how to count it; `None` when it is.
    pub fn advice(&self) -> Option<String> {
        if !self.available {
            return Some("forced idle per group is not available: it is counted in cgroup v2 only".into());
        }
        match self.schedstats {
            Some(true) => None,
            Some(false) => Some(
                "forced idle is not being counted: kernel.sched_schedstats is 0 (sysctl -w kernel.sched_schedstats=1, \
                 or enable_schedstats = true in the config for the follower to set it)"
                    .into(),
            ),
            None => Some(
                "forced idle is not counted: this kernel has no kernel.sched_schedstats (CONFIG_SCHEDSTATS)".into(),
            ),
        }
    }
}

/// `kernel.sched_schedstats` under the `/proc` tree `proc` (`None`: no such setting).
pub fn schedstats(proc: &ProcFs) -> Option<bool> {
    std::fs::read_to_string(proc.root().join(SCHEDSTATS)).ok().map(|v| v.trim() != "0")
}

/// Sets `kernel.sched_schedstats` to 1; `Ok(true)` when it was 0.
pub fn enable_schedstats(proc: &ProcFs) -> std::io::Result<bool> {
    let path = proc.root().join(SCHEDSTATS);
    if std::fs::read_to_string(&path)?.trim() != "0" {
        return Ok(false);
    }
    std::fs::write(&path, "1")?;
    Ok(true)
}

fn seconds(usec: u64) -> f64 {
    usec as f64 / 1e6
}

/// Reads each live member's cgroup and adds to its group what the cgroup grew since that member's
/// last reading (the caller holds the lock and wraps this in one transaction), then the totals.
pub fn update(store: &Txn<'_>, proc: &ProcFs, cgroup_root: &Path) -> Result<ForcedIdle, OpsError> {
    if cgroup::v2_root(cgroup_root).is_some() {
        let members = store.all_members()?;
        let live: Vec<_> = members
            .iter()
            .filter(|m| matches!(membership::liveness(proc, m.init()), Liveness::Alive))
            .filter_map(|m| Some((cgroup::key(m.labels.cgroup.as_deref())?, m)))
            .collect();
        let mut counted = std::collections::BTreeSet::new();
        for (key, m) in &live {
            if live.iter().any(|(k, o)| k == key && o.group != m.group) {
                continue; // two groups' cgroup: nobody's
            }
            let Ok(Some(usec)) = cgroup::forced_idle_usec(cgroup_root, key) else { continue };
            let grown = match store.forced_idle_seen(m)? {
                Some(last) if usec >= last => usec - last,
                Some(_) | None => usec,
            };
            let grown = if counted.insert(key.clone()) { grown } else { 0 };
            store.add_forced_idle(m, key, usec, grown)?;
        }
    }
    totals(store, proc, cgroup_root)
}

/// The totals as the cache has them, without reading the members' cgroups.
pub fn totals(store: &Store, proc: &ProcFs, cgroup_root: &Path) -> Result<ForcedIdle, OpsError> {
    let available = cgroup::v2_root(cgroup_root).is_some();
    let groups = if available {
        store.group_forced_idle()?.into_iter().map(|(g, usec)| (g, seconds(usec))).collect()
    } else {
        Vec::new()
    };
    let node = if available { cgroup::forced_idle_usec(cgroup_root, "/").ok().flatten().map(seconds) } else { None };
    Ok(ForcedIdle { available, schedstats: schedstats(proc), groups, node })
}

/// The Prometheus families (text format 0.0.4): whether the counting is on, each group's total
/// and the node's, or (cgroup v1) a comment saying there is no such figure.
pub fn render(f: &ForcedIdle) -> String {
    let mut out = String::new();
    let on = "oci_coresched_hook_schedstats_enabled";
    family(&mut out, on, "gauge", "1 when kernel.sched_schedstats is 1 (forced idle is counted), else 0.");
    sample(&mut out, on, &[], if f.schedstats == Some(true) { 1.0 } else { 0.0 });
    if let Some(advice) = f.advice() {
        let _ = writeln!(out, "# {advice}");
    }
    if !f.available {
        return out;
    }
    let name = "oci_coresched_hook_group_force_idle_seconds_total";
    family(
        &mut out,
        name,
        "counter",
        "Time a group's containers ran while core scheduling held the other SMT sibling idle for them: the capacity \
         their isolation costs. Never goes down as members come and go.",
    );
    for (group, s) in &f.groups {
        sample(&mut out, name, &[("core_sched_group", group)], *s);
    }
    if let Some(node) = f.node {
        let name = "oci_coresched_hook_force_idle_seconds_total";
        family(
            &mut out,
            name,
            "counter",
            "Time any task ran while core scheduling held its SMT sibling idle, node-wide.",
        );
        sample(&mut out, name, &[], node);
    }
    out
}

#[cfg(test)]
#[path = "forced_idle_tests.rs"]
mod tests;
