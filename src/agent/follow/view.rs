//! The follower's in-memory view of the cache: live members with a cookie, by cgroup, and the
//! one lookup an event needs ([`View::owner`]); the members whose `cpu.idle` the follower
//! keeps at 1 ([`View::idle`]); what each group looked like when the view was built, so that a
//! new view names the groups that changed ([`View::changed_groups`]); and the members whose init
//! is gone ([`View::gone`]). Built under the state lock when the cache file changed
//! ([`Signature`]), never per event.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::cookies::groups::Groups;
use crate::cookies::membership::{self, Seen};
use crate::host::kernel::CoreSched;
use crate::host::procfs::{ProcFs, TaskId};
use crate::store::Member;
use crate::values::Cookie;

/// One live member: the source of its group's cookie for the processes of its cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewMember {
    /// Container id.
    pub container_id: String,
    /// Group key.
    pub group: String,
    /// The init, identity as cached.
    pub init: TaskId,
    /// Its cgroup as `/proc/PID/cgroup` shows it, without a trailing `/`.
    pub cgroup: String,
    /// The cookie a GET found on the init when the view was built.
    pub cookie: Cookie,
}

/// A live member of a `sched_idle` class: the cgroup whose `cpu.idle` must stay 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleMember {
    /// Container id.
    pub container_id: String,
    /// The init, identity as cached.
    pub init: TaskId,
    /// The cgroup (a plain absolute path, not the root).
    pub cgroup: String,
}

/// A group as the view found it: the cookies on its live members' inits and those members.
type GroupState = (BTreeSet<Cookie>, Vec<(String, TaskId, String)>);

/// Live members with a cookie and a usable cgroup, and live members with a `cpu.idle` to keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct View {
    members: Vec<ViewMember>,
    idle: Vec<IdleMember>,
    /// Each group of `members` as built (never changed by [`View::set_cookie`]).
    groups: BTreeMap<String, GroupState>,
    /// Cached members whose init is dead or whose pid now has another start time.
    gone: Vec<String>,
}

impl View {
    /// From the cached members (group, then age): those whose init is alive (pid + start time)
    /// and has a non-zero cookie, with a cgroup that is a plain absolute path and not the root.
    /// Members recorded with an idle cgroup ([`crate::values::Labels::idle_cgroup`]) whose init is
    /// alive are in [`View::idle`], whatever their cookie.
    /// Members whose init is dead or reused (`/proc` says so; an unreadable entry is not gone) are
    /// in [`View::gone`].
    pub fn build<K: CoreSched>(members: &[Member], kernel: &K, proc: &ProcFs) -> Self {
        let mut out = Vec::new();
        let mut held = Vec::new();
        let mut idle = Vec::new();
        let mut gone = Vec::new();
        for seen in membership::live_members(proc, kernel, members) {
            let (m, cookie, key) = match seen {
                Seen::Live(l) => (l.member, l.cookie, l.key),
                Seen::CookieUnreadable(m, _) => (m, 0, None),
                Seen::Gone(m, _) => {
                    gone.push(m.container_id.clone());
                    continue;
                }
                Seen::Unreadable(..) => continue,
            };
            let init = m.init();
            if let Some(cgroup) = crate::host::cgroup::key(m.labels.idle_cgroup.as_deref()) {
                idle.push(IdleMember { container_id: m.container_id.clone(), init, cgroup });
            }
            if let Some(cgroup) = key.filter(|_| cookie != 0) {
                held.push((m, cookie));
                out.push(ViewMember {
                    container_id: m.container_id.clone(),
                    group: m.group.clone(),
                    init,
                    cgroup,
                    cookie,
                });
            }
        }
        let held = Groups::new(held);
        let mut groups: BTreeMap<String, GroupState> = BTreeMap::new();
        for m in &out {
            let g = groups.entry(m.group.clone()).or_insert_with(|| (held.held(&m.group), Vec::new()));
            g.1.push((m.container_id.clone(), m.init, m.cgroup.clone()));
        }
        Self { members: out, idle, groups, gone }
    }

    /// The groups whose cookie or live members differ between this view and `newer` (as each was
    /// built): a group that converged, gained or lost a member, or appeared or went away.
    pub fn changed_groups(&self, newer: &View) -> BTreeSet<String> {
        let keys: BTreeSet<&String> = self.groups.keys().chain(newer.groups.keys()).collect();
        keys.into_iter().filter(|k| self.groups.get(*k) != newer.groups.get(*k)).cloned().collect()
    }

    /// Cached members whose init is dead or reused.
    pub fn gone(&self) -> &[String] {
        &self.gone
    }

    /// False when `/proc` shows that the init of a member in the view (or kept idle) is gone.
    pub fn inits_alive(&self, proc: &ProcFs) -> bool {
        let inits = self.members.iter().map(|m| m.init).chain(self.idle.iter().map(|m| m.init));
        inits.into_iter().all(|i| !membership::liveness(proc, i).is_gone())
    }

    /// The live members whose `cpu.idle` is kept at 1.
    pub fn idle(&self) -> &[IdleMember] {
        &self.idle
    }

    /// No member: no event needs a look at `/proc`.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Members in the view.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// The member whose cookie a process in cgroup `cg` gets: among the members whose cgroup
    /// contains `cg`, the most specific; `None` when there is none or when the most specific
    /// cgroup holds members of different groups (ambiguous, as `reconcile` decides).
    pub fn owner(&self, cg: &str) -> Option<&ViewMember> {
        membership::owner(cg, self.members.iter().map(|m| (m.cgroup.as_str(), m.group.as_str(), m)))
    }

    /// Notes a cookie seen on a member's init since the view was built.
    pub fn set_cookie(&mut self, container_id: &str, cookie: Cookie) {
        for m in self.members.iter_mut().filter(|m| m.container_id == container_id) {
            m.cookie = cookie;
        }
    }
}

/// What the cache files looked like: when it differs from the last one, the view is rebuilt.
/// SQLite in WAL mode writes the `-wal` file first and the database at checkpoints, so both
/// are looked at (size, mtime, inode; a missing file is a state too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature(Vec<Option<(u64, i64, i64, u64)>>);

impl Signature {
    /// Of the database at `db` and its `-wal` file.
    pub fn of(db: &Path) -> Self {
        use std::os::unix::fs::MetadataExt;
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        let files = [db.to_path_buf(), PathBuf::from(wal)];
        Self(
            files
                .iter()
                .map(|f| std::fs::metadata(f).ok().map(|m| (m.len(), m.mtime(), m.mtime_nsec(), m.ino())))
                .collect(),
        )
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
