//! The unit tests of `src/ops/gc.rs`.

use super::*;
use crate::host::kernel::fake::FakeProc;
use crate::store::{Member, Store};
use crate::test_world::{Ground, World};

fn member(id: &str, group: &str, pid: Pid, start_time: u64) -> Member {
    Member { cookie: 0x5eed, ..Member::new(id, group, pid, start_time) }
}

fn setup() -> (tempfile::TempDir, FakeProc, Store) {
    let (Ground { dir, fp, .. }, store) = World::new().into_parts();
    (dir, fp, store)
}

fn ids(s: &Store) -> Vec<String> {
    s.all_members().unwrap().into_iter().map(|m| m.container_id).collect()
}

fn keys(s: &Store) -> Vec<String> {
    s.groups().unwrap().into_iter().map(|g| g.key).collect()
}

#[test]
fn removes_dead_and_reused_members_and_empty_groups() {
    let (_d, fp, s) = setup();
    fp.spawn(100, 10, 1, "/a").unwrap();
    fp.spawn(200, 20, 0, "/b").unwrap();
    fp.spawn(300, 99, 0, "/c").unwrap(); // pid 300 reused: the cache says start time 30
    s.transaction(|tx| tx.upsert_member(&member("live", "web", 100, 10))).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("dead", "web", 150, 15))).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("alone", "db", 200, 20))).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("reused", "batch", 300, 30))).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("gone", "batch", 400, 40))).unwrap();
    // A group row with no members at all (a failed first ensure counts one).
    s.transaction(|tx| tx.count("orphan", false)).unwrap();
    s.transaction(|tx| tx.count("web", true)).unwrap();

    let r = s.transaction(|tx| gc(tx, &fp.procfs())).unwrap();
    assert_eq!(
        r.removed,
        [
            Removed { container_id: "reused".into(), group: "batch".into(), pid: 300, reason: GcReason::Reused },
            Removed { container_id: "gone".into(), group: "batch".into(), pid: 400, reason: GcReason::Dead },
            Removed { container_id: "dead".into(), group: "web".into(), pid: 150, reason: GcReason::Dead },
        ]
    );
    assert_eq!(r.groups_dropped, ["batch", "orphan"]);
    assert!(r.unreadable.is_empty());
    assert_eq!(ids(&s), ["alone", "live"]);
    assert_eq!(keys(&s), ["db", "web"]);
    // The surviving group keeps its counters.
    assert_eq!(s.groups().unwrap().iter().find(|g| g.key == "web").unwrap().ok, 1);

    assert_eq!(
        r.render(),
        "removed reused from group batch (pid 300 now belongs to another process)\n\
             removed gone from group batch (pid 400 exited)\n\
             removed dead from group web (pid 150 exited)\n\
             dropped empty group batch\n\
             dropped empty group orphan\n"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["removed"][0]["reason"], "reused");
    assert_eq!(json["removed"][1]["reason"], "dead");
    assert_eq!(json["removed"][1]["container_id"], "gone");
    assert_eq!(json["removed"][1]["group"], "batch");
    assert_eq!(json["removed"][1]["pid"], 400);
    assert_eq!(json["groups_dropped"][1], "orphan");

    // A second run finds nothing.
    let again = s.transaction(|tx| gc(tx, &fp.procfs())).unwrap();
    assert!(again.is_empty(), "{again:?}");
    assert_eq!(again.render(), "nothing to remove\n");
    assert_eq!(ids(&s), ["alone", "live"]);
}

#[test]
fn only_the_named_members_are_looked_at() {
    let (_d, fp, s) = setup();
    fp.spawn(100, 10, 0, "/a").unwrap();
    s.transaction(|tx| tx.upsert_member(&member("live", "web", 100, 10))).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("dead", "web", 150, 15))).unwrap();
    s.transaction(|tx| tx.upsert_member(&member("other-dead", "db", 160, 16))).unwrap();
    let named: BTreeSet<String> = ["live", "dead", "unknown"].into_iter().map(String::from).collect();
    let r = s.transaction(|tx| gc_members(tx, &fp.procfs(), &named)).unwrap();
    assert_eq!(
        r.removed,
        [Removed { container_id: "dead".into(), group: "web".into(), pid: 150, reason: GcReason::Dead }]
    );
    assert_eq!(ids(&s), ["other-dead", "live"], "a dead member not named stays for gc");
    assert_eq!(keys(&s), ["db", "web"]);
}

#[test]
fn empty_cache_has_nothing_to_remove() {
    let (_d, fp, s) = setup();
    let r = s.transaction(|tx| gc(tx, &fp.procfs())).unwrap();
    assert_eq!(r, GcReport::default());
    assert_eq!(r.render(), "nothing to remove\n");
}

#[test]
fn unreadable_proc_entries_are_kept_not_guessed() {
    let (d, fp, s) = setup();
    fp.spawn(500, 50, 0, "/a").unwrap();
    s.transaction(|tx| tx.upsert_member(&member("odd", "g", 500, 50))).unwrap();
    // A stat file that cannot be parsed is an I/O error, not a dead process.
    std::fs::write(d.path().join("proc/500/stat"), "500 (x) S 1").unwrap();
    let r = s.transaction(|tx| gc(tx, &fp.procfs())).unwrap();
    assert!(r.removed.is_empty() && r.groups_dropped.is_empty());
    assert_eq!(r.unreadable.len(), 1);
    assert_eq!((r.unreadable[0].container_id.as_str(), r.unreadable[0].pid), ("odd", 500));
    assert!(r.render().starts_with("nothing to remove\nkept odd (pid 500): failed to read /proc: "), "{}", r.render());
    assert_eq!(ids(&s), ["odd"]);
}

#[test]
fn rolled_back_gc_changes_nothing() {
    let (_d, fp, s) = setup();
    s.transaction(|tx| tx.upsert_member(&member("dead", "web", 150, 15))).unwrap();
    let rolled_back: Result<(), StoreError> = s.transaction(|s| {
        let r = gc(s, &fp.procfs()).unwrap();
        assert_eq!(r.removed.len(), 1);
        Err(StoreError::Quarantine { path: "x".into(), source: std::io::ErrorKind::Other.into() })
    });
    assert!(rolled_back.is_err());
    assert_eq!(ids(&s), ["dead"]);
    assert_eq!(keys(&s), ["web"]);
}
