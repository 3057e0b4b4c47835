//! Runtimes that attack the plugin: one that trickles bytes to hold the registration open.

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use super::support::{Plugin, accept, plugin_cmd, setup, try_accept};

/// The plugin's registration deadline (`nri::REGISTRATION_TIMEOUT`).
const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(10);

#[test]
fn the_registration_deadline_holds_against_a_runtime_that_trickles_bytes() {
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
