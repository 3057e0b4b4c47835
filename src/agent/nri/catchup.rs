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
use crate::cookies::engine::RelayOn;
use crate::cookies::shim;
use crate::decide::policy::Action;
use crate::decide::policy::ContainerInput;
use crate::hook::{self, Done};
use crate::host::kernel::CoreSched;
use crate::host::system::System;

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
        let decision = match crate::decide::policy::decide(&input(pod, c, pid), config) {
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
                if matches!(o.via, crate::cookies::engine::Via::AlreadySet) =>
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
                    crate::host::kernel::CookieHex(o.cookie)
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
#[path = "catchup_tests.rs"]
mod tests;
