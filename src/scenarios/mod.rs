//! The cookie scenario suite, written once and run twice: over the fake kernel everywhere
//! (`scenarios::fake::*`), and over the real kernel in the VM tier (`scenarios::linux::*`, ignored
//! on hosts without `CONFIG_SCHED_CORE`; `tests/vm` runs them with `--ignored`). A disagreement
//! between the two runs is a bug in the fake or in the engine.
//!
//! Cookie values are compared only between live tasks: a value read from a task that died may be
//! reused by the kernel, so scenarios never compare against a dead member's cookie.

mod world;

use crate::cookies::engine::Via;
use crate::hook::{Done, HookError, Stage};
use world::World;

const GROUP: &str = "oci-coresched-hook/group";
const POLICY: &str = "oci-coresched-hook/policy";
const NS: &str = "io.kubernetes.pod.namespace";

fn ensured(done: Result<Done, HookError>) -> crate::cookies::engine::EnsureOutcome {
    match done {
        Ok(Done::Ensured(o)) => o,
        other => panic!("expected an ensure, got {other:?}"),
    }
}

fn ensured_then_failed(done: Result<Done, HookError>) -> (crate::cookies::engine::EnsureOutcome, HookError) {
    match done {
        Ok(Done::EnsuredThenFailed { outcome, error }) => (outcome, error),
        other => panic!("expected an ensure whose next step failed, got {other:?}"),
    }
}

fn first_member_creates(w: &mut World) {
    let pid = w.spawn("c1");
    let out = ensured(w.create_runtime("c1", pid, &[(GROUP, "web")]));
    assert_eq!(out.via, Via::Created);
    let c = w.cookie(pid);
    assert_ne!(c, 0);
    assert_eq!(out.cookie, c);
    let m = w.member("c1").expect("cached");
    assert_eq!((m.group.as_str(), m.pid, m.cookie), ("web", pid, c));
}

fn second_member_shares(w: &mut World) {
    let p1 = w.start("c1", &[(GROUP, "web")]);
    let p2 = w.spawn("c2");
    let out = ensured(w.create_runtime("c2", p2, &[(GROUP, "web")]));
    assert_eq!(out.via, Via::Shared("c1".into()));
    assert_ne!(w.cookie(p1), 0);
    assert_eq!(w.cookie(p1), w.cookie(p2));
    assert_eq!(w.members("web").len(), 2);
}

fn other_group_gets_another_cookie(w: &mut World) {
    let p1 = w.start("c1", &[(GROUP, "web")]);
    let p2 = w.start("c2", &[(GROUP, "web")]);
    let p3 = w.start("c3", &[(GROUP, "db")]);
    assert_eq!(w.cookie(p1), w.cookie(p2));
    assert_ne!(w.cookie(p3), 0);
    assert_ne!(w.cookie(p3), w.cookie(p1));
}

fn same_group_name_other_namespace_is_isolated(w: &mut World) {
    let a = w.start("a", &[(GROUP, "web"), (NS, "tenant-a")]);
    let a2 = w.start("a2", &[(GROUP, "web"), (NS, "tenant-a")]);
    let b = w.start("b", &[(GROUP, "web"), (NS, "tenant-b")]);
    assert_eq!(w.cookie(a), w.cookie(a2));
    assert_ne!(w.cookie(a), w.cookie(b));
    assert_eq!(w.member("b").unwrap().group, "tenant-b/web");
}

fn all_siblings_dead_creates_fresh(w: &mut World) {
    w.start("c1", &[(GROUP, "web")]);
    w.start("c2", &[(GROUP, "web")]);
    w.kill("c1");
    w.kill("c2");
    let p3 = w.spawn("c3");
    let out = ensured(w.create_runtime("c3", p3, &[(GROUP, "web")]));
    assert_eq!(out.via, Via::Created);
    assert_eq!(out.dropped, vec!["c1".to_string(), "c2".to_string()]);
    assert_ne!(w.cookie(p3), 0);
    let ids: Vec<String> = w.members("web").into_iter().map(|m| m.container_id).collect();
    assert_eq!(ids, vec!["c3"]);
}

fn first_member_exits_newcomer_joins_survivor(w: &mut World) {
    w.start("c1", &[(GROUP, "web")]);
    let p2 = w.start("c2", &[(GROUP, "web")]);
    w.kill("c1");
    let p3 = w.spawn("c3");
    let out = ensured(w.create_runtime("c3", p3, &[(GROUP, "web")]));
    assert_eq!(out.via, Via::Shared("c2".into()));
    assert_eq!(w.cookie(p3), w.cookie(p2));
    assert_ne!(w.cookie(p3), 0);
}

fn reused_pid_is_not_trusted(w: &mut World) {
    let p1 = w.start("c1", &[(GROUP, "web")]);
    // The cached start time no longer matches: the pid now belongs to a stranger.
    let store = w.store();
    let mut m = store.member("c1").unwrap().unwrap();
    m.start_time += 1;
    store.transaction(|tx| tx.upsert_member(&m)).unwrap();
    drop(store);
    let p2 = w.spawn("c2");
    let out = ensured(w.create_runtime("c2", p2, &[(GROUP, "web")]));
    assert_eq!(out.via, Via::Created, "must not share from a pid whose start time changed");
    assert_eq!(out.dropped, vec!["c1".to_string()]);
    assert_ne!(w.cookie(p2), w.cookie(p1), "the stranger's cookie must not be shared");
}

fn group_with_two_cookies_converges_to_oldest(w: &mut World) {
    let p1 = w.start("c1", &[(GROUP, "web")]);
    let p2 = w.start("c2", &[(GROUP, "web")]);
    w.recookie(p2);
    assert_ne!(w.cookie(p1), w.cookie(p2));
    let p3 = w.spawn("c3");
    let out = ensured(w.create_runtime("c3", p3, &[(GROUP, "web")]));
    assert_eq!(out.via, Via::Shared("c1".into()));
    assert_eq!(out.converged, vec!["c2".to_string()]);
    let c = w.cookie(p1);
    assert_eq!((w.cookie(p2), w.cookie(p3)), (c, c));
    assert_eq!(w.member("c2").unwrap().cookie, c);
}

fn member_that_lost_its_cookie_is_repaired(w: &mut World) {
    let p1 = w.start("c1", &[(GROUP, "web")]);
    let p2 = w.start("c2", &[(GROUP, "web")]);
    w.clear_behind(p1);
    assert_eq!(w.cookie(p1), 0);
    let p3 = w.spawn("c3");
    let out = ensured(w.create_runtime("c3", p3, &[(GROUP, "web")]));
    assert_eq!(out.via, Via::Shared("c2".into()), "c1 has no cookie, so c2 is the oldest source");
    assert_eq!(out.converged, vec!["c1".to_string()]);
    assert_eq!((w.cookie(p1), w.cookie(p3)), (w.cookie(p2), w.cookie(p2)));
}

fn policy_none_clears_an_inherited_cookie(w: &mut World) {
    let p = w.spawn("c1");
    w.recookie(p);
    assert_ne!(w.cookie(p), 0);
    let (d, done) = w.hook(&w.state("c1", "creating", Some(p), &[(POLICY, "none")]), None);
    assert!(matches!(done, Ok(Done::Cleared(None))), "{d:?} {done:?}");
    assert_eq!(w.cookie(p), 0);
}

fn policy_none_works_when_the_hook_itself_has_a_cookie(w: &mut World) {
    w.give_threads_a_cookie();
    let p = w.spawn("c1");
    w.recookie(p);
    let (_, done) = w.hook(&w.state("c1", "creating", Some(p), &[(POLICY, "none")]), None);
    assert!(matches!(done, Ok(Done::Cleared(_))), "{done:?}");
    assert_eq!(w.cookie(p), 0);
}

fn policy_none_removes_a_member_from_its_group(w: &mut World) {
    let p1 = w.start("c1", &[(GROUP, "web")]);
    w.start("c2", &[(GROUP, "web")]);
    let (_, done) = w.hook(&w.state("c1", "running", Some(p1), &[(GROUP, "web"), (POLICY, "none")]), None);
    assert!(matches!(done, Ok(Done::Cleared(Some(_)))), "{done:?}");
    assert_eq!(w.cookie(p1), 0);
    assert_eq!(w.members("web").len(), 1);
}

fn exclusive_never_shares(w: &mut World) {
    let p1 = w.start("c1", &[(GROUP, "web")]);
    let p2 = w.start("c2", &[(GROUP, "web"), (POLICY, "exclusive")]);
    let p3 = w.start("c3", &[(GROUP, "web"), (POLICY, "exclusive")]);
    let (c1, c2, c3) = (w.cookie(p1), w.cookie(p2), w.cookie(p3));
    assert!(c1 != 0 && c2 != 0 && c3 != 0);
    assert!(c1 != c2 && c2 != c3 && c1 != c3, "{c1:#x} {c2:#x} {c3:#x}");
}

fn group_change_moves_the_container(w: &mut World) {
    let p1 = w.start("c1", &[(GROUP, "web")]);
    let p2 = w.start("c2", &[(GROUP, "web")]);
    let out = ensured(w.create_runtime("c2", p2, &[(GROUP, "db")]));
    assert_eq!(out.left.as_deref(), Some("web"));
    assert_ne!(w.cookie(p2), w.cookie(p1));
    assert_eq!(w.member("c2").unwrap().group, "db");
    let out = ensured(w.create_runtime("c1", p1, &[(GROUP, "db")]));
    assert_eq!(out.via, Via::Shared("c2".into()));
    assert_eq!(w.cookie(p1), w.cookie(p2));
    assert!(!w.groups().contains(&"web".to_string()), "empty group must vanish: {:?}", w.groups());
}

/// poststop records the stop; the next opener of the cache (here the world's reader, as `list`,
/// `gc` or the next hook would) removes the row, and the group with its last member.
fn poststop_forgets_and_empty_groups_vanish(w: &mut World) {
    w.start("c1", &[(GROUP, "web")]);
    w.start("c2", &[(GROUP, "web")]);
    assert!(matches!(w.stop("c1"), Ok(Done::StopRecorded)));
    assert_eq!(w.groups(), vec!["web"]);
    assert!(w.member("c1").is_none());
    assert!(matches!(w.stop("c2"), Ok(Done::StopRecorded)));
    assert!(w.groups().is_empty());
    assert!(w.member("c2").is_none());
    assert!(matches!(w.stop("never-seen"), Ok(Done::StopRecorded)));
    assert!(w.groups().is_empty());
}

/// A deferred forget that outlives its container's id: a new container took the id and runs by
/// the time the forget is applied, so its row stays and the group keeps its cookie.
fn a_stop_recorded_before_the_id_was_reused_keeps_the_new_container(w: &mut World) {
    w.start("c1", &[(GROUP, "web")]);
    w.kill("c1");
    assert!(matches!(w.hook(&w.state("c1", "stopped", None, &[]), Some(Stage::Poststop)).1, Ok(Done::StopRecorded)));
    // The old forget file is still there when the new c1's createRuntime opens the cache, and a
    // second stop is recorded again after the new one started.
    let p2 = w.spawn("c1");
    ensured(w.create_runtime("c1", p2, &[(GROUP, "web")]));
    crate::cookies::stopped::record(&w.state_dir(), "c1").unwrap();
    assert_eq!(w.member("c1").map(|m| m.pid), Some(p2), "the live container's row stays");
    let p3 = w.start("c3", &[(GROUP, "web")]);
    assert_eq!(w.cookie(p3), w.cookie(p2));
    assert_ne!(w.cookie(p2), 0);
}

fn poststart_after_create_runtime_is_idempotent(w: &mut World) {
    let p1 = w.start("c1", &[(GROUP, "web")]);
    let c = w.cookie(p1);
    for stage in [Stage::Poststart, Stage::Poststart] {
        let (_, done) = w.hook(&w.state("c1", "running", Some(p1), &[(GROUP, "web")]), Some(stage));
        let out = ensured(done);
        assert_eq!(out.via, Via::AlreadySet);
        assert_eq!(w.cookie(p1), c, "poststart must not replace the cookie");
    }
    assert_eq!(w.members("web").len(), 1);
}

/// The repeat run's shortcut (its receipt, one GET) must not hide a cookie replaced behind the
/// hook's back: poststart then takes the full path and puts the group's cookie back.
fn poststart_repairs_an_init_whose_cookie_was_replaced(w: &mut World) {
    let p1 = w.start("c1", &[(GROUP, "web")]);
    let p2 = w.start("c2", &[(GROUP, "web")]);
    let c = w.cookie(p1);
    w.recookie(p2);
    assert_ne!(w.cookie(p2), c);
    let (_, done) = w.hook(&w.state("c2", "running", Some(p2), &[(GROUP, "web")]), Some(Stage::Poststart));
    let out = ensured(done);
    assert_eq!(out.via, Via::Shared("c1".into()));
    assert_eq!(w.cookie(p2), c, "poststart must restore the group's cookie");
    assert_eq!(w.member("c2").unwrap().cookie, c);
}

/// The receipt path must not hide undone work either: with the cookie replaced behind the hook's
/// back and the container's row gone from the cache, poststart takes the full path, puts the
/// group's cookie back and records the container again.
fn poststart_repairs_a_replaced_cookie_whose_record_is_missing(w: &mut World) {
    let p1 = w.start("c1", &[(GROUP, "web")]);
    let p2 = w.start("c2", &[(GROUP, "web")]);
    let c = w.cookie(p1);
    w.recookie(p2);
    w.store().transaction(|s| s.remove_member("c2")).unwrap();
    assert!(w.member("c2").is_none());
    let (_, done) = w.hook(&w.state("c2", "running", Some(p2), &[(GROUP, "web")]), Some(Stage::Poststart));
    let out = ensured(done);
    assert_eq!(out.via, Via::Shared("c1".into()));
    assert_eq!(w.cookie(p2), c, "poststart must restore the group's cookie");
    assert_eq!(w.member("c2").map(|m| (m.pid, m.cookie)), Some((p2, c)), "and record it again");
}

fn invalid_group_gets_own_cookie(w: &mut World) {
    let p1 = w.start("c1", &[(GROUP, "web")]);
    let p2 = w.start("c2", &[(GROUP, "../web")]);
    let p3 = w.start("c3", &[(GROUP, "../web")]);
    assert_ne!(w.cookie(p2), 0);
    assert_ne!(w.cookie(p2), w.cookie(p1));
    assert_ne!(w.cookie(p2), w.cookie(p3), "two invalid groups must not share");
    assert_eq!(w.member("c2").unwrap().group, "container:c2");
}

fn sched_idle_is_written_for_its_class(w: &mut World) {
    let mut cfg = w.config.clone();
    cfg.qos.insert(
        crate::config::QosClass::Be,
        crate::config::QosRule { enable: true, core_expeller: false, sched_idle: true },
    );
    w.config = cfg;
    let pid = w.spawn("c1");
    let cg = w.proc.cgroup(pid).unwrap().expect("cgroup of child");
    let dir = w.cgroup_root().join(cg.trim_start_matches('/'));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cpu.idle"), "0").unwrap();
    ensured(w.create_runtime("c1", pid, &[(GROUP, "batch"), ("koordinator.sh/qosClass", "BE")]));
    assert_eq!(std::fs::read_to_string(dir.join("cpu.idle")).unwrap(), "1");
    assert_eq!(w.member("c1").unwrap().labels.cgroup.as_deref(), Some(cg.as_str()));
}

/// `cpu.idle` cannot be written (cgroup v1, a cgroup without the cpu controller, Linux before
/// 5.15: here a cgroup dir without the file) after the cookie was set: the record of the cookie
/// stays, so the next member of the group shares it and `list` shows both.
fn sched_idle_failure_keeps_the_membership(w: &mut World) {
    let mut cfg = w.config.clone();
    cfg.qos.insert(
        crate::config::QosClass::Be,
        crate::config::QosRule { enable: true, core_expeller: false, sched_idle: true },
    );
    w.config = cfg;
    let be = [(GROUP, "batch"), ("koordinator.sh/qosClass", "BE")];
    let p1 = w.spawn("c1");
    let cg = w.proc.cgroup(p1).unwrap().expect("cgroup of child");
    std::fs::create_dir_all(w.cgroup_root().join(cg.trim_start_matches('/'))).unwrap();
    let (out, error) = ensured_then_failed(w.create_runtime("c1", p1, &be));
    assert_eq!(out.via, Via::Created);
    assert_eq!(error.reason().as_str(), "cgroup");
    assert!(error.to_string().starts_with("failed to set cpu.idle: "), "{error}");
    let c1 = w.cookie(p1);
    assert_ne!(c1, 0, "the cookie is set before cpu.idle is written");
    assert_eq!(out.cookie, c1);
    let m = w.member("c1").expect("c1 must stay cached after the cpu.idle failure");
    assert_eq!((m.group.as_str(), m.cookie), ("batch", c1));

    let p2 = w.spawn("c2");
    let (out, _) = ensured_then_failed(w.create_runtime("c2", p2, &be));
    assert_eq!(out.via, Via::Shared("c1".into()));
    assert_eq!(w.cookie(p2), c1, "the next member must share c1's cookie, not create a second one");
    let ids: Vec<String> = w.members("batch").into_iter().map(|m| m.container_id).collect();
    assert_eq!(ids, ["c1", "c2"]);

    let store = w.store();
    let listed = crate::ops::list::list(&store, &w.k(), &w.proc, &Default::default()).unwrap();
    let g = listed.iter().find(|g| g.group == "batch").expect("list shows group batch");
    let want = crate::host::kernel::CookieHex(c1).to_string();
    let rows: Vec<(&str, bool, Option<&str>)> =
        g.members.iter().map(|m| (m.id.as_str(), m.live, m.cookie_now.as_deref())).collect();
    assert_eq!(rows, [("c1", true, Some(want.as_str())), ("c2", true, Some(want.as_str()))]);
    assert_eq!((g.ok, g.failed, g.live_cookies), (2, 0, 1), "both cookies were set: two ensures that succeeded");
    assert_eq!(store.failures().unwrap(), vec![("cgroup".to_string(), 2)], "each cpu.idle failure is counted");
}

macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        mod fake {
            $(#[test] fn $name() { super::$name(&mut super::World::fake()); })*
        }
        mod linux {
            $(
                #[test]
                #[ignore = "needs a CONFIG_SCHED_CORE kernel with SMT: run by the VM tier (tests/vm)"]
                fn $name() { super::$name(&mut super::World::linux()); }
            )*
        }
    };
}

suite!(
    first_member_creates,
    second_member_shares,
    other_group_gets_another_cookie,
    same_group_name_other_namespace_is_isolated,
    all_siblings_dead_creates_fresh,
    first_member_exits_newcomer_joins_survivor,
    reused_pid_is_not_trusted,
    group_with_two_cookies_converges_to_oldest,
    member_that_lost_its_cookie_is_repaired,
    policy_none_clears_an_inherited_cookie,
    policy_none_works_when_the_hook_itself_has_a_cookie,
    policy_none_removes_a_member_from_its_group,
    exclusive_never_shares,
    group_change_moves_the_container,
    poststop_forgets_and_empty_groups_vanish,
    a_stop_recorded_before_the_id_was_reused_keeps_the_new_container,
    poststart_after_create_runtime_is_idempotent,
    poststart_repairs_an_init_whose_cookie_was_replaced,
    poststart_repairs_a_replaced_cookie_whose_record_is_missing,
    invalid_group_gets_own_cookie,
    sched_idle_is_written_for_its_class,
    sched_idle_failure_keeps_the_membership,
);
