//! The unit tests of `src/cookies/stopped.rs`.

use super::*;
use crate::test_world::{Ground, World};

#[test]
fn a_forget_removes_a_dead_member_and_keeps_a_live_one_that_took_the_id() {
    let (Ground { dir, fp, proc, .. }, store) = World::new().into_parts();
    fp.spawn(10, 100, 0, "/a").unwrap();
    fp.spawn(11, 200, 0, "/b").unwrap();
    store
        .transaction(|s| {
            s.upsert_member(&Member::new("dead", "g", 9, 5))?;
            s.upsert_member(&Member::new("live", "g", 10, 100))?;
            s.upsert_member(&Member::new("reused", "h", 11, 1))
        })
        .unwrap();
    for id in ["dead", "live", "reused", "never-cached"] {
        record(dir.path(), id).unwrap();
    }
    record(dir.path(), "dead").unwrap();
    let removed = apply_now(dir.path(), &store, &proc).unwrap();
    let mut ids: Vec<_> = removed.iter().map(|m| m.container_id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["dead", "reused"]);
    assert!(store.member("live").unwrap().is_some());
    assert_eq!(store.groups().unwrap().iter().map(|g| g.key.as_str()).collect::<Vec<_>>(), ["g"]);
    assert_eq!(std::fs::read_dir(dir.path().join(DIR)).unwrap().count(), 0, "every applied file is gone");
    assert!(apply_now(dir.path(), &store, &proc).unwrap().is_empty());
}

#[test]
fn the_hook_applies_the_recorded_stops_only_once_they_pile_up() {
    let (Ground { dir, fp, .. }, store) = World::new().into_parts();
    for i in 0..HOOK_BACKLOG {
        let id = format!("c{i}");
        store.transaction(|s| s.upsert_member(&Member::new(id.as_str(), "g", 9, 5)).map(drop)).unwrap();
        if i + 1 < HOOK_BACKLOG {
            record(dir.path(), &id).unwrap();
        }
    }
    let backlog = |store: &Store| store.transaction(|s| apply_backlog(dir.path(), s, &fp.procfs(), HOOK_BACKLOG));
    assert!(backlog(&store).unwrap().finish().is_empty(), "one short of the backlog: left for later");
    assert_eq!(store.all_members().unwrap().len(), HOOK_BACKLOG);
    record(dir.path(), &format!("c{}", HOOK_BACKLOG - 1)).unwrap();
    assert_eq!(backlog(&store).unwrap().finish().len(), HOOK_BACKLOG);
    assert!(store.all_members().unwrap().is_empty());
}

#[test]
fn a_rolled_back_transaction_keeps_the_files() {
    let (Ground { dir, fp, .. }, store) = World::new().into_parts();
    store.transaction(|s| s.upsert_member(&Member::new("dead", "g", 9, 5)).map(drop)).unwrap();
    record(dir.path(), "dead").unwrap();
    let r: Result<(), StoreError> = store.transaction(|s| {
        let _ = apply(dir.path(), s, &fp.procfs())?;
        Err(StoreError::Quarantine { path: "x".into(), source: std::io::Error::other("abort") })
    });
    assert!(r.is_err());
    assert!(store.member("dead").unwrap().is_some(), "rolled back");
    assert!(dir.path().join(DIR).join("dead").exists(), "applied again by the next opener");
}
