//! The unit tests of `src/agent/node.rs`.

use super::*;
use crate::host::kernel::fake::{FakeKernel, FakeMode};
use crate::host::kernel::guard::Guarded;
use crate::host::procfs::ProcFs;

fn sys(dir: &std::path::Path, state: &str, smt: &str) -> PathBuf {
    let sys = dir.join("sys");
    std::fs::create_dir_all(sys.join("kernel/sched_ext")).unwrap();
    std::fs::write(sys.join("kernel/sched_ext/state"), format!("{state}\n")).unwrap();
    std::fs::create_dir_all(sys.join(crate::host::cpu::SMT_DIR)).unwrap();
    std::fs::write(sys.join(crate::host::cpu::SMT_DIR).join("active"), format!("{smt}\n")).unwrap();
    sys
}

#[test]
fn a_hold_is_seen_once_when_it_starts_and_once_when_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let root = sys(dir.path(), "enabled", "1");
    let k = Guarded::new(FakeKernel::new(ProcFs::default()), root.clone());
    let mut w = NodeWatch::new(root.clone());
    let first = w.look(&k);
    assert_eq!(first.held_off.as_deref(), Some("a sched_ext scheduler is enabled"));
    assert!(!first.resumed);
    assert_eq!(
        first.cannot_isolate.as_deref(),
        Some("this node cannot isolate: core scheduling is held off: a sched_ext scheduler is enabled")
    );
    assert!(w.look_if_due(&k).is_none(), "not due again at once");
    assert_eq!(w.look(&k), first, "still held: the same look");
    std::fs::write(root.join("kernel/sched_ext/state"), "disabled\n").unwrap();
    assert!(first.no_cookies);
    let back = w.look(&k);
    assert_eq!((back.held_off, back.resumed, back.cannot_isolate, back.no_cookies), (None, true, None, false));
    assert!(!w.look(&k).resumed, "resumed once");
}

#[test]
fn a_kernel_without_core_scheduling_cannot_isolate_unless_smt_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let root = sys(dir.path(), "disabled", "1");
    let k = FakeKernel::new(ProcFs::default());
    k.set_mode(FakeMode::Unsupported);
    let mut w = NodeWatch::new(root.clone());
    let look = w.look(&k);
    assert_eq!(look.held_off, None);
    let note = look.cannot_isolate.expect("cannot isolate");
    assert!(note.starts_with("this node cannot isolate: core scheduling is not supported by this kernel"), "{note}");
    std::fs::write(root.join(crate::host::cpu::SMT_DIR).join("active"), "0\n").unwrap();
    assert_eq!(w.look(&k).cannot_isolate, None, "SMT off: no core is shared, nothing to isolate");
    // SMT off as the kernel says it (ENODEV) is no reason either.
    k.set_mode(FakeMode::NoSmt);
    std::fs::write(root.join(crate::host::cpu::SMT_DIR).join("active"), "1\n").unwrap();
    let look = w.look(&k);
    assert_eq!((look.cannot_isolate, look.no_cookies), (None, true));
}
