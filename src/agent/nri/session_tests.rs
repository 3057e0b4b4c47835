//! The unit tests of `src/agent/nri/session.rs`.

use super::*;
use crate::agent::nri::messages::{self, ConfigureRequest, ConfigureResponse, CreateContainerResponse};

fn test_options() -> Options {
    Options {
        socket: "/nonexistent".into(),
        plugin_name: "p".into(),
        plugin_index: "10".into(),
        hook_path: "/h".into(),
        once: true,
        listen: None,
        surroundings: crate::host::system::Surroundings::of_this_process(
            "/nonexistent".into(),
            &crate::config::Config::default(),
        ),
    }
}

fn session_handle(payload: &[u8], fail_closed: bool) -> Response {
    let opts = test_options();
    let status = Status::new(crate::agent::endpoint::Board::new("test"));
    let config = Config { fail_closed, ..Config::default() };
    let mut s = Connection::new(&opts, &config, "/h", "10-p", &status);
    s.handle(payload).0
}

fn request(method: &str, payload: Vec<u8>) -> Vec<u8> {
    Request { service: PLUGIN_SERVICE.into(), method: method.into(), payload, timeout_nano: 0 }.to_bytes()
}

#[test]
fn unknown_methods_and_services_are_unimplemented() {
    assert_eq!(session_handle(&request("Frobnicate", vec![]), false).code(), code::UNIMPLEMENTED);
    let other = Request { service: "x.Y".into(), method: "Configure".into(), ..Default::default() };
    assert_eq!(session_handle(&other.to_bytes(), false).code(), code::UNIMPLEMENTED);
    assert_eq!(session_handle(&[0xff], false).code(), code::INVALID_ARGUMENT);
}

#[test]
fn a_malformed_create_container_fails_open_or_closed_never_bigger() {
    let garbage = request("CreateContainer", vec![0x0a, 0x05, 0x01]);
    let open = session_handle(&garbage, false);
    assert_eq!(open.code(), code::OK);
    assert_eq!(CreateContainerResponse::decode(&open.payload).unwrap(), CreateContainerResponse::default());
    assert_eq!(session_handle(&garbage, true).code(), code::INVALID_ARGUMENT);
}

#[test]
fn a_split_synchronize_is_collected_until_the_last_part() {
    let opts = test_options();
    let status = Status::new(crate::agent::endpoint::Board::new("test"));
    let config = Config::default();
    let mut s = Connection::new(&opts, &config, "/h", "10-p", &status);
    let part = |id: &str, more: bool| {
        let c = messages::Container { id: id.into(), ..Default::default() };
        request("Synchronize", SynchronizeRequest { pods: vec![], containers: vec![c], more }.to_bytes())
    };
    let (r, after) = s.handle(&part("c1", true));
    assert_eq!(SynchronizeResponse::decode(&r.payload).unwrap(), SynchronizeResponse { more: true });
    assert!(matches!(after, After::Nothing));
    let (r, after) = s.handle(&part("c2", false));
    assert_eq!(r.payload, [] as [u8; 0], "the last (or only) part's answer is empty, as 0.6.1 expects");
    let After::CatchUp(all) = after else { panic!("no catch-up after the last part") };
    assert_eq!(all.containers.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["c1", "c2"]);
}

#[test]
fn configure_subscribes_to_create_container_and_start_container() {
    let r = session_handle(&request("Configure", ConfigureRequest::default().to_bytes()), false);
    assert_eq!(ConfigureResponse::decode(&r.payload).unwrap().events, (1 << 3) | (1 << 5));
}

/// A StartContainer of a container this connection adjusted, of a sandbox, or of no event the
/// plugin acts on answers at once, with nothing to change.
#[test]
fn start_container_of_an_adjusted_container_needs_nothing() {
    let opts = test_options();
    let status = Status::new(crate::agent::endpoint::Board::new("test"));
    let config = Config::default();
    let mut s = Connection::new(&opts, &config, "/h", "10-p", &status);
    let pod = messages::PodSandbox { id: "sb".into(), ..Default::default() };
    let ctr = messages::Container { id: "c1".into(), pod_sandbox_id: "sb".into(), ..Default::default() };
    let create = messages::CreateContainerRequest { pod: Some(pod.clone()), container: Some(ctr.clone()) };
    assert_eq!(s.handle(&request("CreateContainer", create.to_bytes())).0.code(), code::OK);
    assert!(s.adjusted.contains("c1"));
    let start = StateChangeEvent { event: event::START_CONTAINER, pod: Some(pod), container: Some(ctr) };
    let r = s.handle(&request("StateChange", start.to_bytes())).0;
    assert_eq!((r.code(), r.payload.len()), (code::OK, 0));
    assert!(s.adjusted.is_empty(), "remembered until it starts, not longer");
    let other = StateChangeEvent { event: 7, ..Default::default() };
    assert_eq!(s.handle(&request("StateChange", other.to_bytes())).0.code(), code::OK);
    assert_eq!(s.handle(&request("StateChange", vec![0xff])).0.code(), code::INVALID_ARGUMENT);
}
