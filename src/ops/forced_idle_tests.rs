//! Forced idle per group over a fake cgroup v2 tree (`cpu.stat` files written by the test) and a
//! fake `/proc`: the counter adds what each member's cgroup grew, keeps what departed members
//! added, reads a cgroup two groups share for neither, and says when it is not available.

use std::path::PathBuf;

use super::*;
use crate::store::Member;
use crate::test_world::World;
use crate::values::Labels;

impl World {
    fn cg(&self) -> PathBuf {
        self.dir.path().join("cg")
    }

    /// Makes the fake cgroup tree a cgroup v2 one.
    fn v2(&self) {
        std::fs::write(self.cg().join("cgroup.controllers"), "cpu memory pids\n").unwrap();
    }

    /// `core_sched.force_idle_usec` of `cgroup` is `usec`.
    fn forced_idle(&self, cgroup: &str, usec: u64) {
        let d = self.cg().join(cgroup.trim_start_matches('/'));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cpu.stat"), format!("usage_usec 10\ncore_sched.force_idle_usec {usec}\nnr_periods 0\n"))
            .unwrap();
    }

    fn join(&self, id: &str, group: &str, pid: crate::values::Pid, cgroup: &str) {
        self.fp.spawn(pid, 100, 0, cgroup).unwrap();
        let labels = Labels { cgroup: Some(cgroup.into()), ..Default::default() };
        self.store
            .transaction(|tx| tx.upsert_member(&Member { cookie: 1, labels, ..Member::new(id, group, pid, 100) }))
            .unwrap();
    }

    fn update(&self) -> ForcedIdle {
        self.store.transaction(|s| update(s, &self.proc, &self.cg())).unwrap()
    }
}

fn of(f: &ForcedIdle, group: &str) -> f64 {
    f.of(group).unwrap()
}

#[test]
fn a_groups_counter_adds_what_its_cgroups_grew_and_never_goes_down() {
    let w = World::new();
    w.v2();
    w.join("a1", "tenant-a/web", 100, "/pod1/a1");
    w.join("a2", "tenant-a/web", 200, "/pod1/a2");
    w.join("b1", "tenant-b/web", 300, "/pod2/b1");
    w.forced_idle("/pod1/a1", 1_000_000);
    w.forced_idle("/pod1/a2", 500_000);
    w.forced_idle("/pod2/b1", 0);
    let f = w.update();
    assert_eq!((of(&f, "tenant-a/web"), of(&f, "tenant-b/web")), (1.5, 0.0));
    // Again with nothing grown: nothing added.
    assert_eq!(of(&w.update(), "tenant-a/web"), 1.5);
    w.forced_idle("/pod1/a1", 1_250_000);
    assert_eq!(of(&w.update(), "tenant-a/web"), 1.75);
    // a1 exits and leaves the cache: what it added stays.
    w.fp.kill(100, 0).unwrap();
    w.store.transaction(|tx| tx.remove_member("a1")).unwrap();
    assert_eq!(of(&w.update(), "tenant-a/web"), 1.75);
    // A new member adds its cgroup's figure; the group emptied keeps its total.
    w.join("a3", "tenant-a/web", 400, "/pod1/a3");
    w.forced_idle("/pod1/a3", 250_000);
    assert_eq!(of(&w.update(), "tenant-a/web"), 2.0);
    w.store.transaction(|tx| tx.remove_member("a2")).unwrap();
    w.store.transaction(|tx| tx.remove_member("a3")).unwrap();
    let f = w.update();
    assert_eq!(of(&f, "tenant-a/web"), 2.0);
    assert_eq!(of(&f, "never-seen"), 0.0);
}

#[test]
fn a_cgroup_two_groups_share_counts_for_neither_and_one_group_counts_it_once() {
    let w = World::new();
    w.v2();
    w.join("a1", "g1", 100, "/shared");
    w.join("b1", "g2", 200, "/shared");
    w.join("c1", "g3", 300, "/both");
    w.join("c2", "g3", 400, "/both");
    w.forced_idle("/shared", 3_000_000);
    w.forced_idle("/both", 2_000_000);
    let f = w.update();
    assert_eq!((of(&f, "g1"), of(&f, "g2"), of(&f, "g3")), (0.0, 0.0, 2.0));
    w.forced_idle("/both", 2_500_000);
    assert_eq!(of(&w.update(), "g3"), 2.5);
}

#[test]
fn the_node_total_is_the_root_cgroups() {
    let w = World::new();
    w.v2();
    w.forced_idle("/", 5_100_000);
    assert_eq!(w.update().node, Some(5.1));
}

#[test]
fn cgroup_v1_has_no_figure_and_says_so() {
    let w = World::new();
    w.join("a1", "g1", 100, "/pod1/a1");
    w.forced_idle("/pod1/a1", 1_000_000); // a v1 tree has no such file; whatever is there is not read
    let f = w.update();
    assert!(!f.available);
    assert_eq!(f.of("g1"), None);
    let text = render(&f);
    assert!(!text.contains("force_idle_seconds_total"), "{text}");
    assert!(text.contains("# forced idle per group is not available: it is counted in cgroup v2 only"), "{text}");
}

#[test]
fn schedstats_off_is_a_gauge_and_one_line_saying_how_to_turn_it_on() {
    let w = World::new();
    w.v2();
    let sysctl = w.dir.path().join("proc").join(SCHEDSTATS);
    std::fs::create_dir_all(sysctl.parent().unwrap()).unwrap();
    std::fs::write(&sysctl, "0\n").unwrap();
    let f = w.update();
    assert_eq!(f.schedstats, Some(false));
    let text = render(&f);
    assert!(text.contains("oci_coresched_hook_schedstats_enabled 0\n"), "{text}");
    assert!(f.advice().unwrap().contains("sysctl -w kernel.sched_schedstats=1"));
    assert!(enable_schedstats(&w.proc).unwrap());
    assert_eq!(std::fs::read_to_string(&sysctl).unwrap(), "1");
    assert!(!enable_schedstats(&w.proc).unwrap(), "already on");
    let f = w.update();
    assert_eq!((f.schedstats, f.advice()), (Some(true), None));
    assert!(render(&f).contains("oci_coresched_hook_schedstats_enabled 1\n"));
}

#[test]
fn the_families_pass_promtool() {
    let w = World::new();
    w.v2();
    w.join("a1", "tenant-a/web \"quoted\"", 100, "/pod1/a1");
    w.forced_idle("/pod1/a1", 1_950_000);
    w.forced_idle("/", 5_100_000);
    let text = render(&w.update());
    assert!(
        text.contains(
            "oci_coresched_hook_group_force_idle_seconds_total{core_sched_group=\"tenant-a/web \\\"quoted\\\"\"} 1.95\n"
        ),
        "{text}"
    );
    assert!(text.contains("oci_coresched_hook_force_idle_seconds_total 5.1\n"), "{text}");
    crate::ops::metrics::tests::promtool_check(&text);
}
