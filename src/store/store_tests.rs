//! Tests of the SQLite cache: schema, members and their order, counters and transactions. The
//! file across versions (upgrades, the formats an older build uses) and the quarantine of every
//! kind of unusable file have files of their own, which share this one's helpers.

use std::path::{Path, PathBuf};

use super::*;
use crate::error::FailureReason;

#[path = "format_tests.rs"]
mod format_tests;
#[path = "quarantine_tests.rs"]
mod quarantine_tests;

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
fn a_member_read_is_prepared_once_whatever_it_is_bound_to() {
    // rusqlite clears the bindings of a cached statement when it takes it back; a statement whose
    // plan depends on a bound value is then prepared again at its next use.
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&db_in(&dir)).unwrap();
    s.transaction(|tx| {
        tx.upsert_member(&member("a1", "web", 101, 11))?;
        tx.upsert_member(&member("b1", "db", 201, 21))
    })
    .unwrap();
    for (id, group) in [("a1", "web"), ("b1", "db"), ("a1", "web"), ("zz", "none")] {
        s.member(id).unwrap();
        s.members(group).unwrap();
    }
    for sql in [members::MEMBER, members::MEMBERS_OF] {
        let st = s.conn.prepare_cached(sql).unwrap();
        assert_eq!(st.get_status(rusqlite::StatementStatus::RePrepare), 0, "{sql}");
    }
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
fn remove_member_takes_its_idle_cgroup_and_gc_a_stale_one() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&db_in(&dir)).unwrap();
    let idle_rows =
        |s: &Store| -> i64 { s.conn.query_row("SELECT count(*) FROM member_idle", [], |r| r.get(0)).unwrap() };
    let with_idle = |id: &str, pid: Pid| {
        let mut m = member(id, "be", pid, 11);
        m.labels.idle_cgroup = Some(format!("/kubepods/besteffort/{id}.scope"));
        m
    };
    s.transaction(|tx| {
        tx.upsert_member(&with_idle("i1", 101))?;
        tx.upsert_member(&with_idle("i2", 102))?;
        tx.upsert_member(&member("n1", "be", 103, 11))
    })
    .unwrap();
    assert_eq!(idle_rows(&s), 2);
    s.transaction(|tx| tx.remove_member("i1")).unwrap().unwrap();
    assert_eq!(idle_rows(&s), 1);
    s.transaction(|tx| tx.remove_member("n1")).unwrap().unwrap();
    assert_eq!(idle_rows(&s), 1);

    // An older build replaced i2's row with another init's, without knowing of member_idle: the
    // record no longer joins the row, stays when the row goes, and gc drops it.
    s.conn.execute("UPDATE members SET pid = 202 WHERE container_id = 'i2'", []).unwrap();
    assert_eq!(s.member("i2").unwrap().unwrap().labels.idle_cgroup, None);
    s.transaction(|tx| tx.remove_member("i2")).unwrap().unwrap();
    assert_eq!(idle_rows(&s), 1);
    assert_eq!(s.transaction(|tx| tx.drop_stale_idle()).unwrap(), 1);
    assert_eq!(idle_rows(&s), 0);
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
    // A Txn dropped without its commit (an early return, a panic) lands nothing; a committed one
    // lands all of it.
    let tx = s.begin().unwrap();
    tx.upsert_member(&member("a3", "web", 103, 13)).unwrap();
    drop(tx);
    assert_eq!(ids(&s.members("web").unwrap()), ["a1"]);
    let tx = s.begin().unwrap();
    tx.upsert_member(&member("a4", "web", 104, 14)).unwrap();
    tx.commit().unwrap();
    assert_eq!(ids(&s.members("web").unwrap()), ["a1", "a4"]);
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
