//! The unit tests of `src/agent/follow/view.rs`.

use super::*;
use crate::host::kernel::Scope;
use crate::test_world::Ground;
use crate::values::Labels;

fn member(id: &str, group: &str, pid: i32, cg: Option<&str>) -> Member {
    Member {
        labels: Labels { cgroup: cg.map(str::to_string), ..Labels::default() },
        ..Member::new(id, group, pid, 1000 + pid as u64)
    }
}

#[test]
fn only_live_members_with_a_cookie_and_a_plain_cgroup_are_in_the_view() {
    let Ground { fp, kernel, .. } = Ground::new();
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
    let Ground { fp, kernel, .. } = Ground::new();
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
    let Ground { fp, kernel, .. } = Ground::new();
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
