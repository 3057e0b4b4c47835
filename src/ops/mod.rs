//! Operator commands that read (and later repair) what the hook did: `inspect`, `list`.

pub mod gc;
pub mod inspect;
pub mod list;
pub mod metrics;
pub mod rebuild;
pub mod reconcile;

use std::path::Path;

use crate::statedir::{LockGuard, StateDir};
use crate::store::{Store, StoreError};

/// Opens the cache under the lock for reading, without creating anything: `None` when there is
/// no state dir or no database yet.
pub fn open_existing(state_dir: &Path, timeout: std::time::Duration) -> anyhow::Result<Option<(LockGuard, Store)>> {
    if !StateDir::has_cache(state_dir) {
        return Ok(None);
    }
    let dir = StateDir::open(state_dir)?;
    let lock = dir.lock(timeout)?;
    let store = Store::open(&dir.db_path()).map_err(|e: StoreError| anyhow::anyhow!(e))?;
    Ok(Some((lock, store)))
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod view_tests;
