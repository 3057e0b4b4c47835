//! The decision's input ([`ContainerInput`]), built one way from each place that describes a
//! container, for [`super::policy::decide`]:
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

use crate::decide::policy::{
    ANN_GROUP, ANN_POLICY, CONTAINER_NAME, ContainerInput, KOORD_GROUP, KOORD_POLICY, KOORD_QOS, Lifecycle, POD_NAME,
    POD_NAMESPACE, POD_UID, SANDBOX_ID,
};
use crate::host::oci_state::State;
use crate::host::runtimes::RuntimeContainer;

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
    /// the annotations the state lacks and the cgroup parent ([`crate::host::bundle`], the reader
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
        match crate::host::bundle::read(&bundle.join("config.json")) {
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
#[path = "input_tests.rs"]
mod tests;
