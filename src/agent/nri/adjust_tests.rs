//! The unit tests of `src/agent/nri/adjust.rs`.

use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn pod(ann: &[(&str, &str)]) -> PodSandbox {
    PodSandbox {
        id: "sb1".into(),
        name: "web-0".into(),
        uid: "uid-1".into(),
        namespace: "tenant-a".into(),
        annotations: map(ann),
    }
}

fn ctr(ann: &[(&str, &str)]) -> Container {
    Container {
        id: "c1".into(),
        pod_sandbox_id: "sb1".into(),
        name: "app".into(),
        annotations: map(ann),
        ..Default::default()
    }
}

#[test]
fn the_annotations_are_the_decision_inputs_and_read_nris_messages_whole() {
    let c = Container {
        linux: Some(super::super::messages::LinuxContainer { cgroups_path: "/kubepods/besteffort/p/c1".into() }),
        ..ctr(&[("oci-coresched-hook/group", "solo"), ("io.kubernetes.pod.namespace", "tenant-b")])
    };
    let p = pod(&[("oci-coresched-hook/group", "web"), ("koordinator.sh/qosClass", "BE")]);
    let got = annotations(&p, &c);
    assert_eq!(got, crate::decide::input::pod_annotations(&pod_meta(&p), &container_meta(&c)));
    assert_eq!(got["oci-coresched-hook/group"], "solo");
    assert_eq!(got["koordinator.sh/qosClass"], "BE");
    assert_eq!(got["io.kubernetes.pod.namespace"], "tenant-a", "the forged key is overwritten by the metadata");
    assert_eq!(container_meta(&c).cgroups_path, "/kubepods/besteffort/p/c1");
    let a = adjustment(&p, &c, "/h").unwrap();
    assert_eq!(a.annotations, got);
}

#[test]
fn sandbox_containers_are_untouched() {
    let p = pod(&[("oci-coresched-hook/group", "web")]);
    let by_id = Container { id: "sb1".into(), ..ctr(&[]) };
    let by_type = ctr(&[("io.kubernetes.cri.container-type", "sandbox")]);
    let crio = ctr(&[("io.kubernetes.cri-o.ContainerType", "sandbox")]);
    for c in [by_id, by_type, crio] {
        assert_eq!(adjustment(&p, &c, "/usr/bin/oci-coresched-hook"), None, "{c:?}");
    }
    assert!(adjustment(&p, &ctr(&[("io.kubernetes.cri.container-type", "container")]), "/h").is_some());
}

#[test]
fn the_adjustment_is_the_three_hooks_and_the_annotations() {
    let a = adjustment(&pod(&[]), &ctr(&[]), "/host/bin/och").unwrap();
    let h = a.hooks.unwrap();
    for (stage, list) in STAGES.iter().zip([&h.create_runtime, &h.poststart, &h.poststop]) {
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].path, "/host/bin/och");
        assert_eq!(list[0].args, ["oci-coresched-hook", "hook", "--stage", stage]);
        assert_eq!(list[0].env, [HOOK_ENV]);
        assert_eq!(list[0].timeout, Some(10));
    }
    assert!(h.prestart.is_empty() && h.create_container.is_empty() && h.start_container.is_empty());
}
