//! `audit`: a read-only, node-wide check of core scheduling as the kernel holds it. Every thread of
//! every process is read (a GET on the thread, since cookies are per thread) and held to what the
//! cache and the policy say it should carry:
//!
//! - **members** (`member`): a thread whose process's cgroup a live member owns
//!   ([`membership::owner`]) carries its group's cookie: the cookie of the group's oldest live
//!   member holding one (the engine's rule). A member's init off it means the group holds two
//!   cookies (`split`: `reconcile` and the follower's sweep converge it);
//! - **one group per cookie** (`shared`): two groups whose cookies are equal, reported at each
//!   init of every group after the first;
//! - **outsiders** (`outside`): a thread no member owns carries no group's cookie, but for the
//!   pods' shims the hook gave one (members `shim:<sandbox>`, checked by pid and start time), which
//!   carry their own group's;
//! - **cleared** (`cleared`): the threads of a running container the policy runs without a cookie
//!   (policy `none`, a disabled QoS class; found in the runtimes' state, [`crate::session::running::scan`])
//!   and of a shim cleared for its pod carry 0;
//! - **escaped** (`escaped`): a running container whose own hook was to give it a cookie runs
//!   without one ([`super::escapes`], from the runtimes' state alone, cached or not): each of its
//!   threads at cookie 0 is reported, and the container is listed in [`AuditReport::escaped`].
//!
//! Without a cache (none yet, or one that cannot be opened: the caller says why) every rule but
//! `escaped` and `cleared` has nothing to judge against, and those two still run.
//!
//! A process running this binary is left out (a hook between its share and its exit carries its
//! group's cookie by design), and so is the audit itself. It changes nothing: no SHARE, no write,
//! no recorded stop applied. Threads that exit while they are read are skipped.
//!
//! A cgroup's owner is looked up through `membership::Owners` (the most specific member cgroup,
//! walked up from the process's own). 1,000 members of 10 threads stay under the 200 ms target
//! over the fake kernel (`benches/inproc.rs`). The follower runs it after each full sweep and
//! publishes the counts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::config::Config;
use crate::cookies::groups::Groups;
use crate::cookies::membership::{self, Live, Seen};
use crate::decide::policy::Action;
use crate::host::kernel::{CookieHex, CoreSched, KernelError};
use crate::host::procfs::ProcFs;
use crate::host::runtimes::RuntimeRoot;
use crate::store::Store;
use crate::values::{Cookie, Pid};

use super::OpsError;

/// Which rule a violation breaks (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rule {
    /// A thread of a member's cgroup off its group's cookie.
    Member,
    /// A member's init off its group's cookie: the group holds two.
    Split,
    /// A group holding the cookie of another group.
    Shared,
    /// A thread outside every member holding a group's cookie.
    Outside,
    /// A thread of a container the policy clears (or of its pod's cleared shim) not at 0.
    Cleared,
    /// A thread at cookie 0 of a running container whose hook was to give it a cookie.
    Escaped,
}

/// One thread off its cookie.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// The rule.
    pub rule: Rule,
    /// Process (thread-group leader).
    pub pid: Pid,
    /// Thread.
    pub tid: Pid,
    /// The thread's `comm`.
    pub comm: String,
    /// The container it belongs to, when one does.
    pub container: Option<String>,
    /// The group concerned.
    pub group: Option<String>,
    /// The cookie it should carry.
    pub want: String,
    /// The cookie it carries.
    pub have: String,
}

/// What `audit` found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AuditReport {
    /// Processes looked at.
    pub processes: usize,
    /// Threads read.
    pub threads: usize,
    /// Live members of the cache.
    pub members: usize,
    /// Groups with a cookie.
    pub groups: usize,
    /// Running containers the policy clears.
    pub cleared: usize,
    /// Running containers without the cookie their policy gives them ([`super::escapes`]).
    pub escaped: Vec<super::escapes::Escaped>,
    /// Why the cache could not be read, when it could not (the rules that need it did not run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_error: Option<String>,
    /// Every violation, by pid and tid.
    pub violations: Vec<Violation>,
}

impl AuditReport {
    /// Text: one line per violation, then a summary line.
    pub fn render(&self) -> String {
        let mut s = String::new();
        if let Some(e) = &self.cache_error {
            let _ = writeln!(s, "audit: the cache is unusable ({e}): only the escaped and cleared rules ran");
        }
        for e in &self.escaped {
            let _ = writeln!(
                s,
                "escaped  container {} (pid {}) of group {} runs without core scheduling (its hook failed open); \
                 the follower gives it its group's cookie",
                e.id, e.pid, e.group
            );
        }
        for v in &self.violations {
            let _ = writeln!(
                s,
                "{:<8} pid {} tid {} ({}) container {} group {}: want {}, has {}",
                format!("{:?}", v.rule).to_lowercase(),
                v.pid,
                v.tid,
                v.comm,
                v.container.as_deref().unwrap_or("-"),
                v.group.as_deref().unwrap_or("-"),
                v.want,
                v.have
            );
        }
        let _ = writeln!(
            s,
            "audit: {} threads of {} processes; {} live members in {} groups, {} cleared containers, {} escaped; {} violations",
            self.threads,
            self.processes,
            self.members,
            self.groups,
            self.cleared,
            self.escaped.len(),
            self.violations.len()
        );
        s
    }
}

/// Audits the node (see the module documentation). `store`: the cache (`None`: there is none,
/// so every group cookie is foreign to it); `roots`: the runtimes' state, for cleared
/// containers. `Err` when `/proc` cannot be listed or the kernel has no core scheduling.
pub fn audit<K: CoreSched>(
    store: Option<&Store>,
    kernel: &K,
    proc: &ProcFs,
    roots: &[RuntimeRoot],
    config: &Config,
) -> Result<AuditReport, OpsError> {
    let members = match store {
        Some(s) => s.all_members()?,
        None => Vec::new(),
    };
    let mut report = AuditReport::default();
    let live = live_members(&members, kernel, proc)?;
    report.members = live.len();
    let groups = Groups::new(live.iter().map(|l| (l.member, l.cookie)));
    report.groups = groups.with_cookie();
    let mut violations = shared(&live, &groups, proc);

    let scan = crate::session::running::scan(roots, proc, config);
    let cleared = cleared(&scan.running, proc);
    report.cleared = cleared.len();
    let escaped = super::escapes::find(&scan.running, kernel, proc)?;
    let escaping = escaping(&escaped, proc);
    let expected = Expected {
        groups: &groups,
        owners: membership::Owners::new(membership::candidates(&live)),
        shims: shims(&live, &groups),
        clearing: membership::Owners::new(cleared.iter().map(|(key, id)| (key.as_str(), id.as_str(), id))),
        escaped_inits: escaped.iter().map(|e| (e.pid, e)).collect(),
        escaping: membership::Owners::new(escaping.iter().map(|(key, e)| (key.as_str(), e.id.as_str(), *e))),
        own_exe: std::fs::read_link("/proc/self/exe").ok(),
    };
    let me = std::process::id() as Pid;
    let pids = proc.pids().map_err(|source| OpsError::Proc { pid: 0, source })?;
    for pid in pids.into_iter().filter(|pid| *pid != me) {
        expected.check_process(pid, kernel, proc, &mut report, &mut violations)?;
    }
    violations.sort_by_key(|v| (v.pid, v.tid, v.rule));
    report.violations = violations;
    report.escaped = escaped;
    Ok(report)
}

/// The live members of `members` (a kernel without core scheduling is an error).
fn live_members<'m, K: CoreSched>(
    members: &'m [crate::store::Member],
    kernel: &K,
    proc: &ProcFs,
) -> Result<Vec<Live<'m>>, OpsError> {
    let mut live = Vec::new();
    for seen in membership::live_members(proc, kernel, members) {
        match seen {
            Seen::Live(l) => live.push(l),
            Seen::CookieUnreadable(m, e) if e.is_unsupported() => {
                return Err(OpsError::Kernel { pid: m.pid, source: e });
            }
            _ => {}
        }
    }
    Ok(live)
}

/// Rule `shared`: a cookie belongs to the group that had it first ([`Groups::owner_of`]); each
/// group holding another's is reported at its members' inits.
fn shared(live: &[Live<'_>], groups: &Groups, proc: &ProcFs) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (group, cookie) in groups.cookies() {
        let Some(first) = groups.borrowed(group) else { continue };
        for l in live.iter().filter(|l| l.member.group == group) {
            violations.push(Violation {
                rule: Rule::Shared,
                pid: l.member.pid,
                tid: l.member.pid,
                comm: comm(proc, l.member.pid),
                container: Some(l.member.container_id.clone()),
                group: Some(format!("{group} (cookie of {first})")),
                want: "a cookie of its own".into(),
                have: CookieHex(cookie).to_string(),
            });
        }
    }
    violations
}

/// The shims the hook gave a cookie (members without a cgroup: judged by identity), and what
/// each must carry: its group's cookie, or 0 once cleared.
fn shims<'a, 'm>(live: &'a [Live<'m>], groups: &Groups) -> BTreeMap<Pid, (&'a Live<'m>, Cookie)> {
    live.iter()
        .filter(|l| l.key.is_none())
        .map(|l| (l.member.pid, (l, groups.cookie(&l.member.group).unwrap_or(0))))
        .collect()
}

/// The running containers the policy clears, by their init's cgroup key, with their ids.
fn cleared(running: &[crate::session::running::Running], proc: &ProcFs) -> Vec<(String, String)> {
    let mut cleared = Vec::new();
    for r in running {
        if matches!(r.decision.action, Action::Clear { .. })
            && let Some(key) = proc.cgroup(r.task.pid).ok().flatten().and_then(|c| crate::host::cgroup::key(Some(&c)))
        {
            cleared.push((key, r.c.id.clone()));
        }
    }
    cleared
}

/// The cgroup of each escaped container whose processes are its own: its init's, unless that
/// cgroup also holds this audit (then it is no container's own).
fn escaping<'e>(escaped: &'e [super::escapes::Escaped], proc: &ProcFs) -> Vec<(String, &'e super::escapes::Escaped)> {
    let own_cgroup = proc.cgroup(std::process::id() as Pid).ok().flatten();
    let mut escaping = Vec::new();
    for e in escaped {
        if let Some(key) = proc.cgroup(e.pid).ok().flatten().and_then(|c| crate::host::cgroup::key(Some(&c)))
            && own_cgroup.as_deref().is_none_or(|mine| membership::owner(mine, [(key.as_str(), "", ())]).is_none())
        {
            escaping.push((key, e));
        }
    }
    escaping
}

/// What owns a process: the member owning its cgroup, the shim it is (with the cookie it must
/// carry), the cleared container owning its cgroup.
type OwnedBy<'a, 'm> = (Option<&'a Live<'m>>, Option<&'a (&'a Live<'m>, Cookie)>, Option<&'a String>);

/// A thread's rule, the cookie it should carry, its container and its group.
type Judged = (Rule, Cookie, Option<String>, Option<String>);

/// What each process of the node should carry: the indices the thread walk asks.
struct Expected<'a, 'm> {
    groups: &'a Groups,
    /// The member owning a cgroup ([`membership::owner`]'s rule).
    owners: membership::Owners<&'a Live<'m>>,
    /// The shims by pid, with the cookie each must carry.
    shims: BTreeMap<Pid, (&'a Live<'m>, Cookie)>,
    /// The cleared container owning a cgroup.
    clearing: membership::Owners<&'a String>,
    /// The escaped containers by init pid.
    escaped_inits: BTreeMap<Pid, &'a super::escapes::Escaped>,
    /// The escaped container owning a cgroup.
    escaping: membership::Owners<&'a super::escapes::Escaped>,
    /// This binary, whose running copies are left out.
    own_exe: Option<std::path::PathBuf>,
}

impl Expected<'_, '_> {
    /// Reads every thread of process `pid` and adds its violations; none when the process runs
    /// this binary (a hook between its share and its exit carries a group's cookie by design).
    fn check_process<K: CoreSched>(
        &self,
        pid: Pid,
        kernel: &K,
        proc: &ProcFs,
        report: &mut AuditReport,
        violations: &mut Vec<Violation>,
    ) -> Result<(), OpsError> {
        let tids = match proc.threads(pid) {
            Ok(t) if !t.is_empty() => t,
            _ => return Ok(()),
        };
        let Ok(Some(cg)) = proc.cgroup(pid) else { return Ok(()) };
        let escaping = self.escaped_inits.get(&pid).copied().or_else(|| self.escaping.owner(&cg).copied());
        let owned = (self.owners.owner(&cg).copied(), self.shims.get(&pid), self.clearing.owner(&cg).copied());
        report.processes += 1;
        let mut found = Vec::new();
        for tid in tids {
            let have = match kernel.get(tid) {
                Ok(c) => c,
                Err(KernelError::NoSuchProcess(_)) => continue,
                Err(e) if e.is_unsupported() => return Err(OpsError::Kernel { pid: tid, source: e }),
                Err(_) => continue,
            };
            report.threads += 1;
            if let Some(e) = escaping.filter(|_| have == 0) {
                let want =
                    self.groups.cookie(&e.group).map_or("a cookie of its group".into(), |c| CookieHex(c).to_string());
                found.push(Violation {
                    rule: Rule::Escaped,
                    pid,
                    tid,
                    comm: comm(proc, tid),
                    container: Some(e.id.clone()),
                    group: Some(e.group.clone()),
                    want,
                    have: CookieHex(0).to_string(),
                });
                continue;
            }
            let Some((rule, want, container, group)) = self.judge(owned, tid, have) else { continue };
            if have == want {
                continue;
            }
            if self.own_exe.is_some()
                && std::fs::read_link(proc.root().join(pid.to_string()).join("exe")).ok() == self.own_exe
            {
                violations.retain(|v| v.pid != pid);
                return Ok(());
            }
            found.push(Violation {
                rule,
                pid,
                tid,
                comm: comm(proc, tid),
                container,
                group,
                want: CookieHex(want).to_string(),
                have: CookieHex(have).to_string(),
            });
        }
        violations.extend(found);
        Ok(())
    }

    /// The rule thread `tid` (carrying `have`) is held to, the cookie it should carry, and its
    /// container and group, from what owns its process (the member owning its cgroup, the shim
    /// it is, the cleared container owning its cgroup); `None` when no rule speaks of it.
    fn judge(&self, owned: OwnedBy<'_, '_>, tid: Pid, have: Cookie) -> Option<Judged> {
        Some(match owned {
            (Some(l), _, _) => {
                let want = self.groups.cookie(&l.member.group).unwrap_or(l.cookie);
                // The init itself off the group's cookie: the group holds two.
                let rule = if tid == l.member.pid { Rule::Split } else { Rule::Member };
                (rule, want, Some(l.member.container_id.clone()), Some(l.member.group.clone()))
            }
            (None, Some((l, want)), _) => {
                let rule = if *want == 0 { Rule::Cleared } else { Rule::Outside };
                (rule, *want, Some(l.member.container_id.clone()), Some(l.member.group.clone()))
            }
            (None, None, Some(id)) => (Rule::Cleared, 0, Some(id.clone()), None),
            (None, None, None) => (Rule::Outside, 0, None, Some(self.groups.owner_of(have)?.to_string())),
        })
    }
}

/// A thread's `comm` (from `/proc/TID/stat`, which the kernel serves for every thread).
fn comm(proc: &ProcFs, tid: Pid) -> String {
    proc.lineage(tid).ok().flatten().map_or_else(|| "?".into(), |l| l.comm)
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
