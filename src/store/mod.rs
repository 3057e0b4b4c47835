//! The SQLite cache of groups, members and counters, opened only under the state lock.
//!
//! The kernel is the truth and this file a cache of it. A damaged, truncated or foreign database
//! is moved aside (kept for inspection, never deleted) and a fresh one is created; a cache of a
//! newer build's format is left exactly as it is ([`StoreError::Unusable`]); a cache of an older
//! build is upgraded in place ([`format`](mod@format) says what each version writes). The file lives on
//! tmpfs, is guarded by our own flock and can be rebuilt, so durability is chosen for speed (see
//! [`Store::open`]).
//!
//! [`Store::open`] says what it found ([`Found`]: the file as it is, created, upgraded, or replaced
//! after a damaged one was moved aside by [`Store::quarantine`]). [`Store::begin`] hands out the
//! [`Txn`], the only thing that writes rows (a `Store` only reads), landed by [`Txn::commit`] and
//! rolled back when dropped without one; [`Store::transaction`] is begin, a closure, commit.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use rusqlite::config::DbConfig;

use crate::error::Chain;
use crate::host::procfs::TaskId;
use crate::values::{Cookie, Labels, Pid};

mod counters;
mod forced_idle;
mod format;
mod members;
pub mod peek;

pub use counters::GroupRow;
use format::Verdict;
pub use format::{APPLICATION_ID, FORMAT, MAX_FORMAT, REVISION, Unusable};

/// Cache errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite failed.
    #[error("failed to use the cache {path}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: SqliteError,
    },
    /// A cache this binary must not use, left in place.
    #[error("failed to use the cache {path}")]
    Unusable {
        /// The database file.
        path: PathBuf,
        /// Why not.
        #[source]
        why: Unusable,
    },
    /// Moving a bad database aside failed.
    #[error("failed to move the unusable cache {path} aside")]
    Quarantine {
        /// The database file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// A SQLite error as the cause of a [`StoreError`]: rusqlite's message, which already says
/// everything, without rusqlite's own `source()`, which would say it again ("unable to open
/// database file: /x" then "Error code 14: unable to open database file").
#[derive(Debug)]
pub struct SqliteError(pub rusqlite::Error);

impl std::fmt::Display for SqliteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SqliteError {}

impl From<rusqlite::Error> for SqliteError {
    fn from(e: rusqlite::Error) -> Self {
        SqliteError(e)
    }
}

impl StoreError {
    /// True when the database file itself is damaged (so moving it aside and retrying helps).
    pub fn is_corruption(&self) -> bool {
        match self {
            StoreError::Sqlite { source, .. } => is_corrupt(&source.0),
            StoreError::Quarantine { .. } | StoreError::Unusable { .. } => false,
        }
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase))
}

/// One container of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Container id.
    pub container_id: String,
    /// Group key.
    pub group: String,
    /// Init pid.
    pub pid: Pid,
    /// Init start time (`/proc/PID/stat` field 22).
    pub start_time: u64,
    /// Cookie seen at the last check.
    pub cookie: Cookie,
    /// Where it runs and who it is to people.
    pub labels: Labels,
    /// Join order within the cache; the lowest live one is the group's oldest member.
    pub seq: i64,
    /// Unix time of joining.
    pub created_at: i64,
    /// Unix time of the last check.
    pub updated_at: i64,
}

impl Member {
    /// A member with no cookie, no cgroup, namespace or pod labels, and no join order or times
    /// yet (the cache assigns those on [`Txn::upsert_member`]). Set the rest with struct update
    /// syntax: `Member { cookie, labels, ..Member::new(id, group, pid, start_time) }`.
    pub fn new(container_id: impl Into<String>, group: impl Into<String>, pid: Pid, start_time: u64) -> Self {
        Self {
            container_id: container_id.into(),
            group: group.into(),
            pid,
            start_time,
            cookie: 0,
            labels: Labels::default(),
            seq: 0,
            created_at: 0,
            updated_at: 0,
        }
    }

    /// Its recorded init: the pid and the start time recorded with it (what liveness compares
    /// with `/proc`, [`crate::cookies::membership::liveness`]).
    pub fn init(&self) -> TaskId {
        TaskId { pid: self.pid, start_time: self.start_time }
    }
}

/// An open cache. Only ever used while the state lock is held.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
    found: Found,
}

/// A write transaction open on a [`Store`] ([`Store::begin`]): the only thing that writes rows.
/// It reads as the store does. [`Txn::commit`] lands its changes; dropped without a commit (an
/// error returned early, a panic), it rolls them back.
#[derive(Debug)]
pub struct Txn<'s> {
    store: &'s Store,
    open: bool,
}

impl Txn<'_> {
    /// Commits the transaction; when the commit fails, nothing of it lands (the drop rolls it
    /// back).
    pub fn commit(mut self) -> Result<(), StoreError> {
        self.store.conn.execute_batch("COMMIT").map_err(|e| self.store.err(e))?;
        self.open = false;
        Ok(())
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if self.open {
            self.store.rollback();
        }
    }
}

impl std::ops::Deref for Txn<'_> {
    type Target = Store;

    fn deref(&self) -> &Store {
        self.store
    }
}

/// How [`Store::open`] found the file: anything but [`Found::Current`] means the cache may lack
/// containers that run (a new file, one an older build wrote, one that replaced a damaged file,
/// or one whose refill no opener could finish yet), which the caller refills from the runtimes'
/// state ([`crate::session`]) and then marks with [`Txn::refilled`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Ours, at this binary's format and revision (or a newer revision of its format).
    Current,
    /// Ours and current, but still owed the refill of its creation, upgrade or replacement (the
    /// opener that owed it could not read every running container).
    Owed,
    /// None yet, or an empty file: created.
    Created,
    /// Written by an older build: upgraded in place from this format and revision.
    Upgraded {
        /// The format it had.
        format: i32,
        /// The revision it had.
        revision: i64,
    },
    /// Damaged: moved aside to `aside`, and a fresh one created.
    Replaced {
        /// Where the damaged file went.
        aside: PathBuf,
    },
}

/// Turns SQLite's memory statistics off for this process (`SQLITE_CONFIG_MEMSTATUS`, on by
/// default). With them on, every allocation and free SQLite makes takes and releases a global
/// mutex to count it: on a hook's share path, 9% of the process's instructions. Nothing
/// here reads them (no heap limit, no `sqlite3_memory_used`). Once SQLite is in use the call is
/// refused and changes nothing.
///
/// # Safety
///
/// SQLite's configuration is not thread-safe: no other thread may use SQLite during the call.
/// The binary's `main` calls it first thing, before any other thread exists.
pub unsafe fn skip_memory_statistics() {
    // SAFETY: the caller guarantees that no other thread uses SQLite now; the option takes one
    // int, passed as a C int.
    let _ = unsafe { rusqlite::ffi::sqlite3_config(rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS, 0 as std::ffi::c_int) };
}

/// Plans each statement once, whatever values are later bound to it (SQLite's query planner
/// stability guarantee). Without it, SQLite lets the plan of a statement depend on the value bound
/// to a parameter (the member reads' join on `member_idle` is planned so), and a statement so
/// planned is re-prepared whenever that parameter is bound again, which includes rusqlite's
/// clearing of the bindings when a cached statement goes back to its cache: every read of a
/// member after the first paid a second prepare (~190,000 instructions, two on the share path).
/// No statement here has a plan that a bound value could improve.
fn stable_plans(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).map(drop)
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

impl Store {
    /// Opens (creating, upgrading or replacing as needed) the cache at `path`. A file of a newer
    /// build's format is left untouched: [`StoreError::Unusable`].
    ///
    /// Durability: `journal_mode=WAL` with `synchronous=OFF`. The file is on tmpfs (fsync buys
    /// nothing), every writer holds our flock, and a lost or damaged file is rebuilt from the
    /// kernel, so waiting for the disk would only slow every container start.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let store = |conn, found| Self { conn, path: path.to_path_buf(), found };
        // A newer build's file is known by its header alone: no connection is opened, so not even
        // an empty WAL appears beside it.
        if let Some(why) = format::newer_on_disk(path) {
            return Err(StoreError::Unusable { path: path.to_path_buf(), why });
        }
        match Self::open_once(path) {
            Ok((conn, Verdict::Current { refill: false })) => Ok(store(conn, Found::Current)),
            Ok((conn, Verdict::Current { refill: true })) => Ok(store(conn, Found::Owed)),
            Ok((conn, Verdict::Fresh)) => {
                let s = store(conn, Found::Created);
                s.create_schema()?;
                Ok(s)
            }
            Ok((conn, Verdict::Older { format, revision })) => {
                let s = store(conn, Found::Upgraded { format, revision });
                match s.upgrade(format, revision) {
                    Ok(()) => Ok(s),
                    // Another opener holds the file: a real error, not a reason to move it aside.
                    Err(StoreError::Sqlite { source, .. }) if is_busy(&source.0) => {
                        Err(StoreError::Sqlite { path: path.to_path_buf(), source })
                    }
                    Err(e) => {
                        log::warn!(
                            "failed to upgrade the cache {} from format {format}: {}",
                            path.display(),
                            Chain(&e)
                        );
                        drop(s);
                        Self::quarantine(path, &format!("unmigratable-v{format}"))
                    }
                }
            }
            Ok((conn, Verdict::Damaged(why))) => {
                drop(conn);
                Self::quarantine(path, &why)
            }
            Ok((conn, Verdict::Unusable(why))) => {
                drop(conn);
                Err(StoreError::Unusable { path: path.to_path_buf(), why })
            }
            Err(e) if is_corrupt(&e) => Self::quarantine(path, "corrupt"),
            Err(source) => Err(StoreError::Sqlite { path: path.to_path_buf(), source: source.into() }),
        }
    }

    /// An empty cache in memory, with this binary's schema: for a run that must not touch the file
    /// (a newer build's cache) and for renderers that need an empty one.
    pub fn in_memory() -> Result<Self, StoreError> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory()
            .and_then(|conn| stable_plans(&conn).map(|()| conn))
            .map_err(|source| StoreError::Sqlite { path: path.clone(), source: source.into() })?;
        let s = Self { conn, path, found: Found::Created };
        s.create_schema()?;
        Ok(s)
    }

    fn open_once(path: &Path) -> Result<(Connection, Verdict), rusqlite::Error> {
        let conn = Connection::open(path)?;
        stable_plans(&conn)?;
        // Until the file is known to be ours, closing this connection must not checkpoint a WAL
        // into it or delete that WAL: a file moved aside or left in place stays exactly as it
        // was found.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
        conn.busy_timeout(std::time::Duration::from_secs(2))?;
        // `locking_mode = EXCLUSIVE`: every opener holds our flock, so SQLite's own POSIX locks
        // only cost syscalls, and in exclusive mode a WAL database keeps its index in memory
        // instead of creating, growing and mapping a `-shm` file (BENCHMARKS.md: about 30 fewer
        // syscalls per hook). It must come before the first read. The price, pinned by the
        // store tests: a second connection to the file cannot read while one is open.
        // WAL, not a rollback journal, because a hook killed mid-commit by the runtime's
        // timeout leaves a torn, checksummed WAL frame that is ignored, never a half-written
        // page; the last close checkpoints it into the file and removes it.
        conn.execute_batch("PRAGMA locking_mode = EXCLUSIVE; PRAGMA synchronous = OFF; PRAGMA foreign_keys = OFF;")?;
        let verdict = format::judge(&conn)?;
        if matches!(verdict, Verdict::Current { .. } | Verdict::Fresh | Verdict::Older { .. }) {
            conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, false)?;
        }
        Ok((conn, verdict))
    }

    /// Moves a damaged database (and its WAL/SHM files) aside and creates a fresh one.
    pub fn quarantine(path: &Path, why: &str) -> Result<Self, StoreError> {
        let stamp =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let aside = PathBuf::from(format!("{}.{why}-{stamp}", path.display()));
        std::fs::rename(path, &aside).map_err(|source| StoreError::Quarantine { path: path.to_path_buf(), source })?;
        for ext in ["-wal", "-shm"] {
            let side = PathBuf::from(format!("{}{ext}", path.display()));
            if side.exists() {
                let _ = std::fs::rename(&side, format!("{}{ext}", aside.display()));
            }
        }
        log::warn!(
            "moved the damaged cache {} aside to {} ({why}); starting a fresh one",
            path.display(),
            aside.display()
        );
        let conn = Connection::open(path)
            .and_then(|conn| stable_plans(&conn).map(|()| conn))
            .map_err(|source| StoreError::Sqlite { path: path.to_path_buf(), source: source.into() })?;
        let s = Self { conn, path: path.to_path_buf(), found: Found::Replaced { aside } };
        s.conn
            .execute_batch("PRAGMA locking_mode = EXCLUSIVE; PRAGMA synchronous = OFF;")
            .map_err(|source| StoreError::Sqlite { path: path.to_path_buf(), source: source.into() })?;
        s.create_schema()?;
        Ok(s)
    }

    fn create_schema(&self) -> Result<(), StoreError> {
        self.conn.execute_batch(&format::create_sql()).map_err(|e| self.err(e))
    }

    /// Brings a file of an older build to this binary's format and revision in one transaction:
    /// either every step and the new header land, or nothing does.
    fn upgrade(&self, format: i32, revision: i64) -> Result<(), StoreError> {
        let Some(sql) = format::upgrade_sql(format, revision) else {
            let e = rusqlite::Error::InvalidParameterName(format!("no upgrade from format {format}"));
            return Err(self.err(e));
        };
        self.transaction(|s| s.conn.execute_batch(&sql).map_err(|e| s.err(e)))?;
        log::info!(
            "upgraded the cache {} from format {format} revision {revision} to format {FORMAT} revision {REVISION}",
            self.path.display()
        );
        Ok(())
    }

    /// How the file was found when it was opened.
    pub fn found(&self) -> &Found {
        &self.found
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite { path: self.path.clone(), source: source.into() }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens a write transaction (`BEGIN IMMEDIATE`), the only way this crate writes rows: what
    /// the [`Txn`] writes lands at [`Txn::commit`], and none of it when the `Txn` is dropped
    /// without one.
    pub fn begin(&self) -> Result<Txn<'_>, StoreError> {
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| self.err(e))?;
        Ok(Txn { store: self, open: true })
    }

    /// [`Store::begin`], `f`, then [`Txn::commit`] when `f` returns `Ok`: every change `f` makes
    /// lands when it returns `Ok`, none when it returns `Err` (or panics).
    pub fn transaction<T, E: From<StoreError>>(&self, f: impl FnOnce(&Txn<'_>) -> Result<T, E>) -> Result<T, E> {
        let tx = self.begin()?;
        let value = f(&tx)?;
        tx.commit()?;
        Ok(value)
    }

    /// Abandons the open transaction, if any.
    fn rollback(&self) {
        let _ = self.conn.execute_batch("ROLLBACK");
    }

    /// `PRAGMA integrity_check` result (`"ok"` when healthy).
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        self.conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).map_err(|e| self.err(e))
    }
}

impl Txn<'_> {
    /// Settles the refill the file was owed (call once a refill read every running container).
    pub fn refilled(&self) -> Result<(), StoreError> {
        self.conn.execute_batch(format::REFILLED).map_err(|e| self.err(e))
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
