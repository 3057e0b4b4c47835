//! The hook command from the runtime's state to its exit: the pipeline's ends. The decision is
//! logged (one stable `decision <explain JSON>` line per run), the state dir chosen, the hook run
//! ([`super::run_with`]), what it did reported in the log, and the failure policy applied:
//!
//! - **fail open** (`fail_closed = false`, the default): a failure is one warning line and exit 0,
//!   so the container starts without core scheduling;
//! - **fail closed**: the error is printed and the exit is 1, so the runtime refuses the container;
//! - **a manual run** (`--state FILE`) has no container to protect: its error is printed whatever
//!   `fail_closed` says, and input it cannot read is a usage error (exit 2).
//!
//! A step after the cookie was set and recorded (the pod's shim, `cpu.idle`) fails open saying
//! what the container keeps. The caller prints [`Verdict::error`] once and exits with its code.

use std::path::{Path, PathBuf};

use super::{Done, Stage};
use crate::config::{Config, ConfigError};
use crate::cookies::engine::{EnsureOutcome, RelayOn, Via};
use crate::cookies::shim;
use crate::decide::policy::{self, Action, Decision, Lifecycle};
use crate::error::FailureReason;
use crate::exit_codes::ExitCode;
use crate::host::kernel::CookieHex;
use crate::host::oci_state::State;
use crate::host::state_dir::choice::{self, ThisProcess};
use crate::host::state_dir::fail_open;
use crate::host::system::{Surroundings, System};

/// How a hook run ends: the exit code, and the error the caller prints first, if any.
#[derive(Debug)]
pub struct Verdict {
    /// The exit code.
    pub code: ExitCode,
    /// The error to print (once, on stderr and in the log).
    pub error: Option<anyhow::Error>,
}

impl Verdict {
    fn success() -> Self {
        Self { code: ExitCode::Success, error: None }
    }

    fn print(code: ExitCode, error: anyhow::Error) -> Self {
        Self { code, error: Some(error) }
    }
}

/// One run of the `hook` command.
#[derive(Debug)]
pub struct Invocation<'a> {
    /// The OCI state read from stdin or `--state FILE`.
    pub state: anyhow::Result<State>,
    /// `--stage`.
    pub stage: Option<Stage>,
    /// The config (the defaults, with `fail_closed` kept, when the file could not be parsed).
    pub config: &'a Config,
    /// Why the config file could not be parsed.
    pub config_error: Option<ConfigError>,
    /// `--state-dir`.
    pub state_dir: Option<&'a Path>,
    /// `--state FILE` was given: a person runs it by hand.
    pub manual: bool,
}

/// The `hook` command's entry, from the runtime's state to the verdict: decide → plan → execute
/// ([`super::run_with`], one hook run) → report → verdict.
pub fn hook_command(inv: Invocation<'_>) -> Verdict {
    let (config, manual) = (inv.config, inv.manual);
    // Where a fail-open is counted: the state dir the run would use (chosen again only on failure).
    let ledger = || choice::choose(inv.state_dir, &ThisProcess).ok();
    let state = match inv.state {
        Ok(s) => s,
        Err(e) if manual => return Verdict::print(ExitCode::Usage, e),
        Err(e) => {
            let at = Failed { group: None, reason: FailureReason::BadInput, ensure: stage_ensures(inv.stage, None) };
            return fail(config, e, at, ledger());
        }
    };
    crate::timing::mark("state");
    if let Some(e) = inv.config_error {
        let at = Failed { group: None, reason: FailureReason::Config, ensure: stage_ensures(inv.stage, Some(&state)) };
        return fail(config, anyhow::Error::new(e).context(format!("container {}", state.id)), at, ledger());
    }
    let decision = match super::input(&state, inv.stage).and_then(|i| Ok(policy::decide(&i, config)?)) {
        Ok(d) => d,
        Err(e) if manual => return Verdict::print(ExitCode::Usage, e.into()),
        Err(e) => {
            let at = Failed { group: None, reason: e.reason(), ensure: stage_ensures(inv.stage, Some(&state)) };
            return fail(config, e.into(), at, ledger());
        }
    };
    crate::timing::mark("decision + bundle");
    // One stable line per run: `decision <the explain JSON>`; tests and admins grep for it.
    if decision.action != Action::Skip {
        log::info!("decision {}", serde_json::to_string(&decision).unwrap_or_default());
    } else {
        log::debug!("decision {}", serde_json::to_string(&decision).unwrap_or_default());
    }
    let ensure = matches!(decision.action, Action::Ensure { .. });
    let state_dir = match choice::choose(inv.state_dir, &ThisProcess) {
        Ok(dir) => dir,
        // A skip never opens the state dir.
        Err(_) if decision.action == Action::Skip => PathBuf::new(),
        Err(e) => {
            let err = anyhow::Error::new(e).context(format!("container {}", decision.container_id));
            if manual {
                return Verdict::print(ExitCode::Failure, err);
            }
            let at = Failed { group: decision.group(), reason: FailureReason::StateDir, ensure };
            return fail(config, err, at, inv.state_dir.map(Path::to_path_buf));
        }
    };
    let sys = System::new(Surroundings::of_this_process(state_dir, config));
    // The runtime that runs the hook is its parent: its own parent may be the pod's shim.
    let runtime = std::os::unix::process::parent_id() as crate::values::Pid;
    let result = super::run_with(&decision, config, &sys, RelayOn::CallingThread, shim::Proof::Runtime(runtime));
    crate::timing::mark("cache close + unlock");
    match result {
        Ok(done) => {
            report(&decision, &done);
            match done {
                Done::EnsuredThenFailed { outcome, error } => {
                    failed_after_ensure(config, manual, &decision, &outcome, error)
                }
                _ => Verdict::success(),
            }
        }
        // A manual run has no container to protect: show the failure, whatever fail_closed says.
        Err(e) if manual => Verdict::print(ExitCode::Failure, e.into()),
        Err(e) => {
            let at = Failed { group: decision.group(), reason: e.reason(), ensure };
            let id = &decision.container_id;
            // The warning names the container once: most errors do not (the lock, the cache).
            let named = e.to_string().contains(id.as_str());
            let err = if named { e.into() } else { anyhow::Error::new(e).context(format!("container {id}")) };
            fail(config, err, at, Some(sys.state_dir.clone()))
        }
    }
}

/// Whether a run that failed before its decision was at a stage that gives the container its
/// cookie (createRuntime, prestart, poststart; unknown counts as one): only those leave a
/// container running without it.
fn stage_ensures(stage: Option<Stage>, state: Option<&State>) -> bool {
    match state {
        Some(s) => !matches!(super::lifecycle(stage, &s.status), Ok(Lifecycle::Forget | Lifecycle::Skip)),
        None => !matches!(stage, Some(Stage::Poststop | Stage::CreateContainer | Stage::StartContainer)),
    }
}

/// The log lines of what a run did.
fn report(d: &Decision, done: &Done) {
    let id = &d.container_id;
    let group = d.group().unwrap_or("-");
    match done {
        Done::Skipped => log::debug!("container {id}: skipped: {}", d.reason),
        Done::Ensured(o) | Done::EnsuredThenFailed { outcome: o, .. } => {
            let via = match &o.via {
                Via::Created => "created".into(),
                Via::Shared(from) => format!("shared from {from}"),
                Via::AlreadySet => "already set".into(),
            };
            log::info!(
                "container {id} (pid {}): group {group}, cookie {} ({via}; {})",
                d.pid.unwrap_or(0),
                CookieHex(o.cookie),
                d.reason
            );
            if !o.converged.is_empty() {
                log::warn!(
                    "group {group} had members on another cookie; moved {} to {}",
                    o.converged.join(", "),
                    CookieHex(o.cookie)
                );
            }
            if let Some(old) = &o.left {
                log::info!("container {id} moved from group {old} to {group}");
            }
        }
        Done::Cleared(_) => log::info!("container {id} (pid {}): cookie cleared ({})", d.pid.unwrap_or(0), d.reason),
        Done::Forgot(m) => match m {
            Some(m) => log::info!("container {id} stopped: removed from group {}", m.group),
            None => log::debug!("container {id} stopped: it was not in the cache"),
        },
        Done::StopRecorded => {
            log::debug!("container {id} stopped: recorded; the next opener of the cache removes its row")
        }
    }
}

/// A step after the cookie was set and recorded failed (the pod's shim, `cpu.idle`): the container
/// is protected, so failing open says what it keeps. Fail closed (or a manual run) → exit 1.
fn failed_after_ensure(
    config: &Config,
    manual: bool,
    d: &Decision,
    outcome: &EnsureOutcome,
    error: super::HookError,
) -> Verdict {
    let err = anyhow::Error::new(error).context(format!("container {}", d.container_id));
    if manual || config.fail_closed {
        return Verdict::print(ExitCode::Failure, err);
    }
    log::warn!(
        "{err:#} (failing open: it keeps cookie {} of group {}, without cpu.idle; set fail_closed = true to refuse it)",
        CookieHex(outcome.cookie),
        d.group().unwrap_or("-")
    );
    Verdict::success()
}

/// Where a run failed: the container's group when decided, the reason, and whether the stage
/// gives the container its cookie (so that failing open leaves it without one).
struct Failed<'a> {
    group: Option<&'a str>,
    reason: FailureReason,
    ensure: bool,
}

/// The failure policy: fail closed → the error printed, exit 1; fail open → one warning naming
/// the container (in `err`), its group and the reason, exit 0. A fail-open at a stage that gives
/// the cookie is counted in the fail-open ledger of `ledger` ([`fail_open`]), the state dir.
fn fail(config: &Config, err: anyhow::Error, at: Failed<'_>, ledger: Option<PathBuf>) -> Verdict {
    if config.fail_closed {
        return Verdict::print(ExitCode::Failure, err);
    }
    let counted = match (at.ensure, ledger) {
        (false, _) => String::new(),
        (true, Some(dir)) => {
            // A run that failed before it opened the state dir (the kernel's probe, the sched_ext
            // guard) makes it as that step would have, so that a node where no hook has run yet
            // counts it too; a state dir that cannot be made fails the record below.
            let _ = crate::host::state_dir::StateDir::open(&dir);
            match fail_open::record(&dir, at.reason) {
                Ok(()) => String::new(),
                // The ledger's own message only: its cause is the state dir's, said above.
                Err(e) => format!(" (not counted: {e})"),
            }
        }
        (true, None) => " (not counted: no state dir)".into(),
    };
    log::warn!(
        "{err:#} (failing open: group {}, reason {}: the container runs without core scheduling; set fail_closed = true to refuse it){counted}",
        at.group.unwrap_or("-"),
        at.reason
    );
    Verdict::success()
}
