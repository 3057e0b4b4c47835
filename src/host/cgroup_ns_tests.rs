//! The unit tests of `src/host/cgroup_ns.rs`.

use super::*;

/// A fake `/proc` with `self` and `1` (ns links and cgroup files) and a host cgroup tree.
fn world(
    own_ns: &str,
    init_ns: &str,
    own_shown: &str,
    init_shown: &str,
    host_dir: &str,
) -> (tempfile::TempDir, ProcFs) {
    let d = tempfile::tempdir().unwrap();
    let me = std::process::id().to_string();
    for (who, ns, cg) in [("self", own_ns, own_shown), (me.as_str(), own_ns, own_shown), ("1", init_ns, init_shown)] {
        let p = d.path().join("proc").join(who);
        std::fs::create_dir_all(p.join("ns")).unwrap();
        if !ns.is_empty() {
            std::os::unix::fs::symlink(ns, p.join("ns/cgroup")).unwrap();
        }
        std::fs::write(p.join("cgroup"), format!("0::{cg}\n")).unwrap();
    }
    let cg = d.path().join("cg");
    std::fs::create_dir_all(cg.join("kubepods/besteffort/pod2/c9")).unwrap();
    std::fs::write(cg.join("cgroup.procs"), "1\n").unwrap();
    std::fs::write(cg.join("kubepods/besteffort/pod2/c9/cgroup.procs"), "77\n").unwrap();
    std::fs::create_dir_all(cg.join(host_dir.trim_start_matches('/'))).unwrap();
    std::fs::write(cg.join(host_dir.trim_start_matches('/')).join("cgroup.procs"), format!("5\n{me}\n")).unwrap();
    let proc = ProcFs::new(d.path().join("proc"));
    (d, proc)
}

#[test]
fn the_host_namespace_needs_no_translation() {
    let (d, proc) = world("cgroup:[1]", "cgroup:[1]", "/kubepods/x", "/", "/kubepods/x");
    assert_eq!(host_root(&proc, &d.path().join("cg")).unwrap(), None);
    // pid 1's link unreadable (no CAP_SYS_PTRACE): its cgroup without `..` says the same.
    let (d, proc) = world("cgroup:[2]", "", "/kubepods/x", "/init.scope", "/kubepods/x");
    assert_eq!(host_root(&proc, &d.path().join("cg")).unwrap(), None);
}

#[test]
fn pid_1_unreadable_but_its_cgroup_climbs() {
    let (d, proc) = world("cgroup:[2]", "", "/", "/..", "/follow");
    assert_eq!(host_root(&proc, &d.path().join("cg")).unwrap().as_deref(), Some("/follow"));
}

#[test]
fn a_private_namespace_root_is_found_and_paths_become_host_paths() {
    let (d, proc) = world("cgroup:[2]", "cgroup:[1]", "/", "/../../../..", "/kubepods/burstable/pod1/follow");
    let root = host_root(&proc, &d.path().join("cg")).unwrap();
    assert_eq!(root.as_deref(), Some("/kubepods/burstable/pod1/follow"));
    let proc = proc.with_cgroup_ns_root(root.unwrap());
    let p77 = d.path().join("proc/77");
    std::fs::create_dir_all(&p77).unwrap();
    std::fs::write(p77.join("cgroup"), "0::/../../../besteffort/pod2/c9\n").unwrap();
    assert_eq!(proc.cgroup(77).unwrap().as_deref(), Some("/kubepods/besteffort/pod2/c9"));
    assert_eq!(proc.cgroup_as_shown(77).unwrap().as_deref(), Some("/../../../besteffort/pod2/c9"));
}

#[test]
fn an_own_cgroup_below_the_namespace_root_and_an_init_scope() {
    let (d, proc) = world("cgroup:[2]", "cgroup:[1]", "/sub", "/../../init.scope", "/system.slice/x.service/sub");
    assert_eq!(host_root(&proc, &d.path().join("cg")).unwrap().as_deref(), Some("/system.slice/x.service"));
}

#[test]
fn without_the_host_tree_it_says_what_to_mount() {
    let (d, proc) = world("cgroup:[2]", "cgroup:[1]", "/", "/../..", "/elsewhere/deeper/still");
    let e = host_root(&proc, &d.path().join("cg")).unwrap_err();
    assert!(e.to_string().contains("host's /sys/fs/cgroup"), "{e}");
}

#[test]
fn joining_climbs_but_never_above_the_root() {
    assert_eq!(crate::host::cgroup::join("/a/b/c", "/../../x"), "/a/x");
    assert_eq!(crate::host::cgroup::join("/a", "/../../../x"), "/x");
    assert_eq!(crate::host::cgroup::join("/a/b", "/"), "/a/b");
    assert_eq!(crate::host::cgroup::join("/", "/k/p"), "/k/p");
}
