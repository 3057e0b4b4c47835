//! What the cache file is across versions of this binary: its header, the schema each version
//! writes, how a file of an older version is upgraded in place, and which files this binary must
//! leave alone.
//!
//! Two numbers describe a file:
//!
//! - the **format**, `PRAGMA user_version`: what a build must understand to read *and write* the
//!   file safely. Every released build opens a file whose format it knows and refuses one whose
//!   format is newer. So the format is raised only by a change an older writer would break, and
//!   never by an addition it can ignore;
//! - the **revision**, row `revision` of table `meta`: which additions the file carries. Additions
//!   keep the format: new tables, and indexes, whose rows are keyed by a member's identity
//!   (container id, pid, start time), so that a row an older writer replaced or removed is never
//!   taken for the current one. A file without `meta` has the revision of its format.
//!
//! | revision | format | what it added | written by |
//! |---|---|---|---|
//! | 1 | 1 | groups, members, failures | early development builds |
//! | 2 | 2 | the pod labels of a member | development builds |
//! | 3 | 3 | an index on the join order | 0.1.0 |
//! | 4 | 4 | `members.idle_cgroup` | development builds after 0.1.0 |
//! | 5 | 3 | `meta`; the `cpu.idle` cgroup in `member_idle`, folded back from revision 4's column so that 0.1.0 can still open the file | development builds of 0.2.0 |
//! | 6 | 3 | forced idle: each group's total (`group_force_idle`), each member's cgroup's last reading (`member_force_idle`) | 0.2.0 |
//!
//! The rule every later version keeps (docs/upgrading.md): the same application id and lock
//! file; a file of a format it does not know is left in place, never moved or replaced; additions
//! raise the revision, not the format.
//!
//! `newer_on_disk` reads the format from the file's header before SQLite opens anything; `judge`
//! says what an opened file is: current, to upgrade (`upgrade_sql`, in one transaction), to move
//! aside (damaged, foreign, format 0, or an upgrade that fails), or a newer build's
//! ([`Unusable`]).

use rusqlite::Connection;

/// Marks the file as ours (`PRAGMA application_id`, "OCSH").
pub const APPLICATION_ID: i32 = 0x4f43_5348;
/// The format this binary writes (`PRAGMA user_version`): the one 0.1.0 reads and writes.
pub const FORMAT: i32 = 3;
/// The newest format this binary opens: 4, revision 4's column, is folded back into format 3.
pub const MAX_FORMAT: i32 = 4;
/// The revision this binary writes (table `meta`).
pub const REVISION: i64 = 6;

/// The tables of format 3, as 0.1.0 created them.
const FORMAT_3: &str = "
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
    container_name TEXT
);
CREATE INDEX members_by_group ON members (group_key, seq);
CREATE INDEX members_by_seq ON members (seq);
CREATE TABLE failures (
    reason TEXT PRIMARY KEY NOT NULL,
    count  INTEGER NOT NULL
);
";

/// The additions of revision 5: `meta`, and the cgroup whose `cpu.idle` a member of a
/// `sched_idle` class keeps at 1, valid only for the member row with the same identity. Both
/// `WITHOUT ROWID`: no separate index on the key, so less schema for every hook to parse.
const REVISION_5: &str = "
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS member_idle (
    container_id TEXT PRIMARY KEY NOT NULL,
    pid          INTEGER NOT NULL,
    start_time   INTEGER NOT NULL,
    cgroup       TEXT NOT NULL
) WITHOUT ROWID;
";

/// The additions of revision 6: the forced idle of core scheduling charged to each group (its
/// total, kept when members leave and when the group empties, so the counter never goes down),
/// and the last reading of each member's cgroup, valid only for the member with that identity.
const REVISION_6: &str = "
CREATE TABLE IF NOT EXISTS group_force_idle (
    group_key TEXT PRIMARY KEY NOT NULL,
    usec      INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS member_force_idle (
    container_id TEXT PRIMARY KEY NOT NULL,
    pid          INTEGER NOT NULL,
    start_time   INTEGER NOT NULL,
    cgroup       TEXT NOT NULL,
    usec         INTEGER NOT NULL
) WITHOUT ROWID;
";

/// Format upgrades, each from the format it names to the next (revisions 1 to 3).
const FORMAT_STEPS: &[(i32, &str)] = &[
    (
        1,
        "ALTER TABLE members ADD COLUMN pod_name TEXT;
         ALTER TABLE members ADD COLUMN pod_uid TEXT;
         ALTER TABLE members ADD COLUMN container_name TEXT;",
    ),
    (2, "CREATE INDEX members_by_seq ON members (seq);"),
];

/// Format 4 back to format 3: the column's values move into `member_idle` (a build of revision
/// 4 that ran meanwhile may have written newer ones), then the column goes.
const FOLD_FORMAT_4: &str = "
INSERT OR REPLACE INTO member_idle (container_id, pid, start_time, cgroup)
    SELECT container_id, pid, start_time, idle_cgroup FROM members WHERE idle_cgroup IS NOT NULL;
ALTER TABLE members DROP COLUMN idle_cgroup;
";

/// Why a file is not a cache this binary may use, and must be left as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    /// A newer build's format.
    #[error("its format {0} is newer than this binary reads (up to {MAX_FORMAT}); a newer oci-coresched-hook wrote it")]
    Newer(i32),
}

/// What a file is, before anything is changed in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// No schema yet (a new or empty file).
    Fresh,
    /// Ours, at a format and revision this binary writes as they are (or a newer revision of
    /// its format, whose additions it leaves alone). `refill`: a refill from the runtimes' state
    /// is still owed (row `refill` of `meta`: set when the file was created, upgraded or
    /// replaced, cleared by the first opener whose refill read every running container).
    Current {
        /// A refill is owed.
        refill: bool,
    },
    /// Ours, from an older build: upgraded in place.
    Older {
        /// Its format.
        format: i32,
        /// Its revision.
        revision: i64,
    },
    /// Not usable as it is, and worth nothing kept in place: moved aside (the label says why).
    Damaged(String),
    /// Left in place.
    Unusable(Unusable),
}

/// A newer build's format, read from the file's header on disk (SQLite's header: the magic
/// string, `user_version` at byte 60, `application_id` at byte 68). `None` for anything else,
/// which [`judge`] then looks at through SQLite (a header still in the WAL included).
pub(super) fn newer_on_disk(path: &std::path::Path) -> Option<Unusable> {
    use std::io::Read;
    let mut header = [0u8; 100];
    std::fs::File::open(path).ok()?.read_exact(&mut header).ok()?;
    let word = |at: usize| i32::from_be_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let ours = header.starts_with(b"SQLite format 3\0") && word(68) == APPLICATION_ID;
    (ours && word(60) > MAX_FORMAT).then(|| Unusable::Newer(word(60)))
}

/// Reads the header (and the revision) of an open file. Reads only.
pub(super) fn judge(conn: &Connection) -> rusqlite::Result<Verdict> {
    // Two plain pragmas: a join of the table-valued pragma functions costs ~20 us more to
    // prepare in a fresh process.
    let app: i32 = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
    let format: i32 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if app == 0 && format == 0 {
        let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
        return Ok(if tables == 0 { Verdict::Fresh } else { Verdict::Damaged("foreign".into()) });
    }
    if app != APPLICATION_ID {
        return Ok(Verdict::Damaged("foreign".into()));
    }
    if format > MAX_FORMAT {
        return Ok(Verdict::Unusable(Unusable::Newer(format)));
    }
    if format < 1 {
        // Ours, but no build ever wrote format 0 with our id: nothing to upgrade from.
        return Ok(Verdict::Damaged(format!("older-v{format}")));
    }
    let (revision, refill) = meta(conn)?;
    let revision = revision.unwrap_or(i64::from(format));
    Ok(if format == FORMAT && revision >= REVISION {
        Verdict::Current { refill }
    } else {
        Verdict::Older { format, revision }
    })
}

/// The `meta` revision (`None` in a file without the table) and whether a refill is owed. One
/// query on the common path, of the whole table (a few rows): for `WHERE key IN (...)`, SQLite
/// builds the list as a temporary index, which cost 32,000 instructions more per open.
fn meta(conn: &Connection) -> rusqlite::Result<(Option<i64>, bool)> {
    // Only the two rows this build knows are read as integers: a newer revision of the format may
    // add rows of any type, and its file is still one this build uses.
    let rows = conn.prepare("SELECT key, value FROM meta").and_then(|mut st| {
        st.query_map([], |r| {
            let key: String = r.get(0)?;
            let value = if key == "revision" || key == "refill" { Some(r.get::<_, i64>(1)?) } else { None };
            Ok((key, value))
        })?
        .collect::<Result<Vec<_>, _>>()
    });
    match rows {
        Ok(rows) => {
            let get = |k: &str| rows.iter().find(|(key, _)| key == k).and_then(|(_, v)| *v);
            Ok((get("revision"), get("refill").is_some_and(|v| v != 0)))
        }
        Err(e) => {
            let has_meta: i64 =
                conn.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'", [], |r| {
                    r.get(0)
                })?;
            if has_meta == 0 { Ok((None, false)) } else { Err(e) }
        }
    }
}

/// Owes the file a refill (in the transaction that creates, upgrades or replaces it).
pub(super) const OWE_REFILL: &str = "INSERT OR REPLACE INTO meta (key, value) VALUES ('refill', 1);";
/// Settles the refill the file was owed.
pub(super) const REFILLED: &str = "DELETE FROM meta WHERE key = 'refill';";

/// The whole schema of a new file, with its header, in one transaction (WAL mode first).
pub(super) fn create_sql() -> String {
    format!(
        "PRAGMA journal_mode = WAL; BEGIN; {FORMAT_3} {REVISION_5} {REVISION_6} {} {OWE_REFILL} PRAGMA application_id = {APPLICATION_ID}; \
         PRAGMA user_version = {FORMAT}; COMMIT;",
        set_revision()
    )
}

fn set_revision() -> String {
    format!("INSERT OR REPLACE INTO meta (key, value) VALUES ('revision', {REVISION});")
}

/// The statements that bring a file of `format` and `revision` to [`FORMAT`] and [`REVISION`],
/// to run in one transaction. `None` when a step is missing (no build wrote such a file).
pub(super) fn upgrade_sql(format: i32, revision: i64) -> Option<String> {
    let mut sql = String::new();
    let mut f = format;
    while f < FORMAT {
        let (_, step) = FORMAT_STEPS.iter().find(|(from, _)| *from == f)?;
        sql.push_str(step);
        f += 1;
    }
    sql.push_str(REVISION_5);
    sql.push_str(REVISION_6);
    if format == 4 {
        sql.push_str(FOLD_FORMAT_4);
    }
    if revision <= REVISION {
        sql.push_str(&set_revision());
    }
    sql.push_str(OWE_REFILL);
    sql.push_str(&format!("PRAGMA user_version = {FORMAT};"));
    Some(sql)
}

#[cfg(test)]
pub(super) const FORMAT_STEP_SOURCES: &[(i32, &str)] = FORMAT_STEPS;
