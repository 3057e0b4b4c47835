//! Reconcile over the fake kernel: a fake `/proc` and a cgroup tree of `cgroup.procs` files.

use std::path::{Path, PathBuf};

use super::*;
use crate::cookies::engine::{Engine, EnsureRequest};
use crate::test_world::World;
use crate::values::Labels;

impl World {
    fn cg_root(&self) -> PathBuf {
        self.dir.path().join("cg")
    }

    /// A process in `cgroup`, listed in that cgroup's `cgroup.procs`.
    fn spawn(&self, pid: Pid, cgroup: &str) {
        self.fp.spawn(pid, 1000 + pid as u64, 1, cgroup).unwrap();
        let d = self.cg_root().join(cgroup.trim_start_matches('/'));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("cgroup.procs");
        let mut text = std::fs::read_to_string(&f).unwrap_or_default();
        text.push_str(&format!("{pid}\n"));
        std::fs::write(f, text).unwrap();
    }

    /// A container: its init in `cgroup`, ensured into `group` by the engine (as the hook does).
    fn container(&self, id: &str, group: &str, pid: Pid, cgroup: &str) -> Cookie {
        self.spawn(pid, cgroup);
        let req = EnsureRequest {
            container_id: id.into(),
            group: group.into(),
            pid,
            labels: Labels { cgroup: self.proc.cgroup(pid).unwrap(), ..Default::default() },
        };
        self.store.transaction(|tx| Engine::new(&self.kernel, &self.proc, tx).ensure(&req)).unwrap().cookie
    }

    fn reconcile(&self, dry_run: bool) -> ReconcileReport {
        self.store.transaction(|tx| reconcile(tx, &self.kernel, &self.proc, &self.cg_root(), dry_run)).unwrap()
    }

    fn cookie(&self, pid: Pid) -> Cookie {
        self.kernel.get(pid).unwrap()
    }
}

fn report<'a>(r: &'a ReconcileReport, id: &str) -> &'a MemberReport {
    r.members.iter().find(|m| m.id == id).unwrap()
}

#[test]
fn exec_d_process_at_cookie_zero_gets_the_group_cookie() {
    let w = World::new();
    let c = w.container("a1", "web", 100, "/pod1/a1");
    w.spawn(200, "/pod1/a1"); // runc exec: no hook, cookie 0
    w.spawn(300, "/pod1/a1/sub"); // in a descendant cgroup
    assert_eq!(w.cookie(200), 0);
    let r = w.reconcile(false);
    let m = report(&r, "a1");
    assert_eq!(m.status, MemberStatus::Checked);
    assert_eq!(m.processes, 3, "init, the exec'd process and the one in the sub-cgroup");
    let fixed: Vec<Pid> = m.fixed.iter().map(|f| f.pid).collect();
    assert_eq!(fixed, vec![200, 300]);
    assert_eq!(m.fixed[0].old_cookie, "0x0");
    assert_eq!(m.fixed[0].new_cookie, CookieHex(c).to_string());
    assert!(m.errors.is_empty(), "{:?}", m.errors);
    for pid in [200, 201, 300, 301] {
        assert_eq!(w.cookie(pid), c, "every thread of pid {pid} has the group's cookie");
    }
    // Idempotent: nothing left to fix.
    assert_eq!(w.reconcile(false).fixed(), 0);
    assert!(r.render().contains("fixed pid 200: 0x0 -> "));
}

#[test]
fn dry_run_changes_nothing() {
    let w = World::new();
    let c = w.container("a1", "web", 100, "/pod1/a1");
    w.spawn(200, "/pod1/a1");
    let calls = w.kernel.calls().len();
    let r = w.reconcile(true);
    assert!(r.dry_run);
    assert_eq!(r.fixed(), 1);
    assert_eq!(report(&r, "a1").fixed[0].new_cookie, CookieHex(c).to_string());
    assert_eq!(w.cookie(200), 0);
    let after = w.kernel.calls();
    assert!(after[calls..].iter().all(|c| c.starts_with("get ")), "a dry run only reads: {:?}", &after[calls..]);
    assert!(r.render().contains("would fix pid 200"));
}

#[test]
fn dead_member_is_skipped_and_its_cgroup_untouched() {
    let w = World::new();
    w.container("a1", "web", 100, "/pod1/a1");
    w.spawn(200, "/pod1/a1");
    w.fp.kill(100, 1).unwrap();
    let r = w.reconcile(false);
    assert_eq!(report(&r, "a1").status, MemberStatus::Dead);
    assert_eq!(r.fixed(), 0);
    assert_eq!(w.cookie(200), 0);
    // A reused pid is as dead as a gone one.
    w.fp.spawn(100, 99_999, 0, "/pod1/a1").unwrap();
    assert_eq!(report(&w.reconcile(false), "a1").status, MemberStatus::Dead);
}

#[test]
fn exited_processes_are_not_errors_and_foreign_cookies_are_fixed() {
    let w = World::new();
    let c = w.container("a1", "web", 100, "/pod1/a1");
    // Listed in cgroup.procs but already gone from /proc.
    std::fs::write(w.cg_root().join("pod1/a1/cgroup.procs"), "100\n555\n").unwrap();
    w.spawn(200, "/pod1/a1");
    w.kernel.force(200, 0xdead_0000); // entered with some other cookie
    let r = w.reconcile(false);
    let m = report(&r, "a1");
    assert!(m.errors.is_empty(), "{:?}", m.errors);
    assert_eq!(m.fixed.len(), 1);
    assert_eq!(m.fixed[0].old_cookie, "0xdead0000");
    assert_eq!(w.cookie(200), c);
}

#[test]
fn nested_and_shared_cgroups_of_other_groups_are_left_alone() {
    let w = World::new();
    let web = w.container("a1", "web", 100, "/pod1");
    let db = w.container("b1", "db", 110, "/pod1/b1");
    assert_ne!(web, db);
    w.spawn(200, "/pod1/b1"); // exec'd into b1: belongs to db, not web
    let r = w.reconcile(false);
    assert_eq!(report(&r, "a1").fixed.len(), 0);
    assert_eq!(report(&r, "b1").fixed.len(), 1);
    assert_eq!(w.cookie(200), db);
    assert_eq!(w.cookie(110), db, "a1's walk does not steal b1's init");

    // Two groups in one cgroup (crun without a cgroup manager): ambiguous, skipped.
    w.container("c1", "x", 120, "/shared");
    w.container("d1", "y", 130, "/shared");
    w.spawn(210, "/shared");
    let r = w.reconcile(false);
    assert_eq!(report(&r, "c1").status, MemberStatus::SharedCgroup);
    assert_eq!(report(&r, "d1").status, MemberStatus::SharedCgroup);
    assert_eq!(w.cookie(210), 0);
}

#[test]
fn members_without_a_usable_cgroup_are_skipped() {
    let w = World::new();
    w.container("a1", "web", 100, "/");
    w.container("a2", "web", 110, "/not/under/the/root");
    std::fs::remove_dir_all(w.cg_root().join("not")).unwrap();
    let r = w.reconcile(false);
    assert_eq!(report(&r, "a1").status, MemberStatus::NoCgroup);
    assert_eq!(report(&r, "a2").status, MemberStatus::NoCgroup);
    assert!(!Path::new(&w.cg_root()).join("cgroup.procs").exists() || r.fixed() == 0);
}

#[test]
fn adopt_reports_exited_targets_and_a_gone_source() {
    let w = World::new();
    let c = w.container("a1", "web", 100, "/pod1/a1");
    w.spawn(200, "/pod1/a1");
    w.spawn(300, "/pod1/a1");
    let engine = crate::cookies::engine::Relay::new(&w.kernel, &w.proc);
    let src = w.proc.task(100).unwrap().unwrap();
    let t200 = w.proc.task(200).unwrap().unwrap();
    let t300 = w.proc.task(300).unwrap().unwrap();
    w.fp.kill(200, 1).unwrap();
    let out = engine.adopt(src, c, &[t200, t300]).unwrap();
    assert!(matches!(out[0].result, Adopted::Exited));
    assert!(matches!(out[1].result, Adopted::Done));
    assert_eq!(w.cookie(300), c);
    assert!(engine.adopt(src, 0, &[t300]).is_err(), "cookie 0 would clear, not adopt");
    w.fp.kill(100, 1).unwrap();
    assert!(matches!(engine.adopt(src, c, &[t300]), Err(EngineError::TargetGone(100))));
}

/// A group whose live members hold two cookies (a cache that lost members and was refilled)
/// converges to its oldest member's cookie at the sweep, and the processes exec'd into the moved
/// member follow; a dry run only reports it.
#[test]
fn a_group_holding_two_cookies_converges_to_its_oldest_members() {
    let w = World::new();
    let old = w.container("a1", "web", 100, "/pod1/a1");
    // a2 recorded in web with a cookie of its own, behind the hook's back (as after a lost cache).
    w.spawn(200, "/pod2/a2");
    w.kernel.force(200, 0x5e_c0de);
    let t = w.proc.task(200).unwrap().unwrap();
    w.store
        .transaction(|tx| {
            tx.upsert_member(&crate::store::Member {
                cookie: 0x5e_c0de,
                labels: Labels { cgroup: Some("/pod2/a2".into()), ..Default::default() },
                ..crate::store::Member::new("a2", "web", 200, t.start_time)
            })
        })
        .unwrap();
    w.spawn(300, "/pod2/a2"); // exec'd into a2 under its old cookie
    w.kernel.force(300, 0x5e_c0de);

    let dry = w.reconcile(true);
    assert_eq!(
        dry.converged,
        [Converged { group: "web".into(), cookie: CookieHex(old).to_string(), members: vec!["a2".into()] }]
    );
    assert_eq!(w.cookie(200), 0x5e_c0de, "a dry run changes nothing");
    assert!(dry.render().contains("group web held more than one cookie: would fix 1 member to "), "{}", dry.render());

    let r = w.reconcile(false);
    assert_eq!(r.converged.len(), 1);
    assert_eq!(w.cookie(200), old);
    assert_eq!(w.cookie(300), old, "the exec'd process followed in the same sweep");
    assert_eq!(w.store.member("a2").unwrap().unwrap().cookie, old);
    assert!(w.reconcile(false).converged.is_empty(), "converged once");
}
