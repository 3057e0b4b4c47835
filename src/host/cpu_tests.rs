use super::*;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn smt_reads_control_verbatim_and_active_as_a_flag() {
    let t = tempfile::tempdir().unwrap();
    assert_eq!(Smt::read(t.path()), Smt { control: None, active: None });
    for (control, active, want) in [
        ("on", "1", Some(true)),
        ("off", "0", Some(false)),
        ("forceoff", "0", Some(false)),
        ("2", "1", Some(true)),
        ("notsupported", "x", None),
    ] {
        write(t.path(), "devices/system/cpu/smt/control", &format!("{control}\n"));
        write(t.path(), "devices/system/cpu/smt/active", &format!("{active}\n"));
        assert_eq!(Smt::read(t.path()), Smt { control: Some(control.into()), active: want });
    }
}

#[test]
fn every_spelling_the_kernel_uses_has_its_class() {
    for (text, want) in [
        ("Not affected", Exposure::NotAffected),
        ("Vulnerable", Exposure::Vulnerable),
        ("Vulnerable: Clear CPU buffers attempted, no microcode; SMT vulnerable", Exposure::Vulnerable),
        ("Processor vulnerable", Exposure::Vulnerable),
        ("KVM: Vulnerable", Exposure::Vulnerable),
        ("Mitigation: PTE Inversion; VMX: conditional cache flushes, SMT vulnerable", Exposure::Mitigated),
        ("KVM: Mitigation: VMX disabled", Exposure::Mitigated),
        ("Unknown: Dependent on hypervisor status", Exposure::Unknown),
        ("something new", Exposure::Unknown),
    ] {
        assert_eq!(Exposure::of(text), want, "{text}");
    }
}

#[test]
fn vulnerabilities_are_listed_not_assumed() {
    let t = tempfile::tempdir().unwrap();
    assert_eq!(vulnerabilities(t.path()).unwrap(), None);
    write(t.path(), "devices/system/cpu/vulnerabilities/mds", "Mitigation: Clear CPU buffers; SMT vulnerable\n");
    write(t.path(), "devices/system/cpu/vulnerabilities/meltdown", "Not affected\n");
    write(t.path(), "devices/system/cpu/vulnerabilities/ghostwrite", "Not affected\n");
    write(t.path(), "devices/system/cpu/vulnerabilities/l1tf", "Vulnerable\n");
    let v = vulnerabilities(t.path()).unwrap().unwrap();
    let names: Vec<_> = v.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["ghostwrite", "l1tf", "mds", "meltdown"]);
    assert!(v[2].cross_thread && v[2].smt_exposed && v[2].exposure == Exposure::Mitigated);
    assert!(v[1].cross_thread && !v[1].smt_exposed && v[1].exposure == Exposure::Vulnerable);
    assert!(!v[3].cross_thread && v[3].exposure == Exposure::NotAffected);
    assert_eq!(v[2].text, "Mitigation: Clear CPU buffers; SMT vulnerable");
}

#[test]
fn a_node_cannot_isolate_only_while_smt_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let sys = dir.path();
    let smt = sys.join(SMT_DIR);
    std::fs::create_dir_all(&smt).unwrap();
    let held = || Some("a sched_ext scheduler is enabled".to_string());
    std::fs::write(smt.join("active"), "1\n").unwrap();
    assert_eq!(
        cannot_isolate(sys, &Err(KernelError::Unsupported), None),
        Some(CannotIsolate::NoCoreScheduling(KernelError::Unsupported))
    );
    assert_eq!(cannot_isolate(sys, &Ok(()), held()), Some(CannotIsolate::HeldOff(held().unwrap())));
    assert_eq!(cannot_isolate(sys, &Ok(()), None), None);
    assert_eq!(cannot_isolate(sys, &Err(KernelError::NoSmt), held()), None, "the kernel says SMT is off");
    std::fs::write(smt.join("active"), "0\n").unwrap();
    assert_eq!(cannot_isolate(sys, &Ok(()), held()), None, "SMT off: nothing shares a core");
    assert_eq!(cannot_isolate(sys, &Err(KernelError::Unsupported), None), None);
    // SMT unknown (no file): on, unless the kernel says ENODEV.
    std::fs::remove_file(smt.join("active")).unwrap();
    assert!(cannot_isolate(sys, &Ok(()), held()).is_some());
    std::fs::write(smt.join("control"), "off\n").unwrap();
    assert_eq!(cannot_isolate(sys, &Ok(()), held()), None, "control off");
}
