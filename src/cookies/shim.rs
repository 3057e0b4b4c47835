//! The pod's shim. containerd runs one `containerd-shim-runc-v2` per pod, and the shim spawns
//! every process that enters the pod after it was created: exec'd processes (CRI `ExecSync` and
//! `Exec`, so exec probes and `kubectl exec`) and the pod's later containers. A process inherits
//! its parent's cookie at fork, so while the shim holds the pod's group cookie each of them runs
//! under it from its first instruction, and the follower has no race to win.
//!
//! - **Found only by proof** ([`find`]): from the hook, the hook's parent is the runtime (`runc`
//!   or `crun`) and the runtime's parent is a `containerd-shim*` process; from the NRI catch-up,
//!   the parent of the pod's sandbox process (or of the container's init, which the shim reaps)
//!   is one. Anything else (podman's conmon, a shell running runc) has no shim and is left alone.
//! - **Kept as a member** named [`member_id`] (`shim:<sandbox id>`, which no container id can
//!   be), without a cgroup: the engine gives it its cookie as it gives a container's init
//!   theirs (identity by pid and start time, shares through the verified relay, convergence
//!   with the group), every join and `gc` drop the row once the shim exited, and neither
//!   `reconcile` nor the follower walks a cgroup for it.
//! - **Which cookie** ([`wire`], [`clear`]), each state kept for the rest of the shim's life:
//!   - the group of the pod's app containers while they agree;
//!   - a cookie of its own once two of them are in different groups, so a process it spawns
//!     shares a core with nothing outside the pod until the follower gives it its container's
//!     group;
//!   - cookie 0 once one of them is decided to run without a cookie (policy `none`, a disabled
//!     QoS class), so that container's exec'd processes start at 0 as it wants; the other
//!     containers' exec'd processes are then the follower's, as on an engine without a shim.
//!
//!   The sandbox (pause) container does not move the shim.
//! - **A lost row** ([`lost_row_group`]): a rebuild finds the shim from the pod's containers and
//!   records it in the group whose cookie it holds, so that a cache lost and refilled does not
//!   leave a shim holding its pod's cookie outside every member.

use std::collections::BTreeMap;

use crate::cookies::engine::{Engine, EngineError, EnsureOutcome, EnsureRequest, Via};
use crate::cookies::groups;
use crate::cookies::membership;
use crate::host::kernel::CoreSched;
use crate::host::procfs::{ProcFs, TaskId};
use crate::store::{Member, Store, Txn};
use crate::values::{Cookie, Labels, Pid};

/// What a shim's `comm` starts with (`containerd-shim-runc-v2` shows as `containerd-shim`:
/// `comm` keeps 15 bytes).
pub const SHIM_COMM: &str = "containerd-shim";

/// The runtimes whose parent may be a shim, as `comm` shows them.
pub const RUNTIMES: [&str; 2] = ["runc", "crun"];

/// Where to look for a pod's shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// Nowhere: the caller has no shim to offer (tests, benchmarks, operator commands).
    None,
    /// The hook's parent, which must be a runtime ([`RUNTIMES`]) whose parent is the shim.
    Runtime(Pid),
    /// A process the shim spawned and reaps (the pod's sandbox process, a container's init),
    /// whose parent must be the shim.
    ChildOf(Pid),
}

/// The shim that `proof` leads to, when it holds: `None` when a link is missing or is not the
/// process it must be.
pub fn find(proc: &ProcFs, proof: Proof) -> std::io::Result<Option<TaskId>> {
    let parent = match proof {
        Proof::None => return Ok(None),
        Proof::Runtime(runtime) => match proc.lineage(runtime)? {
            Some(r) if RUNTIMES.contains(&r.comm.as_str()) => r.ppid,
            _ => return Ok(None),
        },
        Proof::ChildOf(child) => match proc.lineage(child)? {
            Some(c) => c.ppid,
            None => return Ok(None),
        },
    };
    Ok(proc.lineage(parent)?.filter(|p| p.comm.starts_with(SHIM_COMM)).map(|p| p.id))
}

/// The cache row of the shim of sandbox `sandbox`.
pub fn member_id(sandbox: &str) -> String {
    format!("shim:{sandbox}")
}

/// The group a shim is in once its pod's containers disagree: a cookie of its own.
fn own_group(sandbox: &str) -> String {
    format!("shim:{sandbox}")
}

/// The group a shim is recorded in, at cookie 0, once one of its pod's containers runs without a
/// cookie (no engine ever ensures into it): [`groups::cleared_shim_group`], which also recognises it.
fn cleared_group(sandbox: &str) -> String {
    groups::cleared_shim_group(sandbox)
}

/// What [`wire`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wired {
    /// The group whose cookie the shim now holds (the container's, its own, or the cleared one).
    pub group: String,
    /// The shim's cookie.
    pub cookie: Cookie,
    /// Whether this call changed it.
    pub changed: bool,
}

/// The shim's row when it names this very shim (a row of an earlier shim of the sandbox is not).
fn row_of(store: &Store, sandbox: &str, shim: TaskId) -> Result<Option<crate::store::Member>, EngineError> {
    Ok(store.member(&member_id(sandbox))?.filter(|r| r.init() == shim))
}

/// The ensure checks the pid's identity itself; it must also be the one the proof named.
fn still_there(proc: &ProcFs, shim: TaskId) -> Result<(), EngineError> {
    match crate::cookies::membership::liveness(proc, shim).known() {
        Ok(true) => Ok(()),
        Ok(false) => Err(EngineError::TargetGone(shim.pid)),
        Err(source) => Err(EngineError::Proc { pid: shim.pid, source }),
    }
}

/// Gives the shim `shim` of sandbox `sandbox` the cookie of `group`, the group of a container of
/// the pod that was just given that group's `cookie`; or a cookie of its own once the pod's
/// containers disagree (a row of this very shim in another group); or nothing once one of them
/// was cleared. A shim recorded in `group` that still holds `cookie` ([`membership::holds`])
/// is left as it is: the container's ensure just verified the group. The caller holds the lock
/// and runs this in the transaction of the container's ensure.
pub fn wire<K: CoreSched>(
    engine: &Engine<'_, K>,
    store: &Store,
    proc: &ProcFs,
    shim: TaskId,
    sandbox: &str,
    (group, cookie): (&str, Cookie),
) -> Result<Wired, EngineError> {
    let own = own_group(sandbox);
    let row = row_of(store, sandbox, shim)?;
    if let Some(r) = row.as_ref().filter(|r| r.group == cleared_group(sandbox)) {
        return Ok(Wired { group: r.group.clone(), cookie: 0, changed: false });
    }
    let target = match row.as_ref().map(|r| r.group.as_str()) {
        Some(g) if g != group => own.clone(),
        Some(_) if membership::holds(proc, engine.kernel(), shim, cookie) => {
            return Ok(Wired { group: group.to_string(), cookie, changed: false });
        }
        _ => group.to_string(),
    };
    if let Some(r) = row.as_ref().filter(|r| target == own && r.group != own) {
        log::info!(
            "the containers of sandbox {sandbox} are in different groups ({} and {group}): its shim pid {} gets a \
             cookie of its own",
            r.group,
            shim.pid
        );
    }
    still_there(proc, shim)?;
    let req = EnsureRequest {
        container_id: member_id(sandbox),
        group: target.clone(),
        pid: shim.pid,
        labels: Labels::default(),
    };
    let outcome: EnsureOutcome = engine.ensure(&req)?;
    Ok(Wired { group: target, cookie: outcome.cookie, changed: outcome.via != Via::AlreadySet })
}

/// The group to record the shim of sandbox `sandbox` in when its row is lost (rebuild, which
/// changes no cookie, reads what it `holds`): the group of the pod's containers (`pod`: each
/// group with the cookie its container holds) whose cookie that is; its own group when it holds
/// one that none of theirs is (they disagreed); at cookie 0, the cleared group when one of the
/// pod's containers runs without a cookie (`cleared`), so that no later wire gives it a group's
/// cookie, else `None` (never wired: the next container's ensure wires it); `None` too when two
/// of the pod's groups hold that cookie (not for a rebuild to settle).
pub fn lost_row_group(sandbox: &str, holds: Cookie, pod: &BTreeMap<String, Cookie>, cleared: bool) -> Option<String> {
    if holds == 0 {
        return cleared.then(|| cleared_group(sandbox));
    }
    let mut holding = pod.iter().filter(|(_, c)| **c == holds).map(|(g, _)| g);
    match (holding.next(), holding.next()) {
        (Some(g), None) => Some(g.clone()),
        (None, _) => Some(own_group(sandbox)),
        (Some(_), Some(_)) => None,
    }
}

/// Gives the shim `shim` of sandbox `sandbox` cookie 0 for the rest of its life: a container of
/// the pod was just decided to run without a cookie. The caller holds the lock and runs this in
/// the transaction of the container's clear.
pub fn clear<K: CoreSched>(
    engine: &Engine<'_, K>,
    store: &Txn<'_>,
    proc: &ProcFs,
    shim: TaskId,
    sandbox: &str,
) -> Result<Wired, EngineError> {
    let cleared = cleared_group(sandbox);
    if row_of(store, sandbox, shim)?.is_some_and(|r| r.group == cleared) {
        return Ok(Wired { group: cleared, cookie: 0, changed: false });
    }
    still_there(proc, shim)?;
    let id = member_id(sandbox);
    engine.clear(&id, shim.pid)?;
    store.upsert_member(&Member::new(&id, &cleared, shim.pid, shim.start_time))?;
    Ok(Wired { group: cleared, cookie: 0, changed: true })
}

#[cfg(test)]
#[path = "shim_tests.rs"]
mod tests;
