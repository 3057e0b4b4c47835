//! The quarantine: every kind of unusable file (garbage, truncated, a foreign database, damage
//! found on use) is moved aside intact and a fresh store takes its place; a newer build's file is
//! left untouched.

use std::path::{Path, PathBuf};

use super::*;

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
