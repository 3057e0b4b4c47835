//! Deferred forgets: poststop records a stopped container as an empty file `stopped/<container id>`
//! in the state dir instead of opening the cache, and whoever next opens the cache under the lock
//! (a hook, `gc`, the follower's sweep, `list`, `metrics`) applies them in its transaction.
//!
//! Applying one removes the container's row only when that row's init is dead or its pid was
//! reused, which a stopped container's always is: a row whose init is alive belongs to a newer
//! container that took the same id, and stays. Until a forget is applied, its member is a dead
//! one, which every reader already recognises by pid and start time; so deferring it changes no
//! decision, only when the row goes.
//!
//! The writers apply every recorded stop ([`apply`], from `Session::write` and
//! `Session::apply_stops`); the hook only once [`HOOK_BACKLOG`] have piled up ([`apply_backlog`]),
//! so that a createRuntime does not pay for each earlier poststop. The files go after the commit.
//! When the file cannot be written, poststop forgets the container under the lock instead.

use std::path::{Path, PathBuf};

use crate::cookies::membership::Liveness;
use crate::host::procfs::ProcFs;
use crate::store::{Member, Store, StoreError, Txn};

/// The directory of deferred forgets inside the state dir.
pub const DIR: &str = "stopped";

/// Records that `container_id` stopped (the caller checked the state dir; no lock is needed: the
/// file's existence is the whole record).
pub fn record(state_dir: &Path, container_id: &str) -> std::io::Result<()> {
    crate::host::state_dir::create_in(&state_dir.join(DIR), container_id).map(drop)
}

/// What [`apply`] did; [`Applied::finish`] removes the files once the transaction committed.
#[derive(Debug, Default)]
#[must_use = "the applied files are removed by `finish` after the commit"]
pub struct Applied {
    /// Rows removed.
    pub removed: Vec<Member>,
    files: Vec<PathBuf>,
}

impl Applied {
    /// Removes the applied forgets' files (after the transaction that applied them committed; a
    /// file left by a crash here is applied again, which changes nothing).
    pub fn finish(self) -> Vec<Member> {
        for f in &self.files {
            if let Err(e) = std::fs::remove_file(f) {
                log::warn!("failed to remove the applied forget {}: {e}", f.display());
            }
        }
        self.removed
    }
}

/// How many recorded stops make a hook apply them ([`apply_backlog`]): below this the hook leaves
/// them to `gc`, the follower's sweep and the readers, so that a createRuntime does not pay for
/// every earlier poststop; at this many it applies them all, which bounds the directory on a
/// node where nothing else opens the cache.
pub const HOOK_BACKLOG: usize = 32;

/// Applies every deferred forget in `state_dir` to `store` (inside the caller's transaction, under
/// the lock). A forget whose row's init cannot be read is kept for the next opener.
pub fn apply(state_dir: &Path, store: &Txn<'_>, proc: &ProcFs) -> Result<Applied, StoreError> {
    apply_backlog(state_dir, store, proc, 1)
}

/// [`apply`], when at least `min` stops are recorded; otherwise nothing.
pub fn apply_backlog(state_dir: &Path, store: &Txn<'_>, proc: &ProcFs, min: usize) -> Result<Applied, StoreError> {
    let mut applied = Applied::default();
    let entries: Vec<std::fs::DirEntry> = match std::fs::read_dir(state_dir.join(DIR)) {
        Ok(e) => e.flatten().collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(applied),
        Err(e) => {
            log::warn!("failed to read the deferred forgets in {}: {e}", state_dir.join(DIR).display());
            return Ok(applied);
        }
    };
    if entries.len() < min {
        return Ok(applied);
    }
    for entry in entries {
        let file = entry.path();
        let Some(id) = entry.file_name().to_str().map(str::to_string) else {
            applied.files.push(file);
            continue;
        };
        if let Some(m) = store.member(&id)? {
            match crate::cookies::membership::liveness(proc, m.init()) {
                Liveness::Alive => {
                    log::info!(
                        "stopped container {id}: its id now names a live container (pid {}); kept, and the stop \
                         dropped",
                        m.pid
                    );
                }
                Liveness::Dead | Liveness::Reused => {
                    store.remove_member(&id)?;
                    crate::cookies::receipt::remove(state_dir, &id);
                    log::info!("container {id} stopped: removed from group {}", m.group);
                    applied.removed.push(m);
                }
                Liveness::Unreadable(e) => {
                    log::warn!(
                        "stopped container {id}: failed to read /proc for pid {}: {e}; forgetting it later",
                        m.pid
                    );
                    continue;
                }
            }
        }
        applied.files.push(file);
    }
    Ok(applied)
}

/// Applies the deferred forgets in a transaction of their own (for readers that write nothing
/// else: `list`, `metrics`, `inspect`, the follower's view).
/// With no stop recorded it writes nothing, so a reader of a cache it may not write still works.
pub fn apply_now(state_dir: &Path, store: &Store, proc: &ProcFs) -> Result<Vec<Member>, StoreError> {
    let none = std::fs::read_dir(state_dir.join(DIR)).map_or(true, |mut d| d.next().is_none());
    if none {
        return Ok(Vec::new());
    }
    Ok(store.transaction(|s| apply(state_dir, s, proc))?.finish())
}

#[cfg(test)]
#[path = "stopped_tests.rs"]
mod tests;
