use super::*;
use crate::ops::doctor::Level;
use crate::ops::doctor::tests::{FOLLOWER, Fixture};

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_long_running_parts_are_known_by_their_command_line() {
    for (a, want) in [
        (&["/usr/bin/oci-coresched-hook", "reconcile", "--follow"][..], Some(Kind::Follower)),
        (
            &["oci-coresched-hook", "--state-dir", "/x", "reconcile", "--follow", "--listen", "9464"][..],
            Some(Kind::Follower),
        ),
        (&["/usr/local/bin/oci-coresched-hook", "--config=/c", "nri", "--listen", "9465"][..], Some(Kind::Nri)),
        (&["/usr/bin/oci-coresched-hook", "reconcile", "--once"][..], None),
        (&["/usr/bin/oci-coresched-hook", "hook"][..], None),
        (&["/usr/bin/other", "nri"][..], None),
        (&["/usr/bin/oci-coresched-hook", "--config", "nri", "list"][..], None),
        (&[][..], None),
    ] {
        assert_eq!(kind_of(&args(a)), want, "{a:?}");
    }
}

#[test]
fn the_follower_absent_warns_and_another_build_warns() {
    let f = Fixture::new();
    let fol = f.fact("follower");
    assert_eq!((fol.level, fol.summary.as_str()), (Level::Ok, "the follower runs (pid 900)"));
    assert_eq!(fol.detail, ["pid 900: /usr/bin/oci-coresched-hook reconcile --follow (this binary)"]);
    assert_eq!(f.fact("nri").level, Level::Info);

    f.exe("old/oci-coresched-hook", "build 0");
    std::fs::remove_file(f.g.path(&format!("proc/{FOLLOWER}/exe"))).unwrap();
    std::os::unix::fs::symlink(f.g.path("old/oci-coresched-hook"), f.g.path(&format!("proc/{FOLLOWER}/exe"))).unwrap();
    let fol = f.fact("follower");
    assert_eq!(fol.level, Level::Warn);
    assert!(fol.summary.contains("another build than this binary (pid 900)"), "{}", fol.summary);

    std::fs::remove_dir_all(f.g.path(&format!("proc/{FOLLOWER}"))).unwrap();
    let fol = f.fact("follower");
    assert_eq!(fol.level, Level::Warn);
    assert!(fol.summary.contains("not running") && fol.summary.contains("not healed"), "{}", fol.summary);
}

#[test]
fn the_nri_plugin_running_is_found_and_this_process_is_left_out() {
    let f = Fixture::new();
    f.agent(901, &["/usr/bin/oci-coresched-hook", "nri"], "bin/oci-coresched-hook");
    assert_eq!(f.fact("nri").summary, "the NRI plugin runs (pid 901)");
    // pid 1 is the doctor itself in the fixture.
    f.agent(1, &["/usr/bin/oci-coresched-hook", "nri"], "bin/oci-coresched-hook");
    assert_eq!(f.fact("nri").summary, "the NRI plugin runs (pid 901)");
}
