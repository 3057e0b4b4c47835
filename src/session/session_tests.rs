//! The cache session over the fake kernel: every way a cache can be found that may lack running
//! containers, and a newer build's cache, each followed by the hook's next ensure of a group
//! whose member runs: that container joins the running member's cookie, never a new one.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;
use crate::config::Config;
use crate::hook::{Done, run};
use crate::host::kernel::fake::FakeKernel;
use crate::host::oci_state::parse_state;
use crate::host::system::System;
use crate::store::Member;
use crate::test_world::Ground;

/// The cookie of the container that ran before the cache was lost.
const OLD: u64 = 0x01d_c00c;
/// The cookie a member recorded since holds.
const NEW: u64 = 0x2e4_c00c;

/// The test world without a cache of its own: the session opens `state/cache.db`.
type Env = Ground;

impl Env {
    /// Container `r1` of group `web` runs (pid 100, cookie [`OLD`]), and runc's state root says so.
    fn with_r1() -> Self {
        let e = Ground::new();
        e.fp.spawn(100, 1000, 0, "/r1").unwrap();
        e.kernel.force(100, OLD);
        e.runc("r1", 100, 1000);
        std::fs::create_dir_all(e.state_dir()).unwrap();
        std::fs::set_permissions(e.state_dir(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        e
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn db(&self) -> PathBuf {
        self.state_dir().join("cache.db")
    }

    /// runc's `<root>/<id>/state.json` for a container of group `web`.
    fn runc(&self, id: &str, pid: i64, start: u64) {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runtime-state/runc-state.json");
        let mut st: serde_json::Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
        st["id"] = json!(id);
        st["init_process_pid"] = json!(pid);
        st["init_process_start"] = json!(start);
        st["config"]["labels"] =
            json!(["oci-coresched-hook/group=web", format!("bundle={}", self.dir.path().join("no-bundle").display())]);
        let d = self.dir.path().join("runc").join(id);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("state.json"), serde_json::to_vec(&st).unwrap()).unwrap();
    }

    /// The system over this world, with its state dir and runc's state root.
    fn node(&self) -> System<&FakeKernel> {
        System { runtime_roots: vec![RuntimeRoot::runc(self.path("runc"))], ..self.sys(self.state_dir()) }
    }

    /// The createRuntime hook of container `id` (group `web`, init `pid`).
    fn ensure(&self, id: &str, pid: i64) -> Done {
        let json = format!(
            r#"{{"id":"{id}","status":"creating","pid":{pid},"annotations":{{"oci-coresched-hook/group":"web"}}}}"#
        );
        let config = Config::default();
        let input = crate::hook::input(&parse_state(json.as_bytes()).unwrap(), None).unwrap();
        let d = crate::decide::policy::decide(&input, &config).unwrap();
        // On a thread of its own: the hook relays on its calling thread, whose cookie changes.
        let sys = self.node();
        std::thread::scope(|s| s.spawn(|| run(&d, &config, &sys)).join().unwrap()).unwrap()
    }

    fn members(&self) -> Vec<(String, u64)> {
        let s = Store::open(&self.db()).unwrap();
        s.members("web").unwrap().into_iter().map(|m| (m.container_id, m.cookie)).collect()
    }

    fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.state_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }
}

#[test]
fn a_new_cache_is_filled_before_the_first_container_decides() {
    let e = Env::with_r1();
    e.fp.spawn(4242, 5000, 0, "/c2").unwrap();
    e.ensure("c2", 4242);
    assert_eq!(e.kernel.get(4242).unwrap(), OLD, "c2 joined the running member's cookie");
    assert_eq!(e.members(), [("r1".to_string(), OLD), ("c2".to_string(), OLD)]);
}

#[test]
fn a_damaged_cache_is_moved_aside_and_refilled_before_the_next_container_decides() {
    let e = Env::with_r1();
    std::fs::write(e.db(), b"not a database, not even close".repeat(200)).unwrap();
    e.fp.spawn(4242, 5000, 0, "/c2").unwrap();
    e.ensure("c2", 4242);
    assert_eq!(e.kernel.get(4242).unwrap(), OLD);
    assert_eq!(e.members(), [("r1".to_string(), OLD), ("c2".to_string(), OLD)]);
    assert!(e.files().iter().any(|f| f.starts_with("cache.db.corrupt-")), "{:?}", e.files());
}

/// A cache an older build wrote (0.1.0 keeps format 3 but has no `meta`) may have been started
/// fresh by that build while members ran: the containers it lacks are found in the runtimes'
/// state, recorded as older than the members recorded since, and the group converges to the
/// cookie of those older members.
#[test]
fn an_older_builds_cache_that_lost_members_is_refilled_and_its_group_converges() {
    let e = Env::with_r1();
    e.fp.spawn(300, 3000, 0, "/n1").unwrap();
    e.kernel.force(300, NEW);
    {
        let s = Store::open(&e.db()).unwrap();
        s.transaction(|tx| tx.upsert_member(&Member { cookie: NEW, ..Member::new("n1", "web", 300, 3000) })).unwrap();
    }
    // As 0.1.0 left it: format 3, none of this revision's additions.
    {
        let c = rusqlite::Connection::open(e.db()).unwrap();
        c.execute_batch("DROP TABLE meta; DROP TABLE member_idle;").unwrap();
    }
    e.runc("n1", 300, 3000);
    e.fp.spawn(4242, 5000, 0, "/c2").unwrap();
    e.ensure("c2", 4242);
    assert_eq!(e.kernel.get(4242).unwrap(), OLD, "c2 joined the oldest running member");
    assert_eq!(e.kernel.get(300).unwrap(), OLD, "the member recorded since converged");
    assert_eq!(e.members(), [("r1".to_string(), OLD), ("n1".to_string(), OLD), ("c2".to_string(), OLD)]);
    assert!(!e.files().iter().any(|f| f.starts_with("cache.db.")), "nothing moved aside: {:?}", e.files());
}

/// A newer build's cache is left exactly as it is; the hook still gives the container its
/// group's cookie, from the running members the runtimes' state shows, and writes no receipt.
#[test]
fn a_newer_builds_cache_is_left_in_place_and_the_hook_works_from_the_runtimes_state() {
    let e = Env::with_r1();
    {
        let s = Store::open(&e.db()).unwrap();
        s.transaction(|tx| tx.upsert_member(&Member { cookie: OLD, ..Member::new("r1", "web", 100, 1000) })).unwrap();
    }
    {
        let c = rusqlite::Connection::open(e.db()).unwrap();
        c.execute_batch("PRAGMA user_version = 9; CREATE TABLE added_by_format_9 (x);").unwrap();
    }
    let bytes = std::fs::read(e.db()).unwrap();
    let mut files = e.files();
    files.push("lock".into());
    e.fp.spawn(4242, 5000, 0, "/c2").unwrap();
    match e.ensure("c2", 4242) {
        Done::Ensured(out) => assert_eq!(out.via, crate::cookies::engine::Via::Shared("r1".into())),
        other => panic!("{other:?}"),
    }
    assert_eq!(e.kernel.get(4242).unwrap(), OLD);
    assert_eq!(std::fs::read(e.db()).unwrap(), bytes, "the newer cache was written");
    assert_eq!(e.files(), files, "a receipt, a fresh cache or an aside file appeared");
    // A session says why it works on a stand-in.
    let config = Config::default();
    let sys = e.node();
    let session = Session::open(
        StateDir::open(&e.state_dir()).unwrap(),
        Duration::from_secs(1),
        Create,
        &Refill::of(&sys, &config),
    )
    .unwrap();
    assert_eq!(session.stand_in(), Some(&Unusable::Newer(9)));
    assert_eq!(session.store().members("web").unwrap().len(), 1, "the stand-in holds the running member");
}

/// Readers create nothing: no state dir, no cache, nothing refilled.
#[test]
fn an_existing_session_creates_nothing() {
    let e = Env::with_r1();
    let config = Config::default();
    let sys = e.node();
    std::fs::remove_dir(e.state_dir()).unwrap();
    assert!(
        Session::open(e.state_dir().as_path(), Duration::from_secs(1), Existing, &Refill::of(&sys, &config))
            .unwrap()
            .is_none()
    );
    assert!(!e.state_dir().exists());
}

/// A refill that cannot read a running container's cookie (a unit without CAP_SYS_PTRACE, say)
/// leaves the refill owed: the next opener tries again, and the first complete one settles it.
#[test]
fn a_refill_that_misses_a_container_is_owed_to_the_next_opener() {
    let e = Env::with_r1();
    let config = Config::default();
    let sys = e.node();
    let open = || {
        Session::open(
            StateDir::open(&e.state_dir()).unwrap(),
            Duration::from_secs(1),
            Create,
            &Refill::of(&sys, &config),
        )
        .unwrap()
    };
    e.kernel.deny(100);
    let s = open();
    assert_eq!(*s.store().found(), Found::Created);
    assert!(s.store().members("web").unwrap().is_empty());
    drop(s);
    let s = open();
    assert_eq!(*s.store().found(), Found::Owed, "the first refill missed r1");
    drop(s);
    e.kernel.allow(100);
    let s = open();
    assert_eq!(*s.store().found(), Found::Owed);
    assert_eq!(s.store().members("web").unwrap().len(), 1, "this refill read r1");
    drop(s);
    assert_eq!(*open().store().found(), Found::Current, "and settled what was owed");
}

/// A file whose header and schema read but whose table page is damaged opens as current; the
/// first writer to read that page gets the damage, and the session moves the file aside, refills
/// a fresh one from the runtimes' state and runs the writer once more there.
#[test]
fn a_file_damaged_on_use_is_moved_aside_and_the_writer_runs_once_more_on_a_fresh_one() {
    let e = Env::with_r1();
    {
        let s = Store::open(&e.db()).unwrap();
        s.transaction(|tx| {
            tx.upsert_member(&Member { cookie: OLD, ..Member::new("r1", "web", 100, 1000) })?;
            tx.refilled()
        })
        .unwrap();
    }
    let mut bytes = std::fs::read(e.db()).unwrap();
    assert!(bytes.len() >= 3 * 4096, "{} bytes", bytes.len());
    // Page 2 is the root of `groups` (the first table created).
    bytes[4096..2 * 4096].fill(0xa5);
    std::fs::write(e.db(), &bytes).unwrap();
    let config = Config::default();
    let sys = e.node();
    let refill = Refill::of(&sys, &config);
    let mut session =
        Session::open(StateDir::open(&e.state_dir()).unwrap(), Duration::from_secs(1), Create, &refill).unwrap();
    assert_eq!(session.store().found(), &Found::Current, "the damage shows only on use");
    let runs = std::cell::Cell::new(0);
    let groups = session
        .write(&refill, 1, |tx| {
            runs.set(runs.get() + 1);
            tx.groups().map(|g| g.into_iter().map(|g| g.key).collect::<Vec<_>>())
        })
        .unwrap();
    assert_eq!(runs.get(), 2, "the writer ran on the damaged file, then on the fresh one");
    assert_eq!(groups, ["web"], "the fresh file was refilled with the running member first");
    assert!(e.files().iter().any(|f| f.starts_with("cache.db.corrupt-")), "{:?}", e.files());
    assert_eq!(session.store().members("web").unwrap()[0].container_id, "r1");
}
