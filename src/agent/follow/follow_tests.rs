//! The follower's per-event rules over the fake kernel and a fake `/proc`.

use super::*;
use crate::cookies::engine::{Engine, EnsureRequest};
use crate::host::kernel::Scope;
use crate::test_world::World;
use crate::values::{Cookie, Labels};

fn container(w: &World, id: &str, group: &str, pid: Pid, cgroup: &str) -> Cookie {
    w.fp.spawn(pid, 1000 + pid as u64, 0, cgroup).unwrap();
    let req = EnsureRequest {
        container_id: id.into(),
        group: group.into(),
        pid,
        labels: Labels { cgroup: Some(cgroup.into()), ..Default::default() },
    };
    w.store.transaction(|tx| Engine::new(&w.kernel, &w.proc, tx).ensure(&req)).unwrap().cookie
}

fn exec(tgid: Pid) -> Event {
    Event::Exec { tgid, at_ns: monotonic_ns() }
}

fn follower(w: &World) -> Follower<'_, crate::host::kernel::fake::FakeKernel> {
    let mut f = Follower::new(&w.kernel, &w.proc);
    f.refresh(&w.store).unwrap();
    f
}

#[test]
fn an_exec_d_process_of_a_member_cgroup_gets_the_group_cookie_and_a_window() {
    let w = World::new();
    let c = container(&w, "a1", "web", 100, "/pod1/a1");
    w.fp.spawn(200, 2000, 0, "/pod1/a1").unwrap(); // runc exec: cookie 0
    w.fp.spawn(300, 3000, 0, "/pod1/a1/sub").unwrap(); // a descendant cgroup
    let mut f = follower(&w);
    assert_eq!(f.handle(exec(200)), Outcome::Fixed);
    assert_eq!(f.handle(Event::Fork { parent: 1, pid: 300, tgid: 300, at_ns: monotonic_ns() }), Outcome::Fixed);
    assert_eq!((w.kernel.get(200).unwrap(), w.kernel.get(300).unwrap()), (c, c));
    assert_eq!(f.handle(exec(200)), Outcome::Already, "one GET, nothing else");
    assert_eq!((f.stats.execs, f.stats.forks, f.stats.fixed_event, f.stats.already), (2, 1, 2, 1));
    assert_eq!(f.stats.window_counts.iter().sum::<u64>(), 2);
    assert!(f.stats.window_max > 0.0);
}

#[test]
fn processes_outside_member_cgroups_never_get_a_cookie() {
    let w = World::new();
    container(&w, "a1", "web", 100, "/pod1/a1");
    for (pid, cg) in [(200, "/system.slice/containerd.service"), (201, "/"), (202, "/pod1"), (203, "/pod1/a10")] {
        w.fp.spawn(pid, 5000 + pid as u64, 0, cg).unwrap();
    }
    let mut f = follower(&w);
    for pid in [200, 201, 202, 203, 1, std::process::id() as Pid, 99999] {
        assert!(matches!(f.handle(exec(pid)), Outcome::Outside | Outcome::Exited), "pid {pid}");
    }
    for pid in [200, 201, 202, 203] {
        assert_eq!(w.kernel.get(pid).unwrap(), 0, "pid {pid}");
    }
    assert_eq!(f.stats.fixed_event, 0);
}

#[test]
fn a_cgroup_shared_by_two_groups_and_a_root_member_are_skipped() {
    let w = World::new();
    container(&w, "a", "ga", 100, "/shared");
    container(&w, "b", "gb", 110, "/shared");
    container(&w, "r", "gr", 120, "/");
    w.fp.spawn(200, 2000, 0, "/shared").unwrap();
    w.fp.spawn(201, 2010, 0, "/elsewhere").unwrap();
    let mut f = follower(&w);
    assert_eq!(f.handle(exec(200)), Outcome::Outside);
    assert_eq!(f.handle(exec(201)), Outcome::Outside, "a member in the root cgroup owns nothing");
    assert_eq!((w.kernel.get(200).unwrap(), w.kernel.get(201).unwrap()), (0, 0));
}

#[test]
fn a_dead_or_reused_init_gives_nothing() {
    let w = World::new();
    container(&w, "a1", "web", 100, "/pod1/a1");
    w.fp.spawn(200, 2000, 0, "/pod1/a1").unwrap();
    let mut f = follower(&w);
    // The init's pid is reused by another process in the same cgroup after the view was built.
    w.fp.kill(100, 0).unwrap();
    w.fp.spawn(100, 7777, 0, "/pod1/a1").unwrap();
    w.kernel.create(100, Scope::ThreadGroup).unwrap();
    assert_eq!(f.handle(exec(200)), Outcome::Outside);
    assert_eq!(w.kernel.get(200).unwrap(), 0, "never the cookie of a stranger on the init's pid");
}

#[test]
fn the_group_cookie_is_read_from_the_init_when_it_changed_since_the_view() {
    let w = World::new();
    let old = container(&w, "a1", "web", 100, "/pod1/a1");
    w.fp.spawn(200, 2000, 0, "/pod1/a1").unwrap();
    let mut f = follower(&w);
    w.kernel.create(100, Scope::ThreadGroup).unwrap(); // a converge gave the group a new cookie
    let new = w.kernel.get(100).unwrap();
    assert_ne!(old, new);
    assert_eq!(f.handle(exec(200)), Outcome::Fixed);
    assert_eq!(w.kernel.get(200).unwrap(), new);
}

#[test]
fn a_thread_created_without_the_cookie_is_fixed_and_lost_events_are_counted() {
    let w = World::new();
    let c = container(&w, "a1", "web", 100, "/pod1/a1");
    w.fp.spawn(200, 2000, 1, "/pod1/a1").unwrap(); // 200 and its thread 201
    let mut f = follower(&w);
    assert_eq!(f.handle(Event::Fork { parent: 200, pid: 201, tgid: 200, at_ns: monotonic_ns() }), Outcome::Fixed);
    assert_eq!((w.kernel.get(200).unwrap(), w.kernel.get(201).unwrap()), (c, c), "the whole thread group");
    assert_eq!(f.handle(Event::Lost), Outcome::Outside);
    assert_eq!(f.stats.lost, 1);
}

#[test]
fn an_empty_cache_reads_nothing_from_proc() {
    let w = World::new();
    w.fp.spawn(200, 2000, 0, "/pod1/a1").unwrap();
    let mut f = follower(&w);
    assert!(f.view.is_empty());
    assert_eq!(f.handle(exec(200)), Outcome::Outside);
    assert_eq!(w.kernel.get(200).unwrap(), 0);
}

#[test]
fn a_reset_cpu_idle_of_a_sched_idle_member_is_set_to_1_again_once_per_reset() {
    // systemd writes cpu.idle = 0 when it re-applies a container's scope (a runtime's resource
    // update): the follower's periodic look sets it back; a stopped container is left alone.
    let w = World::new();
    let root = w.dir.path().join("cgroup");
    let scope = root.join("be.slice/c1.scope");
    std::fs::create_dir_all(&scope).unwrap();
    std::fs::write(scope.join("cpu.idle"), "1").unwrap();
    w.fp.spawn(100, 1100, 0, "/be.slice/c1.scope/container").unwrap();
    let req = EnsureRequest {
        container_id: "c1".into(),
        group: "web-expeller".into(),
        pid: 100,
        labels: Labels {
            cgroup: Some("/be.slice/c1.scope/container".into()),
            idle_cgroup: Some("/be.slice/c1.scope".into()),
            ..Default::default()
        },
    };
    w.store.transaction(|tx| Engine::new(&w.kernel, &w.proc, tx).ensure(&req)).unwrap();
    let mut f = follower(&w);
    assert_eq!(f.keep_idle(&root), 0, "still 1: nothing written");
    std::fs::write(scope.join("cpu.idle"), "0\n").unwrap();
    assert_eq!(f.keep_idle(&root), 1);
    assert_eq!(std::fs::read_to_string(scope.join("cpu.idle")).unwrap(), "1");
    assert_eq!(f.keep_idle(&root), 0);
    assert_eq!(f.stats.idle_restored, 1);
    assert!(f.stats.render().contains("oci_coresched_hook_follow_idle_restored_total 1"), "{}", f.stats.render());
    // The container stopped (its init is gone): its cgroup is not written.
    std::fs::write(scope.join("cpu.idle"), "0").unwrap();
    w.fp.kill(100, 0).unwrap();
    assert_eq!(f.keep_idle(&root), 0);
    assert_eq!(std::fs::read_to_string(scope.join("cpu.idle")).unwrap(), "0");
}

/// The cgroup tree the sweep walks: `cg/<cgroup>/cgroup.procs` listing `pids`.
fn cgroup_procs(w: &World, cgroup: &str, pids: &[Pid]) {
    let dir = w.dir.path().join("cg").join(cgroup.trim_start_matches('/'));
    std::fs::create_dir_all(&dir).unwrap();
    let text: String = pids.iter().map(|p| format!("{p}\n")).collect();
    std::fs::write(dir.join("cgroup.procs"), text).unwrap();
}

#[test]
fn a_group_that_converged_while_a_process_was_fixed_is_swept_at_the_refresh() {
    // The follower gives an exec'd process the group's cookie; then the group converges (a hook
    // gives it a new cookie and records it): the process holds the old one, and no event comes
    // for it again. The refresh that follows the cache write sweeps that group's cgroups at once.
    let w = World::new();
    let old = container(&w, "a1", "web", 100, "/pod1/a1");
    container(&w, "d1", "db", 110, "/pod2/d1");
    w.fp.spawn(200, 2000, 0, "/pod1/a1").unwrap();
    w.fp.spawn(300, 3000, 0, "/pod2/d1").unwrap(); // db's, without its cookie, no event for it
    cgroup_procs(&w, "/pod1/a1", &[100, 200]);
    cgroup_procs(&w, "/pod2/d1", &[110, 300]);
    let mut f = follower(&w);
    assert_eq!(f.handle(exec(200)), Outcome::Fixed);
    assert_eq!(w.kernel.get(200).unwrap(), old);
    w.kernel.create(100, Scope::ThreadGroup).unwrap(); // the converge
    let new = w.kernel.get(100).unwrap();
    let m = w.store.member("a1").unwrap().unwrap();
    w.store.transaction(|tx| tx.upsert_member(&crate::store::Member { cookie: new, ..m })).unwrap();
    let changed = f.refresh(&w.store).unwrap();
    assert_eq!(changed.iter().collect::<Vec<_>>(), ["web"]);
    refresh::apply(&mut f, &w.store, &changed, &w.dir.path().join("cg"));
    assert_eq!(w.kernel.get(200).unwrap(), new, "swept at the refresh, not at the next full sweep");
    assert_eq!(w.kernel.get(300).unwrap(), 0, "an unchanged group's cgroups are the full sweep's");
    assert_eq!((f.stats.group_sweeps, f.stats.fixed_sweep), (1, 1));
    // Nothing changed since: nothing to sweep.
    assert!(f.refresh(&w.store).unwrap().is_empty());
}

#[test]
fn a_member_whose_init_exited_is_removed_at_the_refresh() {
    // Containers the NRI plugin caught up have no poststop: the follower removes their rows when
    // it sees their init gone (dead, or its pid reused), and keeps one it cannot read.
    let w = World::new();
    container(&w, "caught-up", "web", 100, "/pod1/a1");
    container(&w, "reused", "web", 110, "/pod1/a2");
    container(&w, "odd", "db", 120, "/pod2/o");
    container(&w, "live", "db", 130, "/pod2/l");
    let mut f = follower(&w);
    assert!(f.view.inits_alive(&w.proc));
    w.fp.kill(100, 0).unwrap();
    w.fp.kill(110, 0).unwrap();
    w.fp.spawn(110, 9999, 0, "/elsewhere").unwrap();
    std::fs::write(w.dir.path().join("proc/120/stat"), "120 (x) S 1").unwrap(); // unreadable
    assert!(!f.view.inits_alive(&w.proc), "what makes the loop refresh");
    let changed = f.refresh(&w.store).unwrap();
    assert_eq!(f.view.gone(), ["caught-up", "reused"]);
    refresh::apply(&mut f, &w.store, &changed, &w.dir.path().join("cg"));
    let left: Vec<String> = w.store.all_members().unwrap().into_iter().map(|m| m.container_id).collect();
    assert_eq!(left, ["odd", "live"]);
    assert_eq!(f.stats.members_removed, 2);
    assert!(f.stats.render().contains("oci_coresched_hook_follow_members_removed_total 2\n"));
    let changed = f.refresh(&w.store).unwrap();
    assert!(f.view.gone().is_empty());
    assert!(changed.is_empty(), "{changed:?}");
}

#[test]
fn a_storming_parents_forks_are_sampled_while_other_forks_and_execs_are_all_read() {
    let w = World::new();
    let c = container(&w, "a1", "web", 100, "/pod1/a1");
    w.fp.spawn(400, 4000, 0, "/build").unwrap(); // the storming parent
    let mut f = follower(&w);
    let fork = |parent: Pid, pid: Pid, at_ns: u64| Event::Fork { parent, pid, tgid: pid, at_ns };
    let t0 = monotonic_ns();
    let n = storm::STREAK + 10 * storm::SAMPLE_EVERY;
    for i in 0..n {
        let pid = 10_000 + i as Pid;
        w.fp.spawn(pid, 1, 0, "/build").unwrap();
        assert_eq!(f.handle(fork(400, pid, t0 + u64::from(i) * 100_000)), Outcome::Outside);
    }
    assert_eq!(f.stats.storm_skipped, u64::from(10 * (storm::SAMPLE_EVERY - 1)));
    // Meanwhile a runtime forks its helper into the member's cgroup, and another process execs
    // there: both are read and fixed at once.
    w.fp.spawn(500, 5000, 0, "/pod1/a1").unwrap();
    w.fp.spawn(600, 6000, 0, "/pod1/a1").unwrap();
    let t = t0 + u64::from(n) * 100_000;
    assert_eq!(f.handle(fork(450, 500, t)), Outcome::Fixed);
    assert_eq!(f.handle(exec(600)), Outcome::Fixed);
    assert_eq!((w.kernel.get(500).unwrap(), w.kernel.get(600).unwrap()), (c, c));
    // A sampled child of the storm found inside a member's cgroup ends the sampling.
    let mut read_inside = false;
    for i in 0..storm::SAMPLE_EVERY {
        let pid = 20_000 + i as Pid;
        w.fp.spawn(pid, 1, 0, "/pod1/a1").unwrap();
        read_inside |= f.handle(fork(400, pid, t + u64::from(i + 1) * 100_000)) == Outcome::Fixed;
    }
    assert!(read_inside, "the sample read a child inside the member's cgroup");
    let skipped = f.stats.storm_skipped;
    w.fp.spawn(30_000, 1, 0, "/pod1/a1").unwrap();
    let later = t + u64::from(storm::SAMPLE_EVERY + 1) * 100_000;
    assert_eq!(f.handle(fork(400, 30_000, later)), Outcome::Fixed, "every child is read again");
    assert_eq!(f.stats.storm_skipped, skipped);
}
