//! `reconcile --follow`: processes that enter a container by exec (`runc exec`, `crun exec`,
//! `podman exec`, CRI `ExecSync` / `Exec`, i.e. probes and `kubectl exec`) pass through no hook.
//! The follower hears every fork and exec on the host from the kernel's proc connector
//! ([`crate::host::proc_events`]) and gives each new process of a member container's cgroup its
//! group's cookie at once, through the verified relay ([`crate::cookies::engine::Relay`]); a full sweep
//! (`reconcile`) runs at start, every `--interval`, and after the kernel dropped events.
//!
//! Per event: no SQLite and no lock. The cgroup comes from `/proc/PID/cgroup`, the member from
//! the in-memory [`view::View`] (rebuilt under the lock when the cache files change), then one
//! GET; a process that already has the cookie costs nothing more. The reconcile safety rules hold:
//! only processes inside a live member's cgroup (the most specific one, of one group only; never
//! the root cgroup), the cookie pulled from the member's init with its identity checked, the
//! target's identity checked around the share. Where there are no process events (no
//! `CONFIG_PROC_EVENTS`, no CAP_NET_ADMIN, not in the host's namespaces) it says so in one line,
//! counts it (`events_enabled 0`) and sweeps every [`FALLBACK_SWEEP`] instead.
//!
//! While the sched_ext guard holds cookies off ([`crate::agent::node`]) it says so in one line
//! when the hold starts and one when it ends, its escape scan heals nothing (the escapes are still
//! counted), an exec'd process it cannot give a cookie is counted and logged at debug only, and
//! the refused calls are counted on its page (`oci_coresched_hook_sched_ext_refusals_total`). When
//! the hold ends it sweeps and scans at once.
//!
//! It also keeps `cpu.idle` at 1 for the members of `sched_idle` classes ([`Follower::keep_idle`],
//! every [`IDLE_EVERY`]): a runtime's resource update of the container (CRI
//! `UpdateContainerResources`, `runc update`) or any change of its systemd scope's properties
//! makes systemd write `cpu.idle = 0` when it re-applies the unit, and nothing else would set it
//! again for a running container. It also writes it for containers the NRI plugin caught up from
//! a container that cannot write the host's cgroups.
//!
//! The loop's other clocks: the inits of the view's members looked at every 5 s (a gone one makes
//! the next batch rebuild the view), the groups' forced idle every 10 s, a sweep every 10 s without
//! events and on ENOBUFS at once, the subscription retried every 30 s, and the audit after each full
//! sweep, whose counts join its page. With `enable_schedstats` it sets `kernel.sched_schedstats = 1`
//! at start.

pub mod heal;
pub mod pace;
mod refresh;
pub mod stats;
pub mod storm;
mod turns;
pub mod view;

pub use turns::run;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cookies::engine::{Adopted, EngineError, Relay};
use crate::error::Chain;
use crate::host::cgroup;
use crate::host::kernel::{CookieHex, CoreSched, KernelError};
use crate::host::proc_events::{Event, monotonic_ns};
use crate::host::procfs::{CgroupReader, ProcFs};
use crate::store::Store;
use crate::values::Pid;
use stats::Stats;
use view::View;

/// The longest sweep interval while process events are missing.
pub const FALLBACK_SWEEP: Duration = Duration::from_secs(10);
/// How often `follow.prom` is rewritten.
pub const METRICS_EVERY: Duration = Duration::from_secs(10);
/// How long the follower waits before it tries to reopen a proc connector that failed.
const REOPEN_AFTER: Duration = Duration::from_secs(30);
/// The metrics file's name in the state dir.
pub const METRICS_FILE: &str = "follow.prom";
/// How often the `cpu.idle` of `sched_idle` members is looked at.
pub const IDLE_EVERY: Duration = Duration::from_secs(5);

/// What a full sweep did: the processes it fixed, and the violations the audit after it found
/// (`None`: no audit ran, e.g. no cache yet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Processes given their group's cookie.
    pub fixed: usize,
    /// Threads off their cookie ([`crate::ops::audit`]).
    pub violations: Option<usize>,
}

/// Why the follower could not start.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The SIGTERM handler could not be installed.
    #[error("failed to install the SIGTERM handler")]
    Signals(#[source] std::io::Error),
}

/// What happened to one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not a process of a live member's cgroup (or gone, or the follower itself).
    Outside,
    /// It had its group's cookie already.
    Already,
    /// It was given the cookie.
    Fixed,
    /// It exited meanwhile.
    Exited,
    /// It could not be fixed (logged).
    Failed,
}

/// Handles events against a view: the per-event part of the follower.
#[derive(Debug)]
pub struct Follower<'a, K: CoreSched> {
    kernel: &'a K,
    proc: &'a ProcFs,
    /// The view events are matched against.
    pub view: View,
    /// Counters.
    pub stats: Stats,
    me: Pid,
    /// `/proc/PID/cgroup`, read for every event without allocating.
    cgroups: CgroupReader,
    /// Parents forking outside every member cgroup, whose children are sampled.
    storms: storm::Storms,
    /// Containers whose `cpu.idle` could not be kept, said once each.
    idle_warned: std::collections::BTreeSet<String>,
}

impl<'a, K: CoreSched> Follower<'a, K> {
    /// A follower with an empty view.
    pub fn new(kernel: &'a K, proc: &'a ProcFs) -> Self {
        Self {
            kernel,
            proc,
            view: View::default(),
            stats: Stats::default(),
            me: std::process::id() as Pid,
            cgroups: CgroupReader::new(proc),
            idle_warned: Default::default(),
            storms: storm::Storms::default(),
        }
    }

    /// Sets `cpu.idle` of the view's `sched_idle` members (under the cgroup mount `root`) back to
    /// 1 where it was reset; returns how many. A member whose init is gone is left alone, and a
    /// failure is logged once per container.
    pub fn keep_idle(&mut self, root: &Path) -> usize {
        let mut restored = 0;
        for m in self.view.idle() {
            if !crate::cookies::membership::liveness(self.proc, m.init).is_alive() {
                continue;
            }
            match cgroup::restore_idle(root, &m.cgroup) {
                Ok(None) => {}
                Ok(Some(file)) => {
                    restored += 1;
                    log::info!(
                        "follow: cpu.idle of container {} had been reset (by its runtime or systemd); wrote 1 to {}",
                        m.container_id,
                        file.display()
                    );
                }
                Err(e) => {
                    if self.idle_warned.insert(m.container_id.clone()) {
                        log::warn!("follow: failed to keep cpu.idle of container {}: {}", m.container_id, Chain(&e));
                    }
                }
            }
        }
        self.stats.idle_restored += restored as u64;
        restored
    }

    /// Rebuilds the view from the cache (read only; the caller holds the lock); returns the groups
    /// whose cookie or live members changed since the last build ([`View::changed_groups`]).
    pub fn refresh(&mut self, store: &Store) -> Result<BTreeSet<String>, crate::store::StoreError> {
        let members = store.all_members()?;
        let view = View::build(&members, self.kernel, self.proc);
        let changed = self.view.changed_groups(&view);
        self.view = view;
        self.stats.refreshes += 1;
        self.stats.members = self.view.len();
        Ok(changed)
    }

    /// Handles one event; `now_ns` is read after the fix for the window. A fork of a parent
    /// storming outside every member cgroup is read only as a sample ([`storm`]).
    pub fn handle(&mut self, ev: Event) -> Outcome {
        let outcome = match ev {
            Event::Fork { parent, pid, tgid, at_ns } => {
                self.stats.forks += 1;
                if !self.storms.must_read(parent, at_ns) {
                    self.stats.storm_skipped += 1;
                    return Outcome::Outside;
                }
                let outcome = self.fix(pid, tgid, at_ns, "fork");
                let inside = matches!(outcome, Outcome::Already | Outcome::Fixed | Outcome::Failed);
                self.storms.read(parent, at_ns, !inside);
                outcome
            }
            Event::Exec { tgid, at_ns } => {
                self.stats.execs += 1;
                self.fix(tgid, tgid, at_ns, "exec")
            }
            Event::Lost => {
                self.stats.lost += 1;
                return Outcome::Outside;
            }
        };
        match outcome {
            Outcome::Already => self.stats.already += 1,
            Outcome::Fixed => self.stats.fixed_event += 1,
            Outcome::Failed => self.stats.failures += 1,
            Outcome::Outside | Outcome::Exited => {}
        }
        outcome
    }

    /// `task` is the new task (a thread of `tgid`, or `tgid` itself): its cookie is checked, and
    /// the share goes to its whole thread group.
    fn fix(&mut self, task: Pid, tgid: Pid, at_ns: u64, kind: &str) -> Outcome {
        if tgid <= 1 || tgid == self.me || self.view.is_empty() {
            return Outcome::Outside;
        }
        let m = match self.cgroups.read(task) {
            Ok(Some(cg)) => match self.view.owner(cg) {
                Some(m) => m.clone(),
                None => return Outcome::Outside,
            },
            Ok(None) => return Outcome::Exited,
            Err(e) => {
                log::debug!("follow: failed to read /proc/{task}/cgroup: {e}");
                return Outcome::Exited;
            }
        };
        let current = match self.kernel.get(task) {
            Ok(c) => c,
            Err(KernelError::NoSuchProcess(_)) => return Outcome::Exited,
            Err(e) => {
                log::warn!("follow: failed to read the cookie of pid {task}: {}", Chain(&e));
                return Outcome::Failed;
            }
        };
        if current == m.cookie {
            return Outcome::Already;
        }
        // The group's cookie may have changed since the view was built: ask its init.
        let cookie = match self.kernel.get(m.init.pid) {
            Ok(0) | Err(KernelError::NoSuchProcess(_)) => return Outcome::Outside,
            Ok(c) => c,
            Err(e) => {
                log::warn!(
                    "follow: failed to read the cookie of pid {} (init of {}): {}",
                    m.init.pid,
                    m.container_id,
                    Chain(&e)
                );
                return Outcome::Failed;
            }
        };
        self.view.set_cookie(&m.container_id, cookie);
        if current == cookie {
            return Outcome::Already;
        }
        let target = match self.proc.task(tgid) {
            Ok(Some(t)) => t,
            Ok(None) => return Outcome::Exited,
            Err(e) => {
                log::warn!("follow: failed to read /proc/{tgid}/stat: {e}");
                return Outcome::Failed;
            }
        };
        match Relay::new(self.kernel, self.proc).adopt(m.init, cookie, &[target]) {
            Ok(mut r) => match r.pop().map(|a| a.result) {
                Some(Adopted::Done) => {
                    let window = monotonic_ns().saturating_sub(at_ns) as f64 / 1e9;
                    self.stats.window(window);
                    log::debug!(
                        "follow: gave pid {tgid} of container {} (group {}) cookie {} (was {}) after {} us ({kind})",
                        m.container_id,
                        m.group,
                        CookieHex(cookie),
                        CookieHex(current),
                        (window * 1e6).round() as u64
                    );
                    Outcome::Fixed
                }
                Some(Adopted::Exited) | None => Outcome::Exited,
                Some(Adopted::Failed(e)) => {
                    said_failed(task, &m.container_id, &e);
                    Outcome::Failed
                }
            },
            // The init died or was replaced: the next refresh drops it.
            Err(EngineError::TargetGone(_)) => Outcome::Outside,
            Err(e) => {
                said_failed(task, &m.container_id, &e);
                Outcome::Failed
            }
        }
    }
}

/// Logs a process that could not be given its cookie: a warning, or, while the sched_ext guard
/// holds cookies off (said once, [`crate::agent::node`]), a debug line: not one line per event.
fn said_failed(task: Pid, container: &str, e: &EngineError) {
    let msg = format!("follow: failed to give pid {task} the cookie of container {container}: {}", Chain(e));
    match e {
        EngineError::Kernel { source: KernelError::SchedExt(_), .. } => log::debug!("{msg}"),
        _ => log::warn!("{msg}"),
    }
}

/// Options of [`run`].
#[derive(Debug, Clone)]
pub struct Options {
    /// The state dir.
    pub state_dir: PathBuf,
    /// How long to wait for the state lock.
    pub lock_timeout: Duration,
    /// The sweep interval while events arrive.
    pub sweep_every: Duration,
    /// The cgroup mount (for `cpu.idle`).
    pub cgroup_root: PathBuf,
    /// The runtimes' state directories, which a cache that lacks containers is refilled from
    /// ([`crate::session`]).
    pub runtime_roots: Vec<crate::host::runtimes::RuntimeRoot>,
    /// The config (the refill decides as the hook does).
    pub config: crate::config::Config,
    /// Where to serve `/metrics`, `/healthz` and `/readyz` ([`crate::agent::endpoint`]), if anywhere.
    pub listen: Option<std::net::SocketAddr>,
}

/// Logs `msg` unless it is the one logged last (one line per problem, not per loop).
pub(crate) fn report(last: &mut String, msg: String) {
    if *last != msg {
        log::warn!("{msg}");
        *last = msg;
    }
}

#[cfg(test)]
#[path = "follow_tests.rs"]
mod tests;
