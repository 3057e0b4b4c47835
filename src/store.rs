//! The SQLite cache of groups, members and counters, opened only under the state lock.
//!
//! The kernel is the truth and this file a cache of it: a corrupt, truncated or foreign database
//! is moved aside (kept for inspection, never deleted) and a fresh one is created. The file lives
//! on tmpfs, is guarded by our own flock and can be rebuilt, so durability is chosen for speed
//! (see [`Store::open`]).

use std::path::{Path, PathBuf};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Chain, FailureReason};
use crate::kernel::Cookie;
use crate::procfs::Pid;

/// Marks the file as ours (`PRAGMA application_id`, "OCSH").
pub const APPLICATION_ID: i32 = 0x4f43_5348;
/// Current schema version (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i32 = 4;

/// Upgrades, each from the version it names to the next, run in one transaction with the bump of
/// `user_version`. v2: the pod labels of a member (for metrics). v3: an index on the join order,
/// so a new member's `seq` is found in O(log n) instead of by scanning every member. v4: the
/// cgroup whose `cpu.idle` a member of a `sched_idle` class keeps at 1.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "ALTER TABLE members ADD COLUMN pod_name TEXT;
         ALTER TABLE members ADD COLUMN pod_uid TEXT;
         ALTER TABLE members ADD COLUMN container_name TEXT;",
    ),
    (2, "CREATE INDEX members_by_seq ON members (seq);"),
    (3, "ALTER TABLE members ADD COLUMN idle_cgroup TEXT;"),
];

const SCHEMA: &str = "
CREATE TABLE groups (
    key        TEXT PRIMARY KEY NOT NULL,
    created_at INTEGER NOT NULL,
    ok         INTEGER NOT NULL DEFAULT 0,
    failed     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE members (
    container_id TEXT PRIMARY KEY NOT NULL,
    group_key    TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    start_time   INTEGER NOT NULL,
    cookie       INTEGER NOT NULL,
    cgroup       TEXT,
    namespace    TEXT,
    seq          INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    pod_name       TEXT,
    pod_uid        TEXT,
    container_name TEXT,
    idle_cgroup    TEXT
);
CREATE INDEX members_by_group ON members (group_key, seq);
CREATE INDEX members_by_seq ON members (seq);
CREATE TABLE failures (
    reason TEXT PRIMARY KEY NOT NULL,
    count  INTEGER NOT NULL
);
";

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
            StoreError::Quarantine { .. } => false,
        }
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}

fn is_corrupt(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase))
}

/// What the cache records about a container besides its identity and cookie: its cgroup (for
/// `reconcile`), the cgroup whose `cpu.idle` it keeps at 1 (for the follower), and its pod's
/// labels (for `list` and metrics). The hook fills it from its decision and `/proc`, a reload
/// from the runtime's state, and the engine stores it as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    /// Cgroup path of the init, relative to the cgroup mount.
    pub cgroup: Option<String>,
    /// Pod namespace.
    pub namespace: Option<String>,
    /// Pod name (`io.kubernetes.pod.name`), when known.
    pub pod_name: Option<String>,
    /// Pod uid (`io.kubernetes.pod.uid`), when known.
    pub pod_uid: Option<String>,
    /// Container name within its pod (`io.kubernetes.container.name`), when known.
    pub container_name: Option<String>,
    /// The container's cgroup (relative to the cgroup mount) whose `cpu.idle` is 1, for a member
    /// of a QoS class with `sched_idle`; the follower sets it again when a runtime or systemd
    /// reset it.
    pub idle_cgroup: Option<String>,
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
    /// yet (the cache assigns those on [`Store::upsert_member`]). Set the rest with struct update
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
}

/// Per-group counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRow {
    /// Group key.
    pub key: String,
    /// Unix time of creation.
    pub created_at: i64,
    /// Successful ensures.
    pub ok: u64,
    /// Failed ensures.
    pub failed: u64,
}

/// An open cache. Only ever used while the state lock is held.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// Where a damaged database was moved when this one was created, if that happened.
    pub quarantined: Option<PathBuf>,
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

enum Verdict {
    Ready,
    Fresh,
    /// Ours, at this older version: upgrade in place.
    Migrate(i32),
    Foreign(String),
}

impl Store {
    /// Opens (creating or replacing as needed) the cache at `path`.
    ///
    /// Durability: `journal_mode=WAL` with `synchronous=OFF`. The file is on tmpfs (fsync buys
    /// nothing), every writer holds our flock, and a lost or damaged file is rebuilt from the
    /// kernel, so waiting for the disk would only slow every container start.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        match Self::open_once(path) {
            Ok((conn, Verdict::Ready)) => Ok(Self { conn, path: path.to_path_buf(), quarantined: None }),
            Ok((conn, Verdict::Fresh)) => {
                let mut s = Self { conn, path: path.to_path_buf(), quarantined: None };
                s.create_schema()?;
                Ok(s)
            }
            Ok((conn, Verdict::Migrate(from))) => {
                let s = Self { conn, path: path.to_path_buf(), quarantined: None };
                match s.migrate(from) {
                    Ok(()) => Ok(s),
                    // Another opener holds the file: a real error, not a reason to move it aside.
                    Err(StoreError::Sqlite { source, .. }) if is_busy(&source.0) => {
                        Err(StoreError::Sqlite { path: path.to_path_buf(), source })
                    }
                    Err(e) => {
                        log::warn!("failed to upgrade the cache {} from schema v{from}: {}", path.display(), Chain(&e));
                        drop(s);
                        Self::quarantine(path, &format!("unmigratable-v{from}"))
                    }
                }
            }
            Ok((conn, Verdict::Foreign(why))) => {
                drop(conn);
                Self::quarantine(path, &why)
            }
            Err(e) if is_corrupt(&e) => Self::quarantine(path, "corrupt"),
            Err(source) => Err(StoreError::Sqlite { path: path.to_path_buf(), source: source.into() }),
        }
    }

    fn open_once(path: &Path) -> Result<(Connection, Verdict), rusqlite::Error> {
        let conn = Connection::open(path)?;
        // Until the file is known to be ours, closing this connection must not checkpoint a WAL
        // into it or delete that WAL: a bad file is moved aside exactly as it was found.
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
        // Two plain pragmas: a join of the table-valued pragma functions costs ~20 us more to
        // prepare in a fresh process.
        let app: i32 = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
        let version: i32 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let verdict = if app == 0 && version == 0 {
            let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
            if tables == 0 { Verdict::Fresh } else { Verdict::Foreign("foreign".into()) }
        } else if app != APPLICATION_ID {
            Verdict::Foreign("foreign".into())
        } else if version > SCHEMA_VERSION {
            Verdict::Foreign(format!("newer-v{version}"))
        } else if version < 1 {
            // Ours but older than the first released schema: nothing to migrate from.
            Verdict::Foreign(format!("older-v{version}"))
        } else if version < SCHEMA_VERSION {
            Verdict::Migrate(version)
        } else {
            Verdict::Ready
        };
        if matches!(verdict, Verdict::Ready | Verdict::Fresh | Verdict::Migrate(_)) {
            conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, false)?;
        }
        Ok((conn, verdict))
    }

    /// Moves a bad database (and its WAL/SHM files) aside and creates a fresh one.
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
            "moved unusable cache {} aside to {} ({why}); starting a fresh one",
            path.display(),
            aside.display()
        );
        let conn = Connection::open(path)
            .map_err(|source| StoreError::Sqlite { path: path.to_path_buf(), source: source.into() })?;
        let mut s = Self { conn, path: path.to_path_buf(), quarantined: Some(aside) };
        s.conn
            .execute_batch("PRAGMA locking_mode = EXCLUSIVE; PRAGMA synchronous = OFF;")
            .map_err(|source| StoreError::Sqlite { path: path.to_path_buf(), source: source.into() })?;
        s.create_schema()?;
        Ok(s)
    }

    fn create_schema(&mut self) -> Result<(), StoreError> {
        let sql = format!(
            "PRAGMA journal_mode = WAL; BEGIN; {SCHEMA} PRAGMA application_id = {APPLICATION_ID}; \
             PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
        );
        self.conn.execute_batch(&sql).map_err(|e| self.err(e))
    }

    /// Upgrades the schema from `from` to [`SCHEMA_VERSION`] in one transaction: either every step
    /// and the new `user_version` land, or nothing does.
    fn migrate(&self, from: i32) -> Result<(), StoreError> {
        self.transaction(|s| {
            let mut version = from;
            while version < SCHEMA_VERSION {
                let Some((_, sql)) = MIGRATIONS.iter().find(|(v, _)| *v == version) else {
                    let e = rusqlite::Error::InvalidParameterName(format!("no migration from schema v{version}"));
                    return Err(s.err(e));
                };
                s.conn.execute_batch(sql).map_err(|e| s.err(e))?;
                version += 1;
            }
            s.conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION};")).map_err(|e| s.err(e))
        })?;
        log::info!("upgraded the cache {} from schema v{from} to v{SCHEMA_VERSION}", self.path.display());
        Ok(())
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite { path: self.path.clone(), source: source.into() }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` in one write transaction (`BEGIN IMMEDIATE`): every change `f` makes lands when
    /// it returns `Ok`, none when it returns `Err` (or panics). The only way this crate writes more
    /// than one row together.
    pub fn transaction<T, E: From<StoreError>>(&self, f: impl FnOnce(&Store) -> Result<T, E>) -> Result<T, E> {
        self.conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| self.err(e))?;
        let open = Open(self);
        let value = f(self)?;
        std::mem::forget(open);
        if let Err(e) = self.conn.execute_batch("COMMIT") {
            self.rollback();
            return Err(self.err(e).into());
        }
        Ok(value)
    }

    /// Abandons the open transaction, if any.
    fn rollback(&self) {
        let _ = self.conn.execute_batch("ROLLBACK");
    }

    fn row_to_member(r: &rusqlite::Row<'_>) -> rusqlite::Result<Member> {
        Ok(Member {
            container_id: r.get(0)?,
            group: r.get(1)?,
            pid: r.get(2)?,
            start_time: r.get::<_, i64>(3)? as u64,
            cookie: r.get::<_, i64>(4)? as u64,
            labels: Labels {
                cgroup: r.get(5)?,
                namespace: r.get(6)?,
                pod_name: r.get(10)?,
                pod_uid: r.get(11)?,
                container_name: r.get(12)?,
                idle_cgroup: r.get(13)?,
            },
            seq: r.get(7)?,
            created_at: r.get(8)?,
            updated_at: r.get(9)?,
        })
    }

    const MEMBER_COLS: &'static str = "container_id, group_key, pid, start_time, cookie, cgroup, namespace, seq, created_at, updated_at, \
         pod_name, pod_uid, container_name, idle_cgroup";

    /// Members of `group`, oldest first.
    pub fn members(&self, group: &str) -> Result<Vec<Member>, StoreError> {
        let sql = format!("SELECT {} FROM members WHERE group_key = ?1 ORDER BY seq", Self::MEMBER_COLS);
        let mut st = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let rows = st.query_map([group], Self::row_to_member).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Every member, by group then age.
    pub fn all_members(&self) -> Result<Vec<Member>, StoreError> {
        let sql = format!("SELECT {} FROM members ORDER BY group_key, seq", Self::MEMBER_COLS);
        let mut st = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        let rows = st.query_map([], Self::row_to_member).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// The cached row of a container.
    pub fn member(&self, container_id: &str) -> Result<Option<Member>, StoreError> {
        let sql = format!("SELECT {} FROM members WHERE container_id = ?1", Self::MEMBER_COLS);
        let mut st = self.conn.prepare_cached(&sql).map_err(|e| self.err(e))?;
        st.query_row([container_id], Self::row_to_member).optional().map_err(|e| self.err(e))
    }

    /// Inserts or updates a member (creating its group row); a new member gets the next `seq`.
    /// Returns the stored row.
    ///
    /// The next `seq` is the last entry of the `members_by_seq` index (schema v3): without it,
    /// `max(seq)` read every row of a 10,000-container cache (~2.5 MB) on each hook run, and
    /// scanning the `members_by_group` index instead still read ~120 pages of it.
    pub fn upsert_member(&self, m: &Member) -> Result<Member, StoreError> {
        let t = now();
        self.conn
            .prepare_cached("INSERT OR IGNORE INTO groups (key, created_at) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![m.group, t]))
            .map_err(|e| self.err(e))?;
        self.conn
            .prepare_cached(
                "INSERT INTO members (container_id, group_key, pid, start_time, cookie, cgroup, namespace, seq, created_at, updated_at,
                                      pod_name, pod_uid, container_name, idle_cgroup)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7,
                         (SELECT coalesce(max(seq), 0) + 1 FROM members INDEXED BY members_by_seq), ?8, ?8, ?9, ?10, ?11, ?12)
                 ON CONFLICT (container_id) DO UPDATE SET
                   seq = CASE WHEN group_key = excluded.group_key AND pid = excluded.pid
                                   AND start_time = excluded.start_time THEN seq ELSE excluded.seq END,
                   group_key = excluded.group_key, pid = excluded.pid, start_time = excluded.start_time,
                   cookie = excluded.cookie, cgroup = excluded.cgroup, namespace = excluded.namespace,
                   updated_at = excluded.updated_at, pod_name = excluded.pod_name, pod_uid = excluded.pod_uid,
                   container_name = excluded.container_name, idle_cgroup = excluded.idle_cgroup",
            )
            .and_then(|mut s| {
                s.execute(params![
                    m.container_id,
                    m.group,
                    m.pid,
                    m.start_time as i64,
                    m.cookie as i64,
                    m.labels.cgroup,
                    m.labels.namespace,
                    t,
                    m.labels.pod_name,
                    m.labels.pod_uid,
                    m.labels.container_name,
                    m.labels.idle_cgroup
                ])
            })
            .map_err(|e| self.err(e))?;
        Ok(self.member(&m.container_id)?.expect("row just written"))
    }

    /// Records the cookie seen on a member now.
    pub fn set_cookie(&self, container_id: &str, cookie: Cookie) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("UPDATE members SET cookie = ?2, updated_at = ?3 WHERE container_id = ?1")
            .and_then(|mut s| s.execute(params![container_id, cookie as i64, now()]))
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Removes a container; drops its group when that leaves it empty. Returns the removed row.
    pub fn remove_member(&self, container_id: &str) -> Result<Option<Member>, StoreError> {
        let Some(m) = self.member(container_id)? else { return Ok(None) };
        self.conn
            .prepare_cached("DELETE FROM members WHERE container_id = ?1")
            .and_then(|mut s| s.execute([container_id]))
            .map_err(|e| self.err(e))?;
        self.drop_group_if_empty(&m.group)?;
        Ok(Some(m))
    }

    /// Deletes a group row (and its counters) when it has no members. Returns whether it did.
    pub fn drop_group_if_empty(&self, group: &str) -> Result<bool, StoreError> {
        self.conn
            .prepare_cached(
                "DELETE FROM groups WHERE key = ?1 AND NOT EXISTS (SELECT 1 FROM members WHERE group_key = ?1)",
            )
            .and_then(|mut s| s.execute([group]))
            .map(|n| n > 0)
            .map_err(|e| self.err(e))
    }

    /// Deletes every group row (and its counters) that has no members. Returns their keys, sorted.
    pub fn drop_empty_groups(&self) -> Result<Vec<String>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(
                "DELETE FROM groups WHERE NOT EXISTS (SELECT 1 FROM members WHERE group_key = groups.key) RETURNING key",
            )
            .map_err(|e| self.err(e))?;
        let rows = st.query_map([], |r| r.get::<_, String>(0)).map_err(|e| self.err(e))?;
        let mut keys: Vec<String> = rows.collect::<Result<_, _>>().map_err(|e| self.err(e))?;
        keys.sort();
        Ok(keys)
    }

    /// Counts one ensure of `group` as a success or failure.
    pub fn count(&self, group: &str, ok: bool) -> Result<(), StoreError> {
        let sql = if ok {
            "INSERT INTO groups (key, created_at, ok) VALUES (?1, ?2, 1) ON CONFLICT (key) DO UPDATE SET ok = ok + 1"
        } else {
            "INSERT INTO groups (key, created_at, failed) VALUES (?1, ?2, 1) ON CONFLICT (key) DO UPDATE SET failed = failed + 1"
        };
        self.conn
            .prepare_cached(sql)
            .and_then(|mut s| s.execute(params![group, now()]))
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// Counts one hook failure by reason.
    pub fn count_failure(&self, reason: FailureReason) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("INSERT INTO failures (reason, count) VALUES (?1, 1) ON CONFLICT (reason) DO UPDATE SET count = count + 1")
            .and_then(|mut s| s.execute([reason.as_str()]))
            .map(drop)
            .map_err(|e| self.err(e))
    }

    /// All groups with their counters.
    pub fn groups(&self) -> Result<Vec<GroupRow>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached("SELECT key, created_at, ok, failed FROM groups ORDER BY key")
            .map_err(|e| self.err(e))?;
        let rows = st
            .query_map([], |r| {
                Ok(GroupRow {
                    key: r.get(0)?,
                    created_at: r.get(1)?,
                    ok: r.get::<_, i64>(2)? as u64,
                    failed: r.get::<_, i64>(3)? as u64,
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// Hook failures by reason.
    pub fn failures(&self) -> Result<Vec<(String, u64)>, StoreError> {
        let mut st =
            self.conn.prepare_cached("SELECT reason, count FROM failures ORDER BY reason").map_err(|e| self.err(e))?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64))).map_err(|e| self.err(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.err(e))
    }

    /// `PRAGMA integrity_check` result (`"ok"` when healthy).
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        self.conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).map_err(|e| self.err(e))
    }
}

/// The rollback of a [`Store::transaction`] whose closure failed or panicked.
struct Open<'s>(&'s Store);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.rollback();
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
