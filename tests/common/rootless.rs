//! A dedicated unprivileged user for rootless podman runs, set up by root and removed again: the
//! account (if missing), its `/etc/subuid` and `/etc/subgid` ranges (if missing), and helpers to
//! hand a test's files to it and to run commands as it with a clean environment.
//!
//! Tests that use it hold [`RootlessUser::lock`]: they share one account.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// The account's name.
pub const USER: &str = "ocsh-rootless";

/// First subordinate id given to [`USER`] when it has none (far above the usual 100000 ranges).
const SUBID_START: u64 = 1_879_048_192;
const SUBID_COUNT: u64 = 65_536;

static LOCK: Mutex<()> = Mutex::new(());

/// The user, for the lifetime of one test; dropping it undoes what [`RootlessUser::setup`] added.
#[derive(Debug)]
pub struct RootlessUser {
    /// Host uid.
    pub uid: u32,
    /// Host gid.
    pub gid: u32,
    created: bool,
    added_subids: Vec<&'static str>,
    _serial: MutexGuard<'static, ()>,
}

fn sh(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("failed to run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl RootlessUser {
    /// Creates [`USER`] and its subordinate id ranges where missing (needs root and `useradd`).
    pub fn setup() -> Result<Self, String> {
        let serial = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let exists = Command::new("getent").args(["passwd", USER]).output().is_ok_and(|o| o.status.success());
        if !exists {
            sh(Command::new("useradd").args([
                "--system",
                "--user-group",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ]))?;
        }
        let mut user = Self { uid: 0, gid: 0, created: !exists, added_subids: Vec::new(), _serial: serial };
        user.uid = sh(Command::new("id").args(["-u", USER]))?.parse().map_err(|e| format!("id -u: {e}"))?;
        user.gid = sh(Command::new("id").args(["-g", USER]))?.parse().map_err(|e| format!("id -g: {e}"))?;
        for file in ["/etc/subuid", "/etc/subgid"] {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            if !text.lines().any(|l| l.starts_with(&format!("{USER}:"))) {
                let mut new = text.clone();
                if !new.is_empty() && !new.ends_with('\n') {
                    new.push('\n');
                }
                new.push_str(&format!("{USER}:{SUBID_START}:{SUBID_COUNT}\n"));
                std::fs::write(file, new).map_err(|e| format!("failed to write {file}: {e}"))?;
                user.added_subids.push(file);
            }
        }
        Ok(user)
    }

    /// Gives `path` (not recursively) to the user.
    pub fn give(&self, path: &Path) {
        std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid))
            .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    }

    /// Gives `path` and everything under it to the user.
    pub fn give_tree(&self, path: &Path) {
        self.give(path);
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
            for entry in std::fs::read_dir(path).expect("read_dir").flatten() {
                self.give_tree(&entry.path());
            }
        }
    }

    /// `runuser -u USER -- env -i PATH=... HOME=home [vars...] program`: the user with only the
    /// environment given.
    pub fn command(&self, home: &Path, vars: &[(&str, String)], program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("runuser");
        c.args(["-u", USER, "--", "env", "-i", "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"])
            .arg(format!("HOME={}", home.display()));
        for (k, v) in vars {
            c.arg(format!("{k}={v}"));
        }
        c.arg(program);
        c
    }

    /// `/run/user/<uid>`.
    pub fn run_user_dir(&self) -> PathBuf {
        PathBuf::from(format!("/run/user/{}", self.uid))
    }
}

impl Drop for RootlessUser {
    fn drop(&mut self) {
        for file in &self.added_subids {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let kept: String =
                text.lines().filter(|l| !l.starts_with(&format!("{USER}:"))).map(|l| format!("{l}\n")).collect();
            if let Err(e) = std::fs::write(file, kept) {
                eprintln!("cleanup: failed to write {file}: {e}");
            }
        }
        if self.created
            && let Err(e) = sh(Command::new("userdel").arg(USER))
        {
            eprintln!("cleanup: {e}");
        }
    }
}
