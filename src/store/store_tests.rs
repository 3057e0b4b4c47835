//! Tests of the SQLite cache: schema, members and their order, counters, and the quarantine of
//! every kind of unusable file.

use std::path::{Path, PathBuf};

use super::*;

fn member(id: &str, group: &str, pid: Pid, start_time: u64) -> Member {
    Member {
        cookie: 0x1000 + pid as u64,
        labels: Labels {
            cgroup: Some(format!("/kubepods/pod1/{id}")),
            namespace: Some("tenant-a".into()),
            pod_name: Some(format!("pod-{id}")),
            pod_uid: Some(format!("uid-{id}")),
            container_name: Some(format!("ctr-{id}")),
            idle_cgroup: None,
        },
        ..Member::new(id, group, pid, start_time)
    }
}

/// Where a damaged file was moved when `s` was opened, if it was.
fn aside_of(s: &Store) -> Option<PathBuf> {
    match s.found() {
        Found::Replaced { aside } => Some(aside.clone()),
        _ => None,
    }
}

fn db_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("cache.db")
}

fn pragma<T: rusqlite::types::FromSql>(s: &Store, name: &str) -> T {
    s.conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0)).unwrap()
}

fn ids(ms: &[Member]) -> Vec<&str> {
    ms.iter().map(|m| m.container_id.as_str()).collect()
}

fn tables(s: &Store) -> Vec<String> {
    let mut st =
        s.conn.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'index') ORDER BY name").unwrap();
    st.query_map([], |r| r.get(0)).unwrap().collect::<Result<_, _>>().unwrap()
}

/// Files in `dir` other than the live database and its WAL/SHM.
fn aside_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            !matches!(n, "cache.db" | "cache.db-wal" | "cache.db-shm")
        })
        .collect();
    v.sort();
    v
}

/// Compares file contents without dumping kilobytes of bytes on failure.
#[track_caller]
fn assert_bytes(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        panic!("{what}: {} bytes, want {}; first difference at byte {at}", got.len(), want.len());
    }
}

/// SQLite's companion files of a database moved aside (kept with it, so it opens as it was).
fn with_companions(aside: &Path) -> Vec<PathBuf> {
    vec![
        aside.to_path_buf(),
        PathBuf::from(format!("{}-shm", aside.display())),
        PathBuf::from(format!("{}-wal", aside.display())),
    ]
}

fn assert_healthy(s: &Store) {
    assert_eq!(s.integrity_check().unwrap(), "ok");
    assert_eq!(pragma::<i32>(s, "application_id"), APPLICATION_ID);
    assert_eq!(pragma::<i32>(s, "user_version"), FORMAT);
    assert_eq!(pragma::<String>(s, "journal_mode"), "wal");
    assert_eq!(
        tables(s),
        [
            "failures",
            "group_force_idle",
            "groups",
            "member_force_idle",
            "member_idle",
            "members",
            "members_by_group",
            "members_by_seq",
            "meta",
            "sqlite_autoindex_failures_1",
            "sqlite_autoindex_groups_1",
            "sqlite_autoindex_members_1",
        ]
    );
    let revision: i64 = s.conn.query_row("SELECT value FROM meta WHERE key = 'revision'", [], |r| r.get(0)).unwrap();
    assert_eq!(revision, REVISION);
}

#[test]
fn open_creates_a_fresh_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let s = Store::open(&path).unwrap();
    assert_eq!(aside_of(&s), None);
    assert_eq!(s.path(), path);
    assert_healthy(&s);
    assert_eq!(APPLICATION_ID.to_be_bytes(), *b"OCSH");
    assert!(s.all_members().unwrap().is_empty());
    assert!(s.groups().unwrap().is_empty());
    assert!(s.failures().unwrap().is_empty());
    assert_eq!(s.member("c1").unwrap(), None);
    assert!(s.members("web").unwrap().is_empty());
    drop(s);
    // The header on disk says it is ours.
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..16], b"SQLite format 3\0");
    assert_eq!(&bytes[68..72], b"OCSH");
    assert_eq!(i32::from_be_bytes(bytes[60..64].try_into().unwrap()), FORMAT);
    assert!(aside_files(dir.path()).is_empty());
}

#[test]
fn an_empty_file_is_a_fresh_store_not_a_corrupt_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    std::fs::write(&path, b"").unwrap();
    let s = Store::open(&path).unwrap();
    assert_eq!(aside_of(&s), None);
    assert_healthy(&s);
    assert!(aside_files(dir.path()).is_empty());
}

#[test]
fn upsert_and_members_in_join_order() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&db_in(&dir)).unwrap();
    let a1 = s.transaction(|tx| tx.upsert_member(&member("a1", "web", 101, 11))).unwrap();
    let b1 = s.transaction(|tx| tx.upsert_member(&member("b1", "db", 201, 21))).unwrap();
    let a2 = s.transaction(|tx| tx.upsert_member(&member("a2", "web", 102, 12))).unwrap();
    let a3 = s.transaction(|tx| tx.upsert_member(&member("a3", "web", 103, 13))).unwrap();
    assert!(a1.seq < b1.seq && b1.seq < a2.seq && a2.seq < a3.seq, "{a1:?} {b1:?} {a2:?} {a3:?}");
    assert_eq!(ids(&s.members("web").unwrap()), ["a1", "a2", "a3"]);
    assert_eq!(ids(&s.members("db").unwrap()), ["b1"]);
    assert!(s.members("tenant-a/web").unwrap().is_empty());
    assert_eq!(ids(&s.all_members().unwrap()), ["b1", "a1", "a2", "a3"]);

    // The stored row is what was given, plus seq and timestamps.
    let want = member("a2", "web", 102, 12);
    let got = s.member("a2").unwrap().unwrap();
    assert_eq!(got, a2);
    assert_eq!(
        (&got.container_id, &got.group, got.pid, got.start_time, got.cookie, &got.labels.cgroup, &got.labels.namespace),
        (
            &want.container_id,
            &want.group,
            want.pid,
            want.start_time,
            want.cookie,
            &want.labels.cgroup,
            &want.labels.namespace
        )
    );
    assert_eq!(
        (&got.labels.pod_name, &got.labels.pod_uid, &got.labels.container_name),
        (&want.labels.pod_name, &want.labels.pod_uid, &want.labels.container_name)
    );
    assert_eq!(got.labels.pod_name.as_deref(), Some("pod-a2"));
    assert!(got.created_at > 1_600_000_000 && got.updated_at >= got.created_at, "{got:?}");

    // The group rows exist, with zero counters.
    let groups = s.groups().unwrap();
    assert_eq!(
        groups.iter().map(|g| (g.key.as_str(), g.ok, g.failed)).collect::<Vec<_>>(),
        [("db", 0, 0), ("web", 0, 0)]
    );
}

#[test]
fn full_range_values_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&db_in(&dir)).unwrap();
    let mut m = member("c1", "ns-with-ünïcode/größe", i32::MAX, u64::MAX);
    m.cookie = 0xdead_beef_dead_beef; // above i64::MAX: stored as its two's complement
    m.labels.cgroup = None;
    m.labels.namespace = None;
    m.labels.pod_name = None;
    m.labels.pod_uid = None;
    m.labels.container_name = Some("we\"ird\\ ünï\ncode".into());
    let got = s.transaction(|tx| tx.upsert_member(&m)).unwrap();
    assert_eq!((got.pid, got.start_time, got.cookie), (i32::MAX, u64::MAX, 0xdead_beef_dead_beef));
    assert_eq!((got.labels.cgroup, got.labels.namespace), (None, None));
    assert_eq!((got.labels.pod_name, got.labels.pod_uid), (None, None));
    assert_eq!(got.labels.container_name.as_deref(), Some("we\"ird\\ ünï\ncode"));
    assert_eq!(s.members("ns-with-ünïcode/größe").unwrap().len(), 1);
    s.transaction(|tx| tx.set_cookie("c1", u64::MAX)).unwrap();
    assert_eq!(s.member("c1").unwrap().unwrap().cookie, u64::MAX);
}

#[test]
fn reupsert_keeps_seq_but_a_new_group_or_process_is_a_new_join() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&db_in(&dir)).unwrap();
    let a1 = s.transaction(|tx| tx.upsert_member(&member("a1", "web", 101, 11))).unwrap();
    let a2 = s.transaction(|tx| tx.upsert_member(&member("a2", "web", 102, 12))).unwrap();

    // Same container, group, pid and start time: the same join (cookie and paths may change).
    let mut again = member("a1", "web", 101, 11);
    again.cookie = 0x77;
    again.labels.cgroup = Some("/moved".into());
    let r = s.transaction(|tx| tx.upsert_member(&again)).unwrap();
    assert_eq!(
        (r.seq, r.created_at, r.cookie, r.labels.cgroup.as_deref()),
        (a1.seq, a1.created_at, 0x77, Some("/moved"))
    );
    assert_eq!(ids(&s.members("web").unwrap()), ["a1", "a2"]);

    // A group change is a new join: a seq after everyone's, and it leaves the old group's list.
    let moved = s.transaction(|tx| tx.upsert_member(&member("a1", "db", 101, 11))).unwrap();
    assert!(moved.seq > a2.seq, "{moved:?} {a2:?}");
    assert_eq!(moved.group, "db");
    assert_eq!(ids(&s.members("web").unwrap()), ["a2"]);
    assert_eq!(ids(&s.members("db").unwrap()), ["a1"]);

    // Back to web: now the youngest member there.
    let back = s.transaction(|tx| tx.upsert_member(&member("a1", "web", 101, 11))).unwrap();
    assert!(back.seq > moved.seq);
    assert_eq!(ids(&s.members("web").unwrap()), ["a2", "a1"]);

    // A new pid (a restarted container under the same id) is a new join.
    let repid = s.transaction(|tx| tx.upsert_member(&member("a2", "web", 202, 12))).unwrap();
    assert!(repid.seq > back.seq);
    assert_eq!(ids(&s.members("web").unwrap()), ["a1", "a2"]);

    // So is a new start time with the same pid (pid reuse).
    let restart = s.transaction(|tx| tx.upsert_member(&member("a1", "web", 101, 99))).unwrap();
    assert!(restart.seq > repid.seq);
    assert_eq!(ids(&s.members("web").unwrap()), ["a2", "a1"]);
    assert_eq!(s.all_members().unwrap().len(), 2);

    // A re-upsert of the youngest keeps its seq (no drift upward on repeats).
    let same = s.transaction(|tx| tx.upsert_member(&member("a1", "web", 101, 99))).unwrap();
    assert_eq!(same.seq, restart.seq);
}

#[test]
fn remove_member_drops_only_an_empty_group() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&db_in(&dir)).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("a1", "web", 101, 11))).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("a2", "web", 102, 12))).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("b1", "db", 201, 21))).unwrap();
    s.transaction(|tx| tx.count("web", true)).unwrap();

    let removed = s.transaction(|tx| tx.remove_member("a1")).unwrap().unwrap();
    assert_eq!((removed.container_id.as_str(), removed.group.as_str(), removed.pid), ("a1", "web", 101));
    assert_eq!(s.member("a1").unwrap(), None);
    assert_eq!(ids(&s.members("web").unwrap()), ["a2"]);
    // web still has a2: its row and counters stay.
    let keys = |s: &Store| s.groups().unwrap().into_iter().map(|g| (g.key, g.ok)).collect::<Vec<_>>();
    assert_eq!(keys(&s), [("db".to_string(), 0), ("web".to_string(), 1)]);
    assert!(!s.transaction(|tx| tx.drop_group_if_empty("web")).unwrap());

    // Removing the last member drops the group.
    assert!(s.transaction(|tx| tx.remove_member("a2")).unwrap().is_some());
    assert_eq!(keys(&s), [("db".to_string(), 0)]);
    // Unknown ids are a no-op.
    assert_eq!(s.transaction(|tx| tx.remove_member("a2")).unwrap(), None);
    assert_eq!(s.transaction(|tx| tx.remove_member("nope")).unwrap(), None);
    assert_eq!(keys(&s), [("db".to_string(), 0)]);
    assert!(!s.transaction(|tx| tx.drop_group_if_empty("never-existed")).unwrap());

    // A group row left empty by other means is dropped on demand.
    s.transaction(|tx| tx.count("orphan", false)).unwrap();
    assert!(s.transaction(|tx| tx.drop_group_if_empty("orphan")).unwrap());
    assert!(!s.transaction(|tx| tx.drop_group_if_empty("orphan")).unwrap());
    assert_eq!(ids(&s.all_members().unwrap()), ["b1"]);

    // A new member after removals still sorts after the survivors.
    let c = s.transaction(|tx| tx.upsert_member(&member("b2", "db", 202, 22))).unwrap();
    assert!(c.seq > s.member("b1").unwrap().unwrap().seq);
    assert_eq!(ids(&s.members("db").unwrap()), ["b1", "b2"]);
}

#[test]
fn counters() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&db_in(&dir)).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("a1", "web", 101, 11))).unwrap();
    s.transaction(|tx| tx.count("web", true)).unwrap();
    s.transaction(|tx| tx.count("web", true)).unwrap();
    s.transaction(|tx| tx.count("web", false)).unwrap();
    // Counting a group with no row yet creates it.
    s.transaction(|tx| tx.count("db", false)).unwrap();
    s.transaction(|tx| tx.count("db", false)).unwrap();
    let g: Vec<(String, u64, u64)> = s.groups().unwrap().into_iter().map(|g| (g.key, g.ok, g.failed)).collect();
    assert_eq!(g, [("db".to_string(), 0, 2), ("web".to_string(), 2, 1)]);
    assert!(s.groups().unwrap().iter().all(|g| g.created_at > 1_600_000_000));

    // An upsert does not reset a group's counters.
    s.transaction(|tx| tx.upsert_member(&member("a2", "web", 102, 12))).unwrap();
    let web = s.groups().unwrap().into_iter().find(|g| g.key == "web").unwrap();
    assert_eq!((web.ok, web.failed), (2, 1));

    s.transaction(|tx| tx.count_failure(FailureReason::LockTimeout)).unwrap();
    s.transaction(|tx| tx.count_failure(FailureReason::Kernel)).unwrap();
    s.transaction(|tx| tx.count_failure(FailureReason::LockTimeout)).unwrap();
    s.transaction(|tx| tx.count_failure(FailureReason::LockTimeout)).unwrap();
    assert_eq!(s.failures().unwrap(), [("kernel".to_string(), 1), ("lock_timeout".to_string(), 3)]);
}

#[test]
fn transactions_commit_and_roll_back() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&db_in(&dir)).unwrap();
    s.transaction(|s| {
        s.upsert_member(&member("a1", "web", 101, 11))?;
        s.count("web", true)
    })
    .unwrap();
    let failed: Result<(), StoreError> = s.transaction(|s| {
        s.upsert_member(&member("a2", "web", 102, 12))?;
        s.remove_member("a1")?;
        s.count_failure(FailureReason::Verify)?;
        Err(StoreError::Quarantine { path: "x".into(), source: std::io::ErrorKind::Other.into() })
    });
    assert!(failed.is_err());
    assert_eq!(ids(&s.members("web").unwrap()), ["a1"]);
    assert!(s.failures().unwrap().is_empty());
    assert_eq!(s.groups().unwrap().len(), 1);
    // A rollback with no transaction open is harmless.
    s.rollback();
    assert_eq!(s.integrity_check().unwrap(), "ok");
}

/// A store with some of everything in it.
fn populate(s: &Store) {
    s.transaction(|tx| tx.upsert_member(&member("a1", "tenant-a/web", 101, 11))).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("a2", "tenant-a/web", 102, 12))).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("b1", "tenant-b/pod:sb1", 201, 21))).unwrap();
    s.transaction(|tx| tx.set_cookie("a2", 0x4242)).unwrap();
    s.transaction(|tx| tx.count("tenant-a/web", true)).unwrap();
    s.transaction(|tx| tx.count("tenant-b/pod:sb1", false)).unwrap();
    s.transaction(|tx| tx.count_failure(FailureReason::Kernel)).unwrap();
}

#[test]
fn reopen_keeps_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let s = Store::open(&path).unwrap();
    populate(&s);
    let (members, groups, failures) = (s.all_members().unwrap(), s.groups().unwrap(), s.failures().unwrap());
    drop(s);

    let s = Store::open(&path).unwrap();
    assert_eq!(aside_of(&s), None);
    assert_healthy(&s);
    assert_eq!(s.all_members().unwrap(), members);
    assert_eq!(s.groups().unwrap(), groups);
    assert_eq!(s.failures().unwrap(), failures);
    assert_eq!(s.member("a2").unwrap().unwrap().cookie, 0x4242);
    // Join order continues after a reopen.
    let a3 = s.transaction(|tx| tx.upsert_member(&member("a3", "tenant-a/web", 103, 13))).unwrap();
    assert!(members.iter().all(|m| m.seq < a3.seq));
    drop(s);

    // Two connections in turn (as two hooks under the lock) see each other's writes.
    let s1 = Store::open(&path).unwrap();
    s1.transaction(|tx| tx.count_failure(FailureReason::LockTimeout)).unwrap();
    drop(s1);
    let s2 = Store::open(&path).unwrap();
    assert_eq!(s2.failures().unwrap().len(), 2);
    assert_eq!(ids(&s2.members("tenant-a/web").unwrap()), ["a1", "a2", "a3"]);
    drop(s2);
    assert!(aside_files(dir.path()).is_empty());
    assert!(!dir.path().join("cache.db-wal").exists() && !dir.path().join("cache.db-shm").exists());
}

/// `locking_mode = EXCLUSIVE`: while one connection is open, another cannot use the file (callers
/// serialise on the state flock anyway); it fails as busy instead of reading behind its back, and
/// neither the open connection nor the file is harmed.
#[test]
fn a_second_connection_waits_for_the_first_to_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let s1 = Store::open(&path).unwrap();
    populate(&s1);
    let err = Store::open(&path).and_then(|s2| s2.all_members().map(|_| ())).unwrap_err();
    let text = crate::error::Chain(&err).to_string();
    assert!(text.contains("locked"), "want a busy/locked error, got: {text}");
    assert!(!dir.path().join("cache.db-shm").exists(), "exclusive mode keeps the WAL index in memory");
    assert_healthy(&s1);
    drop(s1);
    let s2 = Store::open(&path).unwrap();
    assert_eq!(aside_of(&s2), None);
    assert_healthy(&s2);
}

#[test]
fn reupsert_updates_pod_labels() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&db_in(&dir)).unwrap();
    let first = s.transaction(|tx| tx.upsert_member(&member("a1", "web", 101, 11))).unwrap();
    let mut m = member("a1", "web", 101, 11);
    m.labels.pod_name = Some("renamed".into());
    m.labels.pod_uid = None;
    let again = s.transaction(|tx| tx.upsert_member(&m)).unwrap();
    assert_eq!(again.seq, first.seq);
    assert_eq!(again.labels.pod_name.as_deref(), Some("renamed"));
    assert_eq!(again.labels.pod_uid, None);
    assert_eq!(again.labels.container_name.as_deref(), Some("ctr-a1"));
}

#[test]
fn drop_empty_groups_keeps_groups_with_members() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&db_in(&dir)).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("a1", "web", 101, 11))).unwrap();
    s.transaction(|tx| tx.count("web", true)).unwrap();
    s.transaction(|tx| tx.count("zz-orphan", false)).unwrap();
    s.transaction(|tx| tx.count("aa-orphan", true)).unwrap();
    assert_eq!(s.transaction(|tx| tx.drop_empty_groups()).unwrap(), ["aa-orphan", "zz-orphan"]);
    assert_eq!(s.groups().unwrap().iter().map(|g| (g.key.as_str(), g.ok)).collect::<Vec<_>>(), [("web", 1)]);
    assert!(s.transaction(|tx| tx.drop_empty_groups()).unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Migration.

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

// ---------------------------------------------------------------------------------------------
// Quarantine.

/// Bytes of a real, populated cache with every write checkpointed into the main file.
fn real_db_bytes() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let s = Store::open(&path).unwrap();
    populate(&s);
    drop(s); // the last connection checkpoints the WAL into the file and removes it
    assert!(!dir.path().join("cache.db-wal").exists());
    std::fs::read(&path).unwrap()
}

/// Writes `bytes` as the cache, opens it, and checks it was moved aside intact under the name
/// `cache.db.<why>-<stamp>` while a fresh, working store took its place.
fn assert_quarantined(bytes: &[u8], why: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    std::fs::write(&path, bytes).unwrap();
    let s = Store::open(&path).unwrap_or_else(|e| panic!("{why}: open failed: {e}"));
    let aside = aside_of(&s).unwrap_or_else(|| panic!("{why}: not quarantined"));
    assert_eq!(aside.parent(), Some(dir.path()));
    let name = aside.file_name().unwrap().to_str().unwrap();
    let stamp = name
        .strip_prefix(&format!("cache.db.{why}-"))
        .unwrap_or_else(|| panic!("{why}: moved to {name:?}, want cache.db.{why}-<stamp>"));
    assert!(!stamp.is_empty() && stamp.bytes().all(|b| b.is_ascii_digit()), "{name:?}");
    assert_bytes(&std::fs::read(&aside).unwrap(), bytes, &format!("{why}: the bad file must be kept byte for byte"));
    let moved = aside_files(dir.path());
    assert!(moved.contains(&aside) && moved.iter().all(|p| with_companions(&aside).contains(p)), "{why}: {moved:?}");

    // The fresh store is complete and works.
    assert_eq!(s.path(), path);
    assert_healthy(&s);
    assert!(s.all_members().unwrap().is_empty());
    populate(&s);
    assert_eq!(ids(&s.members("tenant-a/web").unwrap()), ["a1", "a2"]);
    drop(s);

    // And it is kept: reopening neither quarantines again nor loses the writes.
    let s = Store::open(&path).unwrap();
    assert_eq!(aside_of(&s), None, "{why}: the fresh store was quarantined again");
    assert_eq!(s.all_members().unwrap().len(), 3);
    assert_eq!(aside_files(dir.path()), moved);
    (dir, aside)
}

fn garbage(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[test]
fn quarantine_garbage() {
    assert_quarantined(&garbage(8192), "corrupt");
}

#[test]
fn quarantine_short_garbage() {
    assert_quarantined(b"not a database\n", "corrupt");
}

#[test]
fn quarantine_text_file_of_a_page() {
    assert_quarantined(&b"0123456789abcdef".repeat(256), "corrupt");
}

#[test]
fn quarantine_truncated_to_the_header() {
    let real = real_db_bytes();
    assert!(real.len() > 4096, "the real db fits one page ({} bytes)", real.len());
    assert_quarantined(&real[..100], "corrupt");
}

#[test]
fn quarantine_truncated_to_one_page() {
    let real = real_db_bytes();
    assert!(real.len() > 4096, "the real db fits one page ({} bytes)", real.len());
    assert_quarantined(&real[..4096], "corrupt");
}

#[test]
fn damaged_table_page_is_found_on_use_then_quarantined() {
    // Header and schema page intact, a table page overwritten: `open` cannot see it (it reads only
    // the header and the schema), the first use of the table reports corruption, and the hook then
    // quarantines (`Session::replace_damaged`), which is what this replays.
    let mut real = real_db_bytes();
    assert!(real.len() / 4096 >= 3);
    for b in &mut real[4096..2 * 4096] {
        *b = 0xa5;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    std::fs::write(&path, &real).unwrap();
    let s = Store::open(&path).unwrap();
    assert_eq!(aside_of(&s), None);
    // Page 2 is the root of `groups`: reading it reports corruption, the other tables still read.
    let err = s.groups().unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert_eq!(s.all_members().unwrap().len(), 3);
    assert_ne!(s.integrity_check().unwrap(), "ok");
    drop(s);
    assert_bytes(&std::fs::read(&path).unwrap(), &real, "reading a damaged file must not change it");
    let s = Store::quarantine(&path, "corrupt").unwrap();
    let aside = aside_of(&s).unwrap();
    assert_bytes(&std::fs::read(&aside).unwrap(), &real, "damaged db");
    assert_healthy(&s);
    populate(&s);
}

fn foreign_db(setup: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch(setup).unwrap();
    drop(c);
    std::fs::read(&path).unwrap()
}

#[test]
fn quarantine_foreign_db() {
    let bytes =
        foreign_db("CREATE TABLE other_app (k TEXT PRIMARY KEY, v BLOB); INSERT INTO other_app VALUES ('x', x'00ff');");
    let (_dir, aside) = assert_quarantined(&bytes, "foreign");
    // The other app's data is still readable in the file moved aside.
    let c = rusqlite::Connection::open(&aside).unwrap();
    let v: Vec<u8> = c.query_row("SELECT v FROM other_app WHERE k = 'x'", [], |r| r.get(0)).unwrap();
    assert_eq!(v, [0x00, 0xff]);
}

#[test]
fn quarantine_foreign_db_with_its_own_application_id() {
    let bytes = foreign_db("PRAGMA application_id = 1234; PRAGMA user_version = 1; CREATE TABLE members (x);");
    assert_quarantined(&bytes, "foreign");
}

#[test]
fn quarantine_foreign_db_in_wal_mode() {
    let bytes = foreign_db("PRAGMA journal_mode = WAL; CREATE TABLE other_app (k); INSERT INTO other_app VALUES (1);");
    assert_quarantined(&bytes, "foreign");
}

#[test]
fn quarantine_keeps_a_foreign_db_with_its_uncheckpointed_wal() {
    // Another app's WAL-mode db whose last commit is still only in its WAL (its writer is alive).
    let src = tempfile::tempdir().unwrap();
    let other = src.path().join("other.db");
    let writer = rusqlite::Connection::open(&other).unwrap();
    writer
        .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('in the wal');")
        .unwrap();
    let main = std::fs::read(&other).unwrap();
    let wal = std::fs::read(src.path().join("other.db-wal")).unwrap();
    assert!(!wal.is_empty());

    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    std::fs::write(&path, &main).unwrap();
    std::fs::write(dir.path().join("cache.db-wal"), &wal).unwrap();
    let s = Store::open(&path).unwrap();
    let aside = aside_of(&s).expect("quarantined");
    assert!(aside.to_str().unwrap().contains("cache.db.foreign-"));
    // Neither file was touched: the WAL was not checkpointed into the main file nor deleted.
    assert_bytes(&std::fs::read(&aside).unwrap(), &main, "main file");
    assert_bytes(&std::fs::read(format!("{}-wal", aside.display())).unwrap(), &wal, "wal");
    // And the pair still opens as the other app left it.
    let c = rusqlite::Connection::open(&aside).unwrap();
    let v: String = c.query_row("SELECT v FROM t", [], |r| r.get(0)).unwrap();
    assert_eq!(v, "in the wal");
    assert_healthy(&s);
    drop(writer);
}

/// A newer build's cache is never moved, replaced or written: the open fails, naming why, and the
/// file (with its WAL) is byte for byte what it was, with nothing created beside it.
#[test]
fn a_newer_format_is_left_untouched() {
    for format in [MAX_FORMAT + 1, 99] {
        // As a newer build leaves it: a populated file in WAL mode, its last writes still only in
        // the WAL (copied from a writer that stays open, as the tmpfs file would be).
        let src = tempfile::tempdir().unwrap();
        let writer = rusqlite::Connection::open(src.path().join("cache.db")).unwrap();
        writer
            .execute_batch(&format!(
                "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; {} \
                 PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {format}; \
                 CREATE TABLE newer_thing (v TEXT); INSERT INTO newer_thing VALUES ('in the wal');",
                format::create_sql().replace("PRAGMA journal_mode = WAL;", "")
            ))
            .unwrap();
        let main = std::fs::read(src.path().join("cache.db")).unwrap();
        let wal = std::fs::read(src.path().join("cache.db-wal")).unwrap();
        assert!(!wal.is_empty());
        let dir = tempfile::tempdir().unwrap();
        let path = db_in(&dir);
        std::fs::write(&path, &main).unwrap();
        std::fs::write(dir.path().join("cache.db-wal"), &wal).unwrap();
        let listing = || {
            let mut v: Vec<String> =
                std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
            v.sort();
            v
        };
        let before = listing();
        for _ in 0..2 {
            let err = Store::open(&path).unwrap_err();
            match &err {
                StoreError::Unusable { path: p, why: Unusable::Newer(f) } => assert_eq!((p, *f), (&path, format)),
                other => panic!("format {format}: {other:?}"),
            }
            assert_eq!(
                Chain(&err).to_string(),
                format!(
                    "failed to use the cache {}: its format {format} is newer than this binary reads (up to \
                     {MAX_FORMAT}); a newer oci-coresched-hook wrote it",
                    path.display()
                )
            );
        }
        assert_bytes(&std::fs::read(&path).unwrap(), &main, "main file");
        assert_bytes(&std::fs::read(dir.path().join("cache.db-wal")).unwrap(), &wal, "wal");
        assert_eq!(listing(), before, "something was created, moved or removed beside the newer cache");
        drop(writer);
        // And the pair still opens as the newer build left it.
        let c = rusqlite::Connection::open(&path).unwrap();
        let v: String = c.query_row("SELECT v FROM newer_thing", [], |r| r.get(0)).unwrap();
        assert_eq!(v, "in the wal");
    }
}

#[test]
fn quarantine_older_schema() {
    let bytes = foreign_db(&format!("PRAGMA application_id = {APPLICATION_ID}; CREATE TABLE members (x);"));
    assert_quarantined(&bytes, "older-v0");
}

#[test]
fn quarantine_moves_wal_and_shm_along() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let bad = garbage(4096);
    std::fs::write(&path, &bad).unwrap();
    std::fs::write(dir.path().join("cache.db-wal"), b"old wal").unwrap();
    std::fs::write(dir.path().join("cache.db-shm"), b"old shm").unwrap();
    let s = Store::open(&path).unwrap();
    let aside = aside_of(&s).expect("quarantined");
    assert_bytes(&std::fs::read(&aside).unwrap(), &bad, "main file");
    // The WAL is kept as found (not checkpointed into the bad file, not deleted); the SHM is only
    // an index SQLite rebuilds, so it just has to go along.
    assert_bytes(&std::fs::read(format!("{}-wal", aside.display())).unwrap(), b"old wal", "wal");
    assert!(Path::new(&format!("{}-shm", aside.display())).exists());
    assert_eq!(aside_files(dir.path()), with_companions(&aside));
    assert_healthy(&s);
    populate(&s);
    assert_eq!(s.all_members().unwrap().len(), 3);
}

#[test]
fn two_quarantines_keep_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    std::fs::write(&path, garbage(4096)).unwrap();
    let first = aside_of(&Store::open(&path).unwrap()).expect("first");
    std::fs::write(&path, b"garbage again, different bytes").unwrap();
    let _ = std::fs::remove_file(dir.path().join("cache.db-wal"));
    let _ = std::fs::remove_file(dir.path().join("cache.db-shm"));
    let second = aside_of(&Store::open(&path).unwrap()).expect("second");
    assert_ne!(first, second);
    assert_bytes(&std::fs::read(&first).unwrap(), &garbage(4096), "first");
    assert_bytes(&std::fs::read(&second).unwrap(), b"garbage again, different bytes", "second");
}

#[test]
fn explicit_quarantine_of_a_healthy_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let s = Store::open(&path).unwrap();
    populate(&s);
    drop(s);
    let before = std::fs::read(&path).unwrap();
    let s = Store::quarantine(&path, "manual").unwrap();
    let aside = aside_of(&s).unwrap();
    assert!(aside.file_name().unwrap().to_str().unwrap().starts_with("cache.db.manual-"));
    assert_bytes(&std::fs::read(&aside).unwrap(), &before, "quarantined healthy db");
    assert_healthy(&s);
    assert!(s.all_members().unwrap().is_empty());
}

#[test]
fn corruption_errors_are_recognised() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.db");
    std::fs::write(&path, garbage(4096)).unwrap();
    let c = rusqlite::Connection::open(&path).unwrap();
    let e = c.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0)).unwrap_err();
    let err = StoreError::Sqlite { path: path.clone(), source: e.into() };
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains("x.db"));
    let q = StoreError::Quarantine { path, source: std::io::Error::other("x") };
    assert!(!q.is_corruption());
    let busy = StoreError::Sqlite {
        path: "y".into(),
        source: rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY), None).into(),
    };
    assert!(!busy.is_corruption());
}

// ---------------------------------------------------------------------------------------------
// Across versions.

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
    s.conn.execute_batch("UPDATE meta SET value = 9 WHERE key = 'revision'; CREATE TABLE added_by_rev9 (x);").unwrap();
    s.transaction(|tx| tx.refilled()).unwrap();
    drop(s);
    let s = Store::open(&path).unwrap();
    assert_eq!(*s.found(), Found::Current);
    assert_eq!(ids(&s.all_members().unwrap()), ["a1"]);
    let revision: i64 = s.conn.query_row("SELECT value FROM meta WHERE key = 'revision'", [], |r| r.get(0)).unwrap();
    assert_eq!(revision, 9);
    assert!(tables(&s).contains(&"added_by_rev9".to_string()));
}

/// A container found again after the cache lost it goes before every member recorded since.
#[test]
fn insert_oldest_goes_before_every_member() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&db_in(&dir)).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("new1", "web", 301, 31))).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("new2", "web", 302, 32))).unwrap();
    s.transaction(|tx| tx.insert_oldest(&member("old2", "web", 102, 12))).unwrap();
    s.transaction(|tx| tx.insert_oldest(&member("old1", "web", 101, 11))).unwrap();
    assert_eq!(ids(&s.members("web").unwrap()), ["old1", "old2", "new1", "new2"]);
    // The next member still joins last.
    s.transaction(|tx| tx.upsert_member(&member("new3", "web", 303, 33))).unwrap();
    assert_eq!(ids(&s.members("web").unwrap()).last(), Some(&"new3"));
}
