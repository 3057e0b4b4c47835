//! The membership model over the fake kernel: liveness in each of its states, the cgroup key, and
//! the owner rule as `reconcile` and the follower's view each reach it, for every cgroup path
//! shape seen in the field.

use std::path::PathBuf;

use super::*;
use crate::agent::follow::view::View;
use crate::cookies::engine::{Engine, EnsureRequest};
use crate::host::procfs::CgroupReader;
use crate::ops::reconcile::reconcile;
use crate::test_world::World;
use crate::values::{Labels, Pid};

#[test]
fn liveness_tells_alive_dead_reused_and_unreadable_apart() {
    let w = World::new();
    w.fp.spawn(100, 10, 0, "/a").unwrap();
    w.fp.spawn(200, 20, 0, "/b").unwrap();
    std::fs::create_dir_all(w.dir.path().join("proc/300")).unwrap();
    std::fs::write(w.dir.path().join("proc/300/stat"), "300 (x) S 1").unwrap();
    let at = |pid, start_time| liveness(&w.proc, TaskId { pid, start_time });
    assert!(matches!(at(100, 10), Liveness::Alive));
    assert!(matches!(at(200, 21), Liveness::Reused), "pid 200 now has another start time");
    assert!(matches!(at(400, 40), Liveness::Dead));
    assert!(matches!(at(300, 30), Liveness::Unreadable(_)), "a malformed stat says nothing");
    assert!(at(200, 21).is_gone() && at(400, 40).is_gone());
    assert!(!at(300, 30).is_gone() && !at(300, 30).is_alive(), "unreadable: neither dropped nor used");
    assert!(at(300, 30).known().is_err());
    assert!(at(100, 10).known().unwrap());
    assert!(!at(400, 40).known().unwrap());
}

#[test]
fn state_reads_the_cookie_of_alive_members_only() {
    let w = World::new();
    w.fp.spawn(100, 10, 0, "/a").unwrap();
    w.kernel.force(100, 0x77);
    let m = |pid, start_time| crate::store::Member::new("c", "g", pid, start_time);
    assert!(matches!(state(&w.proc, &w.kernel, &m(100, 10)), State::Alive(0x77)));
    assert!(matches!(state(&w.proc, &w.kernel, &m(100, 11)), State::Gone(Liveness::Reused)));
    assert!(matches!(state(&w.proc, &w.kernel, &m(101, 10)), State::Gone(Liveness::Dead)));
}

#[test]
fn cgroup_key_accepts_plain_absolute_paths_only() {
    let cases: &[(Option<&str>, Option<&str>)] = &[
        (Some("/kubepods/besteffort/pod1/c1"), Some("/kubepods/besteffort/pod1/c1")),
        (Some("/pod/c1/"), Some("/pod/c1")),
        (Some("//pod//c1"), None),
        (Some("/"), None),
        (Some(""), None),
        (None, None),
        (Some("pod/c1"), None),
        (Some("/../kubepods/pod1/c1"), None),
        (Some("/pod/./c1"), None),
    ];
    for (recorded, want) in cases {
        assert_eq!(crate::host::cgroup::key(*recorded).as_deref(), *want, "{recorded:?}");
    }
}

/// One path shape: the cached members (id, group, cgroup as recorded), the text of the process's
/// `/proc/PID/cgroup`, the cgroup directory listing the process (under the cgroup mount), and the
/// group whose cookie it must get.
struct Case {
    name: &'static str,
    members: &'static [(&'static str, &'static str, &'static str)],
    proc_cgroup: &'static str,
    listed_in: &'static str,
    want: Option<&'static str>,
}

const SYSTEMD_SCOPE: &str =
    "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-c1.scope";

const CASES: &[Case] = &[
    Case {
        name: "cgroupfs driver",
        members: &[("c1", "web", "/kubepods/besteffort/pod1/c1")],
        proc_cgroup: "0::/kubepods/besteffort/pod1/c1\n",
        listed_in: "/kubepods/besteffort/pod1/c1",
        want: Some("web"),
    },
    Case {
        name: "a sibling whose name extends the member's is not inside it",
        members: &[("c1", "web", "/kubepods/besteffort/pod1/c1")],
        proc_cgroup: "0::/kubepods/besteffort/pod1/c10\n",
        listed_in: "/kubepods/besteffort/pod1/c10",
        want: None,
    },
    Case {
        name: "systemd driver: a scope",
        members: &[("c1", "web", SYSTEMD_SCOPE)],
        proc_cgroup: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-c1.scope\n",
        listed_in: SYSTEMD_SCOPE,
        want: Some("web"),
    },
    Case {
        name: "recorded with a trailing slash",
        members: &[("c1", "web", "/pod/c1/")],
        proc_cgroup: "0::/pod/c1\n",
        listed_in: "/pod/c1",
        want: Some("web"),
    },
    Case {
        name: "podman: the init in the scope's nested container cgroup",
        members: &[("c1", "web", "/machine.slice/libpod-c1.scope/container")],
        proc_cgroup: "0::/machine.slice/libpod-c1.scope/container\n",
        listed_in: "/machine.slice/libpod-c1.scope/container",
        want: Some("web"),
    },
    Case {
        name: "podman: the scope above the member's cgroup is not the member's",
        members: &[("c1", "web", "/machine.slice/libpod-c1.scope/container")],
        proc_cgroup: "0::/machine.slice/libpod-c1.scope\n",
        listed_in: "/machine.slice/libpod-c1.scope",
        want: None,
    },
    Case {
        name: "nested members: the most specific wins (inside the inner one)",
        members: &[("pod", "tenant-a", "/kubepods/pod1"), ("inner", "tenant-b", "/kubepods/pod1/c2")],
        proc_cgroup: "0::/kubepods/pod1/c2/t\n",
        listed_in: "/kubepods/pod1/c2/t",
        want: Some("tenant-b"),
    },
    Case {
        name: "nested members: the most specific wins (beside the inner one)",
        members: &[("pod", "tenant-a", "/kubepods/pod1"), ("inner", "tenant-b", "/kubepods/pod1/c2")],
        proc_cgroup: "0::/kubepods/pod1/c1\n",
        listed_in: "/kubepods/pod1/c1",
        want: Some("tenant-a"),
    },
    Case {
        name: "one cgroup, two groups: nobody's",
        members: &[("a", "tenant-a", "/shared"), ("b", "tenant-b", "/shared")],
        proc_cgroup: "0::/shared\n",
        listed_in: "/shared",
        want: None,
    },
    Case {
        name: "one cgroup, one group",
        members: &[("a", "tenant-a", "/shared"), ("b", "tenant-a", "/shared")],
        proc_cgroup: "0::/shared\n",
        listed_in: "/shared",
        want: Some("tenant-a"),
    },
    Case {
        name: "a /..-relative path from a private cgroup namespace owns nothing and is owned by nothing",
        members: &[("ns", "tenant-b", "/../kubepods/pod1/c1"), ("pod", "tenant-a", "/kubepods/pod2")],
        proc_cgroup: "0::/../kubepods/pod1/c1\n",
        listed_in: "/kubepods/pod2/c1",
        want: None,
    },
    Case {
        name: "cgroup v1: the cpu hierarchy's path",
        members: &[("c1", "web", "/kubepods/pod1/c1")],
        proc_cgroup: "12:cpu,cpuacct:/kubepods/pod1/c1\n4:memory:/kubepods/pod1/c1\n1:name=systemd:/kubepods/pod1/c1\n",
        listed_in: "/kubepods/pod1/c1",
        want: Some("web"),
    },
    Case {
        name: "hybrid: the unified path first",
        members: &[("c1", "web", "/kubepods/pod1/c1")],
        proc_cgroup: "12:cpu,cpuacct:/elsewhere\n1:name=systemd:/kubepods/pod1/c1\n0::/kubepods/pod1/c1\n",
        listed_in: "/kubepods/pod1/c1",
        want: Some("web"),
    },
    Case {
        name: "a member recorded at the root owns nothing",
        members: &[("root", "web", "/")],
        proc_cgroup: "0::/x\n",
        listed_in: "/x",
        want: None,
    },
];

/// The process under test.
const P: Pid = 900;

fn cg_dir(w: &World, cgroup: &str) -> PathBuf {
    w.dir.path().join("cg").join(cgroup.trim_start_matches('/'))
}

/// Lists `pid` in the `cgroup.procs` of `cgroup` (a plain path) under the fake cgroup mount.
fn list(w: &World, cgroup: &str, pid: Pid) {
    let d = cg_dir(w, cgroup);
    std::fs::create_dir_all(&d).unwrap();
    let f = d.join("cgroup.procs");
    let mut text = std::fs::read_to_string(&f).unwrap_or_default();
    text.push_str(&format!("{pid}\n"));
    std::fs::write(f, text).unwrap();
}

/// The case's world: each member's init (in its recorded cgroup where that is a plain path)
/// ensured into its group by the engine, and the process at cookie 0.
fn world(case: &Case) -> World {
    let w = World::new();
    for (i, (id, group, recorded)) in case.members.iter().enumerate() {
        let pid = 100 * (i as Pid + 1);
        let home = crate::host::cgroup::key(Some(recorded)).unwrap_or_else(|| format!("/elsewhere-{id}"));
        w.fp.spawn(pid, 1000 + pid as u64, 0, &home).unwrap();
        list(&w, &home, pid);
        let labels = Labels { cgroup: Some(recorded.to_string()), ..Default::default() };
        let req = EnsureRequest { container_id: id.to_string(), group: group.to_string(), pid, labels };
        w.store.transaction(|tx| Engine::new(&w.kernel, &w.proc, tx).ensure(&req)).unwrap();
    }
    w.fp.spawn(P, 5, 0, "/placeholder").unwrap();
    std::fs::write(w.dir.path().join(format!("proc/{P}/cgroup")), case.proc_cgroup).unwrap();
    list(&w, case.listed_in, P);
    w
}

/// The group `reconcile` (dry run) would give the process's cookie from.
fn by_reconcile(w: &World) -> Option<String> {
    let r = w.store.transaction(|tx| reconcile(tx, &w.kernel, &w.proc, &w.dir.path().join("cg"), true)).unwrap();
    let groups: std::collections::BTreeSet<String> =
        r.members.iter().filter(|m| m.fixed.iter().any(|f| f.pid == P)).map(|m| m.group.clone()).collect();
    assert!(groups.len() <= 1, "reconcile gave pid {P} to two groups: {groups:?}");
    groups.into_iter().next()
}

/// The group the follower's view gives the process's cookie from, its cgroup read as an event's is.
fn by_follower(w: &World) -> Option<String> {
    let view = View::build(&w.store.all_members().unwrap(), &w.kernel, &w.proc);
    let mut reader = CgroupReader::new(&w.proc);
    let cg = reader.read(P).unwrap().expect("the process exists").to_string();
    view.owner(&cg).map(|m| m.group.clone())
}

#[test]
fn reconcile_and_the_follower_give_a_process_to_the_same_owner_for_every_path_shape() {
    for case in CASES {
        let w = world(case);
        let want = case.want.map(str::to_string);
        assert_eq!(by_reconcile(&w), want, "{}: reconcile's route", case.name);
        assert_eq!(by_follower(&w), want, "{}: the follower's route", case.name);
    }
}

/// The index answers exactly as [`owner`] for nested, shared and unrelated cgroups.
#[test]
fn the_owners_index_answers_as_owner_does() {
    let candidates = [
        ("/kubepods/pod1", "g1", 1),
        ("/kubepods/pod1/c1", "g1", 2),
        ("/kubepods/pod1/c2", "g2", 3),
        ("/kubepods/pod2/shared", "g1", 4),
        ("/kubepods/pod2/shared", "g2", 5),
        ("/kubepods/pod3/same", "g3", 6),
        ("/kubepods/pod3/same", "g3", 7),
    ];
    let index = Owners::new(candidates);
    for cg in [
        "/kubepods/pod1",
        "/kubepods/pod1/c1",
        "/kubepods/pod1/c1/sub/deeper",
        "/kubepods/pod1/c2",
        "/kubepods/pod1/c3",
        "/kubepods/pod1x",
        "/kubepods/pod2/shared",
        "/kubepods/pod2/shared/x",
        "/kubepods/pod2",
        "/kubepods/pod3/same/x",
        "/",
        "/other",
    ] {
        let want = owner(cg, candidates);
        let got = index.owner(cg).copied();
        // For a key two members of one group share, either handle is that group's.
        let same_group = |a: Option<i32>, b: Option<i32>| {
            let g = |i: Option<i32>| i.map(|i| candidates.iter().find(|c| c.2 == i).unwrap().1);
            g(a) == g(b)
        };
        assert!(same_group(got, want), "{cg}: index {got:?}, owner {want:?}");
    }
}
