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

use crate::state_dir::DEFAULT_STATE_DIR;

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
        crate::state_dir::euid()
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
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// The initial user namespace.
    const INITIAL: &str = "         0          0 4294967295\n";
    /// Rootless podman's namespace for host uid 1000 with a subordinate range.
    const PODMAN_1000: &str = "         0       1000          1\n         1     100000      65536\n";

    #[derive(Default)]
    struct Fake {
        euid: u32,
        uid_map: Option<&'static str>,
        vars: HashMap<&'static str, &'static str>,
        dirs: HashMap<&'static str, u32>,
    }

    impl Host for Fake {
        fn euid(&self) -> u32 {
            self.euid
        }
        fn uid_map(&self) -> Option<String> {
            self.uid_map.map(str::to_string)
        }
        fn var(&self, name: &str) -> Option<OsString> {
            self.vars.get(name).map(OsString::from)
        }
        fn dir_owner(&self, path: &Path) -> Result<u32, DirProblem> {
            self.dirs.get(path.to_str().unwrap()).copied().ok_or(DirProblem::Missing)
        }
    }

    fn fake(euid: u32, uid_map: Option<&'static str>) -> Fake {
        Fake { euid, uid_map, ..Fake::default() }
    }

    fn ok(f: &Fake) -> String {
        choose(None, f).unwrap().display().to_string()
    }

    fn err(f: &Fake) -> String {
        choose(None, f).unwrap_err().to_string()
    }

    #[test]
    fn explicit_dir_is_used_as_given() {
        let f = fake(0, Some(PODMAN_1000));
        assert_eq!(choose(Some(Path::new("/srv/x")), &f).unwrap(), PathBuf::from("/srv/x"));
        let f = fake(1000, Some(INITIAL));
        assert_eq!(choose(Some(Path::new("/srv/x")), &f).unwrap(), PathBuf::from("/srv/x"));
    }

    #[test]
    fn root_in_the_initial_namespace_uses_the_system_dir() {
        assert_eq!(ok(&fake(0, Some(INITIAL))), DEFAULT_STATE_DIR);
        // No /proc: the euid is taken as the host uid.
        assert_eq!(ok(&fake(0, None)), DEFAULT_STATE_DIR);
        // A namespace that maps its uid 0 to host root is root too.
        assert_eq!(ok(&fake(0, Some("0 0 1\n"))), DEFAULT_STATE_DIR);
    }

    #[test]
    fn rootless_podman_uses_run_user_of_the_host_uid() {
        // Inside podman's namespace the user is uid 0 and /run/user/1000 appears owned by uid 0.
        let mut f = fake(0, Some(PODMAN_1000));
        f.dirs.insert("/run/user/1000", 0);
        assert_eq!(ok(&f), "/run/user/1000/oci-coresched-hook");
    }

    #[test]
    fn unprivileged_user_prefers_an_owned_xdg_runtime_dir() {
        let mut f = fake(1000, Some(INITIAL));
        f.vars.insert("XDG_RUNTIME_DIR", "/run/user/1000");
        f.dirs.insert("/run/user/1000", 1000);
        assert_eq!(ok(&f), "/run/user/1000/oci-coresched-hook");
        f.vars.insert("XDG_RUNTIME_DIR", "/tmp/xdg-1000");
        f.dirs.insert("/tmp/xdg-1000", 1000);
        assert_eq!(ok(&f), "/tmp/xdg-1000/oci-coresched-hook");
    }

    #[test]
    fn unusable_xdg_runtime_dir_falls_back_to_run_user() {
        let mut f = fake(1000, Some(INITIAL));
        f.dirs.insert("/run/user/1000", 1000);
        f.vars.insert("XDG_RUNTIME_DIR", "/tmp/someone-else");
        f.dirs.insert("/tmp/someone-else", 1001);
        assert_eq!(ok(&f), "/run/user/1000/oci-coresched-hook");
        f.vars.insert("XDG_RUNTIME_DIR", "relative/dir");
        assert_eq!(ok(&f), "/run/user/1000/oci-coresched-hook");
        f.vars.insert("XDG_RUNTIME_DIR", "");
        assert_eq!(ok(&f), "/run/user/1000/oci-coresched-hook");
    }

    #[test]
    fn no_usable_dir_is_one_error_naming_each_candidate() {
        let f = fake(0, Some(PODMAN_1000));
        assert_eq!(
            err(&f),
            "failed to find a per-user state dir for host uid 1000 (uid 0 in a user namespace): XDG_RUNTIME_DIR \
             is not set, and /run/user/1000 does not exist; pass --state-dir DIR"
        );
        let mut f = fake(1000, Some(INITIAL));
        f.vars.insert("XDG_RUNTIME_DIR", "/run/user/1000");
        f.dirs.insert("/run/user/1000", 0);
        assert_eq!(
            err(&f),
            "failed to find a per-user state dir for uid 1000: XDG_RUNTIME_DIR /run/user/1000 is owned by uid 0, \
             and /run/user/1000 is owned by uid 0; pass --state-dir DIR"
        );
    }

    #[test]
    fn host_uid_follows_the_map() {
        assert_eq!(host_uid(0, Some(PODMAN_1000)), 1000);
        assert_eq!(host_uid(5, Some(PODMAN_1000)), 100004);
        assert_eq!(host_uid(1000, Some(INITIAL)), 1000);
        assert_eq!(host_uid(7, Some("garbage\n")), 7);
        assert_eq!(host_uid(7, None), 7);
    }
}
