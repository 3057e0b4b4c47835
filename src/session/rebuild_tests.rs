//! Rebuild over fixture-shaped runtime state directories, a fake `/proc` and the fake kernel.

use serde_json::json;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::*;
use crate::config::Config;
use crate::host::runtimes::RuntimeRoot;
use crate::store::Member;
use crate::test_world::World;

fn fixture(path: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(path);
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// Annotations of the fixture container with `changes` applied (`None` removes a key).
fn annotations(changes: &[(&str, Option<&str>)]) -> BTreeMap<String, String> {
    let mut ann: BTreeMap<String, String> =
        serde_json::from_value(fixture("states/crun-config.json")["annotations"].clone()).unwrap();
    for (k, v) in changes {
        match v {
            Some(v) => ann.insert(k.to_string(), v.to_string()),
            None => ann.remove(*k),
        };
    }
    ann
}

impl World {
    /// `<root>/<id>/state.json` shaped like the runc fixture.
    fn runc(&self, root: &str, id: &str, pid: i64, start: u64, ann: &BTreeMap<String, String>, bundle: &str) {
        let mut st = fixture("runtime-state/runc-state.json");
        st["id"] = json!(id);
        st["init_process_pid"] = json!(pid);
        st["init_process_start"] = json!(start);
        let mut labels: Vec<String> = ann.iter().map(|(k, v)| format!("{k}={v}")).collect();
        labels.push(format!("bundle={}", self.path(bundle).display()));
        st["config"]["labels"] = json!(labels);
        let d = self.path(root).join(id);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("state.json"), serde_json::to_vec(&st).unwrap()).unwrap();
    }

    /// `<root>/<id>/status` + `config.json` shaped like the crun fixtures.
    fn crun(&self, root: &str, id: &str, pid: i64, start: u64, ann: &BTreeMap<String, String>) {
        let mut st = fixture("runtime-state/crun-status.json");
        st["pid"] = json!(pid);
        st["process-start-time"] = json!(start);
        st["bundle"] = json!(self.path("no-such-bundle"));
        let mut cfg = fixture("states/crun-config.json");
        cfg["annotations"] = json!(ann);
        let d = self.path(root).join(id);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("status"), serde_json::to_vec_pretty(&st).unwrap()).unwrap();
        std::fs::write(d.join("config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
    }

    fn rebuild(&self, roots: &[RuntimeRoot]) -> RebuildReport {
        self.store
            .transaction(|tx| rebuild(tx, &self.kernel, &self.proc, roots, &Config::default(), Fill::All))
            .unwrap()
    }
}

fn skipped<'a>(r: &'a RebuildReport, id: &str) -> &'a str {
    &r.skipped.iter().find(|s| s.id == id).unwrap_or_else(|| panic!("{id} not skipped: {r:#?}")).reason
}

#[test]
fn running_containers_are_recorded_with_their_cookies_and_groups() {
    let w = World::new();
    let web = annotations(&[]);
    // Two runc containers of default/web sharing a cookie, one crun one holding another cookie.
    w.fp.spawn(200, 2000, 1, "/kubepods/burstable/pod1/r2").unwrap();
    w.fp.spawn(100, 1000, 0, "/kubepods/burstable/pod1/r1").unwrap();
    w.fp.spawn(600, 3000, 0, "/kubepods/burstable/pod1/c1").unwrap();
    w.kernel.force(100, 0x5eed_0000_0040);
    w.kernel.force(200, 0x5eed_0000_0040);
    w.kernel.force(600, 0x5eed_0000_0080);
    w.runc("runc", "r2", 200, 2000, &web, "b");
    w.runc("runc", "r1", 100, 1000, &web, "b");
    w.crun("crun", "c1", 600, 3000, &web);
    // Skipped: dead, SYSTEM, policy none at cookie 0.
    w.runc("runc", "rdead", 300, 1000, &web, "b");
    w.fp.spawn(400, 4000, 0, "/x").unwrap();
    w.runc("runc", "rsys", 400, 4000, &annotations(&[("koordinator.sh/qosClass", Some("SYSTEM"))]), "b");
    w.fp.spawn(500, 5000, 0, "/y").unwrap();
    w.crun("crun", "cnone", 500, 5000, &annotations(&[("oci-coresched-hook/policy", Some("none"))]));

    let before = w.kernel.calls().len();
    let r = w.rebuild(&[RuntimeRoot::runc(w.path("runc")), RuntimeRoot::crun(w.path("crun"))]);
    let calls = w.kernel.calls();
    assert!(calls[before..].iter().all(|c| c.starts_with("get ")), "rebuild only reads: {:?}", &calls[before..]);

    let ids: Vec<&str> = r.members.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["r1", "r2", "c1"], "oldest first");
    assert!(r.members.iter().all(|m| m.group == "default/web"));
    assert_eq!(r.members[0].cookie, "0x5eed00000040");
    assert!(skipped(&r, "rdead").contains("dead"));
    assert!(skipped(&r, "rsys").contains("SYSTEM"));
    assert!(skipped(&r, "cnone").contains("cookie 0"));
    assert_eq!(r.conflicts.len(), 1);
    assert_eq!(r.conflicts[0].group, "default/web");
    assert_eq!(r.conflicts[0].cookies, ["0x5eed00000040", "0x5eed00000080"]);

    let cached = w.store.members("default/web").unwrap();
    let cached_ids: Vec<&str> = cached.iter().map(|m| m.container_id.as_str()).collect();
    assert_eq!(cached_ids, ["r1", "r2", "c1"]);
    assert_eq!(cached[1].pid, 200);
    assert_eq!(cached[1].start_time, 2000);
    assert_eq!(cached[1].cookie, 0x5eed_0000_0040);
    assert_eq!(cached[1].labels.cgroup.as_deref(), Some("/kubepods/burstable/pod1/r2"));
    assert_eq!(cached[1].labels.namespace.as_deref(), Some("default"));
    assert_eq!(cached[1].labels.pod_name.as_deref(), Some("web-0"));
    assert_eq!(cached[1].labels.container_name.as_deref(), Some("web"));
    assert!(w.store.member("cnone").unwrap().is_none());

    let text = r.render();
    assert!(text.contains("recorded 3 containers in 1 groups"), "{text}");
    assert!(text.contains("WARNING: group default/web has 2 cookies"), "{text}");

    // Running it again changes nothing (same rows, same join order).
    let again = w.rebuild(&[RuntimeRoot::runc(w.path("runc")), RuntimeRoot::crun(w.path("crun"))]);
    assert_eq!(again.members.len(), 3);
    let seqs: Vec<i64> = w.store.members("default/web").unwrap().iter().map(|m| m.seq).collect();
    assert_eq!(seqs, cached.iter().map(|m| m.seq).collect::<Vec<_>>());
}

#[test]
fn unreadable_reused_duplicate_and_missing_are_reported() {
    let w = World::new();
    let web = annotations(&[]);
    std::fs::create_dir_all(w.path("runc/garbage")).unwrap();
    std::fs::write(w.path("runc/garbage/state.json"), "not json").unwrap();
    std::fs::create_dir_all(w.path("runc/empty")).unwrap();
    std::fs::write(w.path("runc/stray-file"), "").unwrap();
    w.fp.spawn(100, 1111, 0, "/a").unwrap();
    w.runc("runc", "reused", 100, 1000, &web, "b");
    w.fp.spawn(200, 2000, 0, "/b").unwrap();
    w.kernel.force(200, 0x5eed_0000_0050);
    w.runc("runc", "twice", 200, 2000, &web, "b");
    w.runc("runc2", "twice", 200, 2000, &web, "b");
    let r = w.rebuild(&[
        RuntimeRoot::runc(w.path("runc")),
        RuntimeRoot::runc(w.path("runc2")),
        RuntimeRoot::crun(w.path("absent")),
    ]);
    assert!(skipped(&r, "garbage").contains("not valid JSON"));
    assert!(skipped(&r, "empty").starts_with("unreadable"));
    assert!(skipped(&r, "reused").contains("another process"));
    assert!(skipped(&r, "twice").contains("already found"));
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.roots[0].containers, 4, "directories only");
    assert!(!r.roots[2].present);
    assert!(r.render().contains("crun root"));
    assert!(r.conflicts.is_empty());
}

#[test]
fn annotations_and_cgroup_parent_come_from_the_bundle_when_the_labels_lack_them() {
    let w = World::new();
    // The state's labels carry no group; the bundle's config does (and makes it BestEffort).
    let mut cfg = fixture("states/crun-config.json");
    cfg["annotations"] = json!({"oci-coresched-hook/group": "batch", "io.kubernetes.pod.namespace": "tenant-a"});
    cfg["linux"]["cgroupsPath"] = json!("/kubepods/besteffort/pod9/x");
    std::fs::create_dir_all(w.path("bundle")).unwrap();
    std::fs::write(w.path("bundle/config.json"), serde_json::to_vec(&cfg).unwrap()).unwrap();
    w.fp.spawn(100, 1000, 0, "/a").unwrap();
    w.kernel.force(100, 0x77);
    w.runc("runc", "x1", 100, 1000, &BTreeMap::new(), "bundle");
    let cfg = Config::parse("[qos.BE]\ncore_expeller = true\n", Path::new("t.toml")).unwrap();
    let r = w
        .store
        .transaction(|tx| rebuild(tx, &w.kernel, &w.proc, &[RuntimeRoot::runc(w.path("runc"))], &cfg, Fill::All))
        .unwrap();
    assert_eq!(r.members.len(), 1, "{r:#?}");
    assert_eq!(r.members[0].group, "tenant-a/batch-expeller");
    assert_eq!(r.members[0].cookie, "0x77");
}

#[test]
fn default_roots_are_the_documented_ones() {
    let roots = RuntimeRoot::defaults();
    assert_eq!(roots[0], RuntimeRoot::runc("/run/runc"));
    assert!(roots.contains(&RuntimeRoot::runc("/run/containerd/runc/k8s.io")));
    assert!(roots.contains(&RuntimeRoot::runc("/run/containerd/runc/default")));
    assert_eq!(roots.last(), Some(&RuntimeRoot::crun("/run/crun")));
}

#[test]
fn a_container_without_a_cookie_is_reported_not_recorded_in_a_guessed_group() {
    // On containerd's NRI route a container the plugin did not adjust carries no pod annotations
    // in its state: its group here would be the pod's default whatever the pod says.
    let w = World::new();
    let web = annotations(&[]);
    w.fp.spawn(100, 1000, 0, "/kubepods/burstable/pod1/r1").unwrap();
    w.fp.spawn(200, 2000, 0, "/kubepods/burstable/pod1/r2").unwrap();
    w.kernel.force(100, 0x5eed_0000_0040);
    w.runc("runc", "r1", 100, 1000, &web, "b");
    w.runc("runc", "r2", 200, 2000, &web, "b");
    let r = w.rebuild(&[RuntimeRoot::runc(w.path("runc"))]);
    assert_eq!(r.members.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["r1"]);
    let why = skipped(&r, "r2");
    assert!(why.contains("holds no cookie: not recorded") && why.contains("default/web"), "{why}");
    assert!(w.store.member("r2").unwrap().is_none());
    assert!(r.render().contains("recorded 1 containers in 1 groups"), "{}", r.render());
}

/// Filling in what a cache lacks: rows it has stay as they are (even where the runtimes' state
/// would decide another group), and a container older than every live member of its group goes
/// before them.
#[test]
fn fill_missing_keeps_every_row_and_puts_older_containers_first() {
    let w = World::new();
    let web = annotations(&[]);
    w.fp.spawn(100, 1000, 0, "/kubepods/burstable/pod1/r1").unwrap();
    w.fp.spawn(150, 1500, 0, "/kubepods/burstable/pod1/r0").unwrap();
    w.fp.spawn(300, 3000, 0, "/kubepods/burstable/pod1/n1").unwrap();
    w.kernel.force(100, 0x01d);
    w.kernel.force(150, 0x01d);
    w.kernel.force(300, 0x2e4);
    w.runc("runc", "r1", 100, 1000, &web, "b");
    w.runc("runc", "r0", 150, 1500, &web, "b");
    w.runc("runc", "n1", 300, 3000, &web, "b");
    // n1 is cached, in a group the runtimes' state would not give it.
    w.store
        .transaction(|tx| tx.upsert_member(&Member { cookie: 0x2e4, ..Member::new("n1", "default/web", 300, 3000) }))
        .unwrap();
    w.store
        .transaction(|tx| tx.upsert_member(&Member { cookie: 0x2e4, ..Member::new("x", "elsewhere", 300, 3000) }))
        .unwrap();

    let r = w
        .store
        .transaction(|tx| {
            rebuild(tx, &w.kernel, &w.proc, &[RuntimeRoot::runc(w.path("runc"))], &Config::default(), Fill::Missing)
        })
        .unwrap();
    let ids: Vec<&str> = r.members.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["r1", "r0"], "only the missing ones, oldest first");
    let cached: Vec<String> = w.store.members("default/web").unwrap().into_iter().map(|m| m.container_id).collect();
    assert_eq!(cached, ["r1", "r0", "n1"], "the older containers go first");
    assert_eq!(w.store.member("x").unwrap().unwrap().group, "elsewhere", "a row it has is left alone");
    assert_eq!(r.conflicts.len(), 1, "{r:#?}");
}

/// The field's DaemonSet part: d1 and d2 were created while the NRI plugin was down, and its
/// catch-up gave them the cookie of the group the pod's annotations name (from the CRI), recorded
/// in the cache. Their runtime's state lacks those annotations (the plugin adjusted nothing), so
/// deciding from it alone would say the pod's default group and record them in a group other than
/// the one whose cookie they hold (the audit's `shared`). A rebuild keeps the group a row for the
/// very same init records; a row for another init (the id reused) is decided again.
#[test]
fn rebuild_keeps_the_group_a_containers_cookie_was_given_under() {
    let w = World::new();
    let bare = annotations(&[("oci-coresched-hook/group", None)]);
    // d3 holds a cookie of its own: the row alone is what is under test (its cookie would move
    // it, rebuild_moves_a_container_without_a_named_group_to_the_group_holding_its_cookie).
    for (id, pid, cookie) in
        [("d1", 100, 0x5eed_0000_0040), ("d2", 110, 0x5eed_0000_0040), ("d3", 120, 0x5eed_0000_0041)]
    {
        w.fp.spawn(pid, 1000 + pid as u64, 0, &format!("/kubepods/burstable/pod1/{id}")).unwrap();
        w.kernel.force(pid, cookie);
        w.runc("runc", id, pid as i64, 1000 + pid as u64, &bare, "b");
    }
    let caught_up = |id: &str, pid: Pid, start: u64| Member {
        cookie: 0x5eed_0000_0040,
        labels: Labels {
            cgroup: Some(format!("/kubepods/burstable/pod1/{id}")),
            namespace: Some("default".into()),
            pod_name: Some("web-0".into()),
            ..Labels::default()
        },
        ..Member::new(id, "default/web", pid, start)
    };
    w.store
        .transaction(|tx| {
            tx.upsert_member(&caught_up("d1", 100, 1100))?;
            tx.upsert_member(&caught_up("d2", 110, 1110))?;
            // d3's row is of another init that had its id.
            tx.upsert_member(&caught_up("d3", 999, 9999))
        })
        .unwrap();

    let r = w.rebuild(&[RuntimeRoot::runc(w.path("runc"))]);
    let group = |id: &str| r.members.iter().find(|m| m.id == id).unwrap().group.clone();
    assert_eq!(group("d1"), "default/web");
    assert_eq!(group("d2"), "default/web");
    assert_ne!(group("d3"), "default/web", "another init's row is no proof: decided from the state");
    assert!(group("d3").starts_with("default/pod:"), "{}", group("d3"));
    let d1 = w.store.member("d1").unwrap().unwrap();
    assert_eq!((d1.group.as_str(), d1.cookie), ("default/web", 0x5eed_0000_0040));
    assert_eq!(d1.labels.pod_name.as_deref(), Some("web-0"), "the row's labels stay");
    assert_eq!(d1.labels.cgroup.as_deref(), Some("/kubepods/burstable/pod1/d1"));
    assert!(r.conflicts.is_empty(), "{:?}", r.conflicts);
}

/// A container in `root` whose init `pid` holds `cookie` (its cgroup under pod1).
fn running(w: &World, id: &str, pid: Pid, cookie: Cookie, ann: &BTreeMap<String, String>) {
    w.fp.spawn(pid, 1000 + pid as u64, 0, &format!("/kubepods/burstable/pod1/{id}")).unwrap();
    w.kernel.force(pid, cookie);
    w.runc("runc", id, pid as i64, 1000 + pid as u64, ann, "b");
}

fn rebuild_with(w: &World, fill: Fill, config: &Config) -> RebuildReport {
    w.store
        .transaction(|tx| rebuild(tx, &w.kernel, &w.proc, &[RuntimeRoot::runc(w.path("runc"))], config, fill))
        .unwrap()
}

fn group_of(r: &RebuildReport, id: &str) -> String {
    r.members.iter().find(|m| m.id == id).unwrap_or_else(|| panic!("{id} not recorded: {r:#?}")).group.clone()
}

/// The same containers with the cache lost: no row is left to trust. d2 and d4 (one pod) were
/// caught up by the NRI plugin into the group its annotations name (web), whose cookie d1 (created
/// with the plugin adjusting it, so its state names web) holds too; their states name no group.
/// Their cookie puts both in web: a guess is no evidence against another guess. d3 (no group
/// named, a cookie of its own) stays in its pod's group. With the cache lost only in part
/// (Fill::Missing), a cached member of web is the evidence.
#[test]
fn rebuild_moves_a_container_without_a_named_group_to_the_group_holding_its_cookie() {
    let web = annotations(&[]);
    let bare = annotations(&[("oci-coresched-hook/group", None)]);
    for fill in [Fill::All, Fill::Missing] {
        let w = World::new();
        running(&w, "d1", 100, 0x40, &web);
        running(&w, "d2", 110, 0x40, &bare);
        running(&w, "d3", 120, 0x41, &bare);
        running(&w, "d4", 130, 0x40, &bare);
        let r = rebuild_with(&w, fill, &Config::default());
        assert_eq!(group_of(&r, "d1"), "default/web", "{fill:?}");
        assert_eq!(group_of(&r, "d2"), "default/web", "{fill:?}: its cookie is web's");
        assert_eq!(group_of(&r, "d4"), "default/web", "{fill:?}: its cookie is web's");
        assert!(group_of(&r, "d3").starts_with("default/pod:"), "{fill:?}: {}", group_of(&r, "d3"));
        let d2 = w.store.member("d2").unwrap().unwrap();
        assert_eq!((d2.group.as_str(), d2.cookie), ("default/web", 0x40), "{fill:?}");
    }
    // Only the cache says which group holds the cookie: a member of web whose container the
    // runtimes' roots do not show (another root), alive.
    let w = World::new();
    w.fp.spawn(90, 1090, 0, "/kubepods/burstable/pod0/w0").unwrap();
    w.kernel.force(90, 0x40);
    w.store
        .transaction(|tx| tx.upsert_member(&Member { cookie: 0x40, ..Member::new("w0", "default/web", 90, 1090) }))
        .unwrap();
    running(&w, "d2", 110, 0x40, &bare);
    let r = rebuild_with(&w, Fill::Missing, &Config::default());
    assert_eq!(group_of(&r, "d2"), "default/web", "the cached member is the evidence");
}

/// A container whose state names no group stays where its state puts it when its cookie tells
/// nothing for sure: two other groups hold it, or only its own group's recorded member does, or
/// the one group that does is one no annotation of its pod could name (another namespace's, or
/// another pod's default). A container whose state names its group is never moved.
#[test]
fn rebuild_leaves_a_guessed_group_when_the_cookie_is_no_proof() {
    let bare = annotations(&[("oci-coresched-hook/group", None)]);
    let named = |g: &str| annotations(&[("oci-coresched-hook/group", Some(g))]);
    let cached = |w: &World, id: &str, pid: Pid, group: &str, cookie: Cookie| {
        w.fp.spawn(pid, 1000 + pid as u64, 0, &format!("/kubepods/burstable/pod0/{id}")).unwrap();
        w.kernel.force(pid, cookie);
        let m = Member { cookie, ..Member::new(id, group, pid, 1000 + pid as u64) };
        w.store.transaction(|tx| tx.upsert_member(&m)).unwrap();
    };

    let w = World::new();
    running(&w, "g1", 100, 0x77, &bare);
    running(&w, "a1", 110, 0x77, &named("a"));
    running(&w, "b1", 120, 0x77, &named("b"));
    let r = rebuild_with(&w, Fill::All, &Config::default());
    assert!(group_of(&r, "g1").starts_with("default/pod:"), "two other groups hold its cookie: {}", group_of(&r, "g1"));

    let w = World::new();
    running(&w, "g1", 100, 0x88, &bare);
    let own = group_of(&rebuild_with(&w, Fill::All, &Config::default()), "g1");
    let w = World::new();
    cached(&w, "m0", 90, &own, 0x88);
    running(&w, "g1", 100, 0x88, &bare);
    assert_eq!(
        group_of(&rebuild_with(&w, Fill::Missing, &Config::default()), "g1"),
        own,
        "only its own group holds it"
    );

    for (owner, config) in [
        ("other-ns/web", Config::default()),
        ("default/pod:another-pod", Config::default()),
        ("web", Config::default()),
    ] {
        let w = World::new();
        cached(&w, "o1", 90, owner, 0x99);
        running(&w, "g1", 100, 0x99, &bare);
        let r = rebuild_with(&w, Fill::Missing, &config);
        assert!(group_of(&r, "g1").starts_with("default/pod:"), "no annotation of its pod names {owner}: {r:#?}");
    }
    // Unscoped names are a pod's to give where the config allows groups across namespaces.
    let open = Config { allow_cross_namespace_groups: true, ..Config::default() };
    let w = World::new();
    cached(&w, "o1", 90, "web", 0x99);
    running(&w, "g1", 100, 0x99, &bare);
    assert_eq!(group_of(&rebuild_with(&w, Fill::Missing, &open), "g1"), "web");

    let w = World::new();
    running(&w, "n1", 100, 0x55, &named("n"));
    running(&w, "w1", 110, 0x55, &annotations(&[]));
    let r = rebuild_with(&w, Fill::All, &Config::default());
    assert_eq!(group_of(&r, "n1"), "default/n", "a group its state names stays, whoever holds its cookie");
}

/// containerd's pods: the shim that spawned a recorded container holds the cookie the hook gave
/// it, and a lost cache lost its row too. Rebuild records it in the group whose cookie it holds
/// (none at cookie 0, its own group for a cookie none of its pod's groups holds), and leaves a row
/// it has for this very shim as it is.
#[test]
fn rebuild_records_a_pods_shim_in_the_group_whose_cookie_it_holds() {
    const SHIM: Pid = 500;
    const SANDBOX: &str = "5f1c0e7d9a8b6c4d2e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d";
    let shim_row = crate::cookies::shim::member_id(SANDBOX);
    let pod = |holds: Cookie, row: Option<&str>| {
        let w = World::new();
        w.fp.spawn(SHIM, 50, 0, "/system.slice/containerd.service").unwrap();
        w.fp.set_lineage(SHIM, "containerd-shim", 1).unwrap();
        w.kernel.force(SHIM, holds);
        for (id, pid) in [("c1", 100), ("c2", 110)] {
            w.fp.spawn(pid, 1000 + pid as u64, 0, &format!("/kubepods/burstable/pod1/{id}")).unwrap();
            w.fp.set_lineage(pid, "sleep", SHIM).unwrap();
            w.kernel.force(pid, 0x40);
            w.runc("runc", id, pid as i64, 1000 + pid as u64, &annotations(&[]), "b");
        }
        if let Some(group) = row {
            let m = Member { cookie: holds, ..Member::new(&shim_row, group, SHIM, 50) };
            w.store.transaction(|tx| tx.upsert_member(&m)).unwrap();
        }
        w
    };
    for (holds, want) in [(0x40, Some("default/web".to_string())), (0, None), (0x99, Some(shim_row.clone()))] {
        let w = pod(holds, None);
        let r = w.rebuild(&[RuntimeRoot::runc(w.path("runc"))]);
        assert_eq!(r.members.len(), 2, "shims are not reported as containers: {r:#?}");
        let row = w.store.member(&shim_row).unwrap();
        match &want {
            None => assert!(row.is_none(), "a shim at cookie 0 is left alone: {row:?}"),
            Some(group) => {
                let row = row.unwrap_or_else(|| panic!("holding {holds:#x}: no row"));
                assert_eq!((&row.group, row.cookie, row.init()), (group, holds, TaskId { pid: SHIM, start_time: 50 }));
            }
        }
    }
    // A row for this very shim stays as it is, whatever it holds now.
    let w = pod(0x40, Some("kept/elsewhere"));
    w.rebuild(&[RuntimeRoot::runc(w.path("runc"))]);
    assert_eq!(w.store.member(&shim_row).unwrap().unwrap().group, "kept/elsewhere");

    // Only the shim's row was lost (Fill::Missing records no container): the pod's containers'
    // rows say whose cookie it holds.
    let w = pod(0x40, None);
    for (id, pid) in [("c1", 100), ("c2", 110)] {
        let m = Member { cookie: 0x40, ..Member::new(id, "default/web", pid, 1000 + pid as u64) };
        w.store.transaction(|tx| tx.upsert_member(&m)).unwrap();
    }
    let r = w.store.transaction(|tx| {
        rebuild(tx, &w.kernel, &w.proc, &[RuntimeRoot::runc(w.path("runc"))], &Config::default(), Fill::Missing)
    });
    assert!(r.unwrap().members.is_empty());
    assert_eq!(w.store.member(&shim_row).unwrap().unwrap().group, "default/web");

    // A container of the pod runs without a cookie (policy none): a shim at 0 is the cleared one,
    // so that no later ensure of the pod's other container gives it the group's cookie.
    let w = pod(0, None);
    w.runc("runc", "c2", 110, 1110, &annotations(&[("oci-coresched-hook/policy", Some("none"))]), "b");
    w.kernel.force(110, 0);
    w.rebuild(&[RuntimeRoot::runc(w.path("runc"))]);
    let row = w.store.member(&shim_row).unwrap().expect("the cleared shim's row");
    assert_eq!((row.group, row.cookie), (crate::cookies::groups::cleared_shim_group(SANDBOX), 0));
}
