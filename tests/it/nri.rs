//! The NRI plugin as a process: the real binary, `oci-coresched-hook nri --socket <tmp>/nri.sock`,
//! against a fake runtime ([`support`]: a unix listener speaking NRI's mux + ttrpc framing through
//! the crate's own `nri::wire` and `nri::messages`). Each test has its own temp dir; the plugin's
//! stderr goes to a file there and is printed when a test fails. [`hostile`] has the runtimes that
//! attack the plugin.
//!
//! Covered: registration, Configure's subscription, CreateContainer's exact adjustment, a garbage
//! request, an unknown method and an unknown connection survived, the runtime closing the socket
//! and a broken frame (the plugin reconnects), the missing socket (one line naming the settings
//! that enable NRI; `--once` exits 1), SIGTERM (exit 0), and Synchronize catching up running
//! containers over the shared fake kernel (feature `fake-kernel`).

use crate::fakeworld;
mod endpoint;
mod hostile;
pub(crate) mod support;

use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use oci_coresched_hook::agent::nri::messages::{CreateContainerRequest, CreateContainerResponse, Empty, Hook, Hooks};
#[cfg(feature = "fake-kernel")]
use oci_coresched_hook::agent::nri::messages::{PodSandbox, state};
use oci_coresched_hook::agent::nri::proto::Message;
use oci_coresched_hook::agent::nri::ttrpc::code;
use oci_coresched_hook::agent::nri::wire;

use crate::common::wait::wait_until;
use support::{HOOK_PATH, Plugin, WAIT, accept, container, map, plugin_cmd, pod, setup};

#[test]
fn registers_configures_and_adjusts_exactly() {
    let s = setup("adjust");
    let listener = UnixListener::bind(&s.socket).unwrap();
    let mut plugin = Plugin::spawn(plugin_cmd(&s, &[]), s.dir.path());
    let mut rt = accept(&listener);
    let reg = rt.expect_register();
    assert_eq!((reg.plugin_name.as_str(), reg.plugin_idx.as_str()), ("oci-coresched-hook", "10"));
    rt.configure();
    rt.synchronize(vec![], vec![]);

    let req = CreateContainerRequest {
        pod: Some(pod()),
        container: Some(container("c1", 0, &[("oci-coresched-hook/group", "solo"), ("other.example/ctr", "y")])),
    };
    let r = rt.call("CreateContainer", req.to_bytes());
    assert_eq!(r.code(), code::OK, "{r:?}");
    let resp = CreateContainerResponse::decode(&r.payload).unwrap();
    assert_eq!(resp.to_bytes(), r.payload, "the response has no field beyond annotations and hooks");
    let adjust = resp.adjust.expect("an adjustment");
    assert_eq!(
        adjust.annotations,
        map(&[
            ("io.kubernetes.container.name", "app"),
            ("io.kubernetes.pod.name", "web-0"),
            ("io.kubernetes.pod.namespace", "tenant-a"),
            ("io.kubernetes.pod.uid", "uid-1"),
            ("io.kubernetes.cri.container-name", "app"),
            ("io.kubernetes.cri.sandbox-id", "sb1"),
            ("io.kubernetes.cri.sandbox-name", "web-0"),
            ("io.kubernetes.cri.sandbox-namespace", "tenant-a"),
            ("io.kubernetes.cri.sandbox-uid", "uid-1"),
            ("koordinator.sh/qosClass", "LS"),
            ("oci-coresched-hook/group", "solo"),
            ("oci-coresched-hook/policy", "default"),
        ])
    );
    let hook = |stage: &str| Hook {
        path: HOOK_PATH.into(),
        args: vec!["oci-coresched-hook".into(), "hook".into(), "--stage".into(), stage.into()],
        env: vec!["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()],
        timeout: Some(10),
    };
    assert_eq!(
        adjust.hooks,
        Some(Hooks {
            create_runtime: vec![hook("createRuntime")],
            poststart: vec![hook("poststart")],
            poststop: vec![hook("poststop")],
            ..Hooks::default()
        })
    );

    // The sandbox container, should a runtime send it: nothing.
    let sandbox = CreateContainerRequest {
        pod: Some(pod()),
        container: Some(container("sb1", 0, &[("io.kubernetes.cri.container-type", "sandbox")])),
    };
    let r = rt.call("CreateContainer", sandbox.to_bytes());
    assert_eq!(CreateContainerResponse::decode(&r.payload).unwrap().adjust, None);

    // Garbage, an unknown method and a frame for nobody: answered or dropped, and survived.
    let r = rt.call_raw(&[0x0a, 0x7f, 0x01]);
    assert_eq!(r.code(), code::INVALID_ARGUMENT, "{r:?}");
    let r = rt.call("CreateContainer", vec![0x12, 0x09, 0x0a]);
    assert_eq!((r.code(), r.payload.len()), (code::OK, 0), "an undecodable container fails open: no adjustment");
    let r = rt.call("Frobnicate", vec![]);
    assert_eq!(r.code(), code::UNIMPLEMENTED);
    rt.write_raw(&wire::mux_frames(7, b"nobody listens here"));
    let r = rt.call("CreateContainer", req.to_bytes());
    assert_eq!(CreateContainerResponse::decode(&r.payload).unwrap().adjust, Some(adjust));

    plugin.wait_for_log("ignoring a 19-byte NRI frame for connection 7");
    assert_eq!(plugin.terminate(), Some(0), "SIGTERM is a clean exit");
    let log = plugin.log();
    for line in [
        "connected to ",
        "registered as NRI plugin 10-oci-coresched-hook",
        "configured by fake 0.6.1; subscribing to CreateContainer and StartContainer",
        "container c1 (pod tenant-a/web-0): injecting the hook",
        "container sb1 is pod sb1's sandbox: left as it is",
        "answering an undecodable ttrpc request with an error",
        "leaving a container unadjusted",
        "the runtime called unknown method \"Frobnicate\"",
        "stopping on a signal",
    ] {
        assert!(log.contains(line), "no {line:?} in the log:\n{log}");
    }
}

#[test]
fn reconnects_when_the_runtime_goes_away_or_sends_a_broken_frame() {
    let s = setup("reconnect");
    let listener = UnixListener::bind(&s.socket).unwrap();
    let mut plugin = Plugin::spawn(plugin_cmd(&s, &["--plugin-name", "och", "--plugin-index", "42"]), s.dir.path());
    let mut rt = accept(&listener);
    assert_eq!(rt.expect_register().plugin_idx, "42");
    rt.configure();
    drop(rt); // the runtime restarts

    let mut rt = accept(&listener);
    assert_eq!(rt.expect_register().plugin_name, "och");
    rt.configure();
    // A mux header announcing more than NRI allows: the stream cannot be trusted past it.
    rt.write_raw(&[0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff]);
    let mut rt = accept(&listener);
    rt.expect_register();
    rt.configure();
    let r = rt.call("Shutdown", Empty.to_bytes());
    assert_eq!(r.code(), code::OK);
    let mut rt = accept(&listener);
    rt.expect_register();
    wait_until("a fourth registration", WAIT, || plugin.log().matches("registered as NRI plugin 42-och").count() >= 4);

    assert_eq!(plugin.terminate(), Some(0));
    let log = plugin.log();
    assert!(
        log.contains(
            "runtime restarting: NRI connection ended: failed to talk to the runtime over NRI: the NRI connection was closed"
        ),
        "{log}"
    );
    assert!(log.contains("over the limit of 16777216"), "{log}");
    assert!(log.contains("runtime restarting: NRI connection ended: the runtime is shutting down"), "{log}");
    // A broken frame is not a restart.
    assert!(log.contains(": warn: NRI connection ended: failed to talk to the runtime over NRI"), "{log}");
}

/// A runtime that restarts (or crashes and starts again) binds a new socket and creates pods at
/// once; the plugin must be back within a poll of that socket, not after its backoff step.
#[test]
fn a_runtime_that_comes_back_is_rejoined_at_its_new_socket_not_after_the_backoff() {
    let _timed = crate::common::timed();
    let s = setup("comeback");
    // The socket is there before the plugin starts, so its first connect finds it: the two
    // "there anew" lines counted at the end are the restart's and the crash's, never a race
    // between the plugin's first attempt and this bind.
    let listener = UnixListener::bind(&s.socket).unwrap();
    let mut cmd = plugin_cmd(&s, &[]);
    // Backoff steps of 2, 4, 8 s: a plugin that sleeps them out misses the deadline below.
    cmd.env("OCH_NRI_BACKOFF_MS", "2000");
    let mut plugin = Plugin::spawn(cmd, s.dir.path());
    let limit = Duration::from_millis(1500);
    let rejoin = |listener: &UnixListener, what: &str| {
        let since = Instant::now();
        let mut rt = accept(listener);
        rt.expect_register();
        let took = since.elapsed();
        assert!(took < limit, "{what}: registered {took:?} after the new socket appeared (limit {limit:?})");
        rt.configure();
        rt
    };
    let rt = rejoin(&listener, "first start");

    // The plugin's retries that found no runtime while it restarts (debug lines: a restart is
    // routine, not an error).
    let failed_connects = || plugin.log().matches("runtime restarting: the NRI socket").count();

    // A clean restart: the runtime closes the connection and removes its socket, then comes back
    // with a new one once the plugin's first retry (2 s after the loss) has found none; its next
    // retry is 4 s later.
    drop(rt);
    drop(listener);
    std::fs::remove_file(&s.socket).unwrap();
    wait_until("the plugin's first retry after the restart to find no socket", WAIT, || failed_connects() >= 1);
    let listener = UnixListener::bind(&s.socket).unwrap();
    let rt = rejoin(&listener, "after a restart");

    // A crash: the socket file stays behind, refusing connections (the plugin's first retry, 2 s
    // after the loss, is refused), until the runtime starts again and binds a new one in its place.
    drop(rt);
    drop(listener);
    wait_until("the plugin's first retry after the crash to be refused", WAIT, || failed_connects() >= 2);
    std::fs::remove_file(&s.socket).unwrap();
    let listener = UnixListener::bind(&s.socket).unwrap();
    let _rt = rejoin(&listener, "after a crash");

    assert_eq!(plugin.terminate(), Some(0));
    let log = plugin.log();
    assert_eq!(log.matches("is there anew; reconnecting now").count(), 2, "{log}");
    assert_eq!(log.matches("runtime restarting: NRI connection ended").count(), 2, "{log}");
    assert!(!log.contains("failed to connect to the NRI socket"), "a routine restart is no error:\n{log}");
}

/// A runtime that does not come back within the backoff's cap (here 30 x 50 ms) is an error,
/// said once, with the settings that enable NRI.
#[test]
fn a_socket_that_stays_away_after_a_restart_is_an_error_once() {
    let s = setup("stays-away");
    let listener = UnixListener::bind(&s.socket).unwrap();
    let mut plugin = Plugin::spawn(plugin_cmd(&s, &[]), s.dir.path());
    let mut rt = accept(&listener);
    rt.expect_register();
    rt.configure();
    drop(rt);
    drop(listener);
    std::fs::remove_file(&s.socket).unwrap();
    plugin.wait_for_log("runtime restarting: NRI connection ended");
    plugin.wait_for_log("failed to connect to the NRI socket");
    wait_until("more retries after the error", WAIT, || {
        plugin.log().matches("is still unreachable; retrying").count() >= 2
    });
    assert_eq!(plugin.terminate(), Some(0));
    let log = plugin.log();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("failed to connect to the NRI socket")).collect();
    assert_eq!(errors.len(), 1, "{log}");
    assert!(errors[0].contains(": error: ") && errors[0].contains("enable_nri = true"), "{log}");
    assert!(errors[0].contains("(away for 1 s)") || errors[0].contains("(away for 2 s)"), "{log}");
}

#[test]
fn a_missing_socket_says_once_how_to_enable_nri_and_keeps_trying() {
    let s = setup("absent");
    let mut plugin = Plugin::spawn(plugin_cmd(&s, &[]), s.dir.path());
    plugin.wait_for_log("failed to connect to the NRI socket");
    // Several retries (at 50, 100, 200 ms), each still failing, before the socket appears.
    wait_until("three more failed retries", WAIT, || {
        plugin.log().matches("is still unreachable; retrying").count() >= 3
    });
    // The socket appears: the plugin connects.
    let listener = UnixListener::bind(&s.socket).unwrap();
    let mut rt = accept(&listener);
    rt.expect_register();
    assert_eq!(plugin.terminate(), Some(0));
    let log = plugin.log();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("failed to connect")).collect();
    assert_eq!(lines.len(), 1, "one line for the whole outage:\n{log}");
    for needle in [
        r#"[plugins."io.containerd.nri.v1.nri"] disable = false"#,
        "/etc/containerd/config.toml",
        "enable_nri = true",
        "No such file or directory",
    ] {
        assert!(lines[0].contains(needle), "{needle:?} missing from {:?}", lines[0]);
    }
}

#[test]
fn with_once_a_missing_socket_is_exit_1() {
    let s = setup("once");
    let out = fakeworld::run(plugin_cmd(&s, &["--once"]), b"");
    assert_eq!(out.code(), Some(1), "{out}");
    let lines: Vec<&str> = out.stderr.lines().filter(|l| l.contains("failed to connect")).collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].contains("enable_nri = true"), "{out}");
}

#[test]
fn bad_flags_are_usage_errors() {
    let s = setup("flags");
    for bad in [&["--plugin-index", "7"][..], &["--plugin-index", "ab"], &["--plugin-name", ""]] {
        let out = fakeworld::run(plugin_cmd(&s, bad), b"");
        assert_eq!(out.code(), Some(2), "{bad:?}: {out}");
    }
}

#[cfg(feature = "fake-kernel")]
#[test]
fn synchronize_gives_running_containers_their_cookies() {
    let world = crate::common::World::fake_kernel("nri-sync", "");
    let socket = world.path("nri.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let (p1, p2, p3) = (world.spawn(), world.spawn(), world.spawn());
    let mut cmd = world.cmd(&["nri", "--socket", socket.to_str().unwrap(), "--hook-path", HOOK_PATH]);
    cmd.env_remove("RUST_LOG");
    let plugin = Plugin::spawn(cmd, world.root());
    let mut rt = accept(&listener);
    rt.expect_register();
    rt.configure();
    let mut p = pod();
    p.annotations.remove("io.kubernetes.pod.namespace");
    let other = PodSandbox { id: "sb2".into(), namespace: "tenant-b".into(), ..PodSandbox::default() };
    let mut stopped = container("c-stopped", p3 as u32, &[]);
    stopped.state = state::STOPPED;
    let mut lone = container("c3", p3 as u32, &[]);
    lone.pod_sandbox_id = "sb2".into();
    rt.synchronize(
        vec![p, other],
        vec![container("c1", p1 as u32, &[]), container("c2", p2 as u32, &[]), stopped, lone],
    );
    plugin.wait_for_log("catch-up done");
    let log = plugin.log();
    assert!(log.contains("catch-up done: 3 ensured, 0 already set, 0 cleared, 1 skipped, 0 failed"), "{log}");
    let list = world.list();
    let groups = fakeworld::check_consistent(&list);
    assert_eq!(groups.keys().collect::<Vec<_>>(), ["tenant-a/web", "tenant-b/pod:sb2"], "{list:#}");
    let rows = fakeworld::members(&list);
    let ids: Vec<(&str, &str)> = rows.iter().map(|r| (r.0.as_str(), r.1.as_str())).collect();
    assert_eq!(ids, [("tenant-a/web", "c1"), ("tenant-a/web", "c2"), ("tenant-b/pod:sb2", "c3")], "{list:#}");

    // A second Synchronize (a reconnect) finds them done.
    drop(rt);
    let mut rt = accept(&listener);
    rt.expect_register();
    rt.configure();
    rt.synchronize(vec![pod()], vec![container("c1", p1 as u32, &[("io.kubernetes.pod.namespace", "tenant-a")])]);
    crate::common::wait::wait_for("a second catch-up", WAIT, || {
        let log = plugin.log();
        if log.matches("catch-up done").count() >= 2 { Ok(()) } else { Err(log) }
    });
    assert!(plugin.log().contains("catch-up done: 0 ensured, 1 already set"), "{}", plugin.log());
}

/// A container created while the plugin was away (so without the hook) and started once it is
/// back: the catch-up at `Synchronize` cannot act on it (created, no init yet), so the plugin
/// gives it its group's cookie at its StartContainer, before answering: the runtime starts it
/// with the cookie. One the plugin adjusted itself is left to its hook.
#[cfg(feature = "fake-kernel")]
#[test]
fn start_container_catches_up_a_container_created_while_the_plugin_was_away() {
    use oci_coresched_hook::agent::nri::messages::StateChangeEvent;
    let world = crate::common::World::fake_kernel("nri-start", "");
    let socket = world.path("nri.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let (p1, p2) = (world.spawn(), world.spawn());
    let mut cmd = world.cmd(&["nri", "--socket", socket.to_str().unwrap(), "--hook-path", HOOK_PATH]);
    cmd.env_remove("RUST_LOG");
    let plugin = Plugin::spawn(cmd, world.root());
    let mut rt = accept(&listener);
    rt.expect_register();
    rt.configure();
    let mut p = pod();
    p.annotations.remove("io.kubernetes.pod.namespace");
    let mut created = container("c-early", 0, &[]);
    created.state = state::CREATED;
    rt.synchronize(vec![p.clone()], vec![created.clone()]);
    plugin.wait_for_log("catch-up done");
    assert!(plugin.log().contains("container c-early is created but has no init yet: caught up when it starts"));
    assert!(fakeworld::members(&world.list()).is_empty());

    // Its task exists now: its init is p1; StartContainer comes before the runtime starts it.
    created.pid = p1 as u32;
    let start = StateChangeEvent { event: 6, pod: Some(p.clone()), container: Some(created) };
    let r = rt.call("StateChange", start.to_bytes());
    assert_eq!((r.code(), r.payload.len()), (code::OK, 0), "{r:?}");
    let rows = fakeworld::members(&world.list());
    assert_eq!(rows.iter().map(|r| (r.0.as_str(), r.1.as_str())).collect::<Vec<_>>(), [("tenant-a/web", "c-early")]);
    assert_ne!(world.cookie(p1), "0x0", "the cookie was given before the answer");

    // One this plugin adjusted: its hook does the work, the start needs nothing.
    let late = container("c-late", p2 as u32, &[]);
    let req = CreateContainerRequest { pod: Some(p.clone()), container: Some(late.clone()) };
    assert_eq!(rt.call("CreateContainer", req.to_bytes()).code(), code::OK);
    let start = StateChangeEvent { event: 6, pod: Some(p), container: Some(late) };
    assert_eq!(rt.call("StateChange", start.to_bytes()).code(), code::OK);
    assert_eq!(world.cookie(p2), "0x0", "left to the hook the plugin injected");
    let log = plugin.log();
    assert!(log.contains("container c-early (pod tenant-a/web-0) starts without the hook"), "{log}");
    assert!(!log.contains("container c-late (pod tenant-a/web-0) starts without the hook"), "{log}");
}

#[cfg(not(feature = "fake-kernel"))]
#[test]
fn start_container_catches_up_a_container_created_while_the_plugin_was_away() {
    fakeworld::needs_feature("start_container_catches_up_a_container_created_while_the_plugin_was_away", "fake-kernel");
}

#[cfg(not(feature = "fake-kernel"))]
#[test]
fn synchronize_gives_running_containers_their_cookies() {
    fakeworld::needs_feature("synchronize_gives_running_containers_their_cookies", "fake-kernel");
}
