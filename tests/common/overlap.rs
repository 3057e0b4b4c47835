//! The two kinds of test that must not run at once: one that loads the machine ([`heavy_load`])
//! and one that asserts a wall-clock bound ([`timed`]).

#[allow(unused_imports)]
use super::*;

/// All integration tests run in one process, two (one per CPU) at a time, whatever file they come
/// from. A test that loads the machine (a fork storm, two dozen hooks at once) must not run beside
/// a test that asserts a wall-clock bound: the bound would measure the other test. (When each file
/// was a test binary of its own, cargo ran the files one after another.)
pub(crate) static LOAD: RwLock<()> = RwLock::new(());

/// Held for its whole run by a test that loads the machine: it waits until no [`timed`] test
/// runs, and none starts until it is done.
pub fn heavy_load() -> RwLockWriteGuard<'static, ()> {
    LOAD.write().unwrap_or_else(PoisonError::into_inner)
}

/// Held by a test (or the part of one) that asserts a wall-clock bound: timed tests run beside each
/// other and beside any light test, never beside a [`heavy_load`] one.
pub fn timed() -> RwLockReadGuard<'static, ()> {
    LOAD.read().unwrap_or_else(PoisonError::into_inner)
}
