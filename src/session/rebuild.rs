//! Reloads the cache from the containers the runtimes say are running ([`super::running`]):
//! whenever the cache may lack running containers (new, upgraded from an older build, or replacing
//! a damaged file: [`crate::session`] does it before anything decides),
//! or on a node where the hook was installed with containers running (the `rebuild` command).
//!
//! For each container whose init is alive with the recorded start time, decided exactly as the
//! hook would, the cookie on the init is read with a GET, and the container is recorded as a
//! member of its group with the cookie as seen. A container that holds no cookie is reported and
//! not recorded: it has nothing for the next members to share, and where the NRI plugin did not
//! adjust it (it started while the plugin was away, or it is the plugin's own) its state lacks its
//! pod's annotations, so its group would be a guess. A reload never changes a cookie (GET only): a
//! group whose live members hold more than one cookie is reported, and the next ensure of the group
//! converges it (the oldest member's cookie wins, so members are recorded oldest first, by start
//! time).
//!
//! A container the cache already has with this very init (pid and start time) keeps the group
//! and labels its row records: its cookie was given under that group, by the hook or by the NRI
//! plugin's catch-up, which decided from the pod's annotations as the CRI gave them; its runtime's
//! state may lack those (a container the plugin did not adjust), and recording it in the group that
//! state alone says would leave it holding another group's cookie.
//!
//! A container without such a row whose state names no group (its group is the pod's or its own,
//! an internal default) is recorded in the one group whose members hold its cookie, counting only
//! what is no guess, when an annotation of its pod could name that group ([`regroup`]): the
//! cookie was given under that group, and cookies are only ever shared within a group.
//!
//! A containerd pod's shim whose row the cache lacks is recorded again ([`super::lost_shims`]).
//!
//! [`Fill::Missing`] (what [`crate::session`] does with a cache that may lack containers) records
//! only the containers the cache lacks and changes no row it has; one that is older than every
//! live member its group has in the cache is recorded as the oldest, so that a group split by a
//! lost cache converges to the cookie of the members that ran before the loss.
//!
//! The caller holds the state lock and wraps the call in one cache transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Serialize;

use super::lost_shims;
use super::running::{RootScan, Running, Skipped, scan};
use crate::config::Config;
use crate::cookies::engine::EngineError;
use crate::cookies::groups::Groups;
use crate::cookies::membership::{self, Liveness, Seen, State};
use crate::decide::policy::{self, Action, Decision};
use crate::host::kernel::{CookieHex, CoreSched, KernelError};
use crate::host::procfs::{ProcFs, TaskId};
use crate::host::runtimes::{RuntimeContainer, RuntimeRoot};
use crate::store::{Member, Store, Txn};
use crate::values::{Cookie, Labels, Pid};

/// A container recorded in the cache.
#[derive(Debug, Clone, Serialize)]
pub struct Rebuilt {
    /// Container id.
    pub id: String,
    /// Group key.
    pub group: String,
    /// Init pid.
    pub pid: Pid,
    /// Cookie on the init now (never `0x0`: a container without a cookie is not recorded).
    pub cookie: String,
    /// The root it was found in.
    pub root: PathBuf,
}

/// A group whose live members hold more than one non-zero cookie.
#[derive(Debug, Clone, Serialize)]
pub struct Conflict {
    /// Group key.
    pub group: String,
    /// Distinct non-zero cookies, sorted.
    pub cookies: Vec<String>,
    /// Live members with the cookie each holds, oldest first.
    pub members: Vec<(String, String)>,
}

/// What `rebuild` reports.
#[derive(Debug, Clone, Serialize)]
pub struct RebuildReport {
    /// Roots scanned.
    pub roots: Vec<RootScan>,
    /// Containers recorded, oldest first.
    pub members: Vec<Rebuilt>,
    /// Containers not recorded.
    pub skipped: Vec<Skipped>,
    /// Groups with more than one cookie among live members (the next ensure converges them).
    pub conflicts: Vec<Conflict>,
    /// Running containers whose `/proc` entry or cookie could not be read (among `skipped`): a
    /// rebuild with any is incomplete, and a refill is tried again by the next opener.
    #[serde(skip)]
    pub unreadable: usize,
}

/// Which containers a rebuild records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Every running container with a cookie: rows are written again from the runtimes' state
    /// (the `rebuild` command).
    All,
    /// Only those the cache has no row for; rows it has are left as they are.
    Missing,
}

/// A live container and what the hook would decide for it.
struct Candidate {
    c: RuntimeContainer,
    root: PathBuf,
    decision: Decision,
    /// The group its decision ensures it into.
    group: String,
    task: TaskId,
    cookie: Cookie,
    /// The cache's row for this very init, whose group and labels are kept.
    kept: Option<Member>,
}

impl RebuildReport {
    /// The text form of a self.
    pub fn render(&self) -> String {
        let present = self.roots.iter().filter(|r| r.present).count();
        let groups: BTreeSet<&str> = self.members.iter().map(|m| m.group.as_str()).collect();
        let mut s = format!(
            "rebuild: scanned {} runtime roots ({present} present); recorded {} containers in {} groups; {} skipped; {} groups with more than one cookie\n",
            self.roots.len(),
            self.members.len(),
            groups.len(),
            self.skipped.len(),
            self.conflicts.len()
        );
        for r in &self.roots {
            let what = if r.present { format!("{} containers", r.containers) } else { "absent".into() };
            s.push_str(&format!("  {} root {}: {what}\n", r.kind.name(), r.path.display()));
        }
        if !self.members.is_empty() {
            s.push_str(&format!("{:<40} {:<20} {:>8} COOKIE\n", "GROUP", "CONTAINER", "PID"));
            for m in &self.members {
                let id: String = m.id.chars().take(20).collect();
                s.push_str(&format!("{:<40} {:<20} {:>8} {}\n", m.group, id, m.pid, m.cookie));
            }
        }
        for k in &self.skipped {
            s.push_str(&format!("skipped {} ({}): {}\n", k.id, k.root.display(), k.reason));
        }
        for c in &self.conflicts {
            let who: Vec<String> = c.members.iter().map(|(id, ck)| format!("{id}={ck}")).collect();
            s.push_str(&format!(
                "WARNING: group {} has {} cookies among live members ({}); the next ensure converges it\n",
                c.group,
                c.cookies.len(),
                who.join(", ")
            ));
        }
        s
    }
}

/// Scans `roots` and records every running container as a member of its group. See the module
/// documentation. `Err` only for the cache, `/proc` failures on the cache's own members, or a
/// kernel without core scheduling.
pub fn rebuild<K: CoreSched>(
    store: &Txn<'_>,
    kernel: &K,
    proc: &ProcFs,
    roots: &[RuntimeRoot],
    config: &Config,
    fill: Fill,
) -> Result<RebuildReport, EngineError> {
    let found = scan(roots, proc, config);
    let pods = lost_shims::Pods::of(&found.running);
    let mut report = RebuildReport {
        roots: found.roots,
        members: Vec::new(),
        skipped: found.skipped,
        conflicts: Vec::new(),
        unreadable: found.unreadable,
    };
    let mut candidates = Vec::new();
    for running in found.running {
        candidates.extend(candidate(store, kernel, proc, running, fill, &mut report)?);
    }
    regroup(store, kernel, proc, config, &mut candidates)?;
    let (first, last) = place(store, kernel, proc, candidates, fill)?;
    let (mut recorded, groups) = record(store, proc, &first, &last)?;
    let placed = first.iter().chain(&last).map(|k| (k.c.id.as_str(), k.group.as_str())).collect();
    pods.record(store, kernel, proc, &placed)?;
    // Reported oldest first, however they were placed.
    recorded.sort_by_key(|r| first.iter().chain(&last).position(|k| k.c.id == r.id));
    report.members = recorded;
    report.conflicts = conflicts(store, kernel, proc, groups)?;
    Ok(report)
}

/// Phase 1 of [`rebuild`]: `running` as a container to record, with the cookie on its init and
/// its group, or `None` with the reason among `report`'s skipped (a cleared container's row
/// removed).
fn candidate<K: CoreSched>(
    store: &Txn<'_>,
    kernel: &K,
    proc: &ProcFs,
    Running { c, root, task, decision }: Running,
    fill: Fill,
    report: &mut RebuildReport,
) -> Result<Option<Candidate>, EngineError> {
    let id = c.id.clone();
    let pid = task.pid;
    let skip = |reason: String| Skipped { id: id.clone(), root: root.clone(), reason };
    let cached = store.member(&c.id)?;
    if fill == Fill::Missing && cached.is_some() {
        return Ok(None);
    }
    if matches!(decision.action, Action::Skip | Action::Forget) {
        report.skipped.push(skip(format!("the policy skips it: {}", decision.reason)));
        return Ok(None);
    }
    let cookie = match kernel.get(pid) {
        // The cookie read is this init's only while it still runs with its start time.
        Ok(_) if !matches!(membership::liveness(proc, task), Liveness::Alive) => {
            report.skipped.push(skip(format!("dead: pid {pid} exited")));
            return Ok(None);
        }
        Ok(c) => c,
        Err(KernelError::NoSuchProcess(_)) => {
            report.skipped.push(skip(format!("dead: pid {pid} exited")));
            return Ok(None);
        }
        Err(e) if e.is_unsupported() => {
            return Err(EngineError::Kernel { op: format!("read the cookie of pid {pid}"), source: e });
        }
        Err(e) => {
            report.skipped.push(skip(format!("failed to read the cookie of pid {pid}: {e}")));
            report.unreadable += 1;
            return Ok(None);
        }
    };
    // Skip and Forget went above: without a group, the decision is a clear.
    let Some(group) = decision.group().map(str::to_string) else {
        let reason = if cookie == 0 {
            format!("{} (cookie 0, as it should be)", decision.reason)
        } else {
            format!(
                "{}, but it holds cookie {} (rebuild changes no cookie; the next ensure or a restart clears it)",
                decision.reason,
                CookieHex(cookie)
            )
        };
        // A cached row would put it in a group it must not be in.
        if cached.is_some() {
            store.remove_member(&c.id)?;
        }
        report.skipped.push(skip(reason));
        return Ok(None);
    };
    if cookie == 0 {
        // Nothing to share from, and its group is only a guess: a container that the NRI
        // plugin did not adjust (started while it was away, or the plugin's own) carries
        // none of its pod's annotations in the runtime's state. A cached row stays as it
        // is: the next ensure of its group repairs a member that lost its cookie.
        report.skipped.push(skip(format!(
            "it holds no cookie: not recorded (rebuild gives no cookie; its group is decided when the \
                 runtime runs its hook, or by the NRI plugin's catch-up); it would be in group {}",
            group
        )));
        return Ok(None);
    }
    // A row for this very init records the group its cookie was given under: the hook's, or
    // the NRI plugin's catch-up, which decided from the pod's annotations the CRI gave it and
    // which the runtime's state may lack. Its group and labels stay; only its cookie and
    // cgroup are read again.
    let kept = cached.filter(|m| m.init() == task);
    let group = match &kept {
        Some(m) if m.group != group => {
            log::info!(
                "rebuild: container {} (pid {pid}) stays in group {}, which its cookie was given under (its \
                 runtime's state alone would say {group})",
                c.id,
                m.group
            );
            m.group.clone()
        }
        _ => group,
    };
    Ok(Some(Candidate { c, root, decision, group, task, cookie, kept }))
}

/// Phase 2 of [`rebuild`]: a container the cache has no row for, whose runtime's state names no
/// group (its group is an internal default, [`policy::is_named`]), may lack what its cookie was
/// given under: the NRI plugin's catch-up decides from the pod's annotations as the CRI gives
/// them. Its cookie says more, since cookies are only ever shared within a group. The evidence is
/// what is no guess: the cache's live members and the containers whose state names their group.
/// When no such member of its default group holds its cookie and those of exactly one other
/// group do, a group a pod of its namespace could name ([`policy::could_name`]), it moves there.
/// A group its state names is never second-guessed.
fn regroup<K: CoreSched>(
    store: &Txn<'_>,
    kernel: &K,
    proc: &ProcFs,
    config: &Config,
    candidates: &mut [Candidate],
) -> Result<(), EngineError> {
    let guessed = |k: &Candidate| k.kept.is_none() && !policy::is_named(&k.group);
    if !candidates.iter().any(guessed) {
        return Ok(());
    }
    let found: BTreeSet<&str> = candidates.iter().map(|k| k.c.id.as_str()).collect();
    let cached = store.all_members()?;
    let mut live: Vec<(Member, Cookie)> = Vec::new();
    for seen in membership::live_members(proc, kernel, &cached) {
        match seen {
            Seen::Live(l) if !found.contains(l.member.container_id.as_str()) => live.push((l.member.clone(), l.cookie)),
            Seen::Unreadable(m, source) => return Err(EngineError::Proc { pid: m.pid, source }),
            Seen::Live(_) | Seen::CookieUnreadable(..) | Seen::Gone(..) => {}
        }
    }
    let known = candidates.iter().filter(|k| !guessed(k));
    live.extend(known.map(|k| (Member::new(&k.c.id, &k.group, k.task.pid, k.task.start_time), k.cookie)));
    let groups = Groups::new(live.iter().map(|(m, c)| (m, *c)));
    for k in candidates.iter_mut().filter(|k| guessed(k)) {
        let holding = groups.holding(k.cookie);
        let mut holders = holding.keys();
        let (Some(owner), None) = (holders.next(), holders.next()) else { continue };
        if *owner == k.group || !policy::could_name(owner, k.decision.namespace.as_deref(), config) {
            continue;
        }
        log::info!(
            "rebuild: container {} (pid {}) recorded in group {owner}, whose members hold its cookie {} (its \
             runtime's state alone would say {})",
            k.c.id,
            k.task.pid,
            CookieHex(k.cookie),
            k.group
        );
        k.group = owner.to_string();
    }
    Ok(())
}

/// Phase 3 of [`rebuild`]: the candidates in the order they are recorded. Oldest first, so that
/// the cache's join order (which decides whose cookie wins when a group has two) follows the
/// containers' age. Filling in what a cache lacks, a container older than every live member its
/// group has there goes before them all (`first`, youngest of those first, each below the one
/// before); the rest (`last`) after them.
fn place<K: CoreSched>(
    store: &Txn<'_>,
    kernel: &K,
    proc: &ProcFs,
    mut candidates: Vec<Candidate>,
    fill: Fill,
) -> Result<(Vec<Candidate>, Vec<Candidate>), EngineError> {
    candidates.sort_by_key(|k| (k.task.start_time, k.task.pid));
    let mut oldest_cached: BTreeMap<String, Option<u64>> = BTreeMap::new();
    let mut first = Vec::new();
    let mut last = Vec::new();
    for k in candidates {
        let oldest_live = match oldest_cached.get(&k.group) {
            Some(v) => *v,
            None => {
                let v = oldest_live_start(store, kernel, proc, &k.group)?;
                oldest_cached.insert(k.group.clone(), v);
                v
            }
        };
        match oldest_live {
            Some(t) if fill == Fill::Missing && k.task.start_time < t => first.push(k),
            _ => last.push(k),
        }
    }
    Ok((first, last))
}

/// Phase 4 of [`rebuild`]: writes the rows, `first` each as the oldest of its group (youngest of
/// them first), then `last`; what was recorded, and the groups recorded into.
fn record(
    store: &Txn<'_>,
    proc: &ProcFs,
    first: &[Candidate],
    last: &[Candidate],
) -> Result<(Vec<Rebuilt>, BTreeSet<String>), EngineError> {
    let mut groups = BTreeSet::new();
    let placed = first.iter().rev().map(|k| (k, true)).chain(last.iter().map(|k| (k, false)));
    let mut recorded = Vec::new();
    for (k, oldest) in placed {
        let group = k.group.clone();
        let previous = store.member(&k.c.id)?;
        let cgroup = proc.cgroup(k.task.pid).map_err(|source| EngineError::Proc { pid: k.task.pid, source })?;
        let m = Member {
            cookie: k.cookie,
            labels: match &k.kept {
                Some(m) => Labels { cgroup, ..m.labels.clone() },
                None => k.decision.labels(cgroup),
            },
            ..Member::new(&k.c.id, &group, k.task.pid, k.task.start_time)
        };
        if oldest {
            store.insert_oldest(&m)?;
        } else {
            store.upsert_member(&m)?;
        }
        if let Some(old) = previous.filter(|p| p.group != group) {
            store.drop_group_if_empty(&old.group)?;
        }
        log::info!(
            "rebuild: container {} (pid {}) recorded in group {group} with cookie {}",
            k.c.id,
            k.task.pid,
            CookieHex(k.cookie)
        );
        recorded.push(Rebuilt {
            id: k.c.id.clone(),
            group: group.clone(),
            pid: k.task.pid,
            cookie: CookieHex(k.cookie).to_string(),
            root: k.root.clone(),
        });
        groups.insert(group);
    }
    Ok((recorded, groups))
}

/// Phase 6 of [`rebuild`]: the `groups` whose live members (found now or cached before) hold
/// more than one cookie ([`Groups::is_split`]).
fn conflicts<K: CoreSched>(
    store: &Txn<'_>,
    kernel: &K,
    proc: &ProcFs,
    groups: BTreeSet<String>,
) -> Result<Vec<Conflict>, EngineError> {
    let mut out = Vec::new();
    for group in groups {
        let cached = store.members(&group)?;
        let mut members = Vec::new();
        for m in &cached {
            match membership::state(proc, kernel, m) {
                State::Alive(cookie) => members.push((m, cookie)),
                State::Gone(_) | State::CookieUnreadable(_) => {}
                State::Unreadable(source) => return Err(EngineError::Proc { pid: m.pid, source }),
            }
        }
        let held = Groups::new(members.iter().copied());
        if held.is_split(&group) {
            out.push(Conflict {
                cookies: held.held(&group).iter().map(|c| CookieHex(*c).to_string()).collect(),
                group,
                members: members.into_iter().map(|(m, c)| (m.container_id.clone(), CookieHex(c).to_string())).collect(),
            });
        }
    }
    Ok(out)
}

/// The start time of the oldest member of `group` in the cache whose init is alive (its cookie
/// readable or not).
fn oldest_live_start<K: CoreSched>(
    store: &Store,
    kernel: &K,
    proc: &ProcFs,
    group: &str,
) -> Result<Option<u64>, EngineError> {
    let members = store.members(group)?;
    let mut oldest: Option<u64> = None;
    for seen in membership::live_members(proc, kernel, &members) {
        let m = match seen {
            Seen::Live(l) => l.member,
            Seen::CookieUnreadable(m, _) => m,
            Seen::Gone(..) => continue,
            Seen::Unreadable(m, source) => return Err(EngineError::Proc { pid: m.pid, source }),
        };
        oldest = Some(oldest.map_or(m.start_time, |t| t.min(m.start_time)));
    }
    Ok(oldest)
}

#[cfg(test)]
#[path = "rebuild_tests.rs"]
mod tests;
