//! Fake-kernel-only hook behaviour: support probing, failure reasons, and what is (not) written.

use super::*;
use crate::host::kernel::fake::{FakeKernel, FakeMode};
use crate::host::oci_state::parse_state;
use crate::host::state_dir::StateDir;
use crate::store::Store;
use crate::test_world::Ground;

/// The test world; the hook's state dir is `state/` in it.
type Env = Ground;

fn env() -> Env {
    Ground::new()
}

impl Env {
    /// The decision for the OCI state `json` and the system the hook runs against.
    fn setup(&self, json: &str, config: &Config) -> (Decision, System<&FakeKernel>) {
        let state = parse_state(json.as_bytes()).unwrap();
        let d = crate::decide::policy::decide(&input(&state, None).unwrap(), config).unwrap();
        (d, self.sys(self.path("state")))
    }

    fn run(&self, json: &str, config: &Config) -> Result<Done, HookError> {
        let (d, sys) = self.setup(json, config);
        run(&d, config, &sys)
    }
}

const CREATING: &str = r#"{"id":"c1","status":"creating","pid":4242,"annotations":{"oci-coresched-hook/group":"web"}}"#;

#[test]
fn unsupported_and_no_smt_fail_before_touching_the_cache() {
    for (mode, needle) in [(FakeMode::Unsupported, "CONFIG_SCHED_CORE"), (FakeMode::NoSmt, "SMT")] {
        let e = env();
        e.fp.spawn(4242, 1, 0, "/c1").unwrap();
        e.kernel.set_mode(mode);
        let err = e.run(CREATING, &Config::default()).unwrap_err();
        assert_eq!(err.reason().as_str(), "unsupported");
        assert!(err.to_string().contains(needle), "{err}");
        assert!(!e.dir.path().join("state").exists(), "no state dir must be created on an unsupported kernel");
    }
}

#[test]
fn denied_target_is_a_kernel_failure_and_is_counted() {
    let e = env();
    e.fp.spawn(4242, 1, 0, "/c1").unwrap();
    e.kernel.deny(4242);
    let err = e.run(CREATING, &Config::default()).unwrap_err();
    assert_eq!(err.reason().as_str(), "kernel");
    let text = crate::error::Chain(&err).to_string();
    assert!(text.contains("permission denied for process 4242"), "{text}");
    let store = Store::open(&e.dir.path().join("state/cache.db")).unwrap();
    assert_eq!(store.failures().unwrap(), vec![("kernel".to_string(), 1)]);
    let g = store.groups().unwrap();
    assert_eq!((g[0].key.as_str(), g[0].ok, g[0].failed), ("web", 0, 1));
    assert!(store.member("c1").unwrap().is_none(), "a failed ensure must not leave a member row");
}

#[test]
fn dead_target_is_reported() {
    let e = env();
    let err = e.run(CREATING, &Config::default()).unwrap_err();
    assert_eq!(err.reason().as_str(), "target_gone");
}

#[test]
fn invalid_annotation_fails_closed_without_touching_the_kernel() {
    let e = env();
    e.fp.spawn(4242, 1, 0, "/c1").unwrap();
    let cfg = Config { fail_closed: true, ..Config::default() };
    let bad = r#"{"id":"c1","status":"creating","pid":4242,"annotations":{"oci-coresched-hook/group":"a/b"}}"#;
    let err = e.run(bad, &cfg).unwrap_err();
    assert_eq!(err.reason().as_str(), "invalid_annotation");
    assert!(e.kernel.calls().is_empty(), "{:?}", e.kernel.calls());
    // Fail open: the container gets a cookie of its own.
    match e.run(bad, &Config::default()).unwrap() {
        Done::Ensured(o) => assert_ne!(o.cookie, 0),
        other => panic!("{other:?}"),
    }
}

#[test]
fn stage_inference() {
    assert_eq!(lifecycle(None, "creating").unwrap(), Lifecycle::Ensure);
    assert_eq!(lifecycle(None, "created").unwrap(), Lifecycle::Ensure);
    assert_eq!(lifecycle(None, "running").unwrap(), Lifecycle::Ensure);
    assert_eq!(lifecycle(None, "stopped").unwrap(), Lifecycle::Forget);
    assert_eq!(lifecycle(None, "starting").unwrap(), Lifecycle::Skip);
    assert_eq!(lifecycle(Some(Stage::Poststop), "running").unwrap(), Lifecycle::Forget);
    assert_eq!(lifecycle(Some(Stage::StartContainer), "created").unwrap(), Lifecycle::Skip);
    let e = lifecycle(None, "weird").unwrap_err().to_string();
    assert!(e.contains("\"weird\"") && e.contains("--stage"), "{e}");
}

#[test]
fn corrupt_cache_is_moved_aside_and_the_hook_succeeds() {
    let e = env();
    e.fp.spawn(4242, 1, 0, "/c1").unwrap();
    let sd = e.dir.path().join("state");
    std::fs::create_dir_all(&sd).unwrap();
    std::fs::set_permissions(&sd, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(sd.join("cache.db"), b"this is not a database, but it is 32+ bytes long....").unwrap();
    assert!(matches!(e.run(CREATING, &Config::default()).unwrap(), Done::Ensured(_)));
    let aside: Vec<_> = std::fs::read_dir(&sd)
        .unwrap()
        .filter_map(|d| d.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("cache.db.corrupt-"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(Store::open(&sd.join("cache.db")).unwrap().member("c1").unwrap().is_some());
}

/// c0 (pid 4240) then c1 (pid 4242, [`CREATING`]) created into group `web`.
fn two_members_of_web() -> Env {
    let e = env();
    for (pid, cg) in [(4240, "/c0"), (4242, "/c1")] {
        e.fp.spawn(pid, 1, 0, cg).unwrap();
    }
    let c0 = r#"{"id":"c0","status":"creating","pid":4240,"annotations":{"oci-coresched-hook/group":"web"}}"#;
    e.run(c0, &Config::default()).unwrap();
    e.run(CREATING, &Config::default()).unwrap();
    e
}

#[test]
fn poststart_after_create_runtime_reads_only_its_own_init() {
    let e = two_members_of_web();
    let before = e.kernel.calls().len();
    let running = CREATING.replace("creating", "running");
    let done = e.run(&running, &Config::default()).unwrap();
    assert!(matches!(&done, Done::Ensured(o) if o.via == crate::cookies::engine::Via::AlreadySet), "{done:?}");
    let calls = e.kernel.calls()[before..].to_vec();
    assert!(calls.iter().all(|c| !c.contains("4240") && !c.starts_with("share")), "{calls:?}");
    assert!(calls.contains(&"get 4242".to_string()), "{calls:?}");
    let store = Store::open(&e.dir.path().join("state/cache.db")).unwrap();
    let g = store.groups().unwrap();
    assert_eq!((g[0].ok, g[0].failed), (2, 0), "a run that its receipt proves done changes and counts nothing");
}

/// Without its receipt (a container the NRI catch-up or rebuild recorded), the repeat run takes
/// the full path: the group verified, nothing shared, counted like any ensure, the receipt
/// written again. The receipt is the one repeat shortcut.
#[test]
fn a_repeat_run_without_its_receipt_takes_the_full_path_and_is_counted() {
    let e = two_members_of_web();
    std::fs::remove_file(e.dir.path().join("state").join(crate::cookies::receipt::DIR).join("c1")).unwrap();
    let before = e.kernel.calls().len();
    let done = e.run(&CREATING.replace("creating", "running"), &Config::default()).unwrap();
    assert!(matches!(&done, Done::Ensured(o) if o.via == crate::cookies::engine::Via::AlreadySet), "{done:?}");
    let calls = e.kernel.calls()[before..].to_vec();
    assert!(calls.iter().all(|c| !c.starts_with("share") && !c.starts_with("create")), "{calls:?}");
    assert!(calls.contains(&"get 4240".to_string()), "the group is verified: {calls:?}");
    let g = Store::open(&e.dir.path().join("state/cache.db")).unwrap().groups().unwrap();
    assert_eq!((g[0].ok, g[0].failed), (3, 0));
    assert!(e.dir.path().join("state/done/c1").exists(), "the cache path writes the receipt again");
}

/// A receipt torn by a crash (or written by another version) is no receipt: the repeat run takes
/// the full path, keeps the group's cookie and writes the receipt anew, which then holds.
#[test]
fn a_torn_receipt_sends_the_repeat_down_the_full_path_which_writes_it_anew() {
    let e = two_members_of_web();
    let sd = e.path("state");
    let receipt = sd.join(crate::cookies::receipt::DIR).join("c1");
    std::fs::write(&receipt, "v1 4242 1 c0").unwrap();
    let cookie = e.kernel.get(4242).unwrap();
    assert_eq!(crate::cookies::receipt::holds(&e.kernel, &e.proc, &sd, "c1", "web", 4242), None);
    let done = e.run(&CREATING.replace("creating", "running"), &Config::default()).unwrap();
    assert!(matches!(&done, Done::Ensured(o) if o.via == crate::cookies::engine::Via::AlreadySet), "{done:?}");
    assert_eq!(e.kernel.get(4242).unwrap(), cookie);
    assert_eq!(
        crate::cookies::receipt::holds(&e.kernel, &e.proc, &sd, "c1", "web", 4242),
        Some(cookie),
        "written anew"
    );
}

/// A poststart whose receipt holds neither takes the lock nor opens the cache: it succeeds while
/// another process holds the lock, and leaves the cache file untouched.
#[test]
fn poststart_with_its_receipt_takes_no_lock_and_opens_no_cache() {
    let e = env();
    e.fp.spawn(4242, 1, 0, "/c1").unwrap();
    e.run(CREATING, &Config::default()).unwrap();
    let sd = e.dir.path().join("state");
    let db = sd.join("cache.db");
    let before = std::fs::metadata(&db).unwrap().modified().unwrap();
    let dir = StateDir::open(&sd).unwrap();
    let _held = dir.lock(std::time::Duration::from_secs(1)).unwrap();
    let config = Config::parse("lock_timeout_ms = 50\n", std::path::Path::new("t.toml")).unwrap();
    let done = e.run(&CREATING.replace("creating", "running"), &config).unwrap();
    assert!(matches!(&done, Done::Ensured(o) if o.via == crate::cookies::engine::Via::AlreadySet), "{done:?}");
    assert_eq!(std::fs::metadata(&db).unwrap().modified().unwrap(), before);
}

/// A receipt is checked against the kernel, the process and the cache file: each mismatch sends
/// the run down the full path, which repairs or re-proves.
#[test]
fn a_receipt_that_no_longer_holds_is_not_trusted() {
    let e = two_members_of_web();
    let sys = e.sys(e.path("state"));
    let sd = sys.state_dir.clone();
    let holds = |group: &str, pid| crate::cookies::receipt::holds(&e.kernel, &sys.proc, &sd, "c1", group, pid);
    let cookie = e.kernel.get(4240).unwrap();
    assert_eq!(holds("web", 4242), Some(cookie));
    assert_eq!(holds("db", 4242), None, "another group");
    assert_eq!(holds("web", 4240), None, "another pid");
    // The init's pid reused by another process.
    e.fp.spawn(4242, 2, 0, "/c1").unwrap();
    assert_eq!(holds("web", 4242), None, "a reused pid");
    e.fp.spawn(4242, 1, 0, "/c1").unwrap();
    assert_eq!(holds("web", 4242), Some(cookie));
    // The cache moved aside and replaced (another inode).
    let db = sd.join("cache.db");
    std::fs::copy(&db, sd.join("copy.db")).unwrap();
    std::fs::rename(sd.join("copy.db"), &db).unwrap();
    assert_eq!(holds("web", 4242), None, "another cache file");
}

#[test]
fn the_hook_relays_on_its_own_thread_and_long_running_commands_on_fresh_ones() {
    let e = env();
    for (pid, cg) in [(4240, "/c0"), (4242, "/c1"), (4244, "/c2")] {
        e.fp.spawn(pid, 1, 0, cg).unwrap();
    }
    let c0 = r#"{"id":"c0","status":"creating","pid":4240,"annotations":{"oci-coresched-hook/group":"web"}}"#;
    e.run(c0, &Config::default()).unwrap();
    let cookie = e.kernel.get(4240).unwrap();
    assert_eq!(e.kernel.get(0).unwrap(), 0, "creating a cookie pulls nothing into the hook");
    std::thread::scope(|s| {
        s.spawn(|| {
            let proc = e.fp.procfs();
            let relay = crate::cookies::engine::Relay::new(&e.kernel, &proc);
            let (src, target) = (relay.identity(4240).unwrap(), relay.identity(4244).unwrap());
            relay.adopt(src, cookie, &[target]).unwrap();
            assert_eq!(e.kernel.get(4244).unwrap(), cookie);
            assert_eq!(e.kernel.get(0).unwrap(), 0, "a long-running command's thread keeps cookie 0");
        });
    });
    e.run(CREATING, &Config::default()).unwrap();
    assert_eq!(e.kernel.get(4242).unwrap(), cookie);
    assert_eq!(e.kernel.get(0).unwrap(), cookie, "the hook's own thread relayed the share");
}

/// Under a systemd cgroup driver crun runs the init in a child cgroup `container` of the scope the
/// runtime asked systemd for: `cpu.idle` goes to the scope, the container's own cgroup (whose
/// weight the runtime sets), and the row records it for the follower.
#[test]
fn cpu_idle_goes_to_the_containers_scope_and_is_recorded() {
    let e = env();
    let scope = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-c1.scope";
    let init_cg = format!("{scope}/container");
    e.fp.spawn(4242, 42, 0, &init_cg).unwrap();
    let cg = e.dir.path().join("cg");
    for d in [scope.to_string(), init_cg.clone()] {
        std::fs::create_dir_all(cg.join(&d[1..])).unwrap();
        std::fs::write(cg.join(&d[1..]).join("cpu.idle"), "0").unwrap();
    }
    let bundle = e.dir.path().join("bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    let spec = r#"{"linux": {"cgroupsPath": "kubepods-besteffort-pod1.slice:cri-containerd:c1"}}"#;
    std::fs::write(bundle.join("config.json"), spec).unwrap();
    let state = format!(r#"{{"id":"c1","status":"created","pid":4242,"bundle":"{}"}}"#, bundle.display());
    let config = Config::parse("[qos.BE]\nsched_idle = true\n", std::path::Path::new("t.toml")).unwrap();
    assert!(matches!(e.run(&state, &config).unwrap(), Done::Ensured(_)));
    assert_eq!(std::fs::read_to_string(cg.join(&scope[1..]).join("cpu.idle")).unwrap(), "1");
    assert_eq!(std::fs::read_to_string(cg.join(&init_cg[1..]).join("cpu.idle")).unwrap(), "0", "not crun's child");
    let store = Store::open(&e.dir.path().join("state/cache.db")).unwrap();
    let m = store.member("c1").unwrap().unwrap();
    assert_eq!(m.labels.idle_cgroup.as_deref(), Some(scope));
    assert_eq!(m.labels.cgroup.as_deref(), Some(init_cg.as_str()));
}

/// A `sched_idle` container's repeat run whose receipt holds writes `cpu.idle` again (the runtime
/// may have reset it) without the lock or the cache; a write that fails then is counted.
#[test]
fn a_sched_idle_repeat_with_its_receipt_writes_cpu_idle_again_without_the_cache() {
    let e = env();
    let scope = "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/cri-containerd-c1.scope";
    e.fp.spawn(4242, 42, 0, scope).unwrap();
    let idle = e.dir.path().join("cg").join(&scope[1..]).join("cpu.idle");
    std::fs::create_dir_all(idle.parent().unwrap()).unwrap();
    std::fs::write(&idle, "0").unwrap();
    let bundle = e.dir.path().join("bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    let spec = r#"{"linux": {"cgroupsPath": "kubepods-besteffort-pod1.slice:cri-containerd:c1"}}"#;
    std::fs::write(bundle.join("config.json"), spec).unwrap();
    let state =
        |status: &str| format!(r#"{{"id":"c1","status":"{status}","pid":4242,"bundle":"{}"}}"#, bundle.display());
    let config =
        Config::parse("lock_timeout_ms = 50\n[qos.BE]\nsched_idle = true\n", std::path::Path::new("t.toml")).unwrap();
    assert!(matches!(e.run(&state("created"), &config).unwrap(), Done::Ensured(_)));
    assert!(e.dir.path().join("state/done/c1").exists(), "a sched_idle container has its receipt too");
    std::fs::write(&idle, "0").unwrap();
    let sd = e.dir.path().join("state");
    let db = sd.join("cache.db");
    let before = std::fs::metadata(&db).unwrap().modified().unwrap();
    {
        let _held = StateDir::open(&sd).unwrap().lock(std::time::Duration::from_secs(1)).unwrap();
        let done = e.run(&state("running"), &config).unwrap();
        assert!(matches!(&done, Done::Ensured(o) if o.via == crate::cookies::engine::Via::AlreadySet), "{done:?}");
    }
    assert_eq!(std::fs::read_to_string(&idle).unwrap(), "1", "cpu.idle written again");
    assert_eq!(std::fs::metadata(&db).unwrap().modified().unwrap(), before, "the cache was not opened");
    // The scope is gone: the write fails, the cookie stays, and the failure is counted.
    std::fs::remove_file(&idle).unwrap();
    std::fs::remove_dir(idle.parent().unwrap()).unwrap();
    let done = e.run(&state("running"), &config).unwrap();
    assert!(matches!(&done, Done::EnsuredThenFailed { error: HookError::Cgroup(_), .. }), "{done:?}");
    let failures = Store::open(&db).unwrap().failures().unwrap();
    assert_eq!(failures.iter().map(|f| f.1).sum::<u64>(), 1, "{failures:?}");
}

/// A containerd pod: the runtime (pid 600, `runc`) runs under the pod's shim (pid 500).
fn in_a_pod() -> Env {
    let e = env();
    e.fp.spawn(500, 50, 0, "/system.slice/containerd.service").unwrap();
    e.fp.set_lineage(500, "containerd-shim", 1).unwrap();
    e.fp.spawn(600, 60, 0, "/system.slice/containerd.service").unwrap();
    e.fp.set_lineage(600, "runc", 500).unwrap();
    e
}

impl Env {
    /// The hook as runc runs it under the pod's shim.
    fn run_under_shim(&self, json: &str, config: &Config) -> Result<Done, HookError> {
        let (d, sys) = self.setup(json, config);
        run_with(&d, config, &sys, RelayOn::CallingThread, shim::Proof::Runtime(600))
    }

    fn store(&self) -> Store {
        Store::open(&self.dir.path().join("state/cache.db")).unwrap()
    }
}

fn pod_state(id: &str, pid: i64, extra: &str) -> String {
    format!(
        r#"{{"id":"{id}","status":"creating","pid":{pid},"annotations":{{"io.kubernetes.cri.sandbox-id":"sb1",
        "io.kubernetes.cri.sandbox-namespace":"tenant-a","io.kubernetes.cri.container-type":"container"{extra}}}}}"#
    )
}

#[test]
fn an_app_container_gives_its_pods_shim_its_groups_cookie() {
    let e = in_a_pod();
    e.fp.spawn(4242, 1, 0, "/pods/c1").unwrap();
    let done = e.run_under_shim(&pod_state("c1", 4242, ""), &Config::default()).unwrap();
    let Done::Ensured(out) = done else { panic!("{done:?}") };
    assert_eq!(e.kernel.get(500).unwrap(), out.cookie, "the shim holds the pod group's cookie");
    let row = e.store().member("shim:sb1").unwrap().expect("the shim is a member");
    assert_eq!(row.group, "tenant-a/pod:sb1");
    // Without the proof (podman, plain runc) the same container leaves the shim alone.
    let e = in_a_pod();
    e.fp.spawn(4242, 1, 0, "/pods/c1").unwrap();
    e.run(&pod_state("c1", 4242, ""), &Config::default()).unwrap();
    assert_eq!(e.kernel.get(500).unwrap(), 0);
}

#[test]
fn the_sandbox_and_a_container_outside_a_pod_leave_the_shim_alone() {
    let cases = [
        (
            "sandbox",
            pod_state("sb1", 4242, "").replace(r#""container-type":"container""#, r#""container-type":"sandbox""#),
        ),
        ("sandbox by id", pod_state("sb1", 4242, "").replace(r#","io.kubernetes.cri.container-type":"container""#, "")),
        ("no pod", r#"{"id":"c1","status":"creating","pid":4242,"annotations":{}}"#.to_string()),
    ];
    for (what, json) in cases {
        let e = in_a_pod();
        e.fp.spawn(4242, 1, 0, "/pods/c1").unwrap();
        e.run_under_shim(&json, &Config::default()).unwrap();
        assert_eq!(e.kernel.get(500).unwrap(), 0, "{what}: the shim keeps cookie 0");
        assert!(e.store().member("shim:sb1").unwrap().is_none(), "{what}");
    }
}

#[test]
fn a_shim_that_cannot_be_wired_fails_after_the_containers_cookie_and_is_counted() {
    let e = in_a_pod();
    e.fp.spawn(4242, 1, 0, "/pods/c1").unwrap();
    e.kernel.deny(500);
    let done = e.run_under_shim(&pod_state("c1", 4242, ""), &Config::default()).unwrap();
    let Done::EnsuredThenFailed { outcome, error } = done else { panic!("{done:?}") };
    assert_eq!(error.reason().as_str(), "shim");
    let text = crate::error::Chain(&error).to_string();
    assert!(text.contains("failed to give the shim of container c1's pod its group's cookie"), "{text}");
    assert!(text.contains("permission denied for process 500"), "{text}");
    assert_eq!(e.kernel.get(4242).unwrap(), outcome.cookie, "the container keeps its cookie");
    let store = e.store();
    assert!(store.member("c1").unwrap().is_some(), "and its row");
    assert_eq!(store.failures().unwrap(), vec![("shim".to_string(), 1)]);
    assert!(!e.dir.path().join("state/done/c1").exists(), "no receipt: the next stage tries again");
}

#[test]
fn a_cleared_container_takes_its_pods_shim_back_to_cookie_0() {
    let e = in_a_pod();
    e.fp.spawn(4242, 1, 0, "/pods/c1").unwrap();
    e.fp.spawn(4343, 2, 0, "/pods/c2").unwrap();
    e.run_under_shim(&pod_state("c1", 4242, ""), &Config::default()).unwrap();
    assert_ne!(e.kernel.get(500).unwrap(), 0);
    let none = pod_state("c2", 4343, r#","oci-coresched-hook/policy":"none""#);
    let done = e.run_under_shim(&none, &Config::default()).unwrap();
    assert!(matches!(done, Done::Cleared(_)), "{done:?}");
    assert_eq!(e.kernel.get(500).unwrap(), 0, "c2's exec'd processes start at 0");
    assert_ne!(e.kernel.get(4242).unwrap(), 0, "c1 keeps its group's cookie");
    let row = e.store().member("shim:sb1").unwrap().unwrap();
    assert_eq!((row.group.as_str(), row.cookie), ("shim:sb1:cleared", 0));
    // A failure to clear the shim is counted, and the container is still cleared.
    let e = in_a_pod();
    e.fp.spawn(4242, 1, 0, "/pods/c1").unwrap();
    e.fp.spawn(4343, 2, 0, "/pods/c2").unwrap();
    e.run_under_shim(&pod_state("c1", 4242, ""), &Config::default()).unwrap();
    e.kernel.deny(500);
    e.kernel.force(4343, 7);
    assert!(matches!(e.run_under_shim(&none, &Config::default()).unwrap(), Done::Cleared(_)));
    assert_eq!(e.kernel.get(4343).unwrap(), 0);
    assert_eq!(e.store().failures().unwrap(), vec![("shim".to_string(), 1)]);
}
