//! The unit tests of `src/host/kernel/fake_file.rs`.

use super::*;

#[test]
fn generations_let_a_current_reader_skip_the_body() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k");
    let mut a = SharedFile::new(path.clone());
    let mut b = SharedFile::new(path.clone());
    assert!(matches!(a.acquire().unwrap(), Acquired::Empty));
    a.store(b"{\"x\":1}").unwrap();
    a.release();
    // a wrote generation 1 and knows it; b has never seen it.
    assert!(matches!(a.acquire().unwrap(), Acquired::Current));
    a.release();
    match b.acquire().unwrap() {
        Acquired::Changed(body) => assert_eq!(body, b"{\"x\":1}"),
        other => panic!("b must load the body, got {other:?}"),
    }
    b.store(b"{\"x\":22}").unwrap();
    b.release();
    match a.acquire().unwrap() {
        Acquired::Changed(body) => assert_eq!(body, b"{\"x\":22}", "a shorter or longer body replaces the old"),
        other => panic!("a must reload after b's write, got {other:?}"),
    }
    a.release();
    assert_eq!(json_of(&std::fs::read(&path).unwrap()), b"{\"x\":22}");
}

#[test]
fn a_replaced_file_is_reopened_and_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k");
    let mut a = SharedFile::new(path.clone());
    a.acquire().unwrap();
    a.store(b"{}").unwrap();
    a.release();
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(a.acquire().unwrap(), Acquired::Empty), "a new, empty file");
    a.release();
    std::fs::write(&path, "garbage").unwrap();
    let err = SharedFile::new(path).acquire().unwrap_err();
    assert!(err.to_string().contains("not a fake kernel state"), "{err}");
}

#[test]
fn the_lock_is_held_between_acquire_and_release() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k");
    let mut a = SharedFile::new(path.clone());
    a.acquire().unwrap();
    let other = File::open(&path).unwrap();
    assert!(other.try_lock().is_err(), "acquire must hold the flock");
    a.release();
    assert!(other.try_lock().is_ok(), "release must drop the flock");
}
