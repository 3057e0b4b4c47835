//! The state directory (`/run/oci-coresched-hook` by default): created 0700, refused when it is
//! not a directory, owned by someone else or open to group/others, and the bounded-wait lock file
//! that serialises every read → decide → prctl → write.
//!
//! The lock is tried first; under contention a helper thread blocks in `flock` on a clone of the
//! descriptor, so the lock passes over the moment it is freed, and the caller waits at most its
//! timeout ([`DirError::LockTimeout`]). [`create_in`] is the one way a file of the state dir is made
//! (`done/`, `stopped/`): mode 0600, no symlink followed.

pub mod choice;
pub mod fail_open;

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The cache file's name inside the state directory.
/// The cache file's name in the state dir.
pub const DB_FILE: &str = "cache.db";

/// Default state directory.
pub const DEFAULT_STATE_DIR: &str = "/run/oci-coresched-hook";

/// Problems with the directory or the lock.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// Could not create or inspect it.
    #[error("failed to prepare state dir {path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// It exists but is unsafe or unusable.
    #[error("state dir {path} is unusable: {problem}")]
    Unsafe {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// Another hook held the lock for longer than the timeout.
    #[error("failed to take the state lock {path}: still held by another process after {waited:?}")]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long we waited.
        waited: Duration,
    },
}

/// A checked state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
}

/// The held lock; dropping it (or the process dying) releases it.
#[derive(Debug)]
pub struct LockGuard {
    _file: File,
}

impl StateDir {
    /// Creates the directory (0700) if missing and checks that it is safe to use.
    pub fn open(path: &Path) -> Result<Self, DirError> {
        let io = |source| DirError::Io { path: path.to_path_buf(), source };
        match std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
        let meta = std::fs::symlink_metadata(path).map_err(io)?;
        Self::check(path, &meta)
    }

    /// Checks an existing state directory as [`StateDir::open`] does, without creating anything
    /// (for read-only commands): `None` when nothing exists at `path` yet, an error when what is
    /// there is not a safe directory (a regular file, a symlink, another owner, open modes).
    pub fn existing(path: &Path) -> Result<Option<Self>, DirError> {
        match std::fs::symlink_metadata(path) {
            Ok(meta) => Self::check(path, &meta).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(DirError::Io { path: path.to_path_buf(), source }),
        }
    }

    fn check(path: &Path, meta: &std::fs::Metadata) -> Result<Self, DirError> {
        let unsafe_ = |problem: String| DirError::Unsafe { path: path.to_path_buf(), problem };
        if !meta.is_dir() {
            return Err(unsafe_("not a directory".into()));
        }
        let euid = euid();
        if meta.uid() != euid {
            return Err(unsafe_(format!("owned by uid {}, expected {euid}", meta.uid())));
        }
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(unsafe_(format!("mode {mode:04o} lets other users in; expected 0700")));
        }
        Ok(Self { path: path.to_path_buf() })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The SQLite cache file.
    pub fn db_path(&self) -> PathBuf {
        self.path.join(DB_FILE)
    }

    /// The lock file.
    pub fn lock_path(&self) -> PathBuf {
        self.path.join("lock")
    }

    /// Takes the exclusive lock, polling for at most `timeout`.
    pub fn lock(&self, timeout: Duration) -> Result<LockGuard, DirError> {
        let path = self.lock_path();
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|source| DirError::Io { path: path.clone(), source })?;
        // Uncontended: one try_lock, no thread.
        match file.try_lock() {
            Ok(()) => return Ok(LockGuard { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(source)) => return Err(DirError::Io { path, source }),
        }
        // Contended: block in flock on a helper thread so the lock passes to us the moment it is
        // released (polling would leave it idle between holders, a convoy when a hundred
        // containers start at once), and give up after `timeout`. flock belongs to the open file
        // description, which the clone shares, so the lock taken by the helper is ours. If we give
        // up, the helper may still get the lock later, but by then `file` is closed and the
        // helper's clone is the last descriptor: dropping it right after releases the lock.
        let start = Instant::now();
        let waiter = file.try_clone().map_err(|source| DirError::Io { path: path.clone(), source })?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("state-lock".into())
            .spawn(move || {
                let _ = tx.send(waiter.lock());
            })
            .map_err(|source| DirError::Io { path: path.clone(), source })?;
        match rx.recv_timeout(timeout) {
            Ok(Ok(())) => Ok(LockGuard { _file: file }),
            Ok(Err(source)) => Err(DirError::Io { path, source }),
            Err(_) => Err(DirError::LockTimeout { path, waited: start.elapsed() }),
        }
    }
}

/// The process's effective uid (in its own user namespace): the owner the state dir must have.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Creates (or truncates) the file `name` in `dir` (mode 0600, no symlink followed), creating
/// `dir` (0700) when it is missing: the one way the state dir's `done/` and `stopped/` files are
/// made.
pub fn create_in(dir: &Path, name: &str) -> std::io::Result<std::fs::File> {
    let open = || {
        OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(dir.join(name))
    };
    match open() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match std::fs::DirBuilder::new().mode(0o700).create(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            open()
        }
        other => other,
    }
}

#[cfg(test)]
#[path = "state_dir_tests.rs"]
mod tests;
