//! What a cache file is, read without changing anything: no lock, no upgrade, no file created
//! beside it (for `doctor`). A file with no write-ahead log beside it is opened `immutable`
//! (SQLite then creates no `-wal` or `-shm`); one with a log is opened read-only, so that what
//! the log holds is seen.

use std::path::{Path, PathBuf};

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use super::format::{self, Verdict};
use super::{SqliteError, StoreError, Unusable};

/// What a cache file is to this binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// No schema yet: the next writer creates it.
    Empty,
    /// This binary's format and revision (or a newer revision of its format).
    Current,
    /// An older build's: the next opener upgrades it in place.
    Older,
    /// A newer build's format: this binary leaves it in place and records nothing.
    Newer,
    /// Not ours, or damaged: the next opener moves it aside (the label says why).
    Damaged(String),
}

/// A cache file's header, as [`peek`] read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peeked {
    /// Its format (`PRAGMA user_version`).
    pub format: i32,
    /// Its revision (row `revision` of `meta`; `None` when it has none).
    pub revision: Option<i64>,
    /// What it is to this binary.
    pub kind: Kind,
}

/// Reads the header of the cache file `path`, changing nothing.
pub fn peek(path: &Path) -> Result<Peeked, StoreError> {
    if let Some(Unusable::Newer(format)) = format::newer_on_disk(path) {
        return Ok(Peeked { format, revision: None, kind: Kind::Newer });
    }
    let err = |source: rusqlite::Error| StoreError::Sqlite { path: path.to_path_buf(), source: SqliteError(source) };
    let conn = open(path).map_err(err)?;
    let judged = format::judge(&conn);
    let (format, revision) = match numbers(&conn) {
        Ok(n) => n,
        Err(e) if super::is_corrupt(&e) => (0, None),
        Err(e) => return Err(err(e)),
    };
    let kind = match judged {
        Ok(Verdict::Fresh) => Kind::Empty,
        Ok(Verdict::Current { .. }) => Kind::Current,
        Ok(Verdict::Older { .. }) => Kind::Older,
        Ok(Verdict::Damaged(why)) => Kind::Damaged(why),
        Ok(Verdict::Unusable(Unusable::Newer(_))) => Kind::Newer,
        Err(e) if super::is_corrupt(&e) => Kind::Damaged("corrupt".into()),
        Err(e) => return Err(err(e)),
    };
    Ok(Peeked { format, revision, kind })
}

fn open(path: &Path) -> rusqlite::Result<Connection> {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = if PathBuf::from(wal).exists() {
        Connection::open_with_flags(path, flags)?
    } else {
        Connection::open_with_flags(uri(path), flags | OpenFlags::SQLITE_OPEN_URI)?
    };
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    Ok(conn)
}

/// `file:PATH?immutable=1`, the path percent-encoded where a URI needs it.
fn uri(path: &Path) -> String {
    let mut s = String::from("file:");
    for b in path.as_os_str().as_encoded_bytes() {
        match b {
            b'?' | b'#' | b'%' => s.push_str(&format!("%{b:02X}")),
            _ => s.push(char::from(*b)),
        }
    }
    s.push_str("?immutable=1");
    s
}

fn numbers(conn: &Connection) -> rusqlite::Result<(i32, Option<i64>)> {
    let format: i32 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let has_meta: i64 =
        conn.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'", [], |r| r.get(0))?;
    let revision = if has_meta == 0 {
        None
    } else {
        conn.query_row("SELECT value FROM meta WHERE key = 'revision'", [], |r| r.get::<_, i64>(0))
            .map(Some)
            .or_else(|e| if e == rusqlite::Error::QueryReturnedNoRows { Ok(None) } else { Err(e) })?
    };
    Ok((format, revision))
}

#[cfg(test)]
#[path = "peek_tests.rs"]
mod tests;
