//! One hook invocation, as a straight pipeline: the decision's input ([`input`], shared with
//! `explain`) → [`crate::decide::policy::decide`] → the plan ([`plan`]: what to do, worked out before the
//! lock) → its execution ([`execute`]: under the lock, in one cache transaction, then the
//! receipt) → the report and the verdict ([`verdict`]: the log lines, and the failure policy
//! that turns a failure into the exit the runtime sees).
//!
//! This file holds the stages ([`Stage`]), the errors ([`HookError`], each with the failure reason
//! it is counted under), the lifecycle rule ([`lifecycle`], ARCHITECTURE.md "Lifecycle"), what a run
//! did ([`Done`]), and [`run`] / [`run_with`]: the plan, then its execution, on the relay thread and
//! with the shim's proof the caller chooses.

mod execute;
mod plan;
pub mod verdict;

use crate::config::Config;
use crate::cookies::engine::{EngineError, EnsureOutcome, RelayOn};
use crate::cookies::shim;
use crate::decide::policy::{BadContainerId, ContainerInput, Decision, Lifecycle};
use crate::error::FailureReason;
use crate::host::cgroup::CgroupError;
use crate::host::kernel::{CoreSched, KernelError};
use crate::host::oci_state::State;
use crate::host::state_dir::DirError;
use crate::host::system::System;
use crate::session::{Damage, SessionError};
use crate::store::{Member, StoreError};

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
    /// The pod's shim ([`crate::cookies::shim`]).
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
            HookError::Unsupported(KernelError::SchedExt(_)) => FailureReason::SchedExt,
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
    /// Recorded as stopped; the next opener of the cache removes its row ([`crate::cookies::stopped`]).
    StopRecorded,
}

/// Runs the hook for a decision as the hook process does, but with no pod shim to look for: a
/// share is relayed by the calling thread, which keeps that cookie ([`RelayOn::CallingThread`]).
pub fn run<K: CoreSched>(decision: &Decision, config: &Config, sys: &System<K>) -> Result<Done, HookError> {
    run_with(decision, config, sys, RelayOn::CallingThread, shim::Proof::None)
}

/// [`run`] with the relay thread chosen (a long-running command passes
/// [`RelayOn::FreshThread`], so its own threads keep cookie 0) and where the pod's shim is
/// looked for ([`shim::Proof`]; the hook process passes its parent, the runtime): the plan, then
/// its execution.
pub fn run_with<K: CoreSched>(
    decision: &Decision,
    config: &Config,
    sys: &System<K>,
    on: RelayOn,
    shim_proof: shim::Proof,
) -> Result<Done, HookError> {
    let plan = plan::plan(decision, config, sys, shim_proof)?;
    execute::execute(plan, config, sys, on)
}

#[cfg(test)]
#[path = "hook_tests.rs"]
mod tests;
