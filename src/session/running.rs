//! The containers the runtimes run, read from their state directories
//! ([`crate::host::runtimes`]): each read once (the first root wins), its init checked against
//! `/proc` (pid and start time), and decided as the hook would
//! ([`ContainerInput::from_runtime`], lifecycle ensure). Reads only. Rebuild records them
//! ([`super::rebuild`]); the audit, the escape finder and the follower's escape scan look at them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::config::Config;
use crate::cookies::membership::{self, Liveness};
use crate::decide::policy::{ContainerInput, Decision};
use crate::error::Chain;
use crate::host::procfs::{ProcFs, TaskId};
use crate::host::runtimes::{self, RuntimeContainer, RuntimeKind, RuntimeRoot};
use crate::values::Pid;

/// One scanned root.
#[derive(Debug, Clone, Serialize)]
pub struct RootScan {
    /// Its layout.
    pub kind: RuntimeKind,
    /// The directory.
    pub path: PathBuf,
    /// Whether it exists (a missing default root is normal).
    pub present: bool,
    /// Container directories found in it.
    pub containers: usize,
}

/// A container not taken (not running, unreadable, undecidable; for rebuild also not recorded), and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// Container id (the directory name).
    pub id: String,
    /// The root it was found in.
    pub root: PathBuf,
    /// Why.
    pub reason: String,
}

/// A container the runtimes run, with its init (start time checked) and what the hook would
/// decide for it.
#[derive(Debug)]
pub struct Running {
    /// What its runtime's state says.
    pub c: RuntimeContainer,
    /// The root it was found in.
    pub root: PathBuf,
    /// Its init, alive with the recorded start time.
    pub task: TaskId,
    /// The hook's decision (lifecycle ensure).
    pub decision: Decision,
}

/// What [`scan`] found.
#[derive(Debug, Default)]
pub struct Scan {
    /// Roots scanned.
    pub roots: Vec<RootScan>,
    /// Running containers, in root order.
    pub running: Vec<Running>,
    /// Containers not running, unreadable or undecidable, and why.
    pub skipped: Vec<Skipped>,
    /// Containers whose `/proc` entry could not be read (among `skipped`).
    pub unreadable: usize,
}

/// The containers `roots` show running: each read once (the first root wins), its init checked
/// against `/proc` (pid and start time), and decided as the hook would
/// ([`ContainerInput::from_runtime`]). Reads only.
pub fn scan(roots: &[RuntimeRoot], proc: &ProcFs, config: &Config) -> Scan {
    scan_with(roots, proc, config, &mut runtimes::StateCache::default())
}

/// [`scan`], each container's state read through `cache` (parsed again only where it changed).
pub fn scan_with(roots: &[RuntimeRoot], proc: &ProcFs, config: &Config, cache: &mut runtimes::StateCache) -> Scan {
    let mut out = Scan::default();
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    for root in roots {
        let mut scanned = RootScan { kind: root.kind, path: root.path.clone(), present: false, containers: 0 };
        let dirs = match runtimes::container_dirs(&root.path) {
            Ok(Some(d)) => d,
            Ok(None) => {
                out.roots.push(scanned);
                continue;
            }
            Err(e) => {
                scanned.present = true;
                out.skipped.push(Skipped { id: "-".into(), root: root.path.clone(), reason: Chain(&e).to_string() });
                out.roots.push(scanned);
                continue;
            }
        };
        scanned.present = true;
        scanned.containers = dirs.len();
        out.roots.push(scanned);
        for (id, dir) in dirs {
            let skip = |reason: String| Skipped { id: id.clone(), root: root.path.clone(), reason };
            if let Some(first) = seen.get(&id) {
                out.skipped.push(skip(format!("already found in {}", first.display())));
                continue;
            }
            seen.insert(id.clone(), root.path.clone());
            let parsed = cache.read(root.kind, &dir, &id);
            let c = match parsed {
                Ok(c) => c,
                Err(e) => {
                    out.skipped.push(skip(format!("unreadable: {}", Chain(&e))));
                    continue;
                }
            };
            let pid = match Pid::try_from(c.pid) {
                Ok(p) if p > 0 => p,
                _ => {
                    out.skipped.push(skip(format!("not running (pid {})", c.pid)));
                    continue;
                }
            };
            let task = TaskId { pid, start_time: c.start_time };
            match membership::liveness(proc, task) {
                Liveness::Alive => {}
                Liveness::Reused => {
                    out.skipped.push(skip(format!("dead: pid {pid} now belongs to another process")));
                    continue;
                }
                Liveness::Dead => {
                    out.skipped.push(skip(format!("dead: pid {pid} does not exist")));
                    continue;
                }
                Liveness::Unreadable(e) => {
                    out.skipped.push(skip(format!("failed to read /proc for pid {pid}: {e}")));
                    out.unreadable += 1;
                    continue;
                }
            }
            match crate::decide::policy::decide(&ContainerInput::from_runtime(&c), config) {
                Ok(decision) => out.running.push(Running { c, root: root.path.clone(), task, decision }),
                Err(e) => out.skipped.push(skip(e.to_string())),
            }
        }
    }
    cache.forget_unseen();
    out
}
