//! Escaped containers: running containers whose own hook was to give them a cookie, that run
//! without one. A hook that fails open (a lock held past `lock_timeout_ms`, an unusable state dir,
//! a broken config, bad input, a kernel error) lets its container start at cookie 0, and nothing
//! in the cache knows of it; this finds them from the runtimes' state alone, read-only. The
//! `audit` reports them (rule `escaped`), and the follower heals them through the hook's own
//! ensure.
//!
//! A container is **escaped** when all of these hold, checked in this order:
//!
//! 1. its runtime's state file parses and its init is alive with the recorded start time
//!    ([`crate::session::running::scan`]), and the hook's decision for it (from the same
//!    `config.json` the hook reads) gives it a cookie;
//! 2. its spec runs this hook at createRuntime, prestart or poststart
//!    ([`crate::host::bundle::names_hook`]): a container the hook never ran for (the NRI plugin
//!    was away) is the plugin's catch-up's, not an escape;
//! 3. it has started: the runtime's `exec.fifo` is gone ([`RuntimeContainer::waits_to_start`]);
//!    a created container's createRuntime hook may still be running;
//! 4. its init holds cookie 0;
//! 5. no runtime command (`runc`/`crun`/`youki`/`runsc` `create`, `start` or `run`) naming it is
//!    alive ([`crate::host::runtimes::busy_ids`]): its poststart hook may still be running (runc
//!    runs it inside `create`, crun inside `start`);
//! 6. read **after** 5, its init is still the same process and still holds cookie 0.
//!
//! No step depends on time. A hook that is still running is always inside a live runtime command
//! (5), and one that finished before 5 wrote the cookie 6 reads, so a container on its way up is
//! never reported, however busy the node. A container inside its runtime's command for as long as
//! it lives (`runc run` in the foreground) is never reported either: the price of 5.
//!
//! [`RuntimeContainer::waits_to_start`]: crate::host::runtimes::RuntimeContainer::waits_to_start

use std::path::PathBuf;

use serde::Serialize;

use crate::cookies::membership::{self, Liveness};
use crate::decide::policy::Decision;
use crate::host::kernel::{CoreSched, KernelError};
use crate::host::procfs::{ProcFs, TaskId};
use crate::session::running::Running;
use crate::values::Pid;

use super::OpsError;

/// A running container without the cookie its policy gives it.
#[derive(Debug, Clone, Serialize)]
pub struct Escaped {
    /// Container id.
    pub id: String,
    /// The group the hook would put it in.
    pub group: String,
    /// Its init.
    pub pid: Pid,
    /// The runtime root it was found in.
    pub root: PathBuf,
    /// The hook's decision for it (what healing runs).
    #[serde(skip)]
    pub decision: Decision,
    /// Its init's identity.
    #[serde(skip)]
    pub task: TaskId,
}

/// The cookie of `pid`, `None` when it exited or cannot be read now (an unsupported kernel is an
/// error: no container is escaped on a node that cannot isolate at all; `kernel_supported` says so).
fn cookie<K: CoreSched>(kernel: &K, pid: Pid) -> Result<Option<u64>, OpsError> {
    match kernel.get(pid) {
        Ok(c) => Ok(Some(c)),
        Err(e) if e.is_unsupported() => Err(OpsError::Kernel { pid, source: e }),
        Err(KernelError::NoSuchProcess(_)) | Err(_) => Ok(None),
    }
}

/// The escaped containers among `running` (see the module documentation).
pub fn find<K: CoreSched>(running: &[Running], kernel: &K, proc: &ProcFs) -> Result<Vec<Escaped>, OpsError> {
    let mut candidates = Vec::new();
    for r in running {
        let Some(group) = r.decision.group() else { continue };
        if !r.c.names_hook || r.c.waits_to_start() {
            continue;
        }
        if cookie(kernel, r.task.pid)? == Some(0) {
            candidates.push((r, group));
        }
    }
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let busy = crate::host::runtimes::busy_ids(proc).map_err(|source| OpsError::Proc { pid: 0, source })?;
    let mut out = Vec::new();
    for (r, group) in candidates {
        if busy.contains(&r.c.id) || !matches!(membership::liveness(proc, r.task), Liveness::Alive) {
            continue;
        }
        if cookie(kernel, r.task.pid)? != Some(0) {
            continue;
        }
        out.push(Escaped {
            id: r.c.id.clone(),
            group: group.to_string(),
            pid: r.task.pid,
            root: r.root.clone(),
            decision: r.decision.clone(),
            task: r.task,
        });
    }
    Ok(out)
}

#[cfg(test)]
#[path = "escapes_tests.rs"]
pub(crate) mod tests;
