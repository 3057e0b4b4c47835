//! The long-running parts' facts: `follower` (`reconcile --follow`) and `nri` (the NRI plugin),
//! found in `/proc` by their command line (the packaged units and the DaemonSet's containers
//! alike), each process's executable compared with this binary.

use crate::host::bundle::HOOK_NAME;
use crate::host::procfs::ProcFs;
use crate::host::wiring;
use crate::values::Pid;

use super::{Fact, Level, Node};

/// Which long-running part a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `reconcile --follow`.
    Follower,
    /// `nri`.
    Nri,
}

/// One running long-running part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// Its pid.
    pub pid: Pid,
    /// What it is.
    pub kind: Kind,
    /// Its command line.
    pub cmdline: Vec<String>,
    /// Whether its executable is this binary (or why that could not be told).
    pub same_binary: Result<bool, String>,
}

/// What the scan found.
#[derive(Debug, Clone, Default)]
pub struct Agents {
    /// The processes.
    pub found: Vec<Agent>,
    /// Why `/proc` could not be listed, if so.
    pub error: Option<String>,
}

/// Which part `args` (a command line) runs, if it is this binary's `reconcile --follow` or `nri`.
pub fn kind_of(args: &[String]) -> Option<Kind> {
    let (argv0, rest) = args.split_first()?;
    if std::path::Path::new(argv0).file_name()? != HOOK_NAME {
        return None;
    }
    let mut it = rest.iter();
    let command = loop {
        let a = it.next()?;
        if ["--config", "--state-dir", "--log-level"].contains(&a.as_str()) {
            it.next();
        } else if !a.starts_with('-') {
            break a.as_str();
        }
    };
    match command {
        "nri" => Some(Kind::Nri),
        "reconcile" if rest.iter().any(|a| a == "--follow") => Some(Kind::Follower),
        _ => None,
    }
}

/// The long-running parts `/proc` shows (this process left out).
pub fn scan<K>(node: &Node<'_, K>) -> Agents {
    let proc: &ProcFs = &node.sys.proc;
    let pids = match proc.pids() {
        Ok(p) => p,
        Err(e) => {
            return Agents { found: Vec::new(), error: Some(format!("failed to list {}: {e}", proc.root().display())) };
        }
    };
    let mut found = Vec::new();
    for pid in pids.into_iter().filter(|p| *p != node.self_pid) {
        let Ok(Some(cmdline)) = proc.cmdline(pid) else { continue };
        let Some(kind) = kind_of(&cmdline) else { continue };
        let exe = proc.root().join(pid.to_string()).join("exe");
        let same_binary = wiring::same_binary(&exe, node.self_exe).map_err(|e| e.to_string());
        found.push(Agent { pid, kind, cmdline, same_binary });
    }
    Agents { found, error: None }
}

impl Agents {
    /// The NRI plugin runs.
    pub fn nri_running(&self) -> bool {
        self.found.iter().any(|a| a.kind == Kind::Nri)
    }

    /// The `follower` and `nri` facts.
    pub fn facts<K>(&self, node: &Node<'_, K>) -> Vec<Fact> {
        if let Some(e) = &self.error {
            return vec![Fact::new("follower", Level::Warn, e.clone())];
        }
        let exe = node.self_exe.display().to_string();
        vec![
            self.fact(
                Kind::Follower,
                "follower",
                Fact::new(
                    "follower",
                    Level::Warn,
                    "the follower (reconcile --follow) is not running: processes exec'd into containers keep the \
                     caller's cookie and containers whose hook failed open are not healed (systemctl enable --now \
                     oci-coresched-hook-reconcile.service, or the DaemonSet's follow container)",
                ),
                &exe,
            ),
            self.fact(Kind::Nri, "nri", Fact::new("nri", Level::Info, "the NRI plugin is not running"), &exe),
        ]
    }

    fn fact(&self, kind: Kind, name: &'static str, absent: Fact, exe: &str) -> Fact {
        let mine: Vec<&Agent> = self.found.iter().filter(|a| a.kind == kind).collect();
        if mine.is_empty() {
            return absent;
        }
        let what = if kind == Kind::Follower { "the follower" } else { "the NRI plugin" };
        let pids: Vec<String> = mine.iter().map(|a| a.pid.to_string()).collect();
        let mut detail = Vec::new();
        let mut other = Vec::new();
        for a in &mine {
            let line = a.cmdline.join(" ");
            match &a.same_binary {
                Ok(true) => detail.push(format!("pid {}: {line} (this binary)", a.pid)),
                Ok(false) => {
                    other.push(a.pid.to_string());
                    detail.push(format!("pid {}: {line} (another build than {exe})", a.pid));
                }
                Err(e) => detail.push(format!("pid {}: {line} (failed to compare with {exe}: {e})", a.pid)),
            }
        }
        let fact = if other.is_empty() {
            Fact::new(name, Level::Ok, format!("{what} runs (pid {})", pids.join(", ")))
        } else {
            Fact::new(
                name,
                Level::Warn,
                format!(
                    "{what} runs another build than this binary (pid {}): restart it so that it runs the installed one",
                    other.join(", ")
                ),
            )
        };
        fact.with_detail(detail)
    }
}

#[cfg(test)]
#[path = "agents_tests.rs"]
mod tests;
