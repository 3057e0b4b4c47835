//! The kernel's sched_ext state, read from `/sys/kernel/sched_ext/` (Linux 6.12 and later with
//! `CONFIG_SCHED_CLASS_EXT`), and the guard's rule over it.
//!
//! The files, as `kernel/sched/ext.c` defines them (all mode 0444): `state` is one of `enabling`,
//! `enabled`, `disabling`, `disabled` (`disabled` at boot); `root/ops` names the loaded BPF
//! scheduler and exists only while one is attached; `enable_seq` counts the schedulers enabled
//! since boot; `switch_all` is 1 when the scheduler takes every normal task. A kernel without
//! sched_ext has no `sched_ext` directory at all.
//!
//! Why it matters: on an SMT machine running a sched_ext scheduler, the first task given a
//! core-scheduling cookie can hard-hang the machine (github.com/sched-ext/scx/issues/3715). The
//! guard ([`SchedExt::blocks_cookies`]) therefore refuses every cookie while the state is anything
//! but `disabled` or absent, and also when it cannot tell (sysfs missing, an unknown word): the
//! price of a wrong "allow" is a hung node.

use std::io;
use std::path::{Path, PathBuf};

/// The directory under the sysfs root.
pub const DIR: &str = "kernel/sched_ext";

/// The issue the guard protects against, as messages and docs cite it.
pub const ISSUE: &str = "https://github.com/sched-ext/scx/issues/3715";

/// `/sys/kernel/sched_ext/state`, or what stands for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// No `sched_ext` directory, on a mounted sysfs: the kernel has no sched_ext.
    Absent,
    /// `disabled`: no BPF scheduler attached.
    Disabled,
    /// `enabling`: a scheduler is being attached.
    Enabling,
    /// `enabled`: a scheduler runs.
    Enabled,
    /// `disabling`: a scheduler is being detached.
    Disabling,
    /// The state could not be told: the text it held, or why it could not be read.
    Unknown(String),
}

impl State {
    /// The word `state` holds (or `absent`, `unknown`).
    pub fn as_str(&self) -> &str {
        match self {
            State::Absent => "absent",
            State::Disabled => "disabled",
            State::Enabling => "enabling",
            State::Enabled => "enabled",
            State::Disabling => "disabling",
            State::Unknown(_) => "unknown",
        }
    }
}

/// What `/sys/kernel/sched_ext/` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedExt {
    /// The scheduler's state.
    pub state: State,
    /// The attached scheduler's name (`root/ops`), when one is attached and it could be read.
    pub ops: Option<String>,
    /// Schedulers enabled since boot (`enable_seq`), when the kernel says.
    pub enable_seq: Option<u64>,
    /// Whether the scheduler takes every normal task (`switch_all`), when the kernel says.
    pub switch_all: Option<bool>,
}

impl SchedExt {
    /// The state under the sysfs tree `sys_root` (`/sys`).
    pub fn read(sys_root: &Path) -> Self {
        let dir = sys_root.join(DIR);
        let state = match std::fs::read_to_string(dir.join("state")) {
            Ok(text) => match text.trim() {
                "disabled" => State::Disabled,
                "enabled" => State::Enabled,
                "enabling" => State::Enabling,
                "disabling" => State::Disabling,
                other => State::Unknown(format!("{}/state reads {other:?}", dir.display())),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => absent_or_unknown(sys_root, &dir),
            Err(e) => State::Unknown(format!("failed to read {}/state: {e}", dir.display())),
        };
        if state == State::Absent {
            return Self { state, ops: None, enable_seq: None, switch_all: None };
        }
        let word = |name: &str| std::fs::read_to_string(dir.join(name)).ok().map(|t| t.trim().to_string());
        Self {
            ops: word("root/ops").filter(|s| !s.is_empty()),
            enable_seq: word("enable_seq").and_then(|s| s.parse().ok()),
            switch_all: word("switch_all").and_then(|s| match s.as_str() {
                "0" => Some(false),
                "1" => Some(true),
                _ => None,
            }),
            state,
        }
    }

    /// Whether the guard holds cookies off: a scheduler is attached or in transition, or the
    /// state cannot be told.
    pub fn blocks_cookies(&self) -> bool {
        !matches!(self.state, State::Absent | State::Disabled)
    }

    /// The scheduler as messages name it: `"simple"`, or `an unnamed scheduler`, or why the
    /// state is unknown.
    pub fn describe(&self) -> String {
        match (&self.state, &self.ops) {
            (State::Unknown(why), _) => format!("the sched_ext state is unknown ({why})"),
            (State::Absent, _) => "this kernel has no sched_ext".into(),
            (State::Disabled, _) => "no sched_ext scheduler is loaded".into(),
            (state, Some(name)) => format!("the sched_ext scheduler {name:?} is {}", state.as_str()),
            (state, None) => format!("a sched_ext scheduler is {}", state.as_str()),
        }
    }
}

/// No `state` file: the kernel has no sched_ext when sysfs is there to say so, else unknown.
fn absent_or_unknown(sys_root: &Path, dir: &Path) -> State {
    let kernel: PathBuf = sys_root.join("kernel");
    if dir.exists() {
        State::Unknown(format!("{} has no state file", dir.display()))
    } else if kernel.is_dir() {
        State::Absent
    } else {
        State::Unknown(format!("{} is missing: is sysfs mounted?", kernel.display()))
    }
}

#[cfg(test)]
#[path = "sched_ext_tests.rs"]
mod tests;
