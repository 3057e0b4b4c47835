//! The unit tests of `src/host/cgroup.rs`.

use super::*;

#[test]
fn cgroup_prefers_unified_then_v1_cpu() {
    let v2 = "0::/kubepods.slice/pod1/cri-abc\n";
    assert_eq!(parse_proc_file(v2).as_deref(), Some("/kubepods.slice/pod1/cri-abc"));
    let hybrid = "12:cpu,cpuacct:/docker/x\n1:name=systemd:/docker/x\n0::/docker/x2\n";
    assert_eq!(parse_proc_file(hybrid).as_deref(), Some("/docker/x2"));
    let v1 = "4:memory:/a\n3:cpuacct,cpu:/b\n";
    assert_eq!(parse_proc_file(v1).as_deref(), Some("/b"));
    assert_eq!(parse_proc_file("garbage"), None);
}

#[test]
fn writes_idle_and_refuses_odd_paths() {
    let root = tempfile::tempdir().unwrap();
    let cg = root.path().join("kubepods/besteffort/pod1/c1");
    std::fs::create_dir_all(&cg).unwrap();
    std::fs::write(cg.join("cpu.idle"), "0").unwrap();
    set_idle(root.path(), "/kubepods/besteffort/pod1/c1").unwrap();
    assert_eq!(std::fs::read_to_string(cg.join("cpu.idle")).unwrap(), "1");
    assert!(matches!(set_idle(root.path(), "/kubepods/x"), Err(CgroupError::NoIdleFile(_))));
    assert!(matches!(set_idle(root.path(), "/a/../../etc"), Err(CgroupError::BadPath(_))));
    assert!(matches!(set_idle(root.path(), "relative"), Err(CgroupError::BadPath(_))));
}

#[test]
fn restore_idle_writes_only_a_reset_value() {
    let root = tempfile::tempdir().unwrap();
    let cg = root.path().join("k/c.scope");
    std::fs::create_dir_all(&cg).unwrap();
    std::fs::write(cg.join("cpu.idle"), "1\n").unwrap();
    assert_eq!(restore_idle(root.path(), "/k/c.scope").unwrap(), None, "already 1");
    std::fs::write(cg.join("cpu.idle"), "0\n").unwrap();
    assert_eq!(restore_idle(root.path(), "/k/c.scope").unwrap(), Some(cg.join("cpu.idle")));
    assert_eq!(std::fs::read_to_string(cg.join("cpu.idle")).unwrap(), "1");
    assert_eq!(restore_idle(root.path(), "/k/gone.scope").unwrap(), None, "a stopped container");
    assert!(matches!(restore_idle(root.path(), "/k/../etc"), Err(CgroupError::BadPath(_))));
}

#[test]
fn the_idle_cgroup_is_the_containers_unit_under_systemd() {
    let runc = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-abc.scope";
    let crun = format!("{runc}/container");
    let path = Some("kubepods-besteffort-pod1.slice:cri-containerd:abc");
    assert_eq!(idle_target(runc, path), runc);
    assert_eq!(idle_target(&crun, path), runc, "crun's child cgroup: the scope it is in");
    // podman's libpod scope, a unit named whole, no prefix.
    assert_eq!(
        idle_target("/machine.slice/libpod-x.scope/container", Some("machine.slice:libpod:x")),
        "/machine.slice/libpod-x.scope"
    );
    assert_eq!(idle_target("/s.slice/x.scope/container", Some("s.slice::x")), "/s.slice/x.scope");
    // cgroupfs: the path itself; a systemd-form path that names no component of it changes nothing.
    assert_eq!(
        idle_target("/kubepods/besteffort/pod1/abc", Some("/kubepods/besteffort/pod1/abc")),
        "/kubepods/besteffort/pod1/abc"
    );
    assert_eq!(idle_target("/a/b.scope/container", Some("s.slice:p:other")), "/a/b.scope/container");
    assert_eq!(idle_target("/a/b", None), "/a/b");
    assert_eq!(idle_target("/a/b", Some("a:b")), "/a/b");
}

#[test]
fn dir_picks_the_hierarchy_and_refuses_odd_paths() {
    let root = tempfile::tempdir().unwrap();
    let v1 = root.path().join("cpu,cpuacct/docker/x");
    std::fs::create_dir_all(&v1).unwrap();
    std::fs::write(v1.join("cgroup.procs"), "").unwrap();
    assert_eq!(dir(root.path(), "/docker/x"), Some(v1));
    let v2 = root.path().join("docker/x");
    std::fs::create_dir_all(&v2).unwrap();
    std::fs::write(v2.join("cgroup.procs"), "").unwrap();
    assert_eq!(dir(root.path(), "/docker/x/"), Some(v2));
    assert_eq!(dir(root.path(), "/"), None);
    assert_eq!(dir(root.path(), "/docker/../docker/x"), None);
    assert_eq!(dir(root.path(), "docker/x"), None);
    assert_eq!(dir(root.path(), "/nope"), None);
}

#[test]
fn procs_walks_descendants() {
    let root = tempfile::tempdir().unwrap();
    let c = root.path().join("c");
    std::fs::create_dir_all(c.join("sub/deeper")).unwrap();
    std::fs::write(c.join("cgroup.procs"), "10\n12\n").unwrap();
    std::fs::write(c.join("sub/cgroup.procs"), "11\n10\n").unwrap();
    std::fs::write(c.join("sub/deeper/cgroup.procs"), "").unwrap();
    std::fs::write(c.join("cpu.idle"), "0").unwrap();
    assert_eq!(procs(&c).unwrap(), vec![10, 11, 12]);
    assert_eq!(procs(&root.path().join("gone")).unwrap(), Vec::<Pid>::new());
    assert!(within("/a/b", "/a"));
    assert!(within("/a", "/a/"));
    assert!(!within("/ab", "/a"));
}
