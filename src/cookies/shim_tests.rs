//! The shim is found only by proof, and follows its pod's group until the pod's containers
//! disagree (fake kernel, fake `/proc`).

use super::*;
use crate::host::kernel::fake::{FakeKernel, FakeProc};
use crate::test_world::{Ground, World};

struct Env {
    _dir: tempfile::TempDir,
    fp: FakeProc,
    kernel: FakeKernel,
    store: Store,
}

const SHIM: Pid = 500;
const RUNTIME: Pid = 600;

fn env() -> Env {
    let (Ground { dir, fp, kernel, .. }, store) = World::new().into_parts();
    fp.spawn(SHIM, 50, 0, "/system.slice/containerd.service").unwrap();
    fp.set_lineage(SHIM, "containerd-shim", 1).unwrap();
    fp.spawn(RUNTIME, 60, 0, "/system.slice/containerd.service").unwrap();
    fp.set_lineage(RUNTIME, "runc", SHIM).unwrap();
    Env { _dir: dir, fp, kernel, store }
}

impl Env {
    /// A container init `pid` of `group`, ensured as the hook does.
    fn container(&self, id: &str, pid: Pid, group: &str) -> u64 {
        self.fp.spawn(pid, pid as u64, 0, &format!("/pods/{id}")).unwrap();
        self.fp.set_lineage(pid, "sleep", SHIM).unwrap();
        let proc = self.fp.procfs();
        let req = EnsureRequest { container_id: id.into(), group: group.into(), pid, labels: Labels::default() };
        self.store.transaction(|tx| Engine::new(&self.kernel, &proc, tx).ensure(&req)).unwrap().cookie
    }

    /// Wires the shim with `group`, whose cookie the container just got is `cookie`.
    fn wire(&self, group: &str, cookie: u64) -> Result<Wired, EngineError> {
        let proc = self.fp.procfs();
        let shim = find(&proc, Proof::Runtime(RUNTIME)).unwrap().expect("the shim is proven");
        self.store
            .transaction(|tx| wire(&Engine::new(&self.kernel, &proc, tx), tx, &proc, shim, "sb1", (group, cookie)))
    }

    fn shim_cookie(&self) -> u64 {
        self.kernel.get(SHIM).unwrap()
    }
}

#[test]
fn the_shim_is_found_only_through_a_runtime_or_a_child_it_reaps() {
    let e = env();
    let proc = e.fp.procfs();
    let shim = Some(TaskId { pid: SHIM, start_time: 50 });
    assert_eq!(find(&proc, Proof::Runtime(RUNTIME)).unwrap(), shim, "runc's parent");
    e.fp.set_lineage(RUNTIME, "crun", SHIM).unwrap();
    assert_eq!(find(&proc, Proof::Runtime(RUNTIME)).unwrap(), shim, "crun's parent");
    e.fp.spawn(700, 70, 0, "/pods/c1").unwrap();
    e.fp.set_lineage(700, "pause", SHIM).unwrap();
    assert_eq!(find(&proc, Proof::ChildOf(700)).unwrap(), shim, "the parent of the sandbox process");

    // Podman: the runtime's parent is conmon. A shell running runc by hand. A hook whose parent
    // is not a runtime at all. A child whose parent is not a shim. Processes that are gone.
    e.fp.spawn(800, 80, 0, "/").unwrap();
    for (comm, parent) in [("conmon", 800), ("bash", 800)] {
        e.fp.set_lineage(800, comm, 1).unwrap();
        e.fp.set_lineage(RUNTIME, "runc", parent).unwrap();
        assert_eq!(find(&proc, Proof::Runtime(RUNTIME)).unwrap(), None, "runtime under {comm}");
    }
    e.fp.set_lineage(RUNTIME, "containerd-shim", SHIM).unwrap();
    assert_eq!(find(&proc, Proof::Runtime(RUNTIME)).unwrap(), None, "the hook's parent must be a runtime");
    e.fp.set_lineage(700, "pause", 800).unwrap();
    assert_eq!(find(&proc, Proof::ChildOf(700)).unwrap(), None, "a child of conmon");
    assert_eq!(find(&proc, Proof::ChildOf(999)).unwrap(), None, "no such child");
    assert_eq!(find(&proc, Proof::Runtime(999)).unwrap(), None, "no such runtime");
    assert_eq!(find(&proc, Proof::None).unwrap(), None);
}

#[test]
fn the_shim_joins_its_pods_group_and_a_second_container_changes_nothing() {
    let e = env();
    let cookie = e.container("c1", 4242, "tenant-a/web");
    let w = e.wire("tenant-a/web", cookie).unwrap();
    assert_eq!((w.group.as_str(), w.cookie, w.changed), ("tenant-a/web", cookie, true));
    assert_eq!(e.shim_cookie(), cookie, "processes the shim spawns inherit the group's cookie");
    let row = e.store.member(&member_id("sb1")).unwrap().unwrap();
    assert_eq!((row.pid, row.start_time, row.labels.cgroup.as_deref()), (SHIM, 50, None), "no cgroup to walk");

    let again = e.container("c2", 4343, "tenant-a/web");
    assert_eq!(again, cookie);
    let before = e.kernel.calls().len();
    let w = e.wire("tenant-a/web", again).unwrap();
    let calls = e.kernel.calls()[before..].to_vec();
    assert_eq!(calls, [format!("get {SHIM}")], "a shim that holds the cookie is checked, not the group walked again");
    assert!(!w.changed);
    assert_eq!(e.shim_cookie(), cookie);
}

#[test]
fn a_pod_whose_containers_disagree_gives_its_shim_a_cookie_of_its_own_for_good() {
    let e = env();
    let web = e.container("c1", 4242, "tenant-a/web");
    e.wire("tenant-a/web", web).unwrap();
    let solo = e.container("c2", 4343, "tenant-a/container:c2");
    let w = e.wire("tenant-a/container:c2", solo).unwrap();
    assert_eq!(w.group, "shim:sb1");
    let own = e.shim_cookie();
    assert!(own != 0 && own != web && own != solo, "own {own:#x} web {web:#x} solo {solo:#x}");
    assert_eq!(e.kernel.get(4242).unwrap(), web, "the containers keep their groups' cookies");
    assert_eq!(e.kernel.get(4343).unwrap(), solo);
    // Sticky: a later container of the first group does not take the shim back.
    let c3 = e.container("c3", 4444, "tenant-a/web");
    let w = e.wire("tenant-a/web", c3).unwrap();
    assert_eq!((w.group.as_str(), e.shim_cookie()), ("shim:sb1", own));
    assert!(e.store.members("tenant-a/web").unwrap().iter().all(|m| m.container_id != member_id("sb1")));
}

#[test]
fn a_new_shim_for_the_sandbox_replaces_the_row_of_one_that_exited() {
    let e = env();
    let web = e.container("c1", 4242, "tenant-a/web");
    e.wire("tenant-a/web", web).unwrap();
    // The old shim's row claims another group: it must not make the new shim "disagree".
    e.store
        .transaction(|tx| {
            tx.upsert_member(&Member { cookie: 7, ..Member::new(member_id("sb1"), "tenant-a/other", SHIM, 49) })
        })
        .unwrap();
    e.fp.kill(SHIM, 0).unwrap();
    e.fp.spawn(SHIM, 51, 0, "/system.slice/containerd.service").unwrap();
    e.fp.set_lineage(SHIM, "containerd-shim", 1).unwrap();
    let w = e.wire("tenant-a/web", web).unwrap();
    assert_eq!((w.group.as_str(), w.cookie), ("tenant-a/web", web));
    let row = e.store.member(&member_id("sb1")).unwrap().unwrap();
    assert_eq!((row.group.as_str(), row.start_time), ("tenant-a/web", 51));
}

#[test]
fn a_shim_that_exited_after_its_proof_is_not_touched() {
    let e = env();
    let web = e.container("c1", 4242, "tenant-a/web");
    let proc = e.fp.procfs();
    let shim = find(&proc, Proof::Runtime(RUNTIME)).unwrap().unwrap();
    e.fp.spawn(SHIM, 99, 0, "/").unwrap(); // the pid now names another process
    let err = e
        .store
        .transaction(|tx| wire(&Engine::new(&e.kernel, &proc, tx), tx, &proc, shim, "sb1", ("tenant-a/web", web)))
        .unwrap_err();
    assert!(matches!(err, EngineError::TargetGone(SHIM)), "{err:?}");
    assert_eq!(e.kernel.get(SHIM).unwrap(), 0);
    assert!(e.store.member(&member_id("sb1")).unwrap().is_none());
}

#[test]
fn a_cleared_container_leaves_its_pods_shim_at_cookie_0_for_good() {
    let e = env();
    let web = e.container("c1", 4242, "tenant-a/web");
    e.wire("tenant-a/web", web).unwrap();
    assert_ne!(e.shim_cookie(), 0);
    let proc = e.fp.procfs();
    let shim = find(&proc, Proof::Runtime(RUNTIME)).unwrap().unwrap();
    let clear = || e.store.transaction(|tx| clear(&Engine::new(&e.kernel, &proc, tx), tx, &proc, shim, "sb1"));
    let c = clear().unwrap();
    assert_eq!((c.group.as_str(), c.changed), ("shim:sb1:cleared", true));
    assert_eq!(e.shim_cookie(), 0, "the cleared container's exec'd processes start at 0");
    assert!(e.store.members("tenant-a/web").unwrap().iter().all(|m| m.container_id != member_id("sb1")));
    // A later container of a group does not give it a cookie again; clearing again changes nothing.
    let c3 = e.container("c3", 4444, "tenant-a/web");
    let w = e.wire("tenant-a/web", c3).unwrap();
    assert_eq!((w.group.as_str(), w.changed, e.shim_cookie()), ("shim:sb1:cleared", false, 0));
    assert!(!clear().unwrap().changed);
}

#[test]
fn a_lost_shim_row_goes_to_the_group_whose_cookie_the_shim_holds() {
    let pod = |pairs: &[(&str, Cookie)]| -> BTreeMap<String, Cookie> {
        pairs.iter().map(|(g, c)| (g.to_string(), *c)).collect()
    };
    let agree = pod(&[("t/web", 7)]);
    assert_eq!(lost_row_group("sb", 7, &agree, false).as_deref(), Some("t/web"));
    assert_eq!(lost_row_group("sb", 0, &agree, false), None, "at 0 and never cleared: the next ensure wires it");
    assert_eq!(lost_row_group("sb", 0, &agree, true), Some(cleared_group("sb")), "at 0 for a cleared container");
    assert_eq!(lost_row_group("sb", 7, &agree, true).as_deref(), Some("t/web"), "what it holds decides");
    let disagree = pod(&[("t/web", 7), ("t/db", 8)]);
    assert_eq!(lost_row_group("sb", 8, &disagree, false).as_deref(), Some("t/db"));
    assert_eq!(lost_row_group("sb", 9, &disagree, false), Some(own_group("sb")), "a cookie of its own");
    let split = pod(&[("t/web", 7), ("t/db", 7)]);
    assert_eq!(lost_row_group("sb", 7, &split, false), None, "two groups hold it");
    assert_eq!(lost_row_group("sb", 9, &BTreeMap::new(), false), Some(own_group("sb")));
}
