//! `inspect` and `list` over a seeded cache and the fake kernel.

use crate::host::kernel::fake::{FakeKernel, FakeProc};
use crate::host::kernel::{CoreSched, Scope};
use crate::store::{Member, Store};
use crate::test_world::{Ground, World};
use crate::values::{Labels, Pid};

struct Seeded {
    _dir: tempfile::TempDir,
    fp: FakeProc,
    kernel: FakeKernel,
    store: Store,
}

fn member(id: &str, group: &str, pid: Pid, start_time: u64, cookie: u64) -> Member {
    Member {
        cookie,
        labels: Labels { cgroup: Some(format!("/{id}")), namespace: Some("tenant-a".into()), ..Default::default() },
        ..Member::new(id, group, pid, start_time)
    }
}

/// Group tenant-a/web: a1 (pid 100, 2 threads) and a2 (pid 200) sharing one cookie; group
/// tenant-a/db: b1 (pid 300) whose cached start time no longer matches (its pid was reused).
fn seeded() -> Seeded {
    let (Ground { dir, fp, kernel, .. }, store) = World::new().into_parts();
    fp.spawn(100, 10, 2, "/a1").unwrap();
    fp.spawn(200, 20, 0, "/a2").unwrap();
    fp.spawn(300, 99, 0, "/stranger").unwrap();
    kernel.create(100, Scope::ThreadGroup).unwrap();
    let web = kernel.get(100).unwrap();
    kernel.force(200, web);
    store.transaction(|tx| tx.upsert_member(&member("a1", "tenant-a/web", 100, 10, web))).unwrap();
    store.transaction(|tx| tx.upsert_member(&member("a2", "tenant-a/web", 200, 20, web))).unwrap();
    store.transaction(|tx| tx.upsert_member(&member("b1", "tenant-a/db", 300, 30, 0x77))).unwrap();
    Seeded { _dir: dir, fp, kernel, store }
}

#[test]
fn inspect_reports_threads_and_the_cached_container() {
    let s = seeded();
    let web = s.kernel.get(100).unwrap();
    let r = super::inspect::inspect(100, &s.kernel, &s.fp.procfs(), Some(&s.store), &Default::default()).unwrap();
    assert_eq!(r.cookie, format!("{web:#x}"));
    assert!(r.uniform);
    assert_eq!(r.threads.iter().map(|t| t.tid).collect::<Vec<_>>(), vec![100, 101, 102]);
    let c = r.container.as_ref().expect("a1 is cached");
    assert_eq!((c.id.as_str(), c.group.as_str(), c.same_process), ("a1", "tenant-a/web", true));
    assert_eq!(c.group_members, vec!["a2".to_string()]);
    let text = super::inspect::render(&r);
    assert!(text.contains("container a1 in group tenant-a/web"), "{text}");
    assert!(text.contains("other members: a2"), "{text}");

    // A thread with another cookie is flagged.
    s.kernel.create(102, Scope::Thread).unwrap();
    let r = super::inspect::inspect(100, &s.kernel, &s.fp.procfs(), Some(&s.store), &Default::default()).unwrap();
    assert!(!r.uniform);
    assert!(super::inspect::render(&r).contains("(threads differ)"));
}

#[test]
fn inspect_warns_about_a_reused_pid_and_knows_strangers() {
    let s = seeded();
    let r = super::inspect::inspect(300, &s.kernel, &s.fp.procfs(), Some(&s.store), &Default::default()).unwrap();
    assert!(!r.container.as_ref().unwrap().same_process);
    assert!(super::inspect::render(&r).contains("belongs to another process"));
    s.fp.spawn(400, 1, 0, "/x").unwrap();
    let r = super::inspect::inspect(400, &s.kernel, &s.fp.procfs(), Some(&s.store), &Default::default()).unwrap();
    assert!(r.container.is_none());
    assert!(super::inspect::render(&r).contains("not a container init known to the cache"));
    let err =
        super::inspect::inspect(999, &s.kernel, &s.fp.procfs(), None, &Default::default()).unwrap_err().to_string();
    assert!(err.contains("pid 999: no such process"), "{err}");
}

#[test]
fn list_shows_liveness_cookies_and_counters() {
    let s = seeded();
    s.store.transaction(|tx| tx.count("tenant-a/web", true)).unwrap();
    s.store.transaction(|tx| tx.count("tenant-a/web", false)).unwrap();
    let web = format!("{:#x}", s.kernel.get(100).unwrap());
    let groups = super::list::list(&s.store, &s.kernel, &s.fp.procfs(), &Default::default()).unwrap();
    let keys: Vec<&str> = groups.iter().map(|g| g.group.as_str()).collect();
    assert_eq!(keys, ["tenant-a/db", "tenant-a/web"]);
    let db = &groups[0];
    assert!(!db.members[0].live, "b1's pid was reused");
    assert_eq!(db.members[0].cookie_now, None);
    let webg = &groups[1];
    assert_eq!((webg.ok, webg.failed, webg.live_cookies), (1, 1, 1));
    assert!(webg.members.iter().all(|m| m.live && m.cookie_now.as_deref() == Some(web.as_str())));
    let text = super::list::render(&groups, None);
    assert!(text.contains("2 members, 1 ok, 1 failed"), "{text}");
    assert!(text.contains("1 member, 0 ok, 0 failed"), "{text}");
    assert!(!text.contains("WARNING"), "{text}");

    // Two cookies among live members are flagged.
    s.kernel.create(200, Scope::ThreadGroup).unwrap();
    let groups = super::list::list(&s.store, &s.kernel, &s.fp.procfs(), &Default::default()).unwrap();
    assert_eq!(groups[1].live_cookies, 2);
    assert!(super::list::render(&groups, None).contains("WARNING: more than one cookie"));
    assert_eq!(super::list::render(&[], None), "no groups in the cache\n");
}
