//! The unit tests of `src/agent/nri/catchup.rs`.

use super::*;
use crate::test_world::{Ground, World};

#[test]
fn the_pid_is_nris_else_containerds_init_pid_file() {
    let dir = tempfile::tempdir().unwrap();
    let c = Container { id: "c1".into(), pid: 4242, ..Default::default() };
    assert_eq!(init_pid(&c, dir.path()), Some(4242));
    let c = Container { id: "c1".into(), ..Default::default() };
    assert_eq!(init_pid(&c, dir.path()), None);
    let bundle = dir.path().join("default/c1");
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::write(bundle.join("init.pid"), "777").unwrap();
    assert_eq!(init_pid(&c, dir.path()), Some(777));
    let bundle = dir.path().join("k8s.io/c1");
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::write(bundle.join("init.pid"), "888\n").unwrap();
    assert_eq!(init_pid(&c, dir.path()), Some(888), "k8s.io first");
    std::fs::write(bundle.join("init.pid"), "1").unwrap();
    assert_eq!(init_pid(&c, dir.path()), Some(777), "pid 1 is never a container's init here");
    let pid1 = Container { id: "c1".into(), pid: 1, ..Default::default() };
    assert_eq!(init_pid(&pid1, dir.path()), Some(777));
}

#[test]
fn a_catch_up_that_shares_leaves_the_plugins_thread_at_cookie_0() {
    let w = World::new();
    let (dir, fp) = (&w.dir, &w.fp);
    let pod = PodSandbox { id: "sb".into(), namespace: "ns".into(), ..Default::default() };
    let containers: Vec<Container> = [(1, 4240), (2, 4242)]
        .into_iter()
        .map(|(i, pid)| {
            fp.spawn(pid, 1, 0, &format!("/c{i}")).unwrap();
            Container {
                id: format!("c{i}"),
                pod_sandbox_id: "sb".into(),
                state: state::RUNNING,
                pid: pid as u32,
                annotations: [("oci-coresched-hook/group".to_string(), "web".to_string())].into(),
                ..Default::default()
            }
        })
        .collect();
    let sys = w.sys(dir.path().join("state"));
    let s = catch_up(&[pod], &containers, &Config::default(), &sys, dir.path());
    assert_eq!(s.ensured, 2, "{s:?}");
    let cookie = sys.kernel.get(4240).unwrap();
    assert_ne!(cookie, 0);
    assert_eq!(sys.kernel.get(4242).unwrap(), cookie, "the second shared the first's cookie");
    assert_eq!(sys.kernel.get(0).unwrap(), 0, "the plugin's own thread keeps cookie 0");
}

#[test]
fn a_catch_up_gives_the_pods_shim_its_groups_cookie_found_through_the_sandbox_process() {
    let w = World::new();
    let (dir, fp) = (&w.dir, &w.fp);
    for (pid, comm, ppid) in [(500, "containerd-shim", 1), (700, "pause", 500), (4242, "sleep", 500)] {
        fp.spawn(pid, pid as u64, 0, &format!("/p{pid}")).unwrap();
        fp.set_lineage(pid, comm, ppid).unwrap();
    }
    let task = dir.path().join("k8s.io/sb");
    std::fs::create_dir_all(&task).unwrap();
    std::fs::write(task.join("init.pid"), "700").unwrap();
    let pod = PodSandbox { id: "sb".into(), namespace: "ns".into(), ..Default::default() };
    let sys = w.sys(dir.path().join("state"));
    let c = running("c1", 4242, &[("oci-coresched-hook/group", "web")]);
    assert_eq!(shim_proof(&pod, 4242, dir.path()), shim::Proof::ChildOf(700), "the sandbox process first");
    let s = catch_up(std::slice::from_ref(&pod), &[c], &Config::default(), &sys, dir.path());
    assert_eq!(s.ensured, 1, "{s:?}");
    let cookie = sys.kernel.get(4242).unwrap();
    assert_ne!(cookie, 0);
    assert_eq!(sys.kernel.get(500).unwrap(), cookie, "the shim holds the group's cookie");
    // Without containerd's init.pid of the sandbox, the container's own init leads to it.
    std::fs::remove_file(task.join("init.pid")).unwrap();
    assert_eq!(shim_proof(&pod, 4242, dir.path()), shim::Proof::ChildOf(4242));
}

#[test]
fn stopped_and_sandbox_containers_are_skipped_without_touching_anything() {
    let pod = PodSandbox { id: "sb".into(), namespace: "ns".into(), ..Default::default() };
    let stopped = Container {
        id: "c1".into(),
        pod_sandbox_id: "sb".into(),
        state: state::STOPPED,
        pid: 99,
        ..Default::default()
    };
    let sandbox = Container {
        id: "sb".into(),
        pod_sandbox_id: "sb".into(),
        state: state::RUNNING,
        pid: 98,
        ..Default::default()
    };
    let unknown = Container { id: "c2".into(), state: state::UNKNOWN, pid: 97, ..Default::default() };
    let dir = tempfile::tempdir().unwrap();
    let proc = crate::host::procfs::ProcFs::default();
    let kernel = crate::host::kernel::fake::FakeKernel::new(proc.clone());
    // The real `/proc` (the pids are not looked at), so not the test world's.
    let sys = System {
        kernel,
        proc,
        cgroup_root: dir.path().to_path_buf(),
        state_dir: dir.path().join("state"),
        runtime_roots: Vec::new(),
        sys_root: dir.path().join("sys"),
    };
    let s = catch_up(&[pod], &[stopped, sandbox, unknown], &Config::default(), &sys, dir.path());
    assert_eq!(s, Summary { skipped: 3, ..Summary::default() });
    assert!(!sys.state_dir.exists(), "nothing was opened");
    let calls = sys.kernel.calls();
    assert!(calls.iter().all(|c| !c.starts_with("create") && !c.starts_with("share")), "{calls:?}");
}

fn running(id: &str, pid: i32, ann: &[(&str, &str)]) -> Container {
    Container {
        id: id.into(),
        pod_sandbox_id: "sb".into(),
        state: state::RUNNING,
        pid: pid as u32,
        annotations: ann.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        ..Default::default()
    }
}

#[test]
fn a_forged_container_namespace_leaves_a_caught_up_container_in_its_pods_group() {
    let w = World::new();
    let (dir, fp) = (&w.dir, &w.fp);
    fp.spawn(4240, 1, 0, "/c1").unwrap();
    fp.spawn(4242, 2, 0, "/c2").unwrap();
    let sys = w.sys(dir.path().join("state"));
    let pod = PodSandbox {
        id: "sb".into(),
        namespace: "tenant-a".into(),
        annotations: [("oci-coresched-hook/group".to_string(), "web".to_string())].into(),
        ..Default::default()
    };
    let containers = [running("c1", 4240, &[]), running("c2", 4242, &[("io.kubernetes.pod.namespace", "tenant-b")])];
    let s = catch_up(&[pod], &containers, &Config::default(), &sys, dir.path());
    assert_eq!(s, Summary { ensured: 2, ..Summary::default() });
    assert_eq!(sys.kernel.get(4242).unwrap(), sys.kernel.get(4240).unwrap(), "one cookie for the pod's group");
    let store = crate::store::Store::open(&sys.state_dir.join(crate::host::state_dir::DB_FILE)).unwrap();
    assert_eq!(store.member("c2").unwrap().unwrap().group, "tenant-a/web");
}

#[test]
fn a_catch_up_in_a_cgroup_namespace_of_its_own_records_host_paths() {
    // The plugin in a container whose cgroup namespace is rooted at the host's
    // /kubepods/besteffort/podD/nri: /proc shows other cgroups relative to it.
    let Ground { dir, fp, kernel, .. } = Ground::new();
    let root = dir.path().join("proc");
    let me = std::process::id() as crate::values::Pid;
    fp.spawn(1, 1, 0, "/../../../..").unwrap();
    fp.spawn(me, 5, 0, "/").unwrap();
    fp.spawn(4240, 7, 0, "/../../pod1/c1").unwrap();
    for (who, ns) in
        [("self", "cgroup:[4026532000]"), (&me.to_string(), "cgroup:[4026532000]"), ("1", "cgroup:[4026531835]")]
    {
        std::fs::create_dir_all(root.join(who).join("ns")).unwrap();
        std::os::unix::fs::symlink(ns, root.join(who).join("ns/cgroup")).unwrap();
    }
    let mount = dir.path().join("cgroup");
    let own = mount.join("kubepods/besteffort/podD/nri");
    std::fs::create_dir_all(&own).unwrap();
    std::fs::create_dir_all(mount.join("kubepods/besteffort/pod1/c1")).unwrap();
    std::fs::write(mount.join("cgroup.procs"), "1\n").unwrap();
    std::fs::write(own.join("cgroup.procs"), format!("{me}\n")).unwrap();
    let surroundings = crate::host::system::Surroundings {
        proc_root: root.clone(),
        cgroup_mount: mount,
        state_dir: dir.path().join("state"),
        runtime_roots: Vec::new(),
        sys_root: dir.path().join("sys"),
        sched_ext_guard: true,
    };
    let sys = System::with_kernel(surroundings, kernel);
    let pod = PodSandbox { id: "sb".into(), namespace: "tenant-a".into(), ..Default::default() };
    let s = catch_up(&[pod], &[running("c1", 4240, &[])], &Config::default(), &sys, dir.path());
    assert_eq!(s.ensured, 1, "{s:?}");
    let store = crate::store::Store::open(&sys.state_dir.join(crate::host::state_dir::DB_FILE)).unwrap();
    let m = store.member("c1").unwrap().unwrap();
    assert_eq!(m.labels.cgroup.as_deref(), Some("/kubepods/besteffort/pod1/c1"), "a host path, as the hook records");
}
