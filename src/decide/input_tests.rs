//! The unit tests of `src/decide/input.rs`.

use super::*;
use crate::config::Config;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

const IDENTITY: [(&str, &str); 9] = [
    ("io.kubernetes.container.name", "app"),
    ("io.kubernetes.cri.container-name", "app"),
    ("io.kubernetes.cri.sandbox-id", "sb1"),
    ("io.kubernetes.cri.sandbox-name", "web-0"),
    ("io.kubernetes.cri.sandbox-namespace", "tenant-a"),
    ("io.kubernetes.cri.sandbox-uid", "uid-1"),
    ("io.kubernetes.pod.name", "web-0"),
    ("io.kubernetes.pod.namespace", "tenant-a"),
    ("io.kubernetes.pod.uid", "uid-1"),
];

fn with_identity(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut m = map(&IDENTITY);
    m.extend(map(extra));
    m
}

fn annotations(pod_ann: &[(&str, &str)], ctr_ann: &[(&str, &str)]) -> BTreeMap<String, String> {
    let (pa, ca) = (map(pod_ann), map(ctr_ann));
    let pod = PodMeta { id: "sb1", name: "web-0", uid: "uid-1", namespace: "tenant-a", annotations: &pa };
    let ctr = ContainerMeta { id: "c1", name: "app", annotations: &ca, cgroups_path: "" };
    pod_annotations(&pod, &ctr)
}

#[test]
fn precedence_table() {
    let g = "oci-coresched-hook/group";
    let p = "oci-coresched-hook/policy";
    let q = "koordinator.sh/qosClass";
    let kg = "koordinator.sh/core-sched-group-id";
    #[allow(clippy::type_complexity)]
    let table: &[(&[(&str, &str)], &[(&str, &str)], &[(&str, &str)])] = &[
        // pod, container, expected grouping keys
        (&[], &[], &[]),
        (&[(g, "web")], &[], &[(g, "web")]),
        (&[], &[(g, "solo")], &[(g, "solo")]),
        (&[(g, "web")], &[(g, "solo")], &[(g, "solo")]),
        (&[(g, "web"), (p, "exclusive")], &[(g, "solo")], &[(g, "solo"), (p, "exclusive")]),
        (&[(q, "BE")], &[(q, "LS")], &[(q, "LS")]),
        (&[(kg, "k")], &[(g, "ours")], &[(kg, "k"), (g, "ours")]),
        (&[(g, "bad value!")], &[], &[(g, "bad value!")]),
        (&[(g, "")], &[], &[(g, "")]),
    ];
    for (p_ann, c_ann, want) in table {
        assert_eq!(annotations(p_ann, c_ann), with_identity(want), "pod {p_ann:?} container {c_ann:?}");
    }
}

#[test]
fn only_the_hooks_keys_are_copied() {
    let noise = [
        ("other.example/x", "y"),
        ("oci-coresched-hook/unknown", "z"),
        ("koordinator.sh/other", "w"),
        ("io.kubernetes.cri.sandbox-log-directory", "/var/log/pods/x"),
        ("-oci-coresched-hook/group", "removal marker"),
    ];
    assert_eq!(annotations(&noise, &noise), with_identity(&[]));
}

#[test]
fn identity_comes_from_pod_metadata_never_from_annotations() {
    let forged = [
        ("io.kubernetes.cri.sandbox-namespace", "kube-system"),
        ("io.kubernetes.pod.namespace", "kube-system"),
        ("io.kubernetes.cri.sandbox-id", "someone-else"),
        ("io.kubernetes.pod.uid", "other-uid"),
        ("io.kubernetes.cri-o.SandboxID", "crio-other"),
    ];
    assert_eq!(annotations(&forged, &forged), with_identity(&[]), "the pod metadata wins, under both key styles");
}

#[test]
fn a_forged_container_namespace_does_not_move_a_caught_up_container_out_of_its_group() {
    let (pa, ca) = (map(&[("oci-coresched-hook/group", "web")]), map(&[("io.kubernetes.pod.namespace", "tenant-b")]));
    let pod = PodMeta { id: "sb1", name: "web-0", uid: "uid-1", namespace: "tenant-a", annotations: &pa };
    let ctr = ContainerMeta { id: "c1", name: "app", annotations: &ca, cgroups_path: "" };
    let d = crate::decide::policy::decide(&ContainerInput::from_pod(&pod, &ctr, 4242), &Config::default()).unwrap();
    assert_eq!(d.group(), Some("tenant-a/web"), "{d:?}");
    assert_eq!(d.invalid, None);
}

#[test]
fn empty_metadata_sets_no_key() {
    let none = BTreeMap::new();
    let pod = PodMeta { id: "", name: "", uid: "", namespace: "", annotations: &none };
    let ctr = ContainerMeta { id: "c1", name: "", annotations: &none, cgroups_path: "" };
    assert_eq!(pod_annotations(&pod, &ctr), BTreeMap::new());
    assert_eq!(ContainerInput::from_pod(&pod, &ctr, 7).cgroups_path, None);
}

#[test]
fn a_state_reads_its_bundle_only_for_an_ensure() {
    let dir = tempfile::tempdir().unwrap();
    let config = r#"{"annotations": {"oci-coresched-hook/group": "web"}, "linux": {"cgroupsPath": "/kubepods/besteffort/p1/c1"}}"#;
    std::fs::write(dir.path().join("config.json"), config).unwrap();
    let state = State {
        id: "c1".into(),
        status: "creating".into(),
        pid: Some(42),
        bundle: Some(dir.path().to_path_buf()),
        annotations: map(&[("oci-coresched-hook/group", "from-state")]),
    };
    let ensure = ContainerInput::from_state(&state, Lifecycle::Ensure);
    assert_eq!(ensure.annotations["oci-coresched-hook/group"], "from-state", "the state's copy wins");
    assert_eq!(ensure.cgroups_path.as_deref(), Some("/kubepods/besteffort/p1/c1"));
    let forget = ContainerInput::from_state(&state, Lifecycle::Forget);
    assert_eq!(forget.cgroups_path, None);
    assert_eq!(forget.annotations, state.annotations);
}
