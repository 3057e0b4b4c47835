use crate::cookies::engine::{Engine, EnsureRequest};
use crate::error::FailureReason;
use crate::host::kernel::CoreSched;
use crate::host::state_dir::fail_open;
use crate::ops::doctor::Level;
use crate::ops::doctor::tests::Fixture;
use crate::store::Store;
use crate::values::Labels;

#[test]
fn a_clean_node_audits_clean() {
    let f = Fixture::new();
    let a = f.fact("audit");
    assert_eq!(a.level, Level::Ok, "{a:?}");
    assert!(a.summary.starts_with("clean: "), "{}", a.summary);
}

#[test]
fn a_violation_fails_the_audit_fact() {
    let f = Fixture::new();
    let store = Store::open(&f.state_dir.join("cache.db")).unwrap();
    f.g.fp.spawn(100, 1100, 0, "/pod1/a1").unwrap();
    let req = EnsureRequest {
        container_id: "a1".into(),
        group: "tenant-a/web".into(),
        pid: 100,
        labels: Labels { cgroup: Some("/pod1/a1".into()), ..Default::default() },
    };
    let cookie = store.transaction(|tx| Engine::new(&f.g.kernel, &f.g.proc, tx).ensure(&req)).unwrap().cookie;
    drop(store);
    // A host process joined to the tenant's cookie behind the hook's back.
    f.g.fp.spawn(300, 1300, 0, "/system.slice/x").unwrap();
    f.g.kernel.force(300, cookie);
    assert_eq!(f.g.kernel.get(300).unwrap(), cookie);
    let a = f.fact("audit");
    assert_eq!(a.level, Level::Fail, "{a:?}");
    assert!(a.summary.starts_with("1 thread(s) off their group's cookie"), "{}", a.summary);
    assert!(a.detail.iter().any(|d| d.starts_with("outside ")), "{:?}", a.detail);
}

#[test]
fn the_audit_is_not_run_where_no_cookie_can_be_made() {
    let mut f = Fixture::new();
    f.probe = Err(crate::host::kernel::KernelError::Unsupported);
    assert_eq!(f.fact("audit").summary, "not run: the kernel makes no cookies here");
}

#[test]
fn fail_opens_are_told_with_their_reasons_and_leave_the_verdict_to_the_audit() {
    let f = Fixture::new();
    assert_eq!(f.fact("fail_open").level, Level::Ok);
    fail_open::record(&f.state_dir, FailureReason::LockTimeout).unwrap();
    fail_open::record(&f.state_dir, FailureReason::LockTimeout).unwrap();
    fail_open::record(&f.state_dir, FailureReason::Config).unwrap();
    let fo = f.fact("fail_open");
    assert_eq!(fo.level, Level::Info);
    assert!(
        fo.summary.starts_with("3 hook run(s) failed open since the state dir was made: lock_timeout (2), config (1)"),
        "{}",
        fo.summary
    );
}
