//! The pure part of the NRI plugin: what it asks the runtime to change in a container it creates.
//!
//! The adjustment is the hook itself at the stages of the packaged hooks.d file (createRuntime,
//! poststart, poststop) plus annotations under the keys the hook reads, and nothing else: no
//! mounts, environment, devices or resources. The annotations are
//! [`crate::decide::input::pod_annotations`]: the pod's identity from NRI's pod metadata (never from an
//! annotation) and the grouping keys, the container's value over the pod's. The catch-up decides
//! a running container over the very same annotations ([`crate::decide::policy::ContainerInput::from_pod`]),
//! so a container is decided alike whether the injected hook or the catch-up gives it its cookie.
//!
//! A pod's sandbox (pause) container gets no adjustment, should a runtime ever send one.

use std::collections::BTreeMap;

use crate::decide::input::{ContainerMeta, PodMeta};
use crate::decide::policy::CONTAINER_TYPE;

use super::messages::{Container, ContainerAdjustment, Hook, Hooks, PodSandbox};

/// The environment the hook runs with (the hooks.d file's).
pub const HOOK_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The hook's timeout in seconds (the hooks.d file's).
pub const HOOK_TIMEOUT_SECS: i64 = 10;

/// The stages the hook is injected at, as `--stage` values.
pub const STAGES: [&str; 3] = ["createRuntime", "poststart", "poststop"];

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

/// NRI's pod as the decision input reads it.
pub fn pod_meta(pod: &PodSandbox) -> PodMeta<'_> {
    PodMeta { id: &pod.id, name: &pod.name, uid: &pod.uid, namespace: &pod.namespace, annotations: &pod.annotations }
}

/// NRI's container as the decision input reads it.
pub fn container_meta(c: &Container) -> ContainerMeta<'_> {
    ContainerMeta {
        id: &c.id,
        name: &c.name,
        annotations: &c.annotations,
        cgroups_path: c.linux.as_ref().map_or("", |l| l.cgroups_path.as_str()),
    }
}

/// The annotations to set on a container ([`crate::decide::input::pod_annotations`]).
pub fn annotations(pod: &PodSandbox, container: &Container) -> BTreeMap<String, String> {
    crate::decide::input::pod_annotations(&pod_meta(pod), &container_meta(container))
}

/// The adjustment for a container being created; `None` for a sandbox container.
pub fn adjustment(pod: &PodSandbox, container: &Container, hook_path: &str) -> Option<ContainerAdjustment> {
    if is_sandbox(pod, container) {
        return None;
    }
    Some(ContainerAdjustment { annotations: annotations(pod, container), hooks: Some(hooks(hook_path)) })
}

#[cfg(test)]
#[path = "adjust_tests.rs"]
mod tests;
