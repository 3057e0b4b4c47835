//! The decision's input ([`ContainerInput`]), built one way from each place that describes a
//! container, for [`policy::decide`]:
//!
//! - **an OCI state** ([`ContainerInput::from_state`]): what the runtime hands the hook, completed
//!   by the bundle's `config.json` (annotations the state lacks, `linux.cgroupsPath`);
//! - **NRI's pod and container** ([`ContainerInput::from_pod`]): the NRI plugin's catch-up, for a
//!   container that started while the plugin was away. Its annotations are exactly the ones the
//!   plugin injects into a container it adjusts ([`pod_annotations`]), so the catch-up decides
//!   what the injected hook decides;
//! - **a runtime's state directory** ([`ContainerInput::from_runtime`]): `rebuild`, and the hook's
//!   reload after a damaged cache was moved aside.
//!
//! Whatever the route, the same container gives the same decision (`tests/it/decision_routes.rs`
//! feeds one container through all three).

use std::collections::BTreeMap;

use crate::oci_state::State;
use crate::policy::{
    ANN_GROUP, ANN_POLICY, CONTAINER_NAME, ContainerInput, KOORD_GROUP, KOORD_POLICY, KOORD_QOS, Lifecycle, POD_NAME,
    POD_NAMESPACE, POD_UID, SANDBOX_ID,
};
use crate::runtimes::RuntimeContainer;

/// The grouping annotations taken from a pod and its container, the container's value first.
pub const COPIED_KEYS: [&str; 5] = [ANN_GROUP, ANN_POLICY, KOORD_QOS, KOORD_GROUP, KOORD_POLICY];

/// A pod as a CRI runtime describes it to NRI plugins: trusted metadata, and its annotations.
#[derive(Debug, Clone, Copy)]
pub struct PodMeta<'a> {
    /// Sandbox id.
    pub id: &'a str,
    /// Pod name.
    pub name: &'a str,
    /// Pod uid.
    pub uid: &'a str,
    /// Pod namespace.
    pub namespace: &'a str,
    /// The pod's annotations (user-controlled).
    pub annotations: &'a BTreeMap<String, String>,
}

/// A container of such a pod.
#[derive(Debug, Clone, Copy)]
pub struct ContainerMeta<'a> {
    /// Container id.
    pub id: &'a str,
    /// Container name within the pod.
    pub name: &'a str,
    /// The container's annotations (user-controlled).
    pub annotations: &'a BTreeMap<String, String>,
    /// `linux.cgroupsPath`, empty when unknown.
    pub cgroups_path: &'a str,
}

/// The annotations the hook reads for a container of a CRI pod, from what the runtime tells NRI:
///
/// - **the pod's identity from its metadata**, never from an annotation: the namespace, the
///   pod's uid and name and the container's name, each under both keys the hook reads
///   (containerd's `io.kubernetes.cri.*` and the kubelet / CRI-O style `io.kubernetes.pod.*`), and
///   the sandbox id as `io.kubernetes.cri.sandbox-id` (the first of the keys the hook reads). Set
///   over whatever the spec carries, they leave a forged annotation nothing to disagree with;
/// - **the grouping keys** ([`COPIED_KEYS`]), each from the container's annotations if it has the
///   key, else from the pod's: containerd's rule for `pod_annotations` + `container_annotations`
///   (the container's value is written over the pod's), so the NRI route and the hooks.d /
///   base_runtime_spec route decide alike. Values are copied as they are: the hook validates
///   them, and an invalid one gives the container a cookie of its own.
///
/// An empty metadata value sets no key.
pub fn pod_annotations(pod: &PodMeta<'_>, container: &ContainerMeta<'_>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for key in COPIED_KEYS {
        if let Some(v) = container.annotations.get(key).or_else(|| pod.annotations.get(key)) {
            out.insert(key.to_string(), v.clone());
        }
    }
    let identity = [
        (&POD_NAMESPACE[..], pod.namespace),
        (&SANDBOX_ID[..1], pod.id),
        (&POD_UID[..], pod.uid),
        (&POD_NAME[..], pod.name),
        (&CONTAINER_NAME[..], container.name),
    ];
    for (keys, value) in identity {
        if !value.is_empty() {
            for key in keys {
                out.insert(key.to_string(), value.to_string());
            }
        }
    }
    out
}

impl ContainerInput {
    /// The input from an OCI state at `lifecycle`. For an ensure, the bundle's `config.json` adds
    /// the annotations the state lacks and the cgroup parent ([`crate::bundle`], the reader
    /// `rebuild` uses too); a missing or unusable config is logged and the state's annotations
    /// are used alone. Nothing else reads the bundle (a stopped container's may be gone).
    pub fn from_state(state: &State, lifecycle: Lifecycle) -> Self {
        let mut input = Self {
            lifecycle,
            id: state.id.clone(),
            pid: state.pid,
            annotations: state.annotations.clone(),
            cgroups_path: None,
        };
        if lifecycle != Lifecycle::Ensure {
            return input;
        }
        let Some(bundle) = &state.bundle else { return input };
        match crate::bundle::read(&bundle.join("config.json")) {
            Ok(config) => {
                config.complete(&mut input.annotations);
                input.cgroups_path = config.cgroups_path;
            }
            Err(e) => log::warn!("{}; using the state's annotations only", crate::error::Chain(&e)),
        }
        input
    }

    /// The input for a running container of a CRI pod, as NRI describes them: its annotations are
    /// [`pod_annotations`], what the NRI plugin injects, never the container's raw annotations.
    pub fn from_pod(pod: &PodMeta<'_>, container: &ContainerMeta<'_>, pid: i64) -> Self {
        Self {
            lifecycle: Lifecycle::Ensure,
            id: container.id.to_string(),
            pid: Some(pid),
            annotations: pod_annotations(pod, container),
            cgroups_path: Some(container.cgroups_path.to_string()).filter(|p| !p.is_empty()),
        }
    }

    /// The input for a container a runtime's state directory shows running.
    pub fn from_runtime(c: &RuntimeContainer) -> Self {
        Self {
            lifecycle: Lifecycle::Ensure,
            id: c.id.clone(),
            pid: Some(c.pid),
            annotations: c.annotations.clone(),
            cgroups_path: c.cgroups_path.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
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
        let (pa, ca) =
            (map(&[("oci-coresched-hook/group", "web")]), map(&[("io.kubernetes.pod.namespace", "tenant-b")]));
        let pod = PodMeta { id: "sb1", name: "web-0", uid: "uid-1", namespace: "tenant-a", annotations: &pa };
        let ctr = ContainerMeta { id: "c1", name: "app", annotations: &ca, cgroups_path: "" };
        let d = crate::policy::decide(&ContainerInput::from_pod(&pod, &ctr, 4242), &Config::default()).unwrap();
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
}
