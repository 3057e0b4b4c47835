use super::*;
use crate::ops::doctor::Level;
use crate::ops::doctor::tests::Fixture;

#[test]
fn the_kernel_fact_is_the_kernels_own_answer_with_its_release() {
    let mut f = Fixture::new();
    let k = f.fact("kernel");
    assert_eq!((k.level, k.summary.as_str()), (Level::Ok, "core scheduling is supported (Linux 6.12.0-test)"));
    f.probe = Err(KernelError::Unsupported);
    let k = f.fact("kernel");
    assert_eq!(k.level, Level::Fail);
    assert!(k.summary.contains("while SMT is on: tenants can share a core"), "{}", k.summary);
    f.probe = Err(KernelError::PermissionDenied(0));
    assert_eq!(f.fact("kernel").level, Level::Warn);
    // The guard's refusal never reaches this fact: it is sched_ext's.
    f.probe = Ok(());
    f.write("sys/kernel/sched_ext/state", "enabled\n");
    assert_eq!(f.fact("kernel").level, Level::Ok);
}

#[test]
fn smt_off_forceoff_notsupported_or_inactive_is_nothing_to_isolate() {
    let f = Fixture::new();
    assert_eq!(f.fact("smt").level, Level::Ok);
    for (control, active) in [("off", "0"), ("forceoff", "0"), ("notsupported", "0"), ("on", "0")] {
        f.write("sys/devices/system/cpu/smt/control", control);
        f.write("sys/devices/system/cpu/smt/active", active);
        let s = f.fact("smt");
        assert_eq!(s.level, Level::Info, "{control}/{active}");
        assert!(s.summary.contains("nothing to isolate") && s.summary.contains("no cookies"), "{}", s.summary);
        assert_eq!(f.report().exit_code, 0, "{control}/{active}");
    }
    let smt = Smt { control: None, active: None };
    assert!(smt_active(&smt, &Ok(())));
    assert!(!smt_active(&smt, &Err(KernelError::NoSmt)));
}

#[test]
fn vulnerabilities_say_whether_core_scheduling_is_needed_and_list_every_file() {
    let f = Fixture::new();
    let v = f.fact("vulnerabilities");
    assert_eq!(v.summary, "core scheduling is needed: mds");
    assert_eq!(
        v.detail,
        ["mds: Mitigation: Clear CPU buffers; SMT vulnerable [core scheduling addresses it]", "meltdown: Not affected"]
    );
    f.write("sys/devices/system/cpu/vulnerabilities/mds", "Not affected\n");
    assert_eq!(
        f.fact("vulnerabilities").summary,
        "core scheduling is not needed: no cross-thread vulnerability affects this CPU"
    );
    f.write("sys/devices/system/cpu/vulnerabilities/l1tf", "Mitigation: PTE Inversion; VMX: SMT Host state unknown\n");
    let v = f.fact("vulnerabilities");
    assert!(v.summary.starts_with("core scheduling is needed: l1tf; in a VM"), "{}", v.summary);
    assert!(v.summary.contains("host's SMT"), "{}", v.summary);
    std::fs::remove_dir_all(f.g.path("sys/devices/system/cpu/vulnerabilities")).unwrap();
    assert_eq!(f.fact("vulnerabilities").summary, "this kernel lists no CPU vulnerabilities");
}

#[test]
fn schedstats_on_off_or_absent() {
    let f = Fixture::new();
    assert_eq!(f.fact("schedstats").level, Level::Ok);
    f.write("proc/sys/kernel/sched_schedstats", "0\n");
    let s = f.fact("schedstats");
    assert!(s.level == Level::Info && s.summary.contains("enable_schedstats"), "{s:?}");
    std::fs::remove_file(f.g.path("proc/sys/kernel/sched_schedstats")).unwrap();
    assert!(f.fact("schedstats").summary.contains("CONFIG_SCHEDSTATS"));
}

#[test]
fn sched_ext_loaded_fails_with_the_guard_and_at_risk_without() {
    let mut f = Fixture::new();
    assert_eq!(f.fact("sched_ext").level, Level::Ok);
    std::fs::remove_dir_all(f.g.path("sys/kernel/sched_ext")).unwrap();
    assert_eq!(f.fact("sched_ext").summary, "this kernel has no sched_ext");
    f.write("sys/kernel/sched_ext/state", "enabled\n");
    f.write("sys/kernel/sched_ext/root/ops", "simple\n");
    let s = f.fact("sched_ext");
    assert_eq!(s.level, Level::Fail);
    assert!(
        s.summary.starts_with("cookies are held off while the sched_ext scheduler \"simple\" is enabled"),
        "{}",
        s.summary
    );
    assert!(s.summary.contains(sched_ext::ISSUE), "{}", s.summary);
    f.config.sched_ext_guard = false;
    let s = f.fact("sched_ext");
    assert_eq!(s.level, Level::Fail);
    assert!(s.summary.starts_with("at risk: ") && s.summary.contains("sched_ext_guard = false"), "{}", s.summary);
    assert!(s.detail.contains(&"sched_ext_guard = false".to_string()), "{:?}", s.detail);
}
