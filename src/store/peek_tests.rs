use super::*;
use crate::store::{FORMAT, REVISION, Store};

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn a_current_cache_reads_as_this_binarys_and_nothing_is_created() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("ca?che#1.db");
    drop(Store::open(&db).unwrap());
    let before = files(t.path());
    let p = peek(&db).unwrap();
    assert_eq!(p, Peeked { format: FORMAT, revision: Some(REVISION), kind: Kind::Current });
    assert_eq!(files(t.path()), before, "peek created or removed a file");
}

#[test]
fn older_newer_empty_and_damaged_files_are_told_apart() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("cache.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(&format!(
        "PRAGMA application_id = {}; PRAGMA user_version = 2; CREATE TABLE groups (key TEXT);",
        crate::store::APPLICATION_ID
    ))
    .unwrap();
    drop(conn);
    assert_eq!(peek(&db).unwrap(), Peeked { format: 2, revision: None, kind: Kind::Older });

    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("PRAGMA user_version = 9;").unwrap();
    drop(conn);
    assert_eq!(peek(&db).unwrap().kind, Kind::Newer);

    let empty = t.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    assert_eq!(peek(&empty).unwrap().kind, Kind::Empty);

    let junk = t.path().join("junk.db");
    std::fs::write(&junk, vec![7u8; 4096]).unwrap();
    assert_eq!(peek(&junk).unwrap().kind, Kind::Damaged("corrupt".into()));

    let foreign = t.path().join("foreign.db");
    Connection::open(&foreign).unwrap().execute_batch("CREATE TABLE x (y);").unwrap();
    assert_eq!(peek(&foreign).unwrap().kind, Kind::Damaged("foreign".into()));

    assert!(peek(&t.path().join("missing.db")).is_err());
}
