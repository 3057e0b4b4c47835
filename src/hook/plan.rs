//! The hook's plan: what a run does, worked out before the state lock is taken. An invalid
//! annotation is refused here under `fail_closed`; a repeat run whose receipt still holds is done
//! here, the one repeat shortcut ([`crate::cookies::receipt::holds`]; a `sched_idle` container's only
//! writes `cpu.idle` again); the kernel is probed, the state dir checked, the pod's shim looked
//! for and the init's cgroup read, so that under the lock only the cache and the cookies remain.

use super::{Done, HookError};
use crate::config::Config;
use crate::cookies::engine::{EngineError, EnsureOutcome, EnsureRequest, Via};
use crate::cookies::shim;
use crate::decide::policy::{Action, Decision};
use crate::host::kernel::CoreSched;
use crate::host::procfs::TaskId;
use crate::host::state_dir::StateDir;
use crate::host::system::System;
use crate::values::Pid;

/// What a hook run does.
#[derive(Debug)]
pub(super) enum Plan {
    /// Nothing more: a skip, a stop with no cache to remove it from, or a repeat run whose receipt
    /// holds.
    Done(Done),
    /// Poststop: the stop is recorded for the next opener of the cache (no lock), or, when it
    /// cannot be, the row is removed now.
    Stop {
        /// The state dir.
        dir: StateDir,
        /// The container.
        id: String,
    },
    /// A repeat run of a `sched_idle` container whose receipt holds: its cookie is done, and only
    /// `cpu.idle` is written again (the runtime may have reset it since).
    Idle {
        /// The state dir (a failure is counted in its cache).
        dir: StateDir,
        /// The container.
        id: String,
        /// Its init.
        pid: Pid,
        /// Where `cpu.idle` goes ([`crate::values::Labels::idle_cgroup`]).
        labels: crate::values::Labels,
        /// What the receipt proved.
        outcome: EnsureOutcome,
    },
    /// The init gets cookie 0 and leaves any group; the pod's shim too, for good.
    Clear {
        /// The state dir.
        dir: StateDir,
        /// The container.
        id: String,
        /// Its init.
        pid: Pid,
        /// The pod's shim and its sandbox, when found ([`pod_shim`]).
        shim: Option<(TaskId, String)>,
    },
    /// The init gets its group's cookie; the pod's shim too, and `cpu.idle` when asked.
    Ensure {
        /// The state dir.
        dir: StateDir,
        /// What the engine is asked (the group, the init, what the cache records).
        req: EnsureRequest,
        /// Whether `cpu.idle` is written.
        sched_idle: bool,
        /// The pod's shim and its sandbox, when found ([`pod_shim`]).
        shim: Option<(TaskId, String)>,
    },
}

/// The plan for `decision`.
pub(super) fn plan<K: CoreSched>(
    decision: &Decision,
    config: &Config,
    sys: &System<K>,
    shim_proof: shim::Proof,
) -> Result<Plan, HookError> {
    if let Some(problem) = &decision.invalid {
        let err = HookError::InvalidAnnotation { id: decision.container_id.clone(), problem: problem.clone() };
        if config.fail_closed {
            return Err(err);
        }
        log::error!("{err}; giving it a cookie of its own");
    }
    let id = decision.container_id.clone();
    match &decision.action {
        Action::Skip => Ok(Plan::Done(Done::Skipped)),
        Action::Forget => {
            let dir = StateDir::open(&sys.state_dir)?;
            if !dir.db_path().exists() {
                return Ok(Plan::Done(Done::Forgot(None)));
            }
            Ok(Plan::Stop { dir, id })
        }
        Action::Clear { pid } | Action::Ensure { pid, .. } => {
            let pid = *pid;
            if let Action::Ensure { group, sched_idle, .. } = &decision.action
                && let Some((dir, cookie)) = repeat(decision, group, pid, sys)
            {
                let via = Via::AlreadySet;
                let outcome = EnsureOutcome { cookie, via, converged: Vec::new(), dropped: Vec::new(), left: None };
                if !sched_idle {
                    return Ok(Plan::Done(Done::Ensured(outcome)));
                }
                let labels = decision.labels(sys.proc.cgroup(pid).ok().flatten());
                return Ok(Plan::Idle { dir, id, pid, labels, outcome });
            }
            sys.kernel.probe().map_err(|e| {
                if e.is_unsupported() {
                    HookError::Unsupported(e)
                } else {
                    HookError::Engine {
                        id: id.clone(),
                        source: EngineError::Kernel { op: "probe core scheduling".into(), source: e },
                    }
                }
            })?;
            crate::timing::mark("log + kernel probe");
            let dir = StateDir::open(&sys.state_dir)?;
            let shim = pod_shim(decision, sys, shim_proof);
            let Action::Ensure { group, sched_idle, .. } = &decision.action else {
                return Ok(Plan::Clear { dir, id, pid, shim });
            };
            let cgroup = sys.proc.cgroup(pid).ok().flatten();
            let req = EnsureRequest { container_id: id, group: group.clone(), pid, labels: decision.labels(cgroup) };
            crate::timing::mark("state dir + /proc cgroup");
            Ok(Plan::Ensure { dir, req, sched_idle: *sched_idle, shim })
        }
    }
}

/// The state dir and the cookie of a repeat run whose receipt proves the container's ensure into
/// `group` done and still holding ([`crate::cookies::receipt::holds`]): no lock, no cache. This is the
/// one repeat shortcut; `None` sends the run down the full path, which repairs what is wrong.
fn repeat<K: CoreSched>(
    decision: &Decision,
    group: &str,
    pid: Pid,
    sys: &System<K>,
) -> Option<(StateDir, crate::values::Cookie)> {
    let dir = StateDir::existing(&sys.state_dir).ok()??;
    let cookie =
        crate::cookies::receipt::holds(&sys.kernel, &sys.proc, dir.path(), &decision.container_id, group, pid)?;
    crate::timing::mark("receipt + GET (repeat run)");
    Some((dir, cookie))
}

/// The pod's shim to wire with the container's group, and its sandbox: for an app container of a
/// pod (not the sandbox itself) whose shim `proof` finds. A `/proc` read that fails leaves the
/// shim alone (the follower covers exec'd processes).
fn pod_shim<K: CoreSched>(decision: &Decision, sys: &System<K>, proof: shim::Proof) -> Option<(TaskId, String)> {
    let sandbox = decision.sandbox.id.clone().filter(|_| !decision.sandbox.is_sandbox)?;
    match shim::find(&sys.proc, proof) {
        Ok(found) => found.map(|t| (t, sandbox)),
        Err(e) => {
            log::debug!("container {}: failed to look for its pod's shim: {e}", decision.container_id);
            None
        }
    }
}
