//! The fail-open ledger: `<state dir>/fail-open/<reason>`, one file per reason, one byte appended
//! for each hook run that failed open (let a container run without the cookie its policy asks
//! for). A count is a file's length: an `O_APPEND` write of one byte needs no lock and no read,
//! so a hook that could not take the state lock, or open the cache, or parse the config, still
//! counts, and the count outlives the process (`metrics` and the follower read it).
//!
//! The ledger is written only into a directory that is ours: the state dir and its `fail-open`
//! directory must be real directories (not symlinks) owned by this user, and each file is opened
//! with `O_NOFOLLOW`. When the state dir itself is missing or not ours, nothing is written and the
//! caller says so in its log line.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::FailureReason;

/// The ledger's directory in the state dir.
pub const DIR: &str = "fail-open";

/// Why a fail-open could not be recorded, or the ledger read.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// A directory or file could not be made, opened, written or read.
    #[error("failed to use the fail-open ledger {}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A directory on the way is a symlink, not a directory, or another user's.
    #[error("failed to use the fail-open ledger {}: it is not a directory of this user", path.display())]
    NotOurs {
        /// The path.
        path: PathBuf,
    },
}

/// Checks that `path` is a directory (not a symlink) owned by this process's user.
fn ours(path: &Path) -> Result<(), LedgerError> {
    let meta = std::fs::symlink_metadata(path).map_err(|source| LedgerError::Io { path: path.into(), source })?;
    if !meta.file_type().is_dir() || meta.uid() != super::euid() {
        return Err(LedgerError::NotOurs { path: path.into() });
    }
    Ok(())
}

/// Counts one fail-open of `reason` in the ledger of `state_dir`.
pub fn record(state_dir: &Path, reason: FailureReason) -> Result<(), LedgerError> {
    ours(state_dir)?;
    let dir = state_dir.join(DIR);
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => return Err(LedgerError::Io { path: dir, source }),
    }
    ours(&dir)?;
    let file = dir.join(reason.as_str());
    let io = |source| LedgerError::Io { path: file.clone(), source };
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(&file)
        .map_err(io)?;
    f.write_all(b"1").map_err(io)
}

/// The count of every reason in the ledger of `state_dir` (every reason of
/// [`FailureReason::ALL`], 0 when it has no file; no ledger yet: all 0).
pub fn counts(state_dir: &Path) -> Result<BTreeMap<FailureReason, u64>, LedgerError> {
    let dir = state_dir.join(DIR);
    let mut out: BTreeMap<FailureReason, u64> = FailureReason::ALL.iter().map(|r| (*r, 0)).collect();
    for (reason, count) in out.iter_mut() {
        let file = dir.join(reason.as_str());
        match std::fs::symlink_metadata(&file) {
            Ok(meta) if meta.file_type().is_file() => *count = meta.len(),
            Ok(_) => return Err(LedgerError::NotOurs { path: file }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(LedgerError::Io { path: file, source }),
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "fail_open_tests.rs"]
mod tests;
