//! The unit tests of `src/host/procfs.rs`.

use super::*;

#[test]
fn start_time_is_field_22_even_with_parens_in_name() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("42");
    std::fs::create_dir_all(&p).unwrap();
    // comm contains ") (" to make sure the parser anchors on the last ')'.
    let stat = "42 (we) (ird) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10";
    std::fs::write(p.join("stat"), stat).unwrap();
    let proc = ProcFs::new(dir.path());
    assert_eq!(proc.task(42).unwrap(), Some(TaskId { pid: 42, start_time: 98765 }));
    assert_eq!(proc.process_group(42).unwrap(), Some(42));
    assert_eq!(proc.task(43).unwrap(), None);
    assert_eq!(proc.task(0).unwrap(), None);
}

#[test]
fn malformed_stat_is_an_error_not_a_guess() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("7")).unwrap();
    std::fs::write(dir.path().join("7/stat"), "7 (x) S 1").unwrap();
    assert!(ProcFs::new(dir.path()).task(7).is_err());
}

#[test]
fn own_process_is_found_in_real_proc() {
    let proc = ProcFs::default();
    let me = std::process::id() as Pid;
    let id = proc.task(me).unwrap().unwrap();
    assert!(id.start_time > 0);
    assert!(proc.threads(me).unwrap().contains(&me));
}

#[test]
fn the_cgroup_reader_reads_what_cgroup_reads() {
    let dir = tempfile::tempdir().unwrap();
    let proc = ProcFs::new(dir.path());
    let files = [
        (10, "12:cpu,cpuacct:/v1/a\n0::/pod/a\n".to_string()),
        (11, "4:memory:/m\n3:cpu:/v1/b\n".to_string()),
        (12, "1:name=systemd:/s\n".to_string()),
        // Longer than the reader's buffer: read on until the end.
        (13, format!("{}0::/long\n", "7:blkio:/x\n".repeat(600))),
    ];
    for (pid, text) in &files {
        std::fs::create_dir_all(dir.path().join(pid.to_string())).unwrap();
        std::fs::write(dir.path().join(format!("{pid}/cgroup")), text).unwrap();
    }
    let mut r = CgroupReader::new(&proc);
    for pid in [10, 11, 12, 13, 99] {
        let want = proc.cgroup(pid).unwrap();
        assert_eq!(r.read(pid).unwrap().map(str::to_string), want, "pid {pid}");
    }
    assert_eq!(r.read(13).unwrap(), Some("/long"));
    let ns = ProcFs::new(dir.path()).with_cgroup_ns_root("/kubepods/p1/c1".into());
    let mut r = CgroupReader::new(&ns);
    assert_eq!(r.read(10).unwrap(), Some("/kubepods/p1/c1/pod/a"));
    assert_eq!(r.read(10).unwrap().map(str::to_string), ns.cgroup(10).unwrap());
    let me = std::process::id() as Pid;
    assert_eq!(
        CgroupReader::new(&ProcFs::default()).read(me).unwrap().map(str::to_string),
        ProcFs::default().cgroup(me).unwrap()
    );
}
