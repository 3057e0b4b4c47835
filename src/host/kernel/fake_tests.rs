//! The unit tests of `src/host/kernel/fake.rs`.

use super::*;

fn setup() -> (tempfile::TempDir, FakeProc, FakeKernel) {
    let dir = tempfile::tempdir().unwrap();
    let fp = FakeProc::new(dir.path()).unwrap();
    let k = FakeKernel::new(fp.procfs());
    (dir, fp, k)
}

#[test]
fn create_covers_thread_group_and_get_is_per_thread() {
    let (_d, fp, k) = setup();
    fp.spawn(100, 5, 2, "/a").unwrap();
    k.create(100, Scope::ThreadGroup).unwrap();
    let c = k.get(100).unwrap();
    assert_ne!(c, 0);
    assert_eq!(k.get(101).unwrap(), c);
    assert_eq!(k.get(102).unwrap(), c);
    k.create(101, Scope::Thread).unwrap();
    assert_ne!(k.get(101).unwrap(), c);
    assert_eq!(k.get(100).unwrap(), c);
}

#[test]
fn dead_and_reused_pids() {
    let (_d, fp, k) = setup();
    fp.spawn(200, 5, 0, "/a").unwrap();
    k.create(200, Scope::ThreadGroup).unwrap();
    fp.kill(200, 0).unwrap();
    assert_eq!(k.get(200), Err(KernelError::NoSuchProcess(200)));
    fp.spawn(200, 9, 0, "/b").unwrap();
    assert_eq!(k.get(200).unwrap(), 0, "a reused pid must not inherit the dead task's cookie");
}

#[test]
fn relay_threads_start_from_the_inherited_cookie() {
    let (_d, fp, k) = setup();
    fp.spawn(300, 5, 0, "/a").unwrap();
    k.create(300, Scope::ThreadGroup).unwrap();
    let c = k.get(300).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            assert_eq!(k.get(0).unwrap(), 0);
            k.share_from(300).unwrap();
            assert_eq!(k.get(0).unwrap(), c);
        });
    });
    // A new thread does not see the previous relay's cookie.
    std::thread::scope(|s| {
        s.spawn(|| assert_eq!(k.get(0).unwrap(), 0));
    });
    k.set_inherited(7);
    std::thread::scope(|s| {
        s.spawn(|| assert_eq!(k.get(0).unwrap(), 7));
    });
}

#[test]
fn modes_and_denials() {
    let (_d, fp, k) = setup();
    fp.spawn(400, 5, 0, "/a").unwrap();
    k.deny(400);
    assert_eq!(k.get(400), Err(KernelError::PermissionDenied(400)));
    k.set_mode(FakeMode::NoSmt);
    assert_eq!(k.probe(), Err(KernelError::NoSmt));
    k.set_mode(FakeMode::Unsupported);
    assert_eq!(k.create(400, Scope::ThreadGroup), Err(KernelError::Unsupported));
}

#[test]
fn shared_state_is_seen_by_another_instance() {
    let (d, fp, _) = setup();
    fp.spawn(700, 5, 0, "/a").unwrap();
    let file = d.path().join("kernel.json");
    let a = FakeKernel::shared(fp.procfs(), &file);
    a.create(700, Scope::ThreadGroup).unwrap();
    let b = FakeKernel::shared(fp.procfs(), &file);
    assert_eq!(b.get(700).unwrap(), a.get(700).unwrap());
    assert_ne!(b.get(700).unwrap(), 0);
    b.set_mode(FakeMode::NoSmt);
    assert_eq!(a.get(700), Err(KernelError::NoSmt));
}

#[test]
fn a_shared_state_forgets_exited_tasks_once_it_holds_many() {
    let (d, fp, _) = setup();
    let file = d.path().join("kernel.json");
    let k = FakeKernel::shared(fp.procfs(), &file);
    let n = PRUNE_ABOVE as Pid + 2;
    for pid in 1000..1000 + n {
        fp.spawn(pid, 5, 0, "/a").unwrap();
        k.create(pid, Scope::ThreadGroup).unwrap();
    }
    let size = |f: &std::path::Path| std::fs::metadata(f).unwrap().len();
    let full = size(&file);
    for pid in 1000..1000 + n - 1 {
        fp.kill(pid, 0).unwrap();
    }
    k.create(1000 + n - 1, Scope::ThreadGroup).unwrap();
    assert!(size(&file) * 10 < full, "the exited tasks must be pruned: {} -> {} bytes", full, size(&file));
    assert_ne!(FakeKernel::shared(fp.procfs(), &file).get(1000 + n - 1).unwrap(), 0, "the live task is kept");
}

#[test]
fn process_group_scope() {
    let (_d, fp, k) = setup();
    fp.spawn(500, 5, 1, "/a").unwrap();
    fp.spawn(600, 5, 0, "/a").unwrap();
    k.create(500, Scope::ProcessGroup).unwrap();
    assert_ne!(k.get(501).unwrap(), 0);
    assert_eq!(k.get(600).unwrap(), 0, "600 is its own process group");
}
