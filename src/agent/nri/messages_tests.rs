//! Unit tests of `messages.rs`: golden bytes built by hand from api.proto's field numbers, round
//! trips, and a newer runtime's unknown fields.

use super::*;
use crate::agent::nri::proto::Message;

/// Built by hand from the field numbers of api.proto, not by the encoder under test.
#[test]
fn register_plugin_request_golden_bytes() {
    let m = RegisterPluginRequest { plugin_name: "och".into(), plugin_idx: "10".into() };
    let golden = [0x0a, 0x03, b'o', b'c', b'h', 0x12, 0x02, b'1', b'0'];
    assert_eq!(m.to_bytes(), golden);
    assert_eq!(RegisterPluginRequest::decode(&golden).unwrap(), m);
}

#[test]
fn configure_response_golden_bytes() {
    let m = ConfigureResponse { events: event::mask(&[event::CREATE_CONTAINER]) };
    assert_eq!(m.events, 0x8, "CREATE_CONTAINER = 4 is bit 3");
    assert_eq!(m.to_bytes(), [0x10, 0x08]);
}

#[test]
fn hook_golden_bytes() {
    let h = Hook { path: "/x".into(), args: vec!["a".into(), "".into()], env: vec![], timeout: Some(10) };
    // 1: "/x"; 2: "a"; 2: "" (an empty argument is kept); 4: OptionalInt { 1: 10 }.
    let golden = [0x0a, 0x02, b'/', b'x', 0x12, 0x01, b'a', 0x12, 0x00, 0x22, 0x02, 0x08, 0x0a];
    assert_eq!(h.to_bytes(), golden);
    assert_eq!(Hook::decode(&golden).unwrap(), h);
}

#[test]
fn every_message_round_trips() {
    let pod = PodSandbox {
        id: "sb1".into(),
        name: "web-0".into(),
        uid: "u-1".into(),
        namespace: "tenant-a".into(),
        annotations: BTreeMap::from([("k".into(), "v".into())]),
    };
    let ctr = Container {
        id: "c1".into(),
        pod_sandbox_id: "sb1".into(),
        name: "app".into(),
        state: state::RUNNING,
        annotations: BTreeMap::from([("a".into(), "b".into())]),
        linux: Some(LinuxContainer { cgroups_path: "/kubepods/x".into() }),
        pid: 4242,
    };
    let sync = SynchronizeRequest { pods: vec![pod.clone()], containers: vec![ctr.clone()], more: true };
    assert_eq!(SynchronizeRequest::decode(&sync.to_bytes()).unwrap(), sync);
    let create = CreateContainerRequest { pod: Some(pod), container: Some(ctr) };
    assert_eq!(CreateContainerRequest::decode(&create.to_bytes()).unwrap(), create);
    let hook = Hook { path: "/p".into(), args: vec!["p".into()], env: vec!["A=1".into()], timeout: Some(10) };
    let resp = CreateContainerResponse {
        adjust: Some(ContainerAdjustment {
            annotations: BTreeMap::from([("x".into(), "y".into())]),
            hooks: Some(Hooks { create_runtime: vec![hook.clone()], poststop: vec![hook], ..Hooks::default() }),
        }),
    };
    assert_eq!(CreateContainerResponse::decode(&resp.to_bytes()).unwrap(), resp);
    let conf = ConfigureRequest { config: "".into(), runtime_name: "containerd".into(), runtime_version: "1.7".into() };
    assert_eq!(ConfigureRequest::decode(&conf.to_bytes()).unwrap(), conf);
}

#[test]
fn unknown_fields_of_a_newer_runtime_are_skipped() {
    let pod = PodSandbox { id: "sb".into(), namespace: "ns".into(), ..Default::default() };
    let mut w = Writer::new();
    w.raw(&pod.to_bytes());
    w.string(5, "labels are a map we skip"); // labels
    w.varint(9, 77); // pid
    w.message(8, &[0x1a, 0x01, b'x']); // linux
    w.raw(&[0xa5, 0x06, 1, 2, 3, 4]); // field 100, fixed32: a field 0.6.1 does not have
    w.raw(&[0xa1, 0x06, 1, 2, 3, 4, 5, 6, 7, 8]); // field 100, fixed64
    assert_eq!(PodSandbox::decode(&w.finish()).unwrap(), pod);
}

#[test]
fn a_known_field_with_the_wrong_wire_type_is_an_error() {
    let mut w = Writer::new();
    w.varint(1, 5); // id is a string
    assert_eq!(
        Container::decode(&w.finish()).unwrap_err(),
        DecodeError::WrongWireType { field: 1, got: 0, expected: 2 }
    );
}
