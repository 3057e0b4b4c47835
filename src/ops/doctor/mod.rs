//! `doctor` (and its short form, `status`): whether this node isolates tenants with core
//! scheduling, and why not. Each input gives one [`Fact`] with a [`Level`]:
//!
//! - the kernel ([`kernel`]): its own answer to a support probe (not the sched_ext guard's),
//!   SMT, the CPU's vulnerabilities, `kernel.sched_schedstats`, sched_ext;
//! - the files ([`files`]): the config, the state dir, the cache's format and revision;
//! - the wiring ([`wiring`]): the hooks.d files podman and CRI-O read, containerd's base runtime
//!   spec or NRI plugin, and whether any route runs the hook at all;
//! - the long-running parts ([`agents`]): the follower and the NRI plugin as `/proc` shows them,
//!   each compared with this binary;
//! - what happened ([`health`]): the read-only audit and the fail-open ledger.
//!
//! The verdict ([`Verdict`]) follows from the levels: any `fail` means the node does not isolate,
//! any `warn` that it is at risk (exit 1); otherwise it isolates, or, with SMT off, has nothing to
//! isolate (exit 0). With SMT off no two tasks share a core's threads, so the facts that only
//! matter to isolation are kept at `info` at most; the config, SMT and the hooks.d files keep
//! their level (a broken config or a hooks.d file naming a missing binary is wrong either way).
//!
//! Read-only: nothing is created, the cache is read as it is on disk ([`crate::store::peek`]),
//! and the audit is the read-only `audit`.
//!
//! [`examine`] gathers the facts over a [`Node`] (the `System`, the kernel's own probe without the
//! guard, the config file and its error, the host root, this binary), [`judge`] levels them and
//! gives the verdict, [`render`] prints it (`status`: the verdict and the lines that are not ok),
//! and [`cannot_isolate`] is the first line of `list` (the rule itself is `host::cpu`'s).

pub mod agents;
pub mod files;
pub mod health;
pub mod kernel;
pub mod wiring;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::{Config, ConfigError};
use crate::host::cpu::CannotIsolate;
use crate::host::kernel::{CoreSched, KernelError};
use crate::host::system::System;
use crate::values::Pid;

/// How a fact stands, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The node does not isolate because of it.
    Fail,
    /// The node isolates, but this puts it at risk or hides something.
    Warn,
    /// Worth knowing; changes nothing.
    Info,
    /// As it should be.
    Ok,
}

impl Level {
    /// The word the text form prints.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Fail => "fail",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Ok => "ok",
        }
    }
}

/// One fact about the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fact {
    /// Its name (`kernel`, `smt`, `config`, …), stable for scripts.
    pub name: &'static str,
    /// How it stands.
    pub level: Level,
    /// One line.
    pub summary: String,
    /// Further lines (files as read, processes, counts).
    pub detail: Vec<String>,
    /// Whether it only matters when there is something to isolate (SMT on): kept at `info` at
    /// most otherwise.
    #[serde(skip)]
    pub isolation: bool,
}

impl Fact {
    /// A fact that matters only to isolation.
    pub fn new(name: &'static str, level: Level, summary: impl Into<String>) -> Self {
        Self { name, level, summary: summary.into(), detail: Vec::new(), isolation: true }
    }

    /// A fact that keeps its level with SMT off.
    pub fn always(name: &'static str, level: Level, summary: impl Into<String>) -> Self {
        Self { isolation: false, ..Self::new(name, level, summary) }
    }

    /// With `detail` lines.
    pub fn with_detail(mut self, detail: Vec<String>) -> Self {
        self.detail = detail;
        self
    }
}

/// The answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every fact is ok or info, SMT is on: containers get their cookies.
    Isolates,
    /// SMT is off: no two tasks share a core's threads, and no fact fails or warns.
    NothingToIsolate,
    /// A fact warns: it isolates, at risk.
    AtRisk,
    /// A fact fails.
    DoesNotIsolate,
}

impl Verdict {
    /// The exit status: 0 isolates (or nothing to isolate), 1 does not or at risk.
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Isolates | Verdict::NothingToIsolate => 0,
            Verdict::AtRisk | Verdict::DoesNotIsolate => 1,
        }
    }
}

/// What the exit statuses mean, as `--json` and `--help` say them.
pub const EXIT_CODES: &str = "0: the node isolates (or has nothing to isolate: SMT off); 1: it does not isolate, or is at risk; 2: doctor could not run";

/// The whole report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The answer.
    pub verdict: Verdict,
    /// The exit status it gives.
    pub exit_code: u8,
    /// What the exit statuses mean ([`EXIT_CODES`]).
    pub exit_codes: &'static str,
    /// The answer in one sentence.
    pub summary: String,
    /// Every fact, worst first.
    pub facts: Vec<Fact>,
}

/// Why doctor could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    /// Neither `/proc` nor `/sys` can be read.
    #[error("failed to read the node: neither {} nor {} can be read", proc.display(), sys.display())]
    Unreadable {
        /// The `/proc` tree.
        proc: PathBuf,
        /// The sysfs tree.
        sys: PathBuf,
    },
}

/// The config as the command line found it.
#[derive(Debug)]
pub struct ConfigFile<'a> {
    /// The file.
    pub path: &'a Path,
    /// Named by `--config` (a missing file is then an error).
    pub explicit: bool,
    /// Why it could not be loaded (the defaults then apply).
    pub error: Option<&'a ConfigError>,
}

/// What doctor examines.
#[derive(Debug)]
pub struct Node<'a, K> {
    /// The system (its kernel for the audit's reads, `/proc`, `/sys`, the state dir, the
    /// runtimes' state).
    pub sys: &'a System<K>,
    /// The kernel's own answer to the support probe (without the sched_ext guard).
    pub probe: Result<(), KernelError>,
    /// The config in effect.
    pub config: &'a Config,
    /// The config file.
    pub config_file: ConfigFile<'a>,
    /// Why no state dir could be chosen, if so (`sys.state_dir` is then only a placeholder).
    pub state_dir_error: Option<String>,
    /// Where the node's files are (`/`; `/host` in a container that mounts the node there).
    pub host_root: &'a Path,
    /// This binary, which every wired one is compared with.
    pub self_exe: &'a Path,
    /// This process, left out of the scan for the long-running parts.
    pub self_pid: Pid,
}

/// Examines the node.
pub fn examine<K: CoreSched>(node: &Node<'_, K>) -> Result<Report, DoctorError> {
    let sys = node.sys;
    if sys.proc.pids().is_err() && std::fs::read_dir(&sys.sys_root).is_err() {
        return Err(DoctorError::Unreadable { proc: sys.proc.root().to_path_buf(), sys: sys.sys_root.clone() });
    }
    let k = kernel::read(node);
    let mut facts = k.facts.clone();
    facts.extend(files::facts(node));
    let agents = agents::scan(node);
    let routes = wiring::facts(node, &agents);
    facts.extend(routes);
    facts.extend(agents.facts(node));
    facts.extend(health::facts(node, k.can_make_cookies()));
    Ok(judge(facts, k.smt_active))
}

/// The verdict over `facts`; `smt_active`: whether there is anything to isolate.
pub fn judge(mut facts: Vec<Fact>, smt_active: bool) -> Report {
    if !smt_active {
        for f in facts.iter_mut().filter(|f| f.isolation && f.level < Level::Info) {
            f.level = Level::Info;
        }
    }
    facts.sort_by_key(|f| f.level);
    let count = |l: Level| facts.iter().filter(|f| f.level == l).count();
    let (fails, warns) = (count(Level::Fail), count(Level::Warn));
    let first = facts.first().map(|f| format!("{}: {}", f.name, f.summary)).unwrap_or_default();
    let plural = |n: usize, one: &str| if n == 1 { format!("1 {one}") } else { format!("{n} {one}s") };
    let (verdict, summary) = if fails > 0 {
        let also = if warns > 0 { format!(", {}", plural(warns, "warning")) } else { String::new() };
        (
            Verdict::DoesNotIsolate,
            format!("this node does not isolate ({}{also}); worst: {first}", plural(fails, "failure")),
        )
    } else if warns > 0 {
        (Verdict::AtRisk, format!("this node isolates, at risk ({}); worst: {first}", plural(warns, "warning")))
    } else if !smt_active {
        (
            Verdict::NothingToIsolate,
            "nothing to isolate: SMT is off, so no two tasks share a core's threads; the hook makes no cookies".into(),
        )
    } else {
        (Verdict::Isolates, "this node isolates: containers get core-scheduling cookies by group".into())
    };
    Report { verdict, exit_code: verdict.exit_code(), exit_codes: EXIT_CODES, summary, facts }
}

/// The text form: the verdict, then one line per fact (worst first) with its detail indented;
/// `short` (`status`): the verdict and the lines that are not ok, without detail.
pub fn render(report: &Report, short: bool) -> String {
    let mut s = format!("{}\n", report.summary);
    for f in report.facts.iter().filter(|f| !short || f.level < Level::Info) {
        let _ = writeln!(s, "{:<5} {:<16} {}", f.level.as_str(), f.name, f.summary);
        if !short {
            for d in &f.detail {
                let _ = writeln!(s, "{:<22} {d}", "");
            }
        }
    }
    if short && report.facts.iter().any(|f| f.level < Level::Info) {
        s.push_str("(oci-coresched-hook doctor says more about each)\n");
    }
    s
}

/// One line when the kernel cannot isolate while SMT is on, for the first line of `list`: a
/// kernel without core scheduling (`probe`: the kernel's own answer), or the sched_ext guard
/// (`guard`: the config's `sched_ext_guard`) holding cookies off. `None` otherwise. The rule is
/// [`crate::host::cpu::cannot_isolate`]'s, which the agents' ready note shares.
pub fn cannot_isolate(sys_root: &Path, probe: &Result<(), KernelError>, guard: bool) -> Option<String> {
    let held = || {
        let s = crate::host::sched_ext::SchedExt::read(sys_root);
        (guard && s.blocks_cookies()).then(|| s.describe())
    };
    let why = match crate::host::cpu::cannot_isolate(sys_root, probe, held())? {
        CannotIsolate::NoCoreScheduling(e) => e.to_string(),
        CannotIsolate::HeldOff(why) => format!("cookies are held off while {why} (the sched_ext guard)"),
    };
    Some(format!("this node cannot isolate: {why} (run oci-coresched-hook doctor)"))
}

#[cfg(test)]
#[path = "doctor_tests.rs"]
mod tests;
