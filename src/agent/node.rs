//! What the node lets the long-running commands do, looked at from their loops every
//! [`LOOK_EVERY`]: whether the sched_ext guard holds cookies off ([`CoreSched::held_off`]), said in
//! one line when the hold starts (or names another scheduler) and one when it ends, never per
//! container or per scan; and whether the node can isolate at all, the note a ready `/readyz`
//! carries ([`crate::agent::endpoint::Board::set_note`]). Readiness itself stays "this agent does
//! its job": a node that cannot isolate is caught by the pages' gauges and an alert, not by
//! readiness (docs/kubernetes.md, "Readiness on a node that cannot isolate").

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::host::cpu::{self, CannotIsolate};
use crate::host::kernel::{CoreSched, KernelError};
use crate::host::sched_ext::{self, SchedExt, State};

/// How often the agents look.
pub const LOOK_EVERY: Duration = Duration::from_secs(2);

/// What one look found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Look {
    /// Why the guard holds cookies off now ([`CoreSched::held_off`]).
    pub held_off: Option<String>,
    /// The hold ended at this look: what was held off may be done now.
    pub resumed: bool,
    /// Why this node cannot isolate containers, as `/readyz` says it: the rule of
    /// [`cpu::cannot_isolate`] (SMT on, and the kernel has no core scheduling or the guard holds
    /// cookies off), which `doctor` shares.
    pub cannot_isolate: Option<String>,
    /// No cookie can be made here now, for whatever reason (held off, no core scheduling, SMT
    /// off): work that needs one fails as expected, which is no reason to turn unready.
    pub no_cookies: bool,
}

/// The node as one agent last saw it.
#[derive(Debug)]
pub struct NodeWatch {
    sys_root: PathBuf,
    held: Option<String>,
    last: Option<Instant>,
}

impl NodeWatch {
    /// A watch reading SMT and sched_ext under the sysfs tree `sys_root` (`/sys`).
    pub fn new(sys_root: PathBuf) -> Self {
        Self { sys_root, held: None, last: None }
    }

    /// [`NodeWatch::look`] when [`LOOK_EVERY`] has passed since the last one (or none ran yet).
    pub fn look_if_due<K: CoreSched + ?Sized>(&mut self, kernel: &K) -> Option<Look> {
        if self.last.is_some_and(|t| t.elapsed() < LOOK_EVERY) {
            return None;
        }
        Some(self.look(kernel))
    }

    /// Looks now: the guard (a transition logged), then the kernel's own probe and SMT.
    pub fn look<K: CoreSched + ?Sized>(&mut self, kernel: &K) -> Look {
        self.last = Some(Instant::now());
        let held = kernel.held_off();
        let mut resumed = false;
        match (&self.held, &held) {
            (was, Some(why)) if was.as_ref() != Some(why) => log::warn!(
                "core scheduling held off: {why}; no cookie is made or shared until it is unloaded (an SMT host \
                 running sched_ext can hang when a task gets a cookie, {}; sched_ext_guard = false turns the guard off \
                 on a kernel known to be fixed)",
                sched_ext::ISSUE
            ),
            (Some(_), None) => {
                resumed = true;
                let now = SchedExt::read(&self.sys_root);
                let why = match now.state {
                    State::Disabled => "the sched_ext scheduler was unloaded".to_string(),
                    _ => now.describe(),
                };
                log::info!("core scheduling resumed: {why}");
            }
            _ => {}
        }
        self.held = held.clone();
        let probe = kernel.probe_kernel();
        let no_cookies = held.is_some() || probe.as_ref().is_err_and(KernelError::is_unsupported);
        let cannot_isolate = match cpu::cannot_isolate(&self.sys_root, &probe, held.clone()) {
            Some(CannotIsolate::HeldOff(why)) => {
                Some(format!("this node cannot isolate: core scheduling is held off: {why}"))
            }
            Some(CannotIsolate::NoCoreScheduling(e)) => Some(format!("this node cannot isolate: {e}")),
            None => None,
        };
        Look { held_off: held, resumed, cannot_isolate, no_cookies }
    }
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
