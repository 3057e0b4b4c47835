//! The annotations the decision reads: their keys, the validators of their values, what an
//! invalid one is, and the pod's names and sandbox read from them.

use std::collections::BTreeMap;

/// Our group annotation.
pub const ANN_GROUP: &str = "oci-coresched-hook/group";
/// Our policy annotation.
pub const ANN_POLICY: &str = "oci-coresched-hook/policy";
/// Koordinator's group annotation.
pub const KOORD_GROUP: &str = "koordinator.sh/core-sched-group-id";
/// Koordinator's policy annotation.
pub const KOORD_POLICY: &str = "koordinator.sh/core-sched-policy";
/// Koordinator's QoS class (LSE, LSR, LS, BE, SYSTEM).
pub const KOORD_QOS: &str = "koordinator.sh/qosClass";
/// Pod sandbox id, containerd then CRI-O.
pub const SANDBOX_ID: [&str; 2] = ["io.kubernetes.cri.sandbox-id", "io.kubernetes.cri-o.SandboxID"];
/// Pod uid, CRI-O / kubelet then containerd.
pub const POD_UID: [&str; 2] = ["io.kubernetes.pod.uid", "io.kubernetes.cri.sandbox-uid"];
/// Pod namespace, CRI-O / kubelet then containerd.
pub const POD_NAMESPACE: [&str; 2] = ["io.kubernetes.pod.namespace", "io.kubernetes.cri.sandbox-namespace"];
/// Pod name, CRI-O / kubelet then containerd (a metrics label only; never affects grouping).
pub const POD_NAME: [&str; 2] = ["io.kubernetes.pod.name", "io.kubernetes.cri.sandbox-name"];
/// Container name within its pod, CRI-O / kubelet then containerd (a metrics label only).
pub const CONTAINER_NAME: [&str; 2] = ["io.kubernetes.container.name", "io.kubernetes.cri.container-name"];
/// The container's role in its pod, containerd's key then CRI-O's: `sandbox` marks the pod's
/// sandbox (pause) container.
pub const CONTAINER_TYPE: [&str; 2] = ["io.kubernetes.cri.container-type", "io.kubernetes.cri-o.ContainerType"];
/// Longest pod label value kept (a Kubernetes name is at most 253 characters).
pub const MAX_POD_LABEL_LEN: usize = 253;
/// Suffix of a QoS class's expeller group (Koordinator's).
pub const EXPELLER_SUFFIX: &str = "-expeller";
/// The same for internal keys (`pod:`, `exclusive:`, `container:`), which ids could otherwise forge.
pub const INTERNAL_EXPELLER_SUFFIX: &str = ":expeller";

/// Longest group name accepted in an annotation.
pub const MAX_GROUP_LEN: usize = 63;
/// Longest id (container, sandbox, pod uid) accepted.
pub const MAX_ID_LEN: usize = 128;

/// A container's pod sandbox as its annotations name it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxRef {
    /// The sandbox id ([`SANDBOX_ID`]), when it is a valid id.
    pub id: Option<String>,
    /// True for the sandbox (pause) container itself: its id is the sandbox id, or its
    /// [`CONTAINER_TYPE`] is `sandbox`.
    pub is_sandbox: bool,
}

impl SandboxRef {
    /// Reads the sandbox of container `container_id` from its annotations.
    pub fn from_annotations(container_id: &str, ann: &BTreeMap<String, String>) -> Self {
        let id = first_set(ann, &SANDBOX_ID).map(|(_, v)| v).filter(|v| id_chars_ok(v, MAX_ID_LEN)).map(str::to_string);
        let typed = CONTAINER_TYPE.iter().any(|k| ann.get(*k).is_some_and(|v| v == "sandbox"));
        let is_sandbox = typed || id.as_deref() == Some(container_id);
        Self { id, is_sandbox }
    }
}

/// The Kubernetes names of a container, from its annotations. Informational (metrics labels):
/// they never influence the decision, so a value that is empty, longer than
/// [`MAX_POD_LABEL_LEN`] or contains control characters is dropped rather than rejected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodLabels {
    /// Pod name ([`POD_NAME`]).
    pub name: Option<String>,
    /// Pod uid ([`POD_UID`]).
    pub uid: Option<String>,
    /// Container name ([`CONTAINER_NAME`]).
    pub container_name: Option<String>,
}

impl PodLabels {
    /// Reads the labels from annotations (first key that is set wins).
    pub fn from_annotations(ann: &BTreeMap<String, String>) -> Self {
        let get = |keys: &[&'static str]| {
            first_set(ann, keys)
                .map(|(_, v)| v)
                .filter(|v| v.len() <= MAX_POD_LABEL_LEN && !v.chars().any(char::is_control))
                .map(str::to_string)
        };
        Self { name: get(&POD_NAME), uid: get(&POD_UID), container_name: get(&CONTAINER_NAME) }
    }
}

/// A container id that cannot even name a cache row: the input itself is bad.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid container id {0:?}: expected 1-{MAX_ID_LEN} characters of [A-Za-z0-9._-]")]
pub struct BadContainerId(pub String);

pub(super) fn id_chars_ok(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && s.as_bytes()[0].is_ascii_alphanumeric()
}

/// An annotation the decision cannot use; the container then gets a cookie of its own and
/// [`super::Decision::invalid`] says why. Values are cut to 80 characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidAnnotation {
    /// A group name outside the allowed characters or length (`key`: the annotation naming it).
    #[error("{}group {name:?} is invalid: expected 1-{MAX_GROUP_LEN} characters of [A-Za-z0-9._-], starting and ending with a letter or digit", key.map(|k| format!("{k}: ")).unwrap_or_default())]
    Group {
        /// The annotation, when it came from one.
        key: Option<&'static str>,
        /// The name given.
        name: String,
    },
    /// A namespace that is not a DNS label.
    #[error("namespace {0:?} is not a valid DNS label")]
    Namespace(String),
    /// The two namespace annotations name different namespaces.
    #[error("{} {a:?} and {} {b:?} disagree", POD_NAMESPACE[0], POD_NAMESPACE[1])]
    NamespacesDisagree {
        /// The first annotation's value.
        a: String,
        /// The second's.
        b: String,
    },
    /// Koordinator's QoS annotation with a class it does not define.
    #[error("{KOORD_QOS} {0:?} is not one of LSE, LSR, LS, BE, SYSTEM")]
    QosClass(String),
    /// A policy annotation with an unknown policy.
    #[error("{key} {value:?} is not one of default, exclusive, none")]
    Policy {
        /// The annotation.
        key: &'static str,
        /// Its value.
        value: String,
    },
    /// A pod uid or sandbox id with characters an id never has.
    #[error("{key} {value:?} is not a valid id")]
    Id {
        /// The annotation.
        key: &'static str,
        /// Its value.
        value: String,
    },
}

/// Checks a group name: 1-63 characters of `[A-Za-z0-9._-]`, starting and ending alphanumeric.
pub fn validate_group(name: &str) -> Result<(), InvalidAnnotation> {
    if id_chars_ok(name, MAX_GROUP_LEN) && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric() {
        Ok(())
    } else {
        Err(InvalidAnnotation::Group { key: None, name: truncate(name) })
    }
}

/// Checks a namespace: a DNS label (1-63 of `[a-z0-9-]`, alphanumeric at both ends).
pub fn validate_namespace(ns: &str) -> Result<(), InvalidAnnotation> {
    let ok = !ns.is_empty()
        && ns.len() <= 63
        && ns.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !ns.starts_with('-')
        && !ns.ends_with('-');
    if ok { Ok(()) } else { Err(InvalidAnnotation::Namespace(truncate(ns))) }
}

pub(super) fn truncate(s: &str) -> String {
    s.chars().take(80).collect()
}

/// Like [`first`], but an empty value counts as unset (so ours, when empty, defers to Koordinator's).
pub(super) fn first_set<'a>(
    ann: &'a BTreeMap<String, String>,
    keys: &[&'static str],
) -> Option<(&'static str, &'a str)> {
    keys.iter().find_map(|k| ann.get(*k).filter(|v| !v.is_empty()).map(|v| (*k, v.as_str())))
}

pub(super) fn first<'a>(ann: &'a BTreeMap<String, String>, keys: &[&'static str]) -> Option<(&'static str, &'a str)> {
    keys.iter().find_map(|k| ann.get(*k).map(|v| (*k, v.as_str())))
}
