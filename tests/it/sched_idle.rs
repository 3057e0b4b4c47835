//! `sched_idle` when `cpu.idle` cannot be written after the cookie was set (cgroup v1, a cgroup
//! without the cpu controller, Linux before 5.15; here: an empty cgroup mount): the real binary
//! over the fake kernel must keep the cookie's record, so the next member of the group shares the
//! cookie and `list` shows both; the failure is logged and counted (`metrics`), and it fails the
//! hook (exit 1) only with `fail_closed`.
//!
//! Needs `--features fake-kernel`; without it each test fails under `CI` and prints `SKIPPED`
//! otherwise.

#[cfg(not(feature = "fake-kernel"))]
mod skipped {
    #[test]
    fn cpu_idle_failure_keeps_the_membership_and_fails_open() {
        crate::fakeworld::needs_feature("cpu_idle_failure_keeps_the_membership_and_fails_open", "fake-kernel");
    }
    #[test]
    fn cpu_idle_failure_fails_closed_and_keeps_the_record() {
        crate::fakeworld::needs_feature("cpu_idle_failure_fails_closed_and_keeps_the_record", "fake-kernel");
    }
}

#[cfg(feature = "fake-kernel")]
mod fake {
    use crate::common::World;
    use crate::fakeworld::{check_consistent, members, state};

    /// Annotations of a BestEffort container of group `batch` in namespace `tenant-a`.
    const BE: [(&str, &str); 3] = [
        ("io.kubernetes.pod.namespace", "tenant-a"),
        ("oci-coresched-hook/group", "batch"),
        ("koordinator.sh/qosClass", "BE"),
    ];

    /// The cached members as `(group, id, cookie)`.
    fn cached(w: &World) -> Vec<(String, String, String)> {
        let list = w.list();
        check_consistent(&list);
        members(&list).into_iter().map(|r| (r.0, r.1, r.4)).collect()
    }

    #[test]
    fn cpu_idle_failure_keeps_the_membership_and_fails_open() {
        let w = World::fake_kernel("idle-open", "[qos.BE]\nsched_idle = true");
        let p1 = w.spawn();
        let out = w.hook(&state("c1", "creating", Some(p1), &BE));
        assert_eq!(out.code(), Some(0), "fail open:\n{out}");
        assert!(out.stderr.contains(" warn: ") && out.stderr.contains("cpu.idle"), "no warning:\n{out}");
        let c = w.cookie(p1);
        assert_ne!(c, "0x0", "c1 has its cookie");
        let g = "tenant-a/batch".to_string();
        assert_eq!(cached(&w), [(g.clone(), "c1".into(), c.clone())], "c1 must stay cached");

        let p2 = w.spawn();
        let out = w.hook(&state("c2", "creating", Some(p2), &BE));
        assert_eq!(out.code(), Some(0), "fail open:\n{out}");
        assert_eq!(w.cookie(p2), c, "c2 must share c1's cookie, not get a second one");
        assert_eq!(cached(&w), [(g.clone(), "c1".into(), c.clone()), (g, "c2".into(), c)]);

        let out = w.cli(&["metrics"], b"");
        assert_eq!(out.code(), Some(0), "{out}");
        assert!(out.stdout.contains("oci_coresched_hook_failures_total{reason=\"cgroup\"} 2"), "{out}");
    }

    #[test]
    fn cpu_idle_failure_fails_closed_and_keeps_the_record() {
        let w = World::fake_kernel("idle-closed", "fail_closed = true\n[qos.BE]\nsched_idle = true");
        let p1 = w.spawn();
        let out = w.hook(&state("c1", "creating", Some(p1), &BE));
        assert_eq!(out.code(), Some(1), "fail closed:\n{out}");
        assert!(out.stderr.contains("error: ") && out.stderr.contains("cpu.idle"), "no error:\n{out}");
        // The runtime now kills the container; until then its cookie and its record agree.
        let c = w.cookie(p1);
        assert_ne!(c, "0x0");
        assert_eq!(cached(&w), [("tenant-a/batch".to_string(), "c1".to_string(), c)]);
    }
}
