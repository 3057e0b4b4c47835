//! The follower's escape scan: every [`HEAL_EVERY`] it looks for escaped containers (their hook
//! failed open, so they run at cookie 0: [`crate::ops::escapes`]) and heals each through the
//! hook's own ensure ([`crate::hook::run_with`]: under the state lock, identity-checked, the same
//! decision, group scope and policy as the hook, the pod's shim given the cookie too so that a
//! later exec'd process starts with it). Healing never widens sharing: it puts a container in the
//! group its own hook would have.
//!
//! The runtimes' state is read through a [`StateCache`], so a scan parses only the containers
//! whose state file changed; a quiet node costs one `stat` per container and one cookie GET per
//! container the policy gives a cookie.
//!
//! The config is the file's as it is now: read again when it changes. While it cannot be parsed
//! (the cause of the hooks' fail-open), nothing is healed, the escapes are still counted, and the
//! problem is said once; the first scan after it is fixed heals. The same while the sched_ext
//! guard holds cookies off ([`CoreSched::held_off`]): nothing healed, the escapes counted.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::{Config, ConfigError};
use crate::cookies::engine::RelayOn;
use crate::cookies::membership::{self, Liveness};
use crate::cookies::shim;
use crate::error::{Chain, FailureReason};
use crate::hook::Done;
use crate::host::kernel::{CookieHex, CoreSched};
use crate::host::runtimes::StateCache;
use crate::host::system::System;
use crate::ops::OpsError;

/// How often the follower looks for escaped containers.
pub const HEAL_EVERY: Duration = Duration::from_secs(2);

/// What one scan found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Healed {
    /// Escaped containers still escaped after the scan.
    pub escaped: usize,
    /// Escaped containers given their group's cookie.
    pub healed: usize,
    /// Escaped containers whose heal failed (each logged).
    pub failed: usize,
}

/// The config file the hooks read, followed by its stamp.
#[derive(Debug)]
struct ConfigFile {
    path: PathBuf,
    explicit: bool,
    stamp: Option<(u64, u64, i64, i64)>,
    config: Config,
    problem: Option<String>,
}

impl ConfigFile {
    fn stamp(&self) -> Option<(u64, u64, i64, i64)> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(&self.path).ok()?;
        Some((m.ino(), m.len(), m.mtime(), m.mtime_nsec()))
    }

    /// Reads the file again when it changed; `Err` (said once) while it cannot be parsed.
    fn current(&mut self) -> Result<&Config, &str> {
        let now = self.stamp();
        if now != self.stamp {
            self.stamp = now;
            match Config::load(&self.path, self.explicit) {
                Ok(c) => {
                    if self.problem.take().is_some() || c != self.config {
                        log::info!("reconcile --follow: {} read again: healing uses it", self.path.display());
                    }
                    self.config = c;
                }
                Err(e) => {
                    let e: ConfigError = e;
                    log::warn!(
                        "reconcile --follow: {}; escaped containers are not healed until it is fixed",
                        Chain(&e)
                    );
                    self.problem = Some(Chain(&e).to_string());
                }
            }
        }
        match &self.problem {
            Some(p) => Err(p),
            None => Ok(&self.config),
        }
    }
}

/// The escape scan's memory between runs.
#[derive(Debug)]
pub struct Healer {
    cache: StateCache,
    config: ConfigFile,
    /// The last error said per container, so that a failure is said once, not every scan.
    said: BTreeMap<String, String>,
}

impl Healer {
    /// A healer deciding with `config`, read from `path` (`explicit`: named by `--config`, so
    /// that its absence is an error, as for the hook) and read again when that file changes.
    pub fn new(path: PathBuf, explicit: bool, config: Config) -> Self {
        let mut file = ConfigFile { path, explicit, stamp: None, config, problem: None };
        file.stamp = file.stamp();
        Self { cache: StateCache::default(), config: file, said: BTreeMap::new() }
    }

    /// One scan: finds the escaped containers and heals them (see the module documentation).
    /// `Err` when the node cannot be scanned (no core scheduling, `/proc` unreadable).
    pub fn scan<K: CoreSched>(&mut self, sys: &System<K>) -> Result<Healed, OpsError> {
        let usable = self.config.current().is_ok();
        let decide_with = self.config.config.clone();
        let found = crate::session::running::scan_with(&sys.runtime_roots, &sys.proc, &decide_with, &mut self.cache);
        let escaped = crate::ops::escapes::find(&found.running, &sys.kernel, &sys.proc)?;
        let mut out = Healed { escaped: escaped.len(), ..Healed::default() };
        self.said.retain(|id, _| escaped.iter().any(|e| &e.id == id));
        // While the sched_ext guard holds cookies off, a heal could only be refused: the follower
        // said so once (`crate::agent::node`), and heals at the first scan after the hold.
        if !usable || sys.kernel.held_off().is_some() {
            return Ok(out);
        }
        for e in &escaped {
            // The init checked once more just before: a heal acts on the process the scan found.
            if !matches!(membership::liveness(&sys.proc, e.task), Liveness::Alive) {
                out.escaped -= 1;
                continue;
            }
            let proof = shim::Proof::ChildOf(e.pid);
            match crate::hook::run_with(&e.decision, &decide_with, sys, RelayOn::FreshThread, proof) {
                Ok(Done::Ensured(o) | Done::EnsuredThenFailed { outcome: o, .. }) => {
                    log::info!(
                        "reconcile --follow: container {} (pid {}) ran without core scheduling (its hook failed open): \
                         healed, group {}, cookie {}",
                        e.id,
                        e.pid,
                        e.group,
                        CookieHex(o.cookie)
                    );
                    self.said.remove(&e.id);
                    out.healed += 1;
                    out.escaped -= 1;
                }
                Ok(_) => {}
                Err(err) => {
                    out.failed += 1;
                    let msg = Chain(&err).to_string();
                    if self.said.get(&e.id) != Some(&msg) {
                        log::warn!(
                            "reconcile --follow: failed to heal container {} (pid {}, group {}), which runs without core \
                             scheduling: {msg}",
                            e.id,
                            e.pid,
                            e.group
                        );
                        self.said.insert(e.id.clone(), msg);
                    }
                    // The lock is held: the next container would wait as long; try at the next scan.
                    if err.reason() == FailureReason::LockTimeout {
                        break;
                    }
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
#[path = "heal_tests.rs"]
mod tests;
