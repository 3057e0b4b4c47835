//! The pure part of the NRI plugin: what it asks the runtime to change in a container it creates,
//! and the annotations a catch-up decides a running container with.
//!
//! The adjustment is the hook itself at the stages of the packaged hooks.d file (createRuntime,
//! poststart, poststop) plus annotations under the keys the hook reads, and nothing else: no
//! mounts, environment, devices or resources. The annotations are:
//!
//! - **the pod's identity from NRI's pod metadata**, never from an annotation: the namespace as
//!   `io.kubernetes.cri.sandbox-namespace`, the sandbox id as `io.kubernetes.cri.sandbox-id`, the
//!   pod uid and name as `io.kubernetes.cri.sandbox-uid` / `-name`, and the container's name as
//!   `io.kubernetes.cri.container-name` (containerd's own keys, so under containerd the values are
//!   the ones it already wrote). The kubelet-style keys (`io.kubernetes.pod.namespace`, …) are
//!   neither set nor removed: where the spec already carries one (CRI-O writes it; under containerd
//!   only an admin's pass-through can), the hook's rule for two disagreeing namespace keys applies;
//! - **the grouping keys** ([`COPIED_KEYS`]: `oci-coresched-hook/group`, `/policy`, and
//!   Koordinator's `qosClass`, `core-sched-group-id`, `core-sched-policy`), each taken from the
//!   container's annotations if it has the key, else from the pod's. That is containerd's rule for
//!   `pod_annotations` + `container_annotations` (the container's value is written over the
//!   pod's), so the plugin route and the hooks.d / base_runtime_spec route decide alike. Values
//!   are copied as they are: the hook validates them, and an invalid one gives the container a
//!   cookie of its own, which dropping it here would not.
//!
//! A pod's sandbox (pause) container gets no adjustment, should a runtime ever send one.

use std::collections::BTreeMap;

use crate::policy::{
    ANN_GROUP, ANN_POLICY, CONTAINER_NAME, KOORD_GROUP, KOORD_POLICY, KOORD_QOS, POD_NAME, POD_NAMESPACE, POD_UID,
    SANDBOX_ID,
};

use super::messages::{Container, ContainerAdjustment, Hook, Hooks, PodSandbox};

/// The grouping annotations copied from the pod and the container (container first).
pub const COPIED_KEYS: [&str; 5] = [ANN_GROUP, ANN_POLICY, KOORD_QOS, KOORD_GROUP, KOORD_POLICY];

/// The environment the hook runs with (the hooks.d file's).
pub const HOOK_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The hook's timeout in seconds (the hooks.d file's).
pub const HOOK_TIMEOUT_SECS: i64 = 10;

/// The stages the hook is injected at, as `--stage` values.
pub const STAGES: [&str; 3] = ["createRuntime", "poststart", "poststop"];

/// Annotations that mark a pod's sandbox container: containerd's, CRI-O's.
const CONTAINER_TYPE: [&str; 2] = ["io.kubernetes.cri.container-type", "io.kubernetes.cri-o.ContainerType"];

/// Whether this is the pod's sandbox (pause) container rather than an app container.
pub fn is_sandbox(pod: &PodSandbox, container: &Container) -> bool {
    (!pod.id.is_empty() && container.id == pod.id)
        || CONTAINER_TYPE.iter().any(|k| container.annotations.get(*k).is_some_and(|v| v == "sandbox"))
}

/// The hook entry for one stage: `<path> hook --stage <stage>`, with the hooks.d file's
/// environment and timeout.
pub fn hook(path: &str, stage: &str) -> Hook {
    Hook {
        path: path.to_string(),
        args: ["oci-coresched-hook", "hook", "--stage", stage].map(String::from).to_vec(),
        env: vec![HOOK_ENV.to_string()],
        timeout: Some(HOOK_TIMEOUT_SECS),
    }
}

/// The hooks to add: one at each of [`STAGES`].
pub fn hooks(path: &str) -> Hooks {
    let [create_runtime, poststart, poststop] = STAGES.map(|s| vec![hook(path, s)]);
    Hooks { create_runtime, poststart, poststop, ..Hooks::default() }
}

/// The annotations to set on a container (see the module header for which and why).
pub fn annotations(pod: &PodSandbox, container: &Container) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for key in COPIED_KEYS {
        if let Some(v) = container.annotations.get(key).or_else(|| pod.annotations.get(key)) {
            out.insert(key.to_string(), v.clone());
        }
    }
    let identity = [
        (POD_NAMESPACE[1], &pod.namespace),
        (SANDBOX_ID[0], &pod.id),
        (POD_UID[1], &pod.uid),
        (POD_NAME[1], &pod.name),
        (CONTAINER_NAME[1], &container.name),
    ];
    for (key, value) in identity {
        if !value.is_empty() {
            out.insert(key.to_string(), value.clone());
        }
    }
    out
}

/// The adjustment for a container being created; `None` for a sandbox container.
pub fn adjustment(pod: &PodSandbox, container: &Container, hook_path: &str) -> Option<ContainerAdjustment> {
    if is_sandbox(pod, container) {
        return None;
    }
    Some(ContainerAdjustment { annotations: annotations(pod, container), hooks: Some(hooks(hook_path)) })
}

/// The annotations a catch-up decides a running container with: what its spec would carry had the
/// plugin adjusted it, i.e. its own annotations with [`annotations`] set over them.
pub fn catchup_annotations(pod: &PodSandbox, container: &Container) -> BTreeMap<String, String> {
    let mut out = container.annotations.clone();
    out.extend(annotations(pod, container));
    out
}

#[cfg(test)]
mod tests {
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

    const IDENTITY: [(&str, &str); 5] = [
        ("io.kubernetes.cri.container-name", "app"),
        ("io.kubernetes.cri.sandbox-id", "sb1"),
        ("io.kubernetes.cri.sandbox-name", "web-0"),
        ("io.kubernetes.cri.sandbox-namespace", "tenant-a"),
        ("io.kubernetes.cri.sandbox-uid", "uid-1"),
    ];

    fn with_identity(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut m = map(&IDENTITY);
        m.extend(map(extra));
        m
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
            assert_eq!(annotations(&pod(p_ann), &ctr(c_ann)), with_identity(want), "pod {p_ann:?} container {c_ann:?}");
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
        assert_eq!(annotations(&pod(&noise), &ctr(&noise)), with_identity(&[]));
    }

    #[test]
    fn identity_comes_from_pod_metadata_never_from_annotations() {
        let forged = [
            ("io.kubernetes.cri.sandbox-namespace", "kube-system"),
            ("io.kubernetes.pod.namespace", "kube-system"),
            ("io.kubernetes.cri.sandbox-id", "someone-else"),
            ("io.kubernetes.pod.uid", "other-uid"),
        ];
        let got = annotations(&pod(&forged), &ctr(&forged));
        assert_eq!(got, with_identity(&[]), "the pod metadata wins and the kubelet-style keys are not copied");
        // For a catch-up the container's own namespace key stays, so the hook's disagreement rule
        // sees it (and gives the container a cookie of its own).
        let c = catchup_annotations(&pod(&[]), &ctr(&forged));
        assert_eq!(c["io.kubernetes.cri.sandbox-namespace"], "tenant-a");
        assert_eq!(c["io.kubernetes.pod.namespace"], "kube-system");
    }

    #[test]
    fn empty_metadata_sets_no_key() {
        let p = PodSandbox::default();
        let c = Container { id: "c1".into(), ..Default::default() };
        assert_eq!(annotations(&p, &c), BTreeMap::new());
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
}
