//! The unit tests of `src/host/state_dir/mod.rs`.

use super::*;

#[test]
fn creates_0700_and_refuses_unsafe_dirs() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("a/b");
    let d = StateDir::open(&p).unwrap();
    assert_eq!(std::fs::metadata(d.path()).unwrap().permissions().mode() & 0o777, 0o700);

    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = StateDir::open(&p).unwrap_err().to_string();
    assert!(e.contains("mode 0755"), "{e}");

    let f = tmp.path().join("file");
    std::fs::write(&f, "").unwrap();
    assert!(StateDir::open(&f).unwrap_err().to_string().contains("not a directory"));
}

#[test]
fn lock_times_out_while_held_and_is_free_after_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let d = StateDir::open(&tmp.path().join("state")).unwrap();
    let held = d.lock(Duration::from_millis(100)).unwrap();
    let e = d.lock(Duration::from_millis(50)).unwrap_err();
    assert!(matches!(e, DirError::LockTimeout { .. }), "{e}");
    drop(held);
    d.lock(Duration::from_millis(50)).unwrap();
}
