//! Catch-up after a (re)connect: NRI's `Synchronize` lists the pods and containers that already
//! run, and those that started while the plugin was away carry no injected hook. Each running app
//! container is decided as the injected hook would decide it at createRuntime
//! ([`ContainerInput::from_pod`]: the annotations the plugin injects, never the container's raw
//! ones) and run through the hook's own engine ([`crate::hook::run`]: idempotent,
//! identity-checked, under the state lock), so one that already has its group's cookie is left as
//! it is. The [`System`] it acts on is the one every command builds ([`System::new`]): in a
//! container with a cgroup namespace of its own, the cgroups it records are host paths, which the
//! follower and `reconcile` match exec'd processes against.
//!
//! The init's pid is NRI's `Container.pid` (field 12; NRI 0.6.1 has it and containerd 1.7 fills
//! it). When it is 0, the plugin reads the pid file containerd's runc shim keeps in the bundle,
//! `/run/containerd/io.containerd.runtime.v2.task/<namespace>/<id>/init.pid` (namespace `k8s.io`,
//! then `default`). With neither, the container is skipped and said so: one that is only created
//! (no task yet) is caught up at its StartContainer instead, which the plugin also subscribes to
//! and answers only once the container has its cookie. Such containers got no poststop hook
//! either: `gc` and the follower drop them from the cache after they exit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::engine::RelayOn;
use crate::hook::{self, Done};
use crate::kernel::CoreSched;
use crate::policy::Action;
use crate::policy::ContainerInput;
use crate::shim;
use crate::system::System;

use super::adjust;
use super::messages::{Container, PodSandbox, state};

/// containerd's runc shim's bundle root.
pub const CONTAINERD_TASK_ROOT: &str = "/run/containerd/io.containerd.runtime.v2.task";
/// containerd namespaces whose bundles are looked in for `init.pid`.
pub const CONTAINERD_NAMESPACES: [&str; 2] = ["k8s.io", "default"];

/// How a catch-up went.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Containers that got a cookie they lacked (or a group they had left).
    pub ensured: usize,
    /// Containers that had it already.
    pub already: usize,
    /// Containers given cookie 0 (policy `none`, disabled class).
    pub cleared: usize,
    /// Containers not acted on (not running, sandbox, no pid, `SYSTEM` class, …).
    pub skipped: usize,
    /// Containers whose run failed (logged one by one).
    pub failed: usize,
}

/// The init pid of a running container: NRI's, else containerd's `init.pid` under `task_root`.
pub fn init_pid(container: &Container, task_root: &Path) -> Option<i64> {
    if container.pid > 1 {
        return Some(i64::from(container.pid));
    }
    let pid = task_init_pid(&container.id, task_root)?;
    log::debug!(
        "catch-up: container {}: NRI gave no pid; containerd's init.pid says {pid}",
        container.id.escape_debug()
    );
    Some(pid)
}

/// The pid in containerd's `init.pid` of task `id` under `task_root` (any of its namespaces).
fn task_init_pid(id: &str, task_root: &Path) -> Option<i64> {
    CONTAINERD_NAMESPACES.iter().find_map(|ns| {
        let file: PathBuf = task_root.join(ns).join(id).join("init.pid");
        let text = std::fs::read_to_string(&file).ok()?;
        text.trim().parse::<i64>().ok().filter(|p| *p > 1 && *p <= i64::from(i32::MAX))
    })
}

/// Where the pod's shim is proven: the parent of the pod's sandbox process (containerd's
/// `init.pid` of the sandbox), else the parent of the container's init, which the shim reaps.
fn shim_proof(pod: &PodSandbox, init: i64, task_root: &Path) -> shim::Proof {
    let child = Some(pod.id.as_str()).filter(|id| !id.is_empty()).and_then(|id| task_init_pid(id, task_root));
    shim::Proof::ChildOf(child.unwrap_or(init) as crate::values::Pid)
}

/// The decision input of a running container (see the module header).
pub fn input(pod: &PodSandbox, c: &Container, pid: i64) -> ContainerInput {
    ContainerInput::from_pod(&adjust::pod_meta(pod), &adjust::container_meta(c), pid)
}

/// Gives every running app container of `containers` its group's cookie, through the hook.
/// `task_root` is containerd's ([`CONTAINERD_TASK_ROOT`]), for the pids NRI does not give.
pub fn catch_up<K: CoreSched>(
    pods: &[PodSandbox],
    containers: &[Container],
    config: &Config,
    sys: &System<K>,
    task_root: &Path,
) -> Summary {
    let by_id: BTreeMap<&str, &PodSandbox> = pods.iter().map(|p| (p.id.as_str(), p)).collect();
    let mut s = Summary::default();
    if let Err(e) = sys.kernel.probe()
        && e.is_unsupported()
    {
        log::warn!("catch-up skipped: {e}");
        s.skipped = containers.len();
        return s;
    }
    for c in containers {
        let no_pod = PodSandbox::default();
        let pod = by_id.get(c.pod_sandbox_id.as_str()).copied().unwrap_or(&no_pod);
        if !matches!(c.state, state::CREATED | state::RUNNING | state::PAUSED) || adjust::is_sandbox(pod, c) {
            s.skipped += 1;
            continue;
        }
        let Some(pid) = init_pid(c, task_root) else {
            if c.state == state::CREATED {
                // Created, its task not yet: the plugin catches it up at its StartContainer.
                log::info!(
                    "catch-up: container {} is created but has no init yet: caught up when it starts",
                    c.id.escape_debug()
                );
            } else {
                log::warn!(
                    "catch-up: container {}: no init pid from NRI or containerd's init.pid; skipped",
                    c.id.escape_debug()
                );
            }
            s.skipped += 1;
            continue;
        };
        let decision = match crate::policy::decide(&input(pod, c, pid), config) {
            Ok(d) => d,
            Err(e) => {
                log::warn!("catch-up: {e}; skipped");
                s.skipped += 1;
                continue;
            }
        };
        if decision.action == Action::Skip {
            log::debug!("catch-up: container {}: skipped: {}", c.id.escape_debug(), decision.reason);
            s.skipped += 1;
            continue;
        }
        let group = decision.group().unwrap_or("-");
        // A long-running process: its threads keep cookie 0, so each share gets a fresh thread.
        let proof = shim_proof(pod, pid, task_root);
        match hook::run_with(&decision, config, sys, RelayOn::FreshThread, proof) {
            Ok(Done::Ensured(o) | Done::EnsuredThenFailed { outcome: o, .. })
                if matches!(o.via, crate::engine::Via::AlreadySet) =>
            {
                log::debug!(
                    "catch-up: container {} (pid {pid}) already has group {group}'s cookie",
                    c.id.escape_debug()
                );
                s.already += 1;
            }
            Ok(Done::Ensured(o) | Done::EnsuredThenFailed { outcome: o, .. }) => {
                log::info!(
                    "catch-up: container {} (pid {pid}): group {group}, cookie {}",
                    c.id.escape_debug(),
                    crate::kernel::CookieHex(o.cookie)
                );
                s.ensured += 1;
            }
            Ok(Done::Cleared(_)) => {
                log::info!(
                    "catch-up: container {} (pid {pid}): cookie cleared ({})",
                    c.id.escape_debug(),
                    decision.reason
                );
                s.cleared += 1;
            }
            Ok(Done::Skipped | Done::Forgot(_) | Done::StopRecorded) => s.skipped += 1,
            Err(e) => {
                log::warn!("catch-up: container {} (pid {pid}): {}", c.id.escape_debug(), crate::error::Chain(&e));
                s.failed += 1;
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let dir = tempfile::tempdir().unwrap();
        let fp = crate::kernel::fake::FakeProc::new(dir.path().join("proc")).unwrap();
        let proc = fp.procfs();
        let kernel = crate::kernel::fake::FakeKernel::new(proc.clone());
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
        let sys = System {
            kernel,
            proc,
            cgroup_root: dir.path().to_path_buf(),
            state_dir: dir.path().join("state"),
            runtime_roots: Vec::new(),
        };
        let s = catch_up(&[pod], &containers, &Config::default(), &sys, dir.path());
        assert_eq!(s.ensured, 2, "{s:?}");
        let cookie = sys.kernel.get(4240).unwrap();
        assert_ne!(cookie, 0);
        assert_eq!(sys.kernel.get(4242).unwrap(), cookie, "the second shared the first's cookie");
        assert_eq!(sys.kernel.get(0).unwrap(), 0, "the plugin's own thread keeps cookie 0");
    }

    #[test]
    fn a_catch_up_gives_the_pods_shim_its_groups_cookie_found_through_the_sandbox_process() {
        let dir = tempfile::tempdir().unwrap();
        let fp = crate::kernel::fake::FakeProc::new(dir.path().join("proc")).unwrap();
        for (pid, comm, ppid) in [(500, "containerd-shim", 1), (700, "pause", 500), (4242, "sleep", 500)] {
            fp.spawn(pid, pid as u64, 0, &format!("/p{pid}")).unwrap();
            fp.set_lineage(pid, comm, ppid).unwrap();
        }
        let task = dir.path().join("k8s.io/sb");
        std::fs::create_dir_all(&task).unwrap();
        std::fs::write(task.join("init.pid"), "700").unwrap();
        let proc = fp.procfs();
        let kernel = crate::kernel::fake::FakeKernel::new(proc.clone());
        let pod = PodSandbox { id: "sb".into(), namespace: "ns".into(), ..Default::default() };
        let sys = System {
            kernel,
            proc,
            cgroup_root: dir.path().to_path_buf(),
            state_dir: dir.path().join("state"),
            runtime_roots: Vec::new(),
        };
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
        let proc = crate::procfs::ProcFs::default();
        let kernel = crate::kernel::fake::FakeKernel::new(proc.clone());
        let sys = System {
            kernel,
            proc,
            cgroup_root: dir.path().to_path_buf(),
            state_dir: dir.path().join("state"),
            runtime_roots: Vec::new(),
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
        let dir = tempfile::tempdir().unwrap();
        let fp = crate::kernel::fake::FakeProc::new(dir.path().join("proc")).unwrap();
        fp.spawn(4240, 1, 0, "/c1").unwrap();
        fp.spawn(4242, 2, 0, "/c2").unwrap();
        let proc = fp.procfs();
        let kernel = crate::kernel::fake::FakeKernel::new(proc.clone());
        let sys = System {
            kernel,
            proc,
            cgroup_root: dir.path().to_path_buf(),
            state_dir: dir.path().join("state"),
            runtime_roots: Vec::new(),
        };
        let pod = PodSandbox {
            id: "sb".into(),
            namespace: "tenant-a".into(),
            annotations: [("oci-coresched-hook/group".to_string(), "web".to_string())].into(),
            ..Default::default()
        };
        let containers =
            [running("c1", 4240, &[]), running("c2", 4242, &[("io.kubernetes.pod.namespace", "tenant-b")])];
        let s = catch_up(&[pod], &containers, &Config::default(), &sys, dir.path());
        assert_eq!(s, Summary { ensured: 2, ..Summary::default() });
        assert_eq!(sys.kernel.get(4242).unwrap(), sys.kernel.get(4240).unwrap(), "one cookie for the pod's group");
        let store = crate::store::Store::open(&sys.state_dir.join(crate::state_dir::DB_FILE)).unwrap();
        assert_eq!(store.member("c2").unwrap().unwrap().group, "tenant-a/web");
    }

    #[test]
    fn a_catch_up_in_a_cgroup_namespace_of_its_own_records_host_paths() {
        // The plugin in a container whose cgroup namespace is rooted at the host's
        // /kubepods/besteffort/podD/nri: /proc shows other cgroups relative to it.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proc");
        let fp = crate::kernel::fake::FakeProc::new(&root).unwrap();
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
        let kernel = crate::kernel::fake::FakeKernel::new(fp.procfs());
        let surroundings = crate::system::Surroundings {
            proc_root: root.clone(),
            cgroup_mount: mount,
            state_dir: dir.path().join("state"),
            runtime_roots: Vec::new(),
        };
        let sys = System::with_kernel(surroundings, kernel);
        let pod = PodSandbox { id: "sb".into(), namespace: "tenant-a".into(), ..Default::default() };
        let s = catch_up(&[pod], &[running("c1", 4240, &[])], &Config::default(), &sys, dir.path());
        assert_eq!(s.ensured, 1, "{s:?}");
        let store = crate::store::Store::open(&sys.state_dir.join(crate::state_dir::DB_FILE)).unwrap();
        let m = store.member("c1").unwrap().unwrap();
        assert_eq!(
            m.labels.cgroup.as_deref(),
            Some("/kubepods/besteffort/pod1/c1"),
            "a host path, as the hook records"
        );
    }
}
