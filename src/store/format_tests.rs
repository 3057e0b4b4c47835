//! The cache file across versions: the upgrade of every older format in place, a failed
//! upgrade, and the files 0.1.0 must still use after this binary wrote them.

use std::path::Path;

use super::*;

/// The v1 schema exactly as released (before the pod labels).
const SCHEMA_V1: &str = "
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
    updated_at   INTEGER NOT NULL
);
CREATE INDEX members_by_group ON members (group_key, seq);
CREATE TABLE failures (
    reason TEXT PRIMARY KEY NOT NULL,
    count  INTEGER NOT NULL
);
";

/// Builds a populated v1 cache by hand at `path`, as the v1 code left it (WAL mode).
fn build_v1(path: &Path) {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; BEGIN; {SCHEMA_V1} PRAGMA application_id = {APPLICATION_ID}; \
         PRAGMA user_version = 1; COMMIT;
         INSERT INTO groups (key, created_at, ok, failed) VALUES ('tenant-a/web', 1700000000, 3, 1);
         INSERT INTO groups (key, created_at, ok, failed) VALUES ('tenant-b/db', 1700000001, 1, 0);
         INSERT INTO members VALUES ('a1', 'tenant-a/web', 101, 11, 4096, '/kubepods/a1', 'tenant-a', 1, 1700000000, 1700000005);
         INSERT INTO members VALUES ('a2', 'tenant-a/web', 102, 12, 4096, NULL, 'tenant-a', 2, 1700000002, 1700000002);
         INSERT INTO members VALUES ('b1', 'tenant-b/db', 201, 21, 8192, NULL, NULL, 3, 1700000003, 1700000003);
         INSERT INTO failures VALUES ('kernel', 2);"
    ))
    .unwrap();
}

#[test]
fn v1_cache_is_migrated_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    build_v1(&path);

    let s = Store::open(&path).unwrap();
    assert_eq!(aside_of(&s), None, "a v1 cache is upgraded, not moved aside");
    assert_healthy(&s);
    assert!(aside_files(dir.path()).is_empty());

    // Every v1 row survives, with empty pod labels.
    let all = s.all_members().unwrap();
    assert_eq!(ids(&all), ["a1", "a2", "b1"]);
    let a1 = &all[0];
    assert_eq!(
        (
            a1.group.as_str(),
            a1.pid,
            a1.start_time,
            a1.cookie,
            a1.labels.cgroup.as_deref(),
            a1.labels.namespace.as_deref()
        ),
        ("tenant-a/web", 101, 11, 4096, Some("/kubepods/a1"), Some("tenant-a"))
    );
    assert_eq!((a1.seq, a1.created_at, a1.updated_at), (1, 1_700_000_000, 1_700_000_005));
    assert!(all.iter().all(|m| m.labels.pod_name.is_none()
        && m.labels.pod_uid.is_none()
        && m.labels.container_name.is_none()
        && m.labels.idle_cgroup.is_none()));
    assert_eq!(
        s.groups().unwrap().iter().map(|g| (g.key.as_str(), g.ok, g.failed)).collect::<Vec<_>>(),
        [("tenant-a/web", 3, 1), ("tenant-b/db", 1, 0)]
    );
    assert_eq!(s.failures().unwrap(), [("kernel".to_string(), 2)]);

    // The new columns work, and join order continues after the v1 rows.
    let a3 = s.transaction(|tx| tx.upsert_member(&member("a3", "tenant-a/web", 103, 13))).unwrap();
    assert_eq!(a3.seq, 4);
    assert_eq!(a3.labels.pod_name.as_deref(), Some("pod-a3"));
    drop(s);

    // Reopening a migrated cache is a plain open.
    let s = Store::open(&path).unwrap();
    assert_eq!(aside_of(&s), None);
    assert_eq!(pragma::<i32>(&s, "user_version"), FORMAT);
    assert_eq!(s.member("a3").unwrap().unwrap().labels.container_name.as_deref(), Some("ctr-a3"));
    assert_eq!(s.all_members().unwrap().len(), 4);
    // The v4 column: where a sched_idle member keeps cpu.idle at 1.
    let idle = Member {
        labels: Labels { idle_cgroup: Some("/kubepods/besteffort/p/c.scope".into()), ..Labels::default() },
        ..Member::new("a4", "tenant-a/web", 104, 14)
    };
    s.transaction(|tx| tx.upsert_member(&idle)).unwrap();
    assert_eq!(s.member("a4").unwrap().unwrap().labels.idle_cgroup.as_deref(), Some("/kubepods/besteffort/p/c.scope"));
}

#[test]
fn v1_schema_plus_migration_equals_a_fresh_v2_schema() {
    let dir = tempfile::tempdir().unwrap();
    let migrated = dir.path().join("migrated.db");
    build_v1(&migrated);
    let fresh = dir.path().join("fresh.db");
    let columns = |path: &Path| -> Vec<(String, String, bool)> {
        let s = Store::open(path).unwrap();
        let mut st =
            s.conn.prepare("SELECT name, type, \"notnull\" FROM pragma_table_info('members') ORDER BY cid").unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().collect::<Result<_, _>>().unwrap()
    };
    let (m, f) = (columns(&migrated), columns(&fresh));
    assert_eq!(m, f);
    assert_eq!(
        m.iter().rev().take(3).map(|c| c.0.as_str()).collect::<Vec<_>>(),
        ["container_name", "pod_uid", "pod_name"]
    );
}

#[test]
fn a_failed_migration_changes_nothing_and_the_file_is_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    // Claims v1 but already has one of the v2 columns: the ALTER fails half way.
    build_v1(&path);
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("ALTER TABLE members ADD COLUMN pod_uid TEXT;").unwrap();
    }
    let s = Store::open(&path).unwrap();
    let aside = aside_of(&s).expect("moved aside");
    assert!(aside.to_str().unwrap().contains(".unmigratable-v1-"), "{aside:?}");
    assert_healthy(&s);
    assert!(s.all_members().unwrap().is_empty());
    drop(s);
    // The moved file is exactly the v1 database: the migration's first steps were rolled back.
    let c = rusqlite::Connection::open(&aside).unwrap();
    let version: i32 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, 1);
    let has_pod_name: i64 = c
        .query_row("SELECT count(*) FROM pragma_table_info('members') WHERE name = 'pod_name'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(has_pod_name, 0);
    let n: i64 = c.query_row("SELECT count(*) FROM members", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 3);
}

/// The next join order is one step down the `members_by_seq` index, not a scan: the hook's cost
/// must not grow with the number of containers on the node.
#[test]
fn the_next_seq_is_an_index_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&db_in(&dir)).unwrap();
    let plan: Vec<String> = s
        .conn
        .prepare("EXPLAIN QUERY PLAN SELECT coalesce(max(seq), 0) + 1 FROM members INDEXED BY members_by_seq")
        .unwrap()
        .query_map([], |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(plan, ["SEARCH members USING COVERING INDEX members_by_seq"], "{plan:?}");
}

#[test]
fn every_older_format_has_an_upgrade() {
    for f in 1..=MAX_FORMAT {
        assert!(format::upgrade_sql(f, i64::from(f)).is_some(), "no upgrade from format {f}");
    }
    for f in 1..FORMAT {
        assert!(format::FORMAT_STEP_SOURCES.iter().any(|(from, _)| *from == f), "no step from format {f}");
    }
}

/// The statements 0.1.0 (format 3) runs on a cache, as it wrote them, and how it judged a file:
/// a file this binary writes must be one 0.1.0 uses as it is, so that a node rolled back to it
/// (or running its follower while the new hook runs) keeps every member.
const V0_1_0_COLS: &str = "container_id, group_key, pid, start_time, cookie, cgroup, namespace, seq, created_at, \
     updated_at, pod_name, pod_uid, container_name";
const V0_1_0_UPSERT: &str = "INSERT INTO members (container_id, group_key, pid, start_time, cookie, cgroup, namespace, seq, created_at, updated_at,
                                      pod_name, pod_uid, container_name)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7,
                         (SELECT coalesce(max(seq), 0) + 1 FROM members INDEXED BY members_by_seq), ?8, ?8, ?9, ?10, ?11)
                 ON CONFLICT (container_id) DO UPDATE SET
                   seq = CASE WHEN group_key = excluded.group_key AND pid = excluded.pid
                                   AND start_time = excluded.start_time THEN seq ELSE excluded.seq END,
                   group_key = excluded.group_key, pid = excluded.pid, start_time = excluded.start_time,
                   cookie = excluded.cookie, cgroup = excluded.cgroup, namespace = excluded.namespace,
                   updated_at = excluded.updated_at, pod_name = excluded.pod_name, pod_uid = excluded.pod_uid,
                   container_name = excluded.container_name";

/// 0.1.0's verdict: `Ok` when it would use the file as it is.
fn v0_1_0_would_use(c: &rusqlite::Connection) -> Result<(), String> {
    let app: i32 = c.query_row("PRAGMA application_id", [], |r| r.get(0)).unwrap();
    let version: i32 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    match (app, version) {
        (APPLICATION_ID, 3) => Ok(()),
        (APPLICATION_ID, v) if v > 3 => Err(format!("newer-v{v}: 0.1.0 would move it aside")),
        other => Err(format!("{other:?}: 0.1.0 would not use it as it is")),
    }
}

#[test]
fn a_cache_this_binary_writes_is_one_0_1_0_uses_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let s = Store::open(&path).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("a1", "tenant-a/web", 101, 11))).unwrap();
    let idle = Member {
        labels: Labels { idle_cgroup: Some("/kubepods/besteffort/p/a2.scope".into()), ..Labels::default() },
        ..member("a2", "tenant-a/web", 102, 12)
    };
    s.transaction(|tx| tx.upsert_member(&idle)).unwrap();
    drop(s);

    // 0.1.0 opens it, reads the members with its own columns and writes with its own upsert.
    let c = rusqlite::Connection::open(&path).unwrap();
    v0_1_0_would_use(&c).unwrap();
    let n: i64 =
        c.query_row(&format!("SELECT count(*) FROM (SELECT {V0_1_0_COLS} FROM members)"), [], |r| r.get(0)).unwrap();
    assert_eq!(n, 2);
    // 0.1.0 moves container a2 to a new init (the same id, another process) and adds a3.
    for (id, pid, start) in [("a2", 202, 22), ("a3", 103, 13)] {
        c.execute(
            V0_1_0_UPSERT,
            rusqlite::params![
                id,
                "tenant-a/web",
                pid,
                start,
                0x77,
                "/x",
                "tenant-a",
                1_700_000_000,
                None::<String>,
                None::<String>,
                None::<String>
            ],
        )
        .unwrap();
    }
    c.execute("DELETE FROM members WHERE container_id = ?1", ["a1"]).unwrap();
    drop(c);

    // Back in this binary: 0.1.0's rows are there, and the cpu.idle cgroup recorded for a2's old
    // init is not taken for its new one.
    let s = Store::open(&path).unwrap();
    assert_eq!(*s.found(), Found::Owed, "no refill settled the creation");
    let all = s.all_members().unwrap();
    assert_eq!(ids(&all), ["a2", "a3"]);
    assert_eq!((all[0].pid, all[0].labels.idle_cgroup.as_deref()), (202, None));
    assert_eq!(s.transaction(|tx| tx.drop_stale_idle()).unwrap(), 1, "a2's old cgroup row");
    assert_healthy(&s);
}

/// A format-4 file (development builds after 0.1.0 kept the `cpu.idle` cgroup in a column) is
/// folded back into format 3: the values move to `member_idle`, the column goes, and 0.1.0 can
/// open it again.
#[test]
fn format_4_is_folded_back_into_format_3() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    build_v1(&path);
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "ALTER TABLE members ADD COLUMN pod_name TEXT; ALTER TABLE members ADD COLUMN pod_uid TEXT;
             ALTER TABLE members ADD COLUMN container_name TEXT; CREATE INDEX members_by_seq ON members (seq);
             ALTER TABLE members ADD COLUMN idle_cgroup TEXT;
             UPDATE members SET idle_cgroup = '/kubepods/besteffort/a2.scope' WHERE container_id = 'a2';
             PRAGMA user_version = 4;",
        )
        .unwrap();
    }
    let s = Store::open(&path).unwrap();
    assert_eq!(*s.found(), Found::Upgraded { format: 4, revision: 4 });
    assert_healthy(&s);
    let all = s.all_members().unwrap();
    assert_eq!(ids(&all), ["a1", "a2", "b1"]);
    assert_eq!(all[1].labels.idle_cgroup.as_deref(), Some("/kubepods/besteffort/a2.scope"));
    assert_eq!(all[0].labels.idle_cgroup, None);
    let has_column: i64 = s
        .conn
        .query_row("SELECT count(*) FROM pragma_table_info('members') WHERE name = 'idle_cgroup'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(has_column, 0);
    drop(s);
    v0_1_0_would_use(&rusqlite::Connection::open(&path).unwrap()).unwrap();
    assert_eq!(*Store::open(&path).unwrap().found(), Found::Owed, "the upgrade owes a refill until one settles it");
}

/// Creating, upgrading or replacing a file owes it a refill from the runtimes' state; the refill
/// that read every running container settles it, and the file is current from then on.
#[test]
fn a_refill_is_owed_until_one_settles_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    assert_eq!(*Store::open(&path).unwrap().found(), Found::Created);
    assert_eq!(*Store::open(&path).unwrap().found(), Found::Owed);
    Store::open(&path).unwrap().transaction(|tx| tx.refilled()).unwrap();
    assert_eq!(*Store::open(&path).unwrap().found(), Found::Current);
    let s = Store::quarantine(&path, "manual").unwrap();
    assert!(matches!(s.found(), Found::Replaced { .. }));
    drop(s);
    assert_eq!(*Store::open(&path).unwrap().found(), Found::Owed);
}

/// A file 0.1.0 created (format 3, no `meta`) is upgraded to this revision in place: every row
/// kept, the header still format 3. It is reported as upgraded, since such a file may lack
/// containers (0.1.0 may have started it fresh).
#[test]
fn a_0_1_0_cache_gains_this_revision_and_keeps_its_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    build_v1(&path);
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(&format!(
            "{} PRAGMA user_version = 3;",
            format::FORMAT_STEP_SOURCES.iter().map(|(_, s)| *s).collect::<String>()
        ))
        .unwrap();
    }
    let s = Store::open(&path).unwrap();
    assert_eq!(*s.found(), Found::Upgraded { format: 3, revision: 3 });
    assert_healthy(&s);
    assert_eq!(ids(&s.all_members().unwrap()), ["a1", "a2", "b1"]);
}

/// A newer revision of this binary's format holds only additions this binary may ignore: the
/// file is used as it is, and its revision stays.
#[test]
fn a_newer_revision_of_the_format_is_used_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let s = Store::open(&path).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("a1", "web", 101, 11))).unwrap();
    // Revision 9 also keeps a row of its own in meta, of a type this build never reads.
    s.conn
        .execute_batch(
            "UPDATE meta SET value = 9 WHERE key = 'revision'; CREATE TABLE added_by_rev9 (x); \
             INSERT INTO meta (key, value) VALUES ('added_by_rev9', 'text, not an integer');",
        )
        .unwrap();
    s.transaction(|tx| tx.refilled()).unwrap();
    drop(s);
    let s = Store::open(&path).unwrap();
    assert_eq!(*s.found(), Found::Current);
    assert_eq!(ids(&s.all_members().unwrap()), ["a1"]);
    let revision: i64 = s.conn.query_row("SELECT value FROM meta WHERE key = 'revision'", [], |r| r.get(0)).unwrap();
    assert_eq!(revision, 9);
    assert!(tables(&s).contains(&"added_by_rev9".to_string()));
}
