use super::*;
use crate::host::kernel::fake::{FakeKernel, FakeMode, FakeProc};
use crate::host::procfs::ProcFs;

fn setup(state: Option<&str>) -> (tempfile::TempDir, FakeProc, Guarded<FakeKernel>) {
    let dir = tempfile::tempdir().unwrap();
    let fp = FakeProc::new(dir.path().join("proc")).unwrap();
    let sys = dir.path().join("sys");
    std::fs::create_dir_all(sys.join("kernel")).unwrap();
    if let Some(state) = state {
        std::fs::create_dir_all(sys.join("kernel/sched_ext/root")).unwrap();
        std::fs::write(sys.join("kernel/sched_ext/state"), format!("{state}\n")).unwrap();
        std::fs::write(sys.join("kernel/sched_ext/root/ops"), "simple\n").unwrap();
    }
    let k = Guarded::new(FakeKernel::new(fp.procfs()), sys);
    (dir, fp, k)
}

#[test]
fn no_sched_ext_or_a_disabled_one_lets_every_call_through() {
    for state in [None, Some("disabled")] {
        let (_d, fp, k) = setup(state);
        fp.spawn(100, 5, 0, "/a").unwrap();
        fp.spawn(200, 5, 0, "/a").unwrap();
        k.probe().unwrap();
        k.create(100, Scope::ThreadGroup).unwrap();
        let c = k.get(100).unwrap();
        assert_ne!(c, 0);
        std::thread::scope(|s| {
            s.spawn(|| {
                k.share_from(100).unwrap();
                k.share_to(200, Scope::ThreadGroup).unwrap();
            });
        });
        assert_eq!(k.get(200).unwrap(), c);
    }
}

#[test]
fn a_loaded_scheduler_refuses_every_call_that_makes_or_spreads_a_cookie_and_counts_it() {
    for state in ["enabled", "enabling", "disabling", "what"] {
        let (_d, fp, k) = setup(Some(state));
        fp.spawn(100, 5, 0, "/a").unwrap();
        let before = refusals();
        let probe = k.probe().unwrap_err();
        assert!(matches!(&probe, KernelError::SchedExt(_)), "{state}: {probe:?}");
        assert!(probe.is_unsupported());
        assert!(matches!(k.create(100, Scope::ThreadGroup), Err(KernelError::SchedExt(_))));
        assert!(matches!(k.share_to(100, Scope::ThreadGroup), Err(KernelError::SchedExt(_))));
        assert!(matches!(k.share_from(100), Err(KernelError::SchedExt(_))));
        assert!(refusals() >= before + 4);
        assert_eq!(k.get(100).unwrap(), 0, "{state}: reads pass, and nothing was made");
        assert!(k.inner.calls().iter().all(|c| !c.contains("create") && !c.contains("share")), "{:?}", k.inner.calls());
    }
    let (_d, _fp, k) = setup(Some("enabled"));
    let msg = k.probe().unwrap_err().to_string();
    assert!(msg.starts_with("core scheduling is held off: the sched_ext scheduler \"simple\" is enabled"), "{msg}");
    assert!(msg.contains("scx/issues/3715") && msg.contains("sched_ext_guard = false"), "{msg}");
}

#[test]
fn the_kernels_own_refusal_comes_first() {
    let (_d, _fp, k) = setup(Some("enabled"));
    k.inner.set_mode(FakeMode::Unsupported);
    assert_eq!(k.probe().unwrap_err(), KernelError::Unsupported);
}

#[test]
fn the_state_is_read_at_every_call() {
    let (d, fp, k) = setup(Some("enabled"));
    fp.spawn(100, 5, 0, "/a").unwrap();
    assert!(k.create(100, Scope::ThreadGroup).is_err());
    std::fs::write(d.path().join("sys/kernel/sched_ext/state"), "disabled\n").unwrap();
    k.create(100, Scope::ThreadGroup).unwrap();
    assert_ne!(k.get(100).unwrap(), 0);
}

#[test]
fn held_off_says_why_and_the_kernels_own_probe_passes_the_guard() {
    let (d, _fp, k) = setup(Some("enabled"));
    assert_eq!(k.held_off().as_deref(), Some("the sched_ext scheduler \"simple\" is enabled"));
    k.probe_kernel().unwrap();
    // Through the pointers the binary holds the kernel by.
    let boxed: Box<dyn CoreSched> = Box::new(Guarded::new(FakeKernel::new(ProcFs::default()), d.path().join("sys")));
    assert!(boxed.held_off().is_some());
    boxed.probe_kernel().unwrap();
    k.inner.set_mode(FakeMode::NoSmt);
    assert_eq!(k.probe_kernel().unwrap_err(), KernelError::NoSmt);
    std::fs::write(d.path().join("sys/kernel/sched_ext/state"), "disabled\n").unwrap();
    assert_eq!(k.held_off(), None);
    // A bare kernel has no guard to hold anything off.
    assert_eq!(FakeKernel::new(ProcFs::default()).held_off(), None);
}

#[test]
fn a_kernel_without_sched_ext_is_read_once() {
    let (d, fp, k) = setup(None);
    fp.spawn(100, 5, 0, "/a").unwrap();
    k.probe().unwrap();
    // Not a kernel a running system turns into one with sched_ext: the first look stands.
    std::fs::create_dir_all(d.path().join("sys/kernel/sched_ext")).unwrap();
    std::fs::write(d.path().join("sys/kernel/sched_ext/state"), "enabled\n").unwrap();
    k.create(100, Scope::ThreadGroup).unwrap();
    // One with sched_ext is read at every call (the_state_is_read_at_every_call), and so is a
    // state that could not be told.
    let bare = tempfile::tempdir().unwrap();
    let k = Guarded::new(FakeKernel::new(fp.procfs()), bare.path().to_path_buf());
    assert!(k.create(100, Scope::ThreadGroup).is_err());
    std::fs::create_dir_all(bare.path().join("kernel")).unwrap();
    k.create(100, Scope::ThreadGroup).unwrap();
}
