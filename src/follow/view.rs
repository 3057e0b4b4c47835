//! The follower's in-memory view of the cache: live members with a cookie, by cgroup, and the
//! one lookup an event needs ([`View::owner`]); the members whose `cpu.idle` the follower
//! keeps at 1 ([`View::idle`]); what each group looked like when the view was built, so that a
//! new view names the groups that changed ([`View::changed_groups`]); and the members whose init
//! is gone ([`View::gone`]). Built under the state lock when the cache file changed
//! ([`Signature`]), never per event.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::kernel::CoreSched;
use crate::membership::{self, Seen};
use crate::procfs::{ProcFs, TaskId};
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
            if let Some(cgroup) = crate::cgroup::key(m.labels.idle_cgroup.as_deref()) {
                idle.push(IdleMember { container_id: m.container_id.clone(), init, cgroup });
            }
            if let Some(cgroup) = key.filter(|_| cookie != 0) {
                out.push(ViewMember {
                    container_id: m.container_id.clone(),
                    group: m.group.clone(),
                    init,
                    cgroup,
                    cookie,
                });
            }
        }
        let mut groups: BTreeMap<String, GroupState> = BTreeMap::new();
        for m in &out {
            let g = groups.entry(m.group.clone()).or_default();
            g.0.insert(m.cookie);
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
mod tests {
    use super::*;
    use crate::kernel::Scope;
    use crate::kernel::fake::{FakeKernel, FakeProc};
    use crate::values::Labels;

    fn member(id: &str, group: &str, pid: i32, cg: Option<&str>) -> Member {
        Member {
            labels: Labels { cgroup: cg.map(str::to_string), ..Labels::default() },
            ..Member::new(id, group, pid, 1000 + pid as u64)
        }
    }

    #[test]
    fn only_live_members_with_a_cookie_and_a_plain_cgroup_are_in_the_view() {
        let dir = tempfile::tempdir().unwrap();
        let fp = FakeProc::new(dir.path()).unwrap();
        let kernel = FakeKernel::new(fp.procfs());
        for (pid, cg) in [(10, "/pod/a"), (11, "/pod/b"), (12, "/pod/c"), (13, "/"), (14, "/x/../y")] {
            fp.spawn(pid, 1000 + pid as u64, 0, cg).unwrap();
        }
        for pid in [10, 12, 13, 14] {
            kernel.create(pid, Scope::ThreadGroup).unwrap();
        }
        let members = [
            member("a", "g", 10, Some("/pod/a/")),
            member("b", "g", 11, Some("/pod/b")), // cookie 0
            member("c", "g", 12, None),           // no cgroup
            member("r", "g", 13, Some("/")),      // root cgroup
            member("p", "g", 14, Some("/x/../y")),
            member("d", "g", 15, Some("/pod/d")), // dead
        ];
        let v = View::build(&members, &kernel, &fp.procfs());
        assert_eq!(v.len(), 1, "{v:?}");
        let a = v.owner("/pod/a/sub").unwrap();
        assert_eq!((a.container_id.as_str(), a.cgroup.as_str()), ("a", "/pod/a"));
        assert!(v.owner("/pod/ab").is_none(), "a sibling with a common prefix is not inside");
        assert!(v.owner("/").is_none());
    }

    #[test]
    fn live_members_with_an_idle_cgroup_are_kept_idle_whatever_their_cookie() {
        let dir = tempfile::tempdir().unwrap();
        let fp = FakeProc::new(dir.path()).unwrap();
        let kernel = FakeKernel::new(fp.procfs());
        fp.spawn(10, 1010, 0, "/be/a.scope/container").unwrap();
        fp.spawn(11, 1011, 0, "/be/b").unwrap();
        let with_idle = |id: &str, pid: i32, idle: &str| Member {
            labels: Labels { idle_cgroup: Some(idle.into()), ..Labels::default() },
            ..Member::new(id, "g", pid, 1000 + pid as u64)
        };
        let members = [
            with_idle("a", 10, "/be/a.scope"),
            with_idle("b", 11, "/"),             // the root: never
            with_idle("c", 12, "/be/c"),         // dead
            member("d", "g", 11, Some("/be/b")), // no idle cgroup
        ];
        let v = View::build(&members, &kernel, &fp.procfs());
        let idle: Vec<(&str, &str)> = v.idle().iter().map(|m| (m.container_id.as_str(), m.cgroup.as_str())).collect();
        assert_eq!(idle, [("a", "/be/a.scope")]);
        assert!(v.is_empty(), "no cookie: no process gets one from them");
    }

    fn view(ms: &[(&str, &str, &str)]) -> View {
        View {
            idle: Vec::new(),
            groups: BTreeMap::new(),
            gone: Vec::new(),
            members: ms
                .iter()
                .enumerate()
                .map(|(i, (id, g, cg))| ViewMember {
                    container_id: id.to_string(),
                    group: g.to_string(),
                    init: TaskId { pid: i as i32 + 2, start_time: 1 },
                    cgroup: cg.to_string(),
                    cookie: 7,
                })
                .collect(),
        }
    }

    #[test]
    fn the_most_specific_cgroup_wins_and_a_shared_one_is_ambiguous() {
        let v = view(&[("pod", "a", "/kubepods/pod1"), ("inner", "b", "/kubepods/pod1/c2"), ("x", "a", "/k/s")]);
        assert_eq!(v.owner("/kubepods/pod1/c1").unwrap().container_id, "pod");
        assert_eq!(v.owner("/kubepods/pod1/c2/t").unwrap().container_id, "inner");
        let shared = view(&[("x", "a", "/c"), ("y", "b", "/c")]);
        assert!(shared.owner("/c").is_none(), "two groups in one cgroup: nobody's");
        let same_group = view(&[("x", "a", "/c"), ("y", "a", "/c")]);
        assert_eq!(same_group.owner("/c/d").unwrap().container_id, "x", "the oldest of one group");
    }

    #[test]
    fn a_converged_or_changed_group_is_named_and_dead_inits_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let fp = FakeProc::new(dir.path()).unwrap();
        let kernel = FakeKernel::new(fp.procfs());
        for (pid, cg) in [(10, "/a"), (11, "/b"), (12, "/c")] {
            fp.spawn(pid, 1000 + pid as u64, 0, cg).unwrap();
            kernel.create(pid, Scope::ThreadGroup).unwrap();
        }
        fp.spawn(13, 5, 0, "/d").unwrap(); // pid 13 reused: the cache says start time 1013
        let members = [
            member("a", "ga", 10, Some("/a")),
            member("b", "gb", 11, Some("/b")),
            member("c", "gc", 12, Some("/c")),
            member("reused", "gc", 13, Some("/d")),
            member("dead", "gd", 14, Some("/e")),
        ];
        let old = View::build(&members, &kernel, &fp.procfs());
        assert_eq!(old.gone(), ["reused", "dead"]);
        assert!(old.inits_alive(&fp.procfs()));
        assert!(old.changed_groups(&old.clone()).is_empty());
        let mut noted = old.clone();
        noted.set_cookie("a", 99);
        assert!(old.changed_groups(&noted).is_empty(), "a cookie noted on an event is not a build");
        kernel.create(10, Scope::ThreadGroup).unwrap(); // ga converged to a new cookie
        fp.kill(12, 0).unwrap(); // gc's only live member stopped
        let new = View::build(&members, &kernel, &fp.procfs());
        assert_eq!(new.gone(), ["c", "reused", "dead"]);
        assert_eq!(old.changed_groups(&new), BTreeSet::from(["ga".to_string(), "gc".to_string()]));
        assert!(!old.inits_alive(&fp.procfs()), "the init of c is gone");
        assert!(View::default().changed_groups(&new).len() == 2, "every group of a first view");
    }

    #[test]
    fn a_write_to_the_cache_changes_the_signature() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("cache.db");
        let none = Signature::of(&db);
        let store = crate::store::Store::open(&db).unwrap();
        let created = Signature::of(&db);
        assert_ne!(none, created);
        store.transaction(|tx| tx.upsert_member(&member("a", "g", 10, Some("/a")))).unwrap();
        assert_ne!(Signature::of(&db), created);
    }
}
