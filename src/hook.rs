//! One hook invocation: stage → decision → (under the lock, in one cache transaction) the engine
//! → `cpu.idle`. Also the input side shared with `explain`: lifecycle inference and the bundle.

use crate::cgroup::{self, CgroupError};
use crate::config::Config;
use crate::engine::{Engine, EngineError, EnsureOutcome, EnsureRequest, RelayOn};
use crate::error::FailureReason;
use crate::kernel::{CoreSched, KernelError};
use crate::oci_state::State;
use crate::policy::{Action, BadContainerId, ContainerInput, Decision, Lifecycle};
use crate::procfs::TaskId;
use crate::session::{Damage, Refill, Session, SessionError};
use crate::shim;
use crate::state_dir::{DirError, StateDir};
use crate::store::{Member, StoreError, Txn};
use crate::system::System;
use crate::values::{Cookie, Pid};

/// The hook stages of the OCI runtime spec (and the legacy `prestart`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "camelCase")]
pub enum Stage {
    /// Deprecated stage; old podman runs hooks.d createRuntime hooks here.
    Prestart,
    /// After the container's namespaces exist, before pivot_root: pid is the init.
    CreateRuntime,
    /// In the container's namespaces: nothing to do.
    CreateContainer,
    /// In the container, right before the user process: nothing to do.
    StartContainer,
    /// After the user process started: verify and repair.
    Poststart,
    /// After the container stopped: forget it.
    Poststop,
}

/// Why a hook run failed.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// The stage could not be inferred.
    #[error("failed to infer the hook stage: status {0:?} is not one the hook knows; pass --stage")]
    UnknownStatus(String),
    /// The container id cannot be used.
    #[error(transparent)]
    BadId(#[from] BadContainerId),
    /// An annotation was rejected (the container would get a cookie of its own).
    #[error("invalid annotation for container {id}: {problem}")]
    InvalidAnnotation {
        /// Container id.
        id: String,
        /// What was rejected.
        problem: String,
    },
    /// The kernel cannot do core scheduling.
    #[error("{0}")]
    Unsupported(KernelError),
    /// State directory or lock.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// The cache.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The engine.
    #[error("failed to apply core scheduling to container {id}")]
    Engine {
        /// Container id.
        id: String,
        /// The cause.
        #[source]
        source: EngineError,
    },
    /// `cpu.idle`.
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// The pod's shim ([`crate::shim`]).
    #[error("failed to give the shim of container {id}'s pod its group's cookie")]
    Shim {
        /// Container id.
        id: String,
        /// The cause.
        #[source]
        source: EngineError,
    },
}

impl From<SessionError> for HookError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::Dir(e) => HookError::Dir(e),
            SessionError::Store(e) => HookError::Store(e),
        }
    }
}

impl HookError {
    /// The reason label for logs and metrics.
    pub fn reason(&self) -> FailureReason {
        match self {
            HookError::UnknownStatus(_) | HookError::BadId(_) => FailureReason::BadInput,
            HookError::InvalidAnnotation { .. } => FailureReason::InvalidAnnotation,
            HookError::Unsupported(_) => FailureReason::Unsupported,
            HookError::Dir(DirError::LockTimeout { .. }) => FailureReason::LockTimeout,
            HookError::Dir(_) => FailureReason::StateDir,
            HookError::Store(_) => FailureReason::Cache,
            HookError::Engine { source, .. } => source.reason(),
            HookError::Cgroup(_) => FailureReason::Cgroup,
            HookError::Shim { .. } => FailureReason::Shim,
        }
    }
}

impl Damage for HookError {
    fn is_damage(&self) -> bool {
        match self {
            HookError::Store(e) => e.is_damage(),
            HookError::Engine { source, .. } => source.is_damage(),
            _ => false,
        }
    }
}

/// Lifecycle from the stage flag, else from the state's status.
pub fn lifecycle(stage: Option<Stage>, status: &str) -> Result<Lifecycle, HookError> {
    Ok(match stage {
        Some(Stage::Prestart | Stage::CreateRuntime | Stage::Poststart) => Lifecycle::Ensure,
        Some(Stage::Poststop) => Lifecycle::Forget,
        Some(Stage::CreateContainer | Stage::StartContainer) => Lifecycle::Skip,
        None => match status {
            "creating" | "created" | "running" | "paused" => Lifecycle::Ensure,
            "stopped" => Lifecycle::Forget,
            "starting" => Lifecycle::Skip,
            other => return Err(HookError::UnknownStatus(other.chars().take(64).collect())),
        },
    })
}

/// The decision's input from a state (the hook's and `explain`'s): the lifecycle from `stage` or
/// the state's status, then [`ContainerInput::from_state`].
pub fn input(state: &State, stage: Option<Stage>) -> Result<ContainerInput, HookError> {
    Ok(ContainerInput::from_state(state, lifecycle(stage, &state.status)?))
}

/// What a hook run did.
#[derive(Debug)]
pub enum Done {
    /// Nothing (see the decision's reason).
    Skipped,
    /// The init has its group's cookie.
    Ensured(EnsureOutcome),
    /// The init has its group's cookie and is recorded as a member, but a step after that failed
    /// (the pod's shim, `cpu.idle`). The record stays (the next member shares the cookie); the failure is counted
    /// under its own reason, and fails the hook only with `fail_closed`.
    EnsuredThenFailed {
        /// What the ensure did.
        outcome: EnsureOutcome,
        /// What failed after it.
        error: HookError,
    },
    /// The init has cookie 0; the removed cache row, if it had one.
    Cleared(Option<Member>),
    /// Removed from the cache (the row, if it had one).
    Forgot(Option<Member>),
    /// Recorded as stopped; the next opener of the cache removes its row ([`crate::stopped`]).
    StopRecorded,
}

/// Runs the hook for a decision as the hook process does, but with no pod shim to look for: a
/// share is relayed by the calling thread, which keeps that cookie ([`RelayOn::CallingThread`]).
pub fn run<K: CoreSched>(decision: &Decision, config: &Config, sys: &System<K>) -> Result<Done, HookError> {
    run_with(decision, config, sys, RelayOn::CallingThread, shim::Proof::None)
}

/// [`run`] with the relay thread chosen (a long-running command passes
/// [`RelayOn::FreshThread`], so its own threads keep cookie 0) and where the pod's shim is
/// looked for ([`shim::Proof`]; the hook process passes its parent, the runtime).
pub fn run_with<K: CoreSched>(
    decision: &Decision,
    config: &Config,
    sys: &System<K>,
    on: RelayOn,
    shim_proof: shim::Proof,
) -> Result<Done, HookError> {
    if let Some(problem) = &decision.invalid {
        let err = HookError::InvalidAnnotation { id: decision.container_id.clone(), problem: problem.clone() };
        if config.fail_closed {
            return Err(err);
        }
        log::error!("{err}; giving it a cookie of its own");
    }
    let pid = decision.pid.unwrap_or(0) as Pid;
    if let Action::Ensure { group, sched_idle: false } = &decision.action
        && let Some(done) = already_done(decision, group, pid, sys)
    {
        return Ok(done);
    }
    match &decision.action {
        Action::Skip => Ok(Done::Skipped),
        Action::Forget => {
            let dir = StateDir::open(&sys.state_dir)?;
            if !dir.db_path().exists() {
                return Ok(Done::Forgot(None));
            }
            let id = decision.container_id.as_str();
            crate::receipt::remove(dir.path(), id);
            match crate::stopped::record(dir.path(), id) {
                Ok(()) => {
                    crate::timing::mark("stop recorded");
                    crate::fault::point(crate::fault::STOP_RECORDED);
                    return Ok(Done::StopRecorded);
                }
                Err(e) => log::debug!("failed to record container {id} as stopped ({e}); forgetting it now"),
            }
            let forget = |e: &Engine<'_, K>, _: &Txn<'_>| e.forget(id).map_err(|source| engine_err(id, source));
            with_store(&dir, config, None, forget, |_| {}, sys, on).map(Done::Forgot)
        }
        Action::Clear | Action::Ensure { .. } => {
            sys.kernel.probe().map_err(|e| {
                if e.is_unsupported() {
                    HookError::Unsupported(e)
                } else {
                    HookError::Engine {
                        id: decision.container_id.clone(),
                        source: EngineError::Kernel { op: "probe core scheduling".into(), source: e },
                    }
                }
            })?;
            crate::timing::mark("log + kernel probe");
            let dir = StateDir::open(&sys.state_dir)?;
            let id = decision.container_id.as_str();
            let pod_shim = pod_shim(decision, sys, shim_proof);
            let Action::Ensure { group, sched_idle } = &decision.action else {
                let clear = |e: &Engine<'_, K>, store: &Txn<'_>| {
                    let removed = e.clear(id, pid).map_err(|s| engine_err(id, s))?;
                    // A shim left with a cookie only starts this container's exec'd processes
                    // under the pod's group (never wider): a failure is logged and counted.
                    if let Some((shim, sandbox)) = &pod_shim {
                        match shim::clear(e, store, &sys.proc, *shim, sandbox) {
                            Ok(w) if w.changed => log::info!(
                                "container {id} runs without a cookie: its pod's shim (pid {}, sandbox {sandbox}) \
                                 is back at cookie 0, for the rest of its life",
                                shim.pid
                            ),
                            Ok(_) => {}
                            Err(source) => {
                                let e = counted(store, HookError::Shim { id: id.to_string(), source });
                                log::warn!("{}", crate::error::Chain(&e));
                            }
                        }
                    }
                    Ok(removed)
                };
                return with_store(&dir, config, None, clear, |_| {}, sys, on).map(Done::Cleared);
            };
            let group = group.clone();
            let cgroup = sys.proc.cgroup(pid).ok().flatten();
            let req = EnsureRequest {
                container_id: id.to_string(),
                group: group.clone(),
                pid,
                labels: decision.labels(cgroup.clone()),
            };
            let (sched_idle, idle_cgroup) = (*sched_idle, req.labels.idle_cgroup.clone());
            crate::timing::mark("state dir + /proc cgroup");
            with_store(
                &dir,
                config,
                Some(&group),
                |e, store| {
                    let out = e.ensure(&req).map_err(|s| engine_err(id, s))?;
                    // The container's cookie is set and recorded: a failure to wire its pod's
                    // shim leaves exec'd processes to the follower, and is reported on its own.
                    let shim_failed = pod_shim.as_ref().and_then(|(shim, sandbox)| {
                        let wired = shim::wire(e, store, &sys.proc, *shim, sandbox, &group);
                        match wired {
                            Ok(w) if w.changed => {
                                log::info!(
                                    "container {id}: its pod's shim (pid {}, sandbox {sandbox}) holds group {}'s \
                                     cookie {}: the processes it spawns start under it",
                                    shim.pid,
                                    w.group,
                                    crate::kernel::CookieHex(w.cookie)
                                );
                                None
                            }
                            Ok(_) => None,
                            Err(source) => Some(counted(store, HookError::Shim { id: id.to_string(), source })),
                        }
                    });
                    if !sched_idle {
                        return Ok(match shim_failed {
                            None => Done::Ensured(out),
                            Some(error) => Done::EnsuredThenFailed { outcome: out, error },
                        });
                    }
                    // The cookie is set and its record written: from here on nothing may undo the
                    // record (the transaction commits), or the next member would find no one and
                    // create a second cookie. A failure is counted and reported on its own.
                    // The container's own cgroup (its systemd scope under that driver), recorded in
                    // the row: the follower sets it again when the runtime or systemd reset it.
                    let idle = idle_cgroup
                        .as_deref()
                        .ok_or(CgroupError::NoCgroup(pid))
                        .and_then(|cg| cgroup::set_idle(&sys.cgroup_root, cg));
                    let idle_failed = match idle {
                        Ok(file) => {
                            log::info!("container {id}: wrote cpu.idle=1 to {}", file.display());
                            None
                        }
                        Err(e) => Some(counted(store, HookError::Cgroup(e))),
                    };
                    Ok(match shim_failed.or(idle_failed) {
                        None => Done::Ensured(out),
                        Some(error) => Done::EnsuredThenFailed { outcome: out, error },
                    })
                },
                // Committed, still under the lock: the receipt a later stage checks instead of
                // opening the cache (not for sched_idle, whose cpu.idle is written again each time).
                |done| {
                    if let Done::Ensured(out) = done
                        && !sched_idle
                    {
                        write_receipt(&dir, id, &group, pid, out.cookie, sys);
                    }
                },
                sys,
                on,
            )
        }
    }
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

/// Counts a failure that comes after the cookie was set and recorded (best effort), and returns it.
fn counted(store: &Txn<'_>, error: HookError) -> HookError {
    if let Err(e) = store.count_failure(error.reason()) {
        log::warn!("failed to count a failure ({}): {}", error.reason(), crate::error::Chain(&e));
    }
    error
}

/// The receipt path ([`crate::receipt`]): the container's ensure into its group is done and
/// still holds. Needs no lock and no cache open; `None` sends the caller down the full path.
fn already_done<K: CoreSched>(decision: &Decision, group: &str, pid: Pid, sys: &System<K>) -> Option<Done> {
    let dir = StateDir::existing(&sys.state_dir).ok()??;
    let id = decision.container_id.as_str();
    let cookie = crate::receipt::holds(&sys.kernel, &sys.proc, dir.path(), id, group, pid)?;
    crate::timing::mark("receipt + GET (repeat run)");
    Some(Done::Ensured(EnsureOutcome {
        cookie,
        via: crate::engine::Via::AlreadySet,
        converged: Vec::new(),
        dropped: Vec::new(),
        left: None,
    }))
}

/// Writes the receipt of an ensure that committed (best effort: without it the next stage takes
/// the full path).
fn write_receipt<K: CoreSched>(dir: &StateDir, id: &str, group: &str, pid: Pid, cookie: Cookie, sys: &System<K>) {
    let written = sys.proc.task(pid).and_then(|init| {
        let init = init.ok_or_else(|| std::io::Error::other(format!("pid {pid} is gone")))?;
        let cache = crate::receipt::cache_identity(&dir.db_path())?;
        let receipt = crate::receipt::Receipt { group: group.to_string(), init, cookie, cache };
        crate::receipt::write(dir.path(), id, &receipt)
    });
    if let Err(e) = written {
        log::debug!("failed to write the receipt of container {id}: {e}");
    }
}

fn engine_err(id: &str, source: EngineError) -> HookError {
    HookError::Engine { id: id.to_string(), source }
}

/// Opens the cache session ([`Session`]: the lock, the file or a stand-in, refilled when it may
/// lack running containers) and runs `f` (over an engine and the cache) in one transaction,
/// committed when `f` returns `Ok` ([`Session::write`]: a file that shows damage is moved aside
/// and `f` runs once more on a fresh one); `after_commit` runs then, still under the lock, unless
/// the session works on a stand-in. A failure `f` returns is counted (best effort).
fn with_store<K: CoreSched, T>(
    dir: &StateDir,
    config: &Config,
    group: Option<&str>,
    f: impl Fn(&Engine<'_, K>, &Txn<'_>) -> Result<T, HookError>,
    after_commit: impl FnOnce(&T),
    sys: &System<K>,
    on: RelayOn,
) -> Result<T, HookError> {
    let refill = Refill::of(sys, config);
    let mut session = Session::open_in(dir.clone(), config.lock_timeout(), &refill)?;
    let written = session
        .write(&refill, crate::stopped::HOOK_BACKLOG, |s| f(&Engine::relaying_on(&sys.kernel, &sys.proc, s, on), s));
    match written {
        Ok(v) => {
            if session.stand_in().is_none() {
                after_commit(&v);
            }
            crate::timing::mark("receipt");
            Ok(v)
        }
        Err(e) => {
            session.count_failure(group, e.reason());
            Err(e)
        }
    }
}

#[cfg(test)]
#[path = "hook_tests.rs"]
mod tests;
