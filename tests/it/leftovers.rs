//! A state dir left by a version that crashed mid-upgrade, met by the real binary over the shared
//! fake kernel: a torn receipt (`done/<id>`), a recorded stop (`stopped/<id>`) for a container
//! id that runs again, and a follower's page (`follow.prom`) of another format. Each gets one
//! clear line and is repaired; no group splits and nothing crashes. (A cache of a format this
//! build does not know is `bad_input.rs`'s row "newer build's database" and
//! `src/session/session_tests.rs`.)
//!
//! Needs `--features fake-kernel`; without it the test fails under `CI` and prints `SKIPPED`
//! otherwise.

#[cfg(not(feature = "fake-kernel"))]
#[test]
fn a_crashed_upgrades_leftovers_are_said_and_repaired() {
    crate::fakeworld::needs_feature("a_crashed_upgrades_leftovers_are_said_and_repaired", "fake-kernel");
}

#[cfg(feature = "fake-kernel")]
#[test]
fn a_crashed_upgrades_leftovers_are_said_and_repaired() {
    use crate::common::World;
    use crate::fakeworld::{check_consistent, members, pod, state};

    let w = World::fake_kernel("leftovers", "");
    let web = pod("tenant-a", "web");
    let (p1, p2) = (w.spawn(), w.spawn());
    w.ensure("c1", p1, &web);
    w.ensure("c2", p2, &web);
    let cookie = w.cookie(p1);
    let sd = w.state_dir();

    // The leftovers.
    std::fs::write(sd.join("done/c1"), "v1 12").unwrap();
    w.kill(p2);
    std::fs::create_dir_all(sd.join("stopped")).unwrap();
    std::fs::write(sd.join("stopped/c2"), "").unwrap();
    let p3 = w.spawn();
    w.ensure("c2", p3, &web); // the id runs again, with a new init
    std::fs::write(sd.join("follow.prom"), "# HELP coresched_old_family Another format.\ncoresched_old_family 1\n")
        .unwrap();

    // The stop of an id that runs again: applied by the next reader, which keeps the live
    // one (the first command since the leftovers: `inspect` would apply it too).
    let out = w.cli(&["list", "--json"], b"");
    check_eq!(w, out.code(), Some(0), "list");
    check!(w, out.stderr.contains("stopped container c2: its id now names a live container"), "{out}");
    check!(w, !sd.join("stopped/c2").exists(), "the stop is dropped");
    let list = w.list();
    let live: Vec<_> = members(&list).into_iter().filter(|m| m.3).map(|m| (m.1, m.2)).collect();
    check_eq!(w, live, vec![("c1".to_string(), i64::from(p1)), ("c2".to_string(), i64::from(p3))], "members");
    check_eq!(
        w,
        check_consistent(&list).get("tenant-a/web").cloned(),
        Some(cookie.clone()),
        "one cookie for the group"
    );

    // The torn receipt: poststart says so, keeps the cookie and writes the receipt anew.
    let out = w.hook(&state("c1", "running", Some(p1), &web));
    check_eq!(w, out.code(), Some(0), "poststart over a torn receipt");
    check!(w, out.stderr.contains("its receipt") && out.stderr.contains("is not one this build reads"), "{out}");
    check_eq!(w, w.cookie(p1), cookie, "c1 keeps its cookie");
    let receipt = std::fs::read_to_string(sd.join("done/c1")).unwrap();
    check!(w, receipt.starts_with(&format!("v1 {p1} ")), "the receipt written anew: {receipt:?}");

    // The follower's page of another format: left out of `metrics`, which stays valid.
    let out = w.cli(&["metrics"], b"");
    check_eq!(w, out.code(), Some(0), "metrics");
    check!(w, !out.stdout.contains("coresched_old_family"), "the foreign page was appended:\n{}", out.stdout);
    check!(w, out.stdout.contains("oci_coresched_hook_group_members{"), "{out}");
    check!(
        w,
        out.stderr.contains("follow.prom is not in this build's format: line 1 is")
            && out.stderr.contains("left out of the metrics"),
        "{out}"
    );

    // And the group still takes its next container.
    let p4 = w.spawn();
    w.ensure("c4", p4, &web);
    check_eq!(w, w.cookie(p4), cookie, "a new container joins the group's cookie");
}
