//! The system a run acts on, described once and built in one place: the kernel handle, `/proc`,
//! the cgroup mount, the state dir and the runtimes' state directories. The hook, the NRI plugin and its catch-up, the follower
//! and every operator command get theirs from [`System::new`] over the [`Surroundings`] of the
//! process, so none of them reads `/proc` differently from the others.
//!
//! The one thing that differs between places a command runs is the cgroup namespace. In a
//! container with a cgroup namespace of its own (the DaemonSet's), `/proc/PID/cgroup` shows paths
//! relative to that namespace, while the hook, run by the runtime on the host, records host
//! paths. [`System::new`] asks [`crate::host::cgroup_ns`] for the namespace's host root, so
//! [`ProcFs::cgroup`] gives host paths wherever the process runs.

use std::fmt;
use std::path::PathBuf;

use crate::config::Config;
use crate::host::kernel::{self, CoreSched};
use crate::host::procfs::ProcFs;
use crate::host::runtimes::RuntimeRoot;

/// Where a process finds the system: the `/proc` tree, the cgroup mount, the state dir and the
/// runtimes' state directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Surroundings {
    /// The `/proc` tree (`/proc`).
    pub proc_root: PathBuf,
    /// The cgroup mount ([`crate::host::cgroup::root`]); in a private cgroup namespace, the host's
    /// tree mounted there lets `/proc` paths be mapped to host paths.
    pub cgroup_mount: PathBuf,
    /// The state dir (`--state-dir`, else [`crate::host::state_dir::choice::choose`]).
    pub state_dir: PathBuf,
    /// The runtimes' state directories a cache that lacks containers is refilled from.
    pub runtime_roots: Vec<RuntimeRoot>,
    /// The sysfs tree (`/sys`): the sched_ext state, SMT and the CPU's vulnerabilities.
    pub sys_root: PathBuf,
    /// Whether the kernel calls go through the sched_ext guard (the config's `sched_ext_guard`).
    pub sched_ext_guard: bool,
}

impl Surroundings {
    /// This process's: `/proc`, [`crate::host::cgroup::root`], `state_dir`,
    /// [`RuntimeRoot::of_this_process`], `/sys` and the guard as `config` sets it.
    pub fn of_this_process(state_dir: PathBuf, config: &Config) -> Self {
        Self {
            proc_root: PathBuf::from("/proc"),
            cgroup_mount: crate::host::cgroup::root(),
            state_dir,
            runtime_roots: RuntimeRoot::of_this_process(),
            sys_root: sys_root(),
            sched_ext_guard: config.sched_ext_guard,
        }
    }
}

/// `/sys`; builds with the non-default `fake-kernel` feature read `OCH_FAKE_SYS` instead when it
/// is set (tests of the guard over a fake sysfs tree); a release build has no such code path.
pub fn sys_root() -> PathBuf {
    #[cfg(feature = "fake-kernel")]
    if let Some(dir) = std::env::var_os("OCH_FAKE_SYS") {
        return PathBuf::from(dir);
    }
    PathBuf::from("/sys")
}

/// The kernel, `/proc`, the cgroup mount and the state dir one run acts on.
pub struct System<K = Box<dyn CoreSched>> {
    /// The core-scheduling calls.
    pub kernel: K,
    /// `/proc`, whose [`ProcFs::cgroup`] gives host paths.
    pub proc: ProcFs,
    /// The cgroup mount.
    pub cgroup_root: PathBuf,
    /// The state dir.
    pub state_dir: PathBuf,
    /// The runtimes' state directories.
    pub runtime_roots: Vec<RuntimeRoot>,
    /// The sysfs tree.
    pub sys_root: PathBuf,
}

impl<K> fmt::Debug for System<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("System")
            .field("proc", &self.proc)
            .field("cgroup_root", &self.cgroup_root)
            .field("state_dir", &self.state_dir)
            .field("runtime_roots", &self.runtime_roots)
            .field("sys_root", &self.sys_root)
            .finish_non_exhaustive()
    }
}

impl System {
    /// The system of `surroundings` with the kernel the binary uses, behind the sched_ext guard
    /// unless the config opted out ([`kernel::guarded`]).
    pub fn new(surroundings: Surroundings) -> Self {
        let guard = surroundings.sched_ext_guard.then(|| surroundings.sys_root.clone());
        Self::with_kernel(surroundings, kernel::guarded(guard))
    }
}

impl<K> System<K> {
    /// The system of `surroundings` over `kernel`: `/proc` mapped to host cgroup paths when this
    /// process has a cgroup namespace of its own ([`crate::host::cgroup_ns::host_procfs`]).
    pub fn with_kernel(surroundings: Surroundings, kernel: K) -> Self {
        let Surroundings { proc_root, cgroup_mount, state_dir, runtime_roots, sys_root, sched_ext_guard: _ } =
            surroundings;
        let proc = crate::host::cgroup_ns::host_procfs(ProcFs::new(proc_root), &cgroup_mount);
        Self { kernel, proc, cgroup_root: cgroup_mount, state_dir, runtime_roots, sys_root }
    }
}
