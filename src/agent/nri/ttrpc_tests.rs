//! The unit tests of `src/agent/nri/ttrpc.rs`.

use super::*;
use crate::agent::nri::messages::Empty;

#[test]
fn ttrpc_envelopes_golden_bytes() {
    let r = Request { service: "s".into(), method: "m".into(), payload: vec![1], timeout_nano: 0 };
    assert_eq!(r.to_bytes(), [0x0a, 0x01, b's', 0x12, 0x01, b'm', 0x1a, 0x01, 0x01]);
    let e = Response::error(code::UNIMPLEMENTED, "x");
    assert_eq!(e.to_bytes(), [0x0a, 0x05, 0x08, 0x0c, 0x12, 0x01, b'x']);
    assert_eq!(Response::decode(&e.to_bytes()).unwrap().code(), 12);
    assert_eq!(Response::ok(&Empty).to_bytes(), [] as [u8; 0], "an OK response with an empty message is empty");
}
