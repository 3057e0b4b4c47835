//! The membership model: the one answer to the two questions every part of the project asks
//! about a cached member, whether it is the hook, `reconcile` and its follower, `list`,
//! `metrics`, `gc` or rebuild.
//!
//! - **Is it alive, and what is its cookie** ([`liveness`], [`state`]): the init recorded in the
//!   cache (pid and start time) is compared with `/proc`. It is [`Liveness::Alive`] when the pid
//!   still has the recorded start time, [`Liveness::Dead`] when the pid is gone,
//!   [`Liveness::Reused`] when another process has it, and [`Liveness::Unreadable`] when `/proc`
//!   could not say. The rule every caller keeps: only a dead or reused member is ever dropped,
//!   and only an alive one is ever a cookie source or counted; an unreadable one is neither
//!   (the engine, which must not guess, fails on it instead).
//! - **Which member owns a cgroup** ([`cgroup::key`], [`owner`]): a member is known by its cgroup
//!   as `/proc/PID/cgroup` showed it when it was recorded, a plain absolute path other than the
//!   root. A process belongs to the member whose cgroup is the most specific one containing the
//!   process's own cgroup; when members of different groups share that cgroup, no member owns
//!   it. `reconcile` and the follower's view both ask [`owner`], so that a process gets the same
//!   cookie whichever of them reaches it first.
//!
//! Built on those: [`holds`] (identity, GET, identity: what a receipt and a wired shim are checked
//! with), [`live_members`] (the one walk over cached members, each live with its cookie and cgroup
//! key, gone, or unreadable), [`candidates`] (the owner candidates among live members),
//! [`shared`] and [`Owners`] ([`owner`]'s rule indexed, for the audit's many lookups).

use std::io;

use crate::host::cgroup;
use crate::host::kernel::{CoreSched, KernelError};
use crate::host::procfs::{ProcFs, TaskId};
use crate::store::Member;
use crate::values::Cookie;

/// Whether a cached member's init is still the process the cache recorded.
#[derive(Debug)]
pub enum Liveness {
    /// The pid has the recorded start time.
    Alive,
    /// No process has the pid.
    Dead,
    /// Another process has the pid (another start time).
    Reused,
    /// `/proc` could not be read: neither dropped nor used.
    Unreadable(io::Error),
}

impl Liveness {
    /// The member may be dropped: its init is dead or its pid reused.
    pub fn is_gone(&self) -> bool {
        matches!(self, Liveness::Dead | Liveness::Reused)
    }

    /// The member's init is the recorded process.
    pub fn is_alive(&self) -> bool {
        matches!(self, Liveness::Alive)
    }

    /// For a caller that must not guess: `Ok(true)` alive, `Ok(false)` dead or reused, the
    /// error when `/proc` could not say.
    pub fn known(self) -> io::Result<bool> {
        match self {
            Liveness::Alive => Ok(true),
            Liveness::Dead | Liveness::Reused => Ok(false),
            Liveness::Unreadable(e) => Err(e),
        }
    }
}

/// Whether `init` (a pid and the start time recorded with it) is still that process.
pub fn liveness(proc: &ProcFs, init: TaskId) -> Liveness {
    match proc.task(init.pid) {
        Ok(Some(now)) if now == init => Liveness::Alive,
        Ok(Some(_)) => Liveness::Reused,
        Ok(None) => Liveness::Dead,
        Err(e) => Liveness::Unreadable(e),
    }
}

/// Whether `task` is still the process it names and holds `cookie`: its identity, a GET, its
/// identity again, so that a pid reused around the GET is caught. Any error is a no. This is the
/// one test a recorded fact passes before a run trusts it instead of doing the work again (a
/// receipt, a pod's shim already wired).
pub fn holds<K: CoreSched>(proc: &ProcFs, kernel: &K, task: TaskId, cookie: Cookie) -> bool {
    let same = || liveness(proc, task).is_alive();
    same() && kernel.get(task.pid).is_ok_and(|now| now == cookie) && same()
}

/// A cached member as the kernel shows it now.
#[derive(Debug)]
pub enum State {
    /// Its init is the recorded process and carries `cookie` (0: none).
    Alive(Cookie),
    /// Its init is dead or its pid reused (the GET may have found it gone, too): it may be dropped.
    Gone(Liveness),
    /// `/proc` could not be read for its init.
    Unreadable(io::Error),
    /// Its init is the recorded process but its cookie could not be read.
    CookieUnreadable(KernelError),
}

/// The member's liveness, then (when alive) the cookie a GET finds on its init.
pub fn state<K: CoreSched>(proc: &ProcFs, kernel: &K, m: &Member) -> State {
    match liveness(proc, m.init()) {
        Liveness::Alive => match kernel.get(m.pid) {
            Ok(cookie) => State::Alive(cookie),
            Err(KernelError::NoSuchProcess(_)) => State::Gone(Liveness::Dead),
            Err(e) => State::CookieUnreadable(e),
        },
        Liveness::Unreadable(e) => State::Unreadable(e),
        gone => State::Gone(gone),
    }
}

/// A cached member whose init is the recorded process, with the cookie a GET found on it (0:
/// none) and the cgroup it is known by ([`cgroup::key`]).
#[derive(Debug)]
pub struct Live<'m> {
    /// The member.
    pub member: &'m Member,
    /// The cookie on its init.
    pub cookie: Cookie,
    /// Its cgroup key, when it has a usable one.
    pub key: Option<String>,
}

/// A member as [`live_members`] found it: its [`State`], the live one with its cgroup key.
#[derive(Debug)]
pub enum Seen<'m> {
    /// Alive, with its cookie and cgroup key.
    Live(Live<'m>),
    /// Its init is dead or its pid reused: it may be dropped.
    Gone(&'m Member, Liveness),
    /// `/proc` could not be read for its init.
    Unreadable(&'m Member, io::Error),
    /// Its init is the recorded process but its cookie could not be read.
    CookieUnreadable(&'m Member, KernelError),
}

/// Each of `members`, in order, as the kernel shows it now ([`state`]): the live ones with their
/// cookie and cgroup key. The one walk over cached members that the engine, `reconcile`, the
/// audit and the follower's view take; each decides what a member that is not live means to it.
pub fn live_members<'m, K: CoreSched>(proc: &ProcFs, kernel: &K, members: &'m [Member]) -> Vec<Seen<'m>> {
    members
        .iter()
        .map(|m| match state(proc, kernel, m) {
            State::Alive(cookie) => {
                Seen::Live(Live { member: m, cookie, key: cgroup::key(m.labels.cgroup.as_deref()) })
            }
            State::Gone(how) => Seen::Gone(m, how),
            State::Unreadable(e) => Seen::Unreadable(m, e),
            State::CookieUnreadable(e) => Seen::CookieUnreadable(m, e),
        })
        .collect()
}

/// The owner of a process whose own cgroup is `cg` among `candidates`, each a member's cgroup key
/// ([`cgroup::key`]), its group and the caller's handle: the candidate with the most specific
/// cgroup containing `cg`; `None` when none contains it or when members of different groups share
/// the most specific one (ambiguous: nobody's cookie is handed out).
pub fn owner<'a, T>(cg: &str, candidates: impl IntoIterator<Item = (&'a str, &'a str, T)>) -> Option<T> {
    let mut best: Option<(&str, &str, T)> = None;
    let mut ambiguous = false;
    for (key, group, item) in candidates.into_iter().filter(|(key, _, _)| cgroup::within(cg, key)) {
        match &best {
            Some((b, _, _)) if key.len() < b.len() => {}
            Some((b, g, _)) if key.len() == b.len() => ambiguous |= *g != group,
            _ => {
                best = Some((key, group, item));
                ambiguous = false;
            }
        }
    }
    if ambiguous { None } else { best.map(|(_, _, item)| item) }
}

/// The live members with a cgroup key as candidates for [`owner`] and [`Owners`]: each one's key,
/// its group and the member itself. The one way `reconcile` and the audit list them.
pub fn candidates<'a, 'm>(live: &'a [Live<'m>]) -> impl Iterator<Item = (&'a str, &'a str, &'a Live<'m>)> {
    live.iter().filter_map(|l| Some((l.key.as_deref()?, l.member.group.as_str(), l)))
}

/// Whether the live members known by the cgroup `key` belong to more than one group: then none
/// of them owns it ([`owner`]'s rule), and no process in it gets either group's cookie.
pub fn shared(key: &str, live: &[Live<'_>]) -> bool {
    owner(key, candidates(live)).is_none()
}

/// [`owner`] for many lookups: the members' cgroup keys indexed once, then each lookup walks up the
/// process's cgroup (the cgroup itself, then each parent), so its cost is the cgroup's depth, not
/// the number of members. The same answer as [`owner`] for every cgroup.
#[derive(Debug)]
pub struct Owners<T> {
    /// Key -> (group, handle), `None` when members of different groups share the key.
    by_key: std::collections::HashMap<String, Option<(String, T)>>,
}

impl<T: Clone> Owners<T> {
    /// The index of `candidates`, each a member's cgroup key ([`cgroup::key`]), its group and the
    /// caller's handle.
    pub fn new<'a>(candidates: impl IntoIterator<Item = (&'a str, &'a str, T)>) -> Self {
        let mut by_key: std::collections::HashMap<String, Option<(String, T)>> = std::collections::HashMap::new();
        for (key, group, item) in candidates {
            let key = key.trim_end_matches('/').to_string();
            match by_key.get_mut(&key) {
                None => {
                    by_key.insert(key, Some((group.to_string(), item)));
                }
                Some(slot) => {
                    if slot.as_ref().is_some_and(|(g, _)| g != group) {
                        *slot = None;
                    }
                }
            }
        }
        Self { by_key }
    }

    /// The owner of a process whose own cgroup is `cg` ([`owner`]'s rule).
    pub fn owner(&self, cg: &str) -> Option<&T> {
        let mut at = cg.trim_end_matches('/');
        loop {
            if let Some(slot) = self.by_key.get(at) {
                return slot.as_ref().map(|(_, item)| item);
            }
            match at.rfind('/') {
                Some(i) if i > 0 => at = &at[..i],
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
#[path = "membership_tests.rs"]
mod tests;
