//! Runtimes that attack the plugin: one that trickles bytes to hold the registration open, one
//! that stops reading so the plugin's writes block, one frame of many tiny messages (the parse
//! must stay linear), strings with newlines that would forge log lines, and a flood of frames the plugin ignores (summarised, not logged one line each).

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use oci_coresched_hook::agent::nri::messages::{CreateContainerRequest, PodSandbox};
use oci_coresched_hook::agent::nri::proto::Message;
use oci_coresched_hook::agent::nri::ttrpc::code;
use oci_coresched_hook::agent::nri::wire::{self, PLUGIN_CONN, RUNTIME_CONN, TYPE_RESPONSE};

use super::support::{Plugin, Runtime, WAIT, accept, connected, container, plugin_cmd, pod, setup, try_accept};

/// The plugin's registration deadline (`nri::REGISTRATION_TIMEOUT`).
const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether the plugin's main thread is inside a write to its socket (`/proc/<pid>/syscall`).
fn in_write(pid: i32) -> bool {
    let text = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    let nr = text.split_whitespace().next().and_then(|n| n.parse::<libc::c_long>().ok());
    nr.is_some_and(|n| [libc::SYS_write, libc::SYS_writev, libc::SYS_sendto, libc::SYS_sendmsg].contains(&n))
}

#[test]
fn the_registration_deadline_holds_against_a_runtime_that_trickles_bytes() {
    let _timed = crate::common::timed();
    let s = setup("trickle");
    let listener = UnixListener::bind(&s.socket).unwrap();
    let plugin = Plugin::spawn(plugin_cmd(&s, &[]), s.dir.path());
    let mut rt = accept(&listener);
    rt.recv(); // RegisterPlugin, never answered
    let started = Instant::now();
    // A frame announcing 1 KiB, then one byte of it every 150 ms: bytes keep arriving, no
    // message ever completes.
    rt.write_raw(&[0, 0, 0, 1, 0, 0, 4, 0]);
    let limit = REGISTRATION_TIMEOUT + Duration::from_secs(3);
    let again = loop {
        if let Some(again) = try_accept(&listener) {
            break again;
        }
        let took = started.elapsed();
        assert!(took < limit, "still registering {took:?} into a trickle (deadline {REGISTRATION_TIMEOUT:?})");
        let _ = rt.socket().write(&[0]); // the plugin may have closed its end already
        std::thread::sleep(Duration::from_millis(150));
    };
    let took = started.elapsed();
    assert!(took >= REGISTRATION_TIMEOUT - Duration::from_millis(500), "gave up after {took:?}");
    drop(again);
    plugin.wait_for_log("did not configure it within 10s");
}

#[test]
fn sigterm_ends_the_plugin_while_its_write_is_blocked() {
    let _timed = crate::common::timed();
    let (_s, _listener, mut plugin, rt) = connected("blocked");
    // Calls answered without a log line, sent without ever reading the answers: the plugin's
    // writes fill the socket's buffer and block.
    let mut calls = Vec::new();
    for i in 0..20_000u32 {
        calls.extend(Runtime::call_frames(1001 + 2 * i, "StateChange", vec![]));
    }
    let mut sock = rt.socket();
    sock.set_nonblocking(true).unwrap();
    let mut sent = 0;
    let end = Instant::now() + WAIT;
    let mut blocked_looks = 0;
    while blocked_looks < 3 {
        assert!(Instant::now() < end, "the plugin never blocked in a write ({sent} bytes of calls sent)");
        match sock.write(&calls[sent..]) {
            Ok(n) => {
                sent += n;
                assert!(sent < calls.len(), "the plugin took every call without blocking");
                blocked_looks = 0;
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("write the calls: {e}"),
        }
        // It reads no more: blocked writing, once it is seen inside a write several times running.
        blocked_looks = if in_write(plugin.pid()) { blocked_looks + 1 } else { 0 };
        std::thread::sleep(Duration::from_millis(20));
    }
    let since = Instant::now();
    assert_eq!(plugin.terminate(), Some(0));
    let took = since.elapsed();
    assert!(took < Duration::from_secs(1), "the plugin took {took:?} to exit on SIGTERM");
}

#[test]
fn a_frame_of_many_tiny_messages_is_parsed_in_linear_time() {
    let _timed = crate::common::timed();
    let (_s, _listener, mut plugin, mut rt) = connected("tiny");
    // 400,000 empty responses on the plugin's connection (ignored: the plugin serves there) in one
    // 4 MB frame, then a call: its answer comes once the frame is parsed. Linear parsing takes
    // about 0.6 s in a debug build on a loaded machine; shifting the rest of the frame for each
    // message took 13 s.
    let mut tiny = Vec::new();
    for _ in 0..400_000 {
        tiny.extend(wire::ttrpc_message(2, TYPE_RESPONSE, 0, b""));
    }
    let mut frame = PLUGIN_CONN.to_be_bytes().to_vec();
    frame.extend((tiny.len() as u32).to_be_bytes());
    frame.extend(tiny);
    let since = Instant::now();
    rt.write_raw(&frame);
    assert_eq!(rt.call("StateChange", vec![]).code(), code::OK);
    let took = since.elapsed();
    assert!(took < Duration::from_secs(3), "400k tiny messages in one frame took {took:?}");
    assert_eq!(plugin.terminate(), Some(0));
    let log = plugin.log();
    assert!(log.contains("ignored 400000 unexpected ttrpc messages"), "{log}");
}

#[test]
fn strings_from_the_runtime_cannot_forge_log_lines() {
    let s = setup("forge");
    let listener = UnixListener::bind(&s.socket).unwrap();
    let mut plugin = Plugin::spawn(plugin_cmd(&s, &[]), s.dir.path());
    let mut rt = accept(&listener);
    rt.expect_register();
    rt.configure_as("fake\nFORGED runtime name", "0.6.1\nFORGED runtime version");
    let hostile = PodSandbox {
        id: "sb1\nFORGED pod id".into(),
        name: "web-0\nFORGED pod name".into(),
        namespace: "tenant-a\nFORGED namespace".into(),
        ..pod()
    };
    let req = CreateContainerRequest {
        pod: Some(hostile.clone()),
        container: Some(container("c1\nFORGED container id", 0, &[])),
    };
    assert_eq!(rt.call("CreateContainer", req.to_bytes()).code(), code::OK);
    let sandbox = CreateContainerRequest { container: Some(container(&hostile.id, 0, &[])), pod: Some(hostile) };
    assert_eq!(rt.call("CreateContainer", sandbox.to_bytes()).code(), code::OK);
    assert_eq!(rt.call("Frobnicate\nFORGED method", vec![]).code(), code::UNIMPLEMENTED);
    assert_eq!(plugin.terminate(), Some(0));
    let log = plugin.log();
    let forged: Vec<&str> = log.lines().filter(|l| l.starts_with("FORGED")).collect();
    assert!(forged.is_empty(), "forged lines {forged:?} in the log:\n{log}");
    for escaped in [
        r"configured by fake\nFORGED runtime name 0.6.1\nFORGED runtime version",
        r"container c1\nFORGED container id (pod tenant-a\nFORGED namespace/web-0\nFORGED pod name)",
        r"is pod sb1\nFORGED pod id's sandbox",
    ] {
        assert!(log.contains(escaped), "no {escaped:?} in the log:\n{log}");
    }
}

#[test]
fn a_flood_of_ignored_frames_is_summarised_not_logged_one_line_each() {
    let (_s, _listener, mut plugin, mut rt) = connected("flood");
    let mut flood = Vec::new();
    for _ in 0..20_000 {
        flood.extend(wire::mux_frames(7, b"x"));
    }
    for _ in 0..2_000 {
        flood.extend(wire::mux_frames(RUNTIME_CONN, &wire::ttrpc_message(9, TYPE_RESPONSE, 0, b"")));
    }
    rt.write_raw(&flood);
    for _ in 0..200 {
        assert_eq!(rt.call("Frobnicate", vec![]).code(), code::UNIMPLEMENTED);
    }
    assert_eq!(plugin.terminate(), Some(0));
    let log = plugin.log();
    let lines = log.lines().count();
    assert!(lines < 50, "{lines} lines for 22,200 ignored frames and calls:\n{}", &log[..log.len().min(4000)]);
    for count in ["ignored 20000 ", "ignored 2000 ", "ignored 200 "] {
        assert!(log.contains(count), "no {count:?} in the log:\n{log}");
    }
}
