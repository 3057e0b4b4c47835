//! The cache session: the one way the hook, the NRI plugin's catch-up, the follower and every
//! operator command open the cache, [`Session::open`] with [`Create`] (a writer that records) or
//! [`Existing`] (nothing is created). A session holds the state lock, the open [`Store`] and what
//! became of the file on the way in:
//!
//! - **ours, current**: used as it is;
//! - **new, upgraded from an older build, or a damaged file moved aside**: the cache may lack
//!   containers that run, so it is refilled from the runtimes' state ([`crate::session::rebuild`], the
//!   missing containers only, GET only) before anything decides. A fresh cache never makes a
//!   group's next container create a second cookie while members of the group still run;
//! - **a newer build's format** ([`Unusable`]): the file is left exactly as it is, and the session
//!   works on a stand-in, an in-memory cache filled the same way from the runtimes' state. What
//!   the run writes is not kept; no receipt is written and no recorded stop applied, since both
//!   belong to the file. One warning line says so (once per process).
//!
//! Rows are written under the session's lock, always in a [`Txn`] (the only thing that writes rows),
//! through one of four doors:
//!
//! - [`Session::write`], every writer's door (the hook, `gc`, `reconcile`, `rebuild`, the NRI
//!   plugin's catch-up through the hook, the follower's forced idle): one transaction, with the
//!   recorded stops of poststop ([`crate::cookies::stopped`]) applied first; a file that shows
//!   damage on the way ([`Damage`]) is moved aside, a fresh one refilled, and the writer runs once
//!   more there;
//! - [`Session::apply_stops`], the readers' door (`list`, `metrics`, `inspect`, the follower's
//!   view): only the recorded stops, in a transaction of their own
//!   ([`crate::cookies::stopped::apply_now`]), and none at all when no stop is recorded;
//! - [`Session::count_failure`]: a failed hook run's counters, in a transaction of their own;
//! - the follower's removal of members whose init it saw gone (`agent/follow/refresh.rs`,
//!   `forget_gone`): `ops::gc::gc_members` in a [`Store::transaction`] of its own on
//!   [`Session::store`], after [`Session::apply_stops`], without the damage retry (a damaged file
//!   is left to the next writer).
//!
//! The refill of a cache that may lack containers writes in its own transaction as the session
//! opens, before any door.
//!
//! [`Session::open`] with [`Create`] takes a state dir the caller has just checked (the hook's plan);
//! [`Session::apply_stops`] applies the recorded stops for a reader; [`Refill`] carries what a refill
//! needs (the kernel, `/proc`, the runtimes' roots, the config).

mod lost_shims;
pub mod rebuild;
pub mod running;

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use self::rebuild::{Fill, RebuildReport};
use crate::config::Config;
use crate::cookies::engine::EngineError;
use crate::cookies::stopped::{self, Applied};
use crate::error::{Chain, FailureReason};
use crate::host::kernel::CoreSched;
use crate::host::procfs::ProcFs;
use crate::host::runtimes::RuntimeRoot;
use crate::host::state_dir::{DirError, LockGuard, StateDir};
use crate::store::{Found, Store, StoreError, Txn, Unusable};

/// What a cache that may lack running containers is refilled from.
#[derive(Debug)]
pub struct Refill<'a, K> {
    /// The kernel (GET only).
    pub kernel: &'a K,
    /// `/proc`.
    pub proc: &'a ProcFs,
    /// The runtimes' state directories.
    pub roots: &'a [RuntimeRoot],
    /// The decisions are the hook's.
    pub config: &'a Config,
}

impl<'a, K: CoreSched> Refill<'a, K> {
    /// The refill of a [`crate::host::system::System`]'s cache.
    pub fn of(sys: &'a crate::host::system::System<K>, config: &'a Config) -> Self {
        Self { kernel: &sys.kernel, proc: &sys.proc, roots: &sys.runtime_roots, config }
    }
}

/// An error that can say the cache file showed damage (corruption, a truncated or foreign file):
/// [`Session::write`] then moves the file aside and tries once more on a fresh one.
pub trait Damage {
    /// Whether the error is the cache file's damage.
    fn is_damage(&self) -> bool;
}

impl Damage for StoreError {
    fn is_damage(&self) -> bool {
        self.is_corruption()
    }
}

impl Damage for EngineError {
    fn is_damage(&self) -> bool {
        matches!(self, EngineError::Store(e) if e.is_corruption())
    }
}

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The state dir or its lock.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// The cache.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An open cache under the state lock.
#[derive(Debug)]
pub struct Session {
    store: Store,
    stand_in: Option<Unusable>,
    dir: StateDir,
    // Dropped last: the lock outlives every use of the store.
    _lock: LockGuard,
}

/// What a session may create when it opens: [`Create`] or [`Existing`].
pub trait Access: sealed::Sealed {
    /// Where the session opens: a [`StateDir`] its caller checked ([`Create`]), or the path of one
    /// that may not exist ([`Existing`], which checks it once, and creates nothing).
    type At<'p>;
    /// What [`Session::open`] returns.
    type Opened;
    #[doc(hidden)]
    fn open<K: CoreSched>(
        at: Self::At<'_>,
        timeout: Duration,
        refill: &Refill<'_, K>,
    ) -> Result<Self::Opened, SessionError>;
}

/// A session for a writer that records, in a state dir its caller checked (and created when
/// missing: [`StateDir::open`]); the cache is created when missing.
#[derive(Debug, Clone, Copy)]
pub struct Create;

/// A session that creates nothing: none when there is no state dir or no cache yet (a reader, or
/// a writer with nothing to do without a cache: `gc`, `reconcile`, the follower).
#[derive(Debug, Clone, Copy)]
pub struct Existing;

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Create {}
    impl Sealed for super::Existing {}
}

impl Access for Create {
    type At<'p> = StateDir;
    type Opened = Session;
    fn open<K: CoreSched>(dir: StateDir, timeout: Duration, refill: &Refill<'_, K>) -> Result<Session, SessionError> {
        Session::open_in(dir, timeout, refill)
    }
}

impl Access for Existing {
    type At<'p> = &'p Path;
    type Opened = Option<Session>;
    fn open<K: CoreSched>(
        state_dir: &Path,
        timeout: Duration,
        refill: &Refill<'_, K>,
    ) -> Result<Option<Session>, SessionError> {
        match StateDir::existing(state_dir)? {
            Some(dir) if dir.db_path().exists() => Session::open_in(dir, timeout, refill).map(Some),
            _ => Ok(None),
        }
    }
}

impl Session {
    /// Opens the cache under the state lock, waiting for it at most `timeout`: with [`Create`],
    /// a [`Session`] in the [`StateDir`] its caller checked (the hook's plan checks it before the
    /// lock, once per run, and the session does not check it again; a dir that vanished since
    /// fails at its lock), the file created when missing; with [`Existing`], in the state dir at
    /// a path, `None` when there is no state dir or no cache yet, and nothing is created. An
    /// error when the state dir is unusable or the lock stays held.
    pub fn open<A: Access, K: CoreSched>(
        at: A::At<'_>,
        timeout: Duration,
        _access: A,
        refill: &Refill<'_, K>,
    ) -> Result<A::Opened, SessionError> {
        A::open(at, timeout, refill)
    }

    fn open_in<K: CoreSched>(dir: StateDir, timeout: Duration, refill: &Refill<'_, K>) -> Result<Self, SessionError> {
        let lock = dir.lock(timeout)?;
        crate::fault::point("after_lock");
        crate::timing::mark("lock");
        let db = dir.db_path();
        let session = match Store::open(&db) {
            Ok(store) => {
                let s = Session { store, stand_in: None, dir, _lock: lock };
                if *s.store.found() != Found::Current {
                    fill(&s.store, refill);
                }
                s
            }
            Err(StoreError::Unusable { path, why }) => {
                let store = Store::in_memory()?;
                let n = fill_quietly(&store, refill);
                let error = Chain(&StoreError::Unusable { path, why: why.clone() }).to_string();
                warn_once(
                    &error,
                    &format!(
                        "{error}; left it in place: this binary works from the {n} running containers the \
                         runtimes' state shows and keeps nothing it records (finish the upgrade: restart every \
                         oci-coresched-hook service, or install the newer package)"
                    ),
                );
                Session { store, stand_in: Some(why), dir, _lock: lock }
            }
            Err(e) => return Err(e.into()),
        };
        crate::timing::mark("cache open");
        Ok(session)
    }

    /// The open cache (the file's, or the stand-in).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The state dir.
    pub fn dir(&self) -> &StateDir {
        &self.dir
    }

    /// Why the file was left alone, when this session works on a stand-in.
    pub fn stand_in(&self) -> Option<&Unusable> {
        self.stand_in.as_ref()
    }

    /// Runs `f` in one transaction, committed when it returns `Ok`, with the recorded stops
    /// applied first when at least `backlog` are waiting (1: all of them; never on a stand-in).
    /// The stops' files go once the transaction committed. When the file shows damage on the
    /// way ([`Damage`]), it is moved aside, a fresh one refilled ([`Session::replace_damaged`])
    /// and `f` runs once more there.
    pub fn write<K: CoreSched, T, E: From<StoreError> + Damage>(
        &mut self,
        refill: &Refill<'_, K>,
        backlog: usize,
        f: impl Fn(&Txn<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        match self.write_once(refill.proc, backlog, &f) {
            Err(e) if e.is_damage() && self.stand_in.is_none() => {
                // The refill of the fresh file says where the damaged one went (one warning).
                self.replace_damaged(refill)?;
                self.write_once(refill.proc, backlog, &f)
            }
            done => done,
        }
    }

    fn write_once<T, E: From<StoreError>>(
        &self,
        proc: &ProcFs,
        backlog: usize,
        f: &impl Fn(&Txn<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let tx = self.store.begin()?;
        let stopped = match self.stand_in {
            Some(_) => Applied::default(),
            None => stopped::apply_backlog(self.dir.path(), &tx, proc, backlog)?,
        };
        crate::timing::mark("deferred forgets");
        let value = f(&tx)?;
        crate::fault::point("before_commit");
        crate::timing::mark("cache writes");
        tx.commit()?;
        crate::timing::mark("commit");
        crate::fault::point("after_commit");
        stopped.finish();
        Ok(value)
    }

    /// Counts a failed hook run in a transaction of its own: its group's failure counter (when
    /// the group is known) and the failures by reason. Best effort: a failure to count is logged
    /// at debug level.
    pub fn count_failure(&self, group: Option<&str>, reason: FailureReason) {
        let counted = self.store.begin().and_then(|tx| {
            if let Some(g) = group {
                tx.count(g, false)?;
            }
            tx.count_failure(reason)?;
            tx.commit()
        });
        if let Err(e) = counted {
            log::debug!("failed to count the failure: {}", Chain(&e));
        }
    }

    /// Applies every recorded stop in a transaction of its own, for readers that write nothing
    /// else (`list`, `metrics`, `inspect`, the follower's view). With none recorded (or on a
    /// stand-in) it writes nothing.
    pub fn apply_stops(&self, proc: &ProcFs) -> Result<(), StoreError> {
        if self.stand_in.is_none() {
            stopped::apply_now(self.dir.path(), &self.store, proc)?;
        }
        Ok(())
    }

    /// Moves the file aside after it showed damage during use, and starts a fresh one, refilled.
    pub fn replace_damaged<K: CoreSched>(&mut self, refill: &Refill<'_, K>) -> Result<(), StoreError> {
        if self.stand_in.is_some() {
            return Ok(());
        }
        let db = self.dir.db_path();
        // The connection to the damaged file closes before the file moves (closing it later
        // could write into the moved file).
        self.store = Store::in_memory()?;
        self.store = Store::quarantine(&db, "corrupt")?;
        fill(&self.store, refill);
        Ok(())
    }
}

/// Records the running containers `store` lacks, from the runtimes' state, in one transaction;
/// a refill that read every one of them settles what the file was owed. `None` on a kernel
/// without core scheduling (there are no cookies to find).
fn refill_missing<K: CoreSched>(store: &Store, refill: &Refill<'_, K>) -> Option<Result<RebuildReport, EngineError>> {
    if refill.kernel.probe().is_err_and(|e| e.is_unsupported()) {
        return None;
    }
    Some(refill_in(store, refill))
}

fn refill_in<K: CoreSched>(store: &Store, refill: &Refill<'_, K>) -> Result<RebuildReport, EngineError> {
    let tx = store.begin()?;
    let r = rebuild::rebuild(&tx, refill.kernel, refill.proc, refill.roots, refill.config, Fill::Missing)?;
    if r.unreadable == 0 {
        tx.refilled()?;
    }
    tx.commit()?;
    Ok(r)
}

/// Refills a cache that may lack running containers, saying what it found (one line).
fn fill<K: CoreSched>(store: &Store, refill: &Refill<'_, K>) {
    let why = match store.found() {
        Found::Current => return,
        Found::Owed => "a cache whose last refill could not read every running container".to_string(),
        Found::Created => "a new cache".to_string(),
        Found::Upgraded { format, revision } => {
            format!("a cache of an older build (format {format}, revision {revision})")
        }
        Found::Replaced { aside } => format!("a fresh cache in place of the damaged one, moved to {}", aside.display()),
    };
    match refill_missing(store, refill) {
        None => log::debug!("{why}: not refilled from the runtimes' state (no core scheduling here)"),
        Some(Ok(r)) if r.unreadable > 0 => log::warn!(
            "{why}: recorded {} running containers from the runtimes' state, but failed to read {} more; the next \
             opener of the cache tries again",
            r.members.len(),
            r.unreadable
        ),
        Some(Ok(r)) if r.members.is_empty() && matches!(store.found(), Found::Created) => {
            log::debug!("{why}: no running container with a cookie in the runtimes' state");
        }
        Some(Ok(r)) => {
            let conflicts = match r.conflicts.len() {
                0 => String::new(),
                n => format!("; {n} groups hold more than one cookie and converge at their next ensure"),
            };
            let line =
                format!("{why}: recorded {} running containers from the runtimes' state{conflicts}", r.members.len());
            if matches!(store.found(), Found::Replaced { .. }) { log::warn!("{line}") } else { log::info!("{line}") }
        }
        Some(Err(e)) => log::warn!(
            "{why}: failed to refill it from the runtimes' state: {} (run `oci-coresched-hook rebuild`)",
            Chain(&e)
        ),
    }
}

/// Fills a stand-in; how many containers it holds.
fn fill_quietly<K: CoreSched>(store: &Store, refill: &Refill<'_, K>) -> usize {
    match refill_missing(store, refill) {
        Some(Ok(r)) => r.members.len(),
        Some(Err(e)) => {
            log::debug!("failed to fill the stand-in cache from the runtimes' state: {}", Chain(&e));
            0
        }
        None => 0,
    }
}

/// Logs `line` as a warning the first time this process sees `key`, at debug level after that
/// (a long-running command opens the cache many times).
fn warn_once(key: &str, line: &str) {
    static SAID: Mutex<Option<String>> = Mutex::new(None);
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.as_deref() == Some(key) {
        log::debug!("{line}");
    } else {
        log::warn!("{line}");
        *said = Some(key.to_string());
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
