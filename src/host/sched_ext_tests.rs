use super::*;

fn root(files: &[(&str, &str)]) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("kernel")).unwrap();
    for (name, text) in files {
        let p = t.path().join(DIR).join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    t
}

#[test]
fn a_kernel_without_sched_ext_allows_cookies() {
    let t = root(&[]);
    let s = SchedExt::read(t.path());
    assert_eq!(s.state, State::Absent);
    assert!(!s.blocks_cookies());
    assert_eq!(s.describe(), "this kernel has no sched_ext");
}

#[test]
fn disabled_allows_and_reads_the_counters() {
    let t = root(&[("state", "disabled\n"), ("enable_seq", "2\n"), ("switch_all", "0\n")]);
    let s = SchedExt::read(t.path());
    assert_eq!(s.state, State::Disabled);
    assert_eq!(s.enable_seq, Some(2));
    assert_eq!(s.switch_all, Some(false));
    assert_eq!(s.ops, None);
    assert!(!s.blocks_cookies());
}

#[test]
fn every_attached_or_moving_state_blocks_and_names_the_scheduler() {
    for (word, state) in [("enabled", State::Enabled), ("enabling", State::Enabling), ("disabling", State::Disabling)] {
        let t = root(&[("state", &format!("{word}\n")), ("root/ops", "simple\n"), ("switch_all", "1\n")]);
        let s = SchedExt::read(t.path());
        assert_eq!(s.state, state);
        assert!(s.blocks_cookies(), "{word}");
        assert_eq!(s.ops.as_deref(), Some("simple"));
        assert_eq!(s.switch_all, Some(true));
        assert_eq!(s.describe(), format!("the sched_ext scheduler \"simple\" is {word}"));
    }
    let t = root(&[("state", "enabled\n")]);
    assert_eq!(SchedExt::read(t.path()).describe(), "a sched_ext scheduler is enabled");
}

#[test]
fn what_cannot_be_told_blocks() {
    let t = root(&[("state", "paused\n")]);
    let s = SchedExt::read(t.path());
    assert!(matches!(&s.state, State::Unknown(why) if why.contains("\"paused\"")), "{s:?}");
    assert!(s.blocks_cookies());

    let t = root(&[("enable_seq", "0\n")]);
    let s = SchedExt::read(t.path());
    assert!(matches!(&s.state, State::Unknown(why) if why.contains("has no state file")), "{s:?}");
    assert!(s.blocks_cookies());

    let bare = tempfile::tempdir().unwrap();
    let s = SchedExt::read(bare.path());
    assert!(matches!(&s.state, State::Unknown(why) if why.contains("is sysfs mounted")), "{s:?}");
    assert!(s.blocks_cookies());
    assert!(s.describe().starts_with("the sched_ext state is unknown ("), "{}", s.describe());
}
