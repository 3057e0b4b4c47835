//! Which state directory a process uses when `--state-dir` does not say: the system one
//! ([`DEFAULT_STATE_DIR`]) for root, a per-user one for anyone else. The hook under rootless
//! podman and the operator commands run by the same user decide here, by the same rule, so they
//! find the same cache.
//!
//! "Root" means uid 0 on the host, not in the process's user namespace: rootless podman runs the
//! OCI runtime, and so the hook, in a user namespace where the user is uid 0, but the host's
//! `/run` and `/run/oci-coresched-hook` are not theirs. The host uid is the process's euid mapped
//! through `/proc/self/uid_map` (the identity `0 0 4294967295` in the initial namespace).
//!
//! A non-root process uses `$XDG_RUNTIME_DIR/oci-coresched-hook` when `XDG_RUNTIME_DIR` is an
//! absolute path to a directory the process owns, else `/run/user/<host uid>/oci-coresched-hook`
//! when that directory exists and is owned by the process (its owner appears as uid 0 inside
//! podman's namespace). Podman gives the hook only the hooks.d file's `env`, so under podman the
//! second rule applies. Neither → [`NoStateDir`]: the hook fails open (or closed with
//! `fail_closed`) with that one message.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::host::state_dir::DEFAULT_STATE_DIR;

/// The per-user state directory's name inside the user's runtime directory.
pub const USER_STATE_DIR_NAME: &str = "oci-coresched-hook";

/// No per-user state directory can be used.
#[derive(Debug, thiserror::Error)]
#[error("failed to find a per-user state dir for {who}: {problem}; pass --state-dir DIR")]
pub struct NoStateDir {
    /// The process, e.g. `host uid 1000 (uid 0 in a user namespace)`.
    pub who: String,
    /// Why neither candidate fits.
    pub problem: String,
}

/// Why a candidate directory cannot be used (said after its path).
#[derive(Debug, thiserror::Error)]
pub enum DirProblem {
    /// Something else is at the path.
    #[error("is not a directory")]
    NotADirectory,
    /// Nothing is at the path.
    #[error("does not exist")]
    Missing,
    /// `stat` failed otherwise. (No `#[source]`: the cause is said here, once.)
    #[error("cannot be read: {0}")]
    Unreadable(std::io::Error),
}

/// The reads the decision needs, behind a seam so that the tests need no root or namespace.
pub trait Host {
    /// The effective uid in the process's own user namespace.
    fn euid(&self) -> u32;
    /// The text of `/proc/self/uid_map`, `None` when unreadable.
    fn uid_map(&self) -> Option<String>;
    /// An environment variable.
    fn var(&self, name: &str) -> Option<OsString>;
    /// The owner of the directory at `path` (following symlinks), `Err` with what is wrong.
    fn dir_owner(&self, path: &Path) -> Result<u32, DirProblem>;
}

/// The running process.
#[derive(Debug, Clone, Copy, Default)]
pub struct ThisProcess;

impl Host for ThisProcess {
    fn euid(&self) -> u32 {
        crate::host::state_dir::euid()
    }
    fn uid_map(&self) -> Option<String> {
        std::fs::read_to_string("/proc/self/uid_map").ok()
    }
    fn var(&self, name: &str) -> Option<OsString> {
        std::env::var_os(name)
    }
    fn dir_owner(&self, path: &Path) -> Result<u32, DirProblem> {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => Ok(m.uid()),
            Ok(_) => Err(DirProblem::NotADirectory),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(DirProblem::Missing),
            Err(e) => Err(DirProblem::Unreadable(e)),
        }
    }
}

/// `uid` (of the process's namespace) mapped to the host through `uid_map`; `uid` itself when
/// the map is unreadable or does not cover it.
fn host_uid(uid: u32, uid_map: Option<&str>) -> u32 {
    let Some(map) = uid_map else { return uid };
    for line in map.lines() {
        let f: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
        if let [inside, outside, count] = f[..]
            && (inside..inside + count).contains(&u64::from(uid))
        {
            return u32::try_from(outside + (u64::from(uid) - inside)).unwrap_or(uid);
        }
    }
    uid
}

/// The state directory to use: `explicit` (from `--state-dir`) as given; otherwise the system
/// one for host root, the per-user one for anyone else (see the module docs).
pub fn choose(explicit: Option<&Path>, host: &impl Host) -> Result<PathBuf, NoStateDir> {
    if let Some(dir) = explicit {
        return Ok(dir.to_path_buf());
    }
    let euid = host.euid();
    let uid = host_uid(euid, host.uid_map().as_deref());
    if uid == 0 {
        return Ok(PathBuf::from(DEFAULT_STATE_DIR));
    }
    let mut problems = Vec::new();
    match host.var("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()).map(PathBuf::from) {
        None => problems.push("XDG_RUNTIME_DIR is not set".to_string()),
        Some(p) if !p.is_absolute() => problems.push(format!("XDG_RUNTIME_DIR {} is not absolute", p.display())),
        Some(p) => match host.dir_owner(&p) {
            Ok(owner) if owner == euid => return Ok(p.join(USER_STATE_DIR_NAME)),
            Ok(owner) => problems.push(format!("XDG_RUNTIME_DIR {} is owned by uid {owner}", p.display())),
            Err(why) => problems.push(format!("XDG_RUNTIME_DIR {} {why}", p.display())),
        },
    }
    let run_user = PathBuf::from(format!("/run/user/{uid}"));
    match host.dir_owner(&run_user) {
        Ok(owner) if owner == euid => return Ok(run_user.join(USER_STATE_DIR_NAME)),
        Ok(owner) => problems.push(format!("{} is owned by uid {owner}", run_user.display())),
        Err(why) => problems.push(format!("{} {why}", run_user.display())),
    }
    let who =
        if uid == euid { format!("uid {uid}") } else { format!("host uid {uid} (uid {euid} in a user namespace)") };
    Err(NoStateDir { who, problem: problems.join(", and ") })
}

#[cfg(test)]
#[path = "choice_tests.rs"]
mod tests;
