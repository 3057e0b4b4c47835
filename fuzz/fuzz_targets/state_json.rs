//! OCI state parsing (`oci_state::read_state`), with properties: the size limit holds, a parsed
//! state is well formed and survives a round trip, errors are short and name the problem, and
//! the stage inference accepts exactly the statuses it knows.
#![no_main]

use libfuzzer_sys::fuzz_target;
use oci_coresched_hook::decide::policy::Lifecycle;
use oci_coresched_hook::hook::{self, HookError};
use oci_coresched_hook::host::oci_state::{self, MAX_STATE_BYTES, StateError};
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let read = oci_state::read_state(data);
    if data.len() as u64 > MAX_STATE_BYTES {
        assert!(matches!(read, Err(StateError::TooLarge)), "{} bytes accepted", data.len());
        return;
    }
    let parsed = oci_state::parse_state(data);
    assert_eq!(
        read.as_ref().map_err(ToString::to_string),
        parsed.as_ref().map_err(ToString::to_string),
        "read_state and parse_state disagree"
    );
    match parsed {
        Ok(s) => {
            assert!(!s.id.is_empty(), "empty id accepted");
            if let Some(p) = s.pid {
                assert!((0..=i64::from(i32::MAX)).contains(&p), "pid {p} accepted");
            }
            // The same fields written back parse to the same state.
            let doc = json!({
                "id": s.id,
                "status": s.status,
                "pid": s.pid,
                "bundle": s.bundle.as_ref().map(|b| b.to_str().expect("bundle came from a JSON string")),
                "annotations": s.annotations,
            });
            let again = oci_state::parse_state(&serde_json::to_vec(&doc).unwrap()).expect("round trip parses");
            assert_eq!(again, s, "round trip changed the state");
            match hook::lifecycle(None, &s.status) {
                Ok(Lifecycle::Ensure) => {
                    assert!(["creating", "created", "running", "paused"].contains(&s.status.as_str()))
                }
                Ok(Lifecycle::Forget) => assert_eq!(s.status, "stopped"),
                Ok(Lifecycle::Skip) => assert_eq!(s.status, "starting"),
                Err(e @ HookError::UnknownStatus(_)) => {
                    assert!(e.to_string().len() < 512, "unbounded message: {} bytes", e.to_string().len())
                }
                Err(e) => panic!("unexpected lifecycle error {e}"),
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with("OCI state"), "message does not say what failed: {msg:?}");
            // A message goes to the log and to the runtime's error: hostile input must not make it
            // arbitrarily long.
            assert!(msg.len() < 1024, "unbounded message: {} bytes: {:?}", msg.len(), &msg[..200]);
        }
    }
});
