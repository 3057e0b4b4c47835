//! `reconcile`: processes that entered a container with `runc exec` or `nsenter` never pass a
//! hook and keep their caller's cookie (usually 0). For every live cached member, every process
//! of its cgroup (and of the cgroups below it) whose cookie differs from the cookie on the
//! member's init is given that cookie, thread-group scope, through a verified relay thread
//! ([`Relay::adopt`](crate::cookies::engine::Relay::adopt)). The sweep of `reconcile --follow` (the packaged
//! service) and a command of its own; `--dry-run` only reports.
//!
//! Safety rules, because the cgroup is the only thing that ties a process to a container:
//! - the root cgroup and paths that are not plain absolute paths are never walked;
//! - a process belongs to the member with the most specific cgroup containing its own cgroup
//!   (`/proc/PID/cgroup`), so a nested member of another group keeps its processes;
//! - a cgroup shared by members of different groups (e.g. crun with `--cgroup-manager=disabled`)
//!   is ambiguous and skipped;
//! - the cookie source is the member's init with its identity (pid + start time) checked, never a
//!   cached cookie value.
//!
//! Before the walk, a group whose live members hold more than one cookie (a cache that lost members
//! and was refilled, or a member's cookie changed behind the hook's back) is converged to the
//! cookie of its oldest member holding one ([`Engine::converge`]), as its next ensure would.
//!
//! The caller holds the state lock and wraps [`reconcile`] in a transaction (a converge records
//! the members' new cookies); [`reconcile_groups`] only reads the cache.
//!
//! Each member's status: dead, no cookie, failed, or live; a live one's cgroup not found or shared
//! with another group is skipped. An unsupported kernel fails the whole run; per-process errors make
//! the command exit 1 after the report. `--interval` repeats it, the lock held for each sweep.

use std::path::Path;

use serde::Serialize;

use crate::cookies::engine::{Adopted, Engine, EngineError, Relay, kerr};
use crate::cookies::groups::Groups;
use crate::cookies::membership::{self, Live, Seen};
use crate::error::Chain;
use crate::host::cgroup;
use crate::host::kernel::{CookieHex, CoreSched, KernelError};
use crate::host::procfs::{ProcFs, TaskId};
use crate::store::{Member, Store, Txn};
use crate::values::{Cookie, Pid};

/// A process given (or, in a dry run, to be given) the group's cookie.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fixed {
    /// The process (thread-group leader).
    pub pid: Pid,
    /// Its cookie before.
    pub old_cookie: String,
    /// The group's cookie.
    pub new_cookie: String,
}

/// What reconcile did with one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberStatus {
    /// Its cgroup was walked (see `fixed`, `errors`).
    Checked,
    /// Its init is gone or its pid was reused: skipped (`gc` or the next hook drops it).
    Dead,
    /// Its init has cookie 0: there is no cookie to hand out (the next ensure fixes the group).
    NoCookie,
    /// No usable cgroup: none recorded, the root cgroup, or not found under the cgroup mount.
    NoCgroup,
    /// Its cgroup is also the cgroup of a member of another group: ambiguous, skipped.
    SharedCgroup,
    /// The member itself could not be checked (see `errors`).
    Failed,
}

/// One member's result.
#[derive(Debug, Clone, Serialize)]
pub struct MemberReport {
    /// Container id.
    pub id: String,
    /// Group key.
    pub group: String,
    /// Init pid.
    pub pid: Pid,
    /// Outcome.
    pub status: MemberStatus,
    /// The cookie on the init (the one handed out), when read.
    pub cookie: Option<String>,
    /// Cgroup path as recorded.
    pub cgroup: Option<String>,
    /// Processes of the cgroup looked at.
    pub processes: usize,
    /// Processes fixed (in a dry run: that would be fixed).
    pub fixed: Vec<Fixed>,
    /// Processes that exited while being fixed (not an error).
    pub exited: Vec<Pid>,
    /// Failures.
    pub errors: Vec<String>,
}

/// A group whose live members held more than one cookie, converged (in a dry run: to converge).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Converged {
    /// Group key.
    pub group: String,
    /// The cookie of its oldest member holding one: the group's.
    pub cookie: String,
    /// The members moved to it.
    pub members: Vec<String>,
}

/// What `reconcile` reports.
#[derive(Debug, Clone, Serialize)]
pub struct ReconcileReport {
    /// Nothing was changed.
    pub dry_run: bool,
    /// Groups whose members held more than one cookie.
    pub converged: Vec<Converged>,
    /// Per cached member, by group then age.
    pub members: Vec<MemberReport>,
}

impl ReconcileReport {
    /// Processes fixed (or to fix, in a dry run).
    pub fn fixed(&self) -> usize {
        self.members.iter().map(|m| m.fixed.len()).sum()
    }

    /// Errors over all members.
    pub fn errors(&self) -> usize {
        self.members.iter().map(|m| m.errors.len()).sum()
    }

    /// Text form.
    pub fn render(&self) -> String {
        let verb = if self.dry_run { "would fix" } else { "fixed" };
        let mut s = format!(
            "reconcile{}: {} members, {verb} {} processes, {} errors\n",
            if self.dry_run { " (dry run)" } else { "" },
            self.members.len(),
            self.fixed(),
            self.errors()
        );
        for c in &self.converged {
            s.push_str(&format!(
                "group {} held more than one cookie: {verb} {} to {} ({})\n",
                c.group,
                if c.members.len() == 1 { "1 member".to_string() } else { format!("{} members", c.members.len()) },
                c.cookie,
                c.members.join(", ")
            ));
        }
        for m in &self.members {
            let id: String = m.id.chars().take(20).collect();
            let status = match m.status {
                MemberStatus::Checked => format!("{} processes checked", m.processes),
                MemberStatus::Dead => "dead: skipped".into(),
                MemberStatus::NoCookie => "init has no cookie: skipped (the next ensure fixes the group)".into(),
                MemberStatus::NoCgroup => {
                    format!("no usable cgroup ({}): skipped", m.cgroup.as_deref().unwrap_or("none recorded"))
                }
                MemberStatus::SharedCgroup => {
                    format!("cgroup {} is shared with another group: skipped", m.cgroup.as_deref().unwrap_or("-"))
                }
                MemberStatus::Failed => "failed".into(),
            };
            s.push_str(&format!(
                "{:<40} {:<20} pid {:>7} cookie {:<18} {status}\n",
                m.group,
                id,
                m.pid,
                m.cookie.as_deref().unwrap_or("-")
            ));
            for f in &m.fixed {
                s.push_str(&format!("    {verb} pid {}: {} -> {}\n", f.pid, f.old_cookie, f.new_cookie));
            }
            for p in &m.exited {
                s.push_str(&format!("    pid {p} exited meanwhile\n"));
            }
            for e in &m.errors {
                s.push_str(&format!("    error: {e}\n"));
            }
        }
        s
    }
}

/// Gives every process in each live member's cgroup the cookie of the member's init. See the
/// module documentation. `Err` only for the cache, or a kernel without core scheduling.
pub fn reconcile<K: CoreSched>(
    store: &Txn<'_>,
    kernel: &K,
    proc: &ProcFs,
    cgroup_root: &Path,
    dry_run: bool,
) -> Result<ReconcileReport, EngineError> {
    let converged = converge_split_groups(store, kernel, proc, dry_run)?;
    let mut report = reconcile_groups(store, kernel, proc, cgroup_root, dry_run, None)?;
    report.converged = converged;
    Ok(report)
}

/// Converges every group whose live members hold more than one cookie (reports them in a dry
/// run). A group that cannot be converged is logged and left to its next ensure.
fn converge_split_groups<K: CoreSched>(
    store: &Txn<'_>,
    kernel: &K,
    proc: &ProcFs,
    dry_run: bool,
) -> Result<Vec<Converged>, EngineError> {
    let members = store.all_members()?;
    let mut live = Vec::new();
    for seen in membership::live_members(proc, kernel, &members) {
        match seen {
            Seen::Live(l) => live.push((l.member, l.cookie)),
            Seen::CookieUnreadable(_, e) if e.is_unsupported() => return Err(kerr("read the cookie of a member")(e)),
            _ => {}
        }
    }
    let groups = Groups::new(live);
    let mut out = Vec::new();
    for (group, cookie) in groups.cookies() {
        let group = group.to_string();
        let off: Vec<String> = groups.off(&group).into_iter().map(|(id, _)| id).collect();
        if off.is_empty() {
            continue;
        }
        if dry_run {
            out.push(Converged { group, cookie: CookieHex(cookie).to_string(), members: off });
            continue;
        }
        match Engine::new(kernel, proc, store).converge(&group) {
            Ok((Some(cookie), moved)) if !moved.is_empty() => {
                log::info!(
                    "reconcile: group {group} held more than one cookie: moved {} to its oldest member's cookie {}",
                    moved.join(", "),
                    CookieHex(cookie)
                );
                out.push(Converged { group, cookie: CookieHex(cookie).to_string(), members: moved });
            }
            Ok(_) => {}
            Err(EngineError::Kernel { op, source }) if source.is_unsupported() => {
                return Err(EngineError::Kernel { op, source });
            }
            Err(e) => log::warn!("reconcile: failed to converge group {group}: {}", Chain(&e)),
        }
    }
    Ok(out)
}

/// [`reconcile`] walking only the cgroups of the members of `groups` (`None`: every group); the
/// members of the other groups still decide which processes those cgroups' members own. What
/// `reconcile --follow` runs for the groups whose cookie or members changed in the cache.
pub fn reconcile_groups<K: CoreSched>(
    store: &Store,
    kernel: &K,
    proc: &ProcFs,
    cgroup_root: &Path,
    dry_run: bool,
    groups: Option<&std::collections::BTreeSet<String>>,
) -> Result<ReconcileReport, EngineError> {
    let members = store.all_members()?;
    let (mut reports, live) = check_members(&members, kernel, proc)?;
    let walk = Walk {
        kernel,
        proc,
        relay: Relay::new(kernel, proc),
        cgroup_root,
        dry_run,
        live: &live,
        me: std::process::id() as Pid,
    };
    for l in live.iter().filter(|l| groups.is_none_or(|g| g.contains(&l.member.group))) {
        let r = reports.iter_mut().find(|r| r.id == l.member.container_id).expect("every member has a report");
        walk.member(l, r)?;
    }
    Ok(ReconcileReport { dry_run, converged: Vec::new(), members: reports })
}

/// Pass 1 of [`reconcile_groups`]: which members are alive, and the cookie on each init; a report
/// for every member, and the live ones holding a cookie.
fn check_members<'m, K: CoreSched>(
    members: &'m [Member],
    kernel: &K,
    proc: &ProcFs,
) -> Result<(Vec<MemberReport>, Vec<Live<'m>>), EngineError> {
    let mut reports = Vec::with_capacity(members.len());
    let mut live = Vec::new();
    for seen in membership::live_members(proc, kernel, members) {
        let m = match &seen {
            Seen::Live(l) => l.member,
            Seen::Gone(m, _) | Seen::Unreadable(m, _) | Seen::CookieUnreadable(m, _) => *m,
        };
        let mut r = MemberReport {
            id: m.container_id.clone(),
            group: m.group.clone(),
            pid: m.pid,
            status: MemberStatus::Checked,
            cookie: None,
            cgroup: m.labels.cgroup.clone(),
            processes: 0,
            fixed: Vec::new(),
            exited: Vec::new(),
            errors: Vec::new(),
        };
        match seen {
            Seen::Live(l) if l.cookie == 0 => {
                r.cookie = Some(CookieHex(0).to_string());
                r.status = MemberStatus::NoCookie;
            }
            Seen::Live(l) => {
                r.cookie = Some(CookieHex(l.cookie).to_string());
                live.push(l);
            }
            Seen::Gone(..) => r.status = MemberStatus::Dead,
            Seen::Unreadable(_, e) => {
                r.status = MemberStatus::Failed;
                r.errors.push(format!("failed to read /proc for pid {}: {e}", m.pid));
            }
            Seen::CookieUnreadable(_, e) if e.is_unsupported() => return Err(kerr("read the cookie of a member")(e)),
            Seen::CookieUnreadable(_, e) => {
                r.status = MemberStatus::Failed;
                r.errors.push(format!("failed to read the cookie of pid {}: {e}", m.pid));
            }
        }
        reports.push(r);
    }

    Ok((reports, live))
}

/// Pass 2 of [`reconcile_groups`]: the walk of each live member's cgroup.
struct Walk<'a, 'm, K: CoreSched> {
    kernel: &'a K,
    proc: &'a ProcFs,
    relay: Relay<'a, K>,
    cgroup_root: &'a Path,
    dry_run: bool,
    /// Every live member holding a cookie: who owns which process.
    live: &'a [Live<'m>],
    /// This process, never touched.
    me: Pid,
}

/// A process given `cookie`, which held `old`.
fn fixed(task: &TaskId, old: Cookie, cookie: Cookie) -> Fixed {
    Fixed { pid: task.pid, old_cookie: CookieHex(old).to_string(), new_cookie: CookieHex(cookie).to_string() }
}

impl<K: CoreSched> Walk<'_, '_, K> {
    /// Walks live member `l`'s cgroup into its report `r`: the processes it owns off its init's
    /// cookie, given it (listed only, in a dry run).
    fn member(&self, l: &Live<'_>, r: &mut MemberReport) -> Result<(), EngineError> {
        let Some((key, dir)) = l.key.as_deref().and_then(|k| Some((k, cgroup::dir(self.cgroup_root, k)?))) else {
            r.status = MemberStatus::NoCgroup;
            return Ok(());
        };
        if membership::shared(key, self.live) {
            r.status = MemberStatus::SharedCgroup;
            return Ok(());
        }
        let pids = match cgroup::procs(&dir) {
            Ok(p) => p,
            Err(e) => {
                r.status = MemberStatus::Failed;
                r.errors.push(format!("failed to list the processes of {}: {e}", dir.display()));
                return Ok(());
            }
        };
        let todo = self.strays(l, pids, r);
        if self.dry_run || todo.is_empty() {
            r.fixed = todo.iter().map(|(t, old)| fixed(t, *old, l.cookie)).collect();
            return Ok(());
        }
        self.adopt(l, &todo, r)
    }

    /// The processes among `pids` that `l` owns ([`membership::owner`]) and whose cookie is not
    /// its init's, with the cookie each holds.
    fn strays(&self, l: &Live<'_>, pids: Vec<Pid>, r: &mut MemberReport) -> Vec<(TaskId, Cookie)> {
        let mut todo = Vec::new();
        for pid in pids {
            if pid <= 1 || pid == self.me {
                continue;
            }
            let pid_cg = match self.proc.cgroup(pid) {
                Ok(Some(c)) => c,
                Ok(None) => continue, // exited
                Err(e) => {
                    r.errors.push(format!("failed to read /proc/{pid}/cgroup: {e}"));
                    continue;
                }
            };
            if membership::owner(&pid_cg, membership::candidates(self.live))
                .is_none_or(|o| o.member.group != l.member.group)
            {
                continue;
            }
            r.processes += 1;
            let task = match self.proc.task(pid) {
                Ok(Some(t)) => t,
                Ok(None) => continue,
                Err(e) => {
                    r.errors.push(format!("failed to read /proc/{pid}/stat: {e}"));
                    continue;
                }
            };
            match self.kernel.get(pid) {
                Ok(c) if c == l.cookie => {}
                Ok(c) => todo.push((task, c)),
                Err(KernelError::NoSuchProcess(_)) => {}
                Err(e) => r.errors.push(format!("failed to read the cookie of pid {pid}: {e}")),
            }
        }
        todo
    }

    /// Gives each process of `todo` the cookie of `l`'s init through a verified relay thread.
    fn adopt(&self, l: &Live<'_>, todo: &[(TaskId, Cookie)], r: &mut MemberReport) -> Result<(), EngineError> {
        let m = l.member;
        let targets: Vec<TaskId> = todo.iter().map(|(t, _)| *t).collect();
        match self.relay.adopt(m.init(), l.cookie, &targets) {
            Ok(results) => {
                for (a, (task, old)) in results.into_iter().zip(todo) {
                    match a.result {
                        Adopted::Done => {
                            log::info!(
                                "reconcile: gave pid {} of container {} (group {}) cookie {} (was {})",
                                task.pid,
                                m.container_id,
                                m.group,
                                CookieHex(l.cookie),
                                CookieHex(*old)
                            );
                            r.fixed.push(fixed(task, *old, l.cookie));
                        }
                        Adopted::Exited => r.exited.push(task.pid),
                        Adopted::Failed(e) => r.errors.push(Chain(&e).to_string()),
                    }
                }
            }
            Err(EngineError::TargetGone(_)) => r.status = MemberStatus::Dead,
            Err(EngineError::Kernel { op, source }) if source.is_unsupported() => {
                return Err(EngineError::Kernel { op, source });
            }
            Err(e) => r.errors.push(Chain(&e).to_string()),
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
