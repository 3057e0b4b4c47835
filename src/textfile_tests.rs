//! The unit tests of `src/textfile.rs`.

use super::*;

#[test]
fn write_replaces_the_file_with_mode_0644() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("coresched.prom");
    write(&path, "a 1\n").unwrap();
    write(&path, "b 2\n").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "b 2\n");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["coresched.prom"], "no temporary file is left behind");
    // A missing directory is an error, and leaves nothing behind.
    assert!(write(&dir.path().join("nope/x.prom"), "c 3\n").is_err());
}
