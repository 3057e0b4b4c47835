//! The pure part of the NRI plugin: what it asks the runtime to change in a container it creates.
//!
//! The adjustment is the hook itself at the stages of the packaged hooks.d file (createRuntime,
//! poststart, poststop) plus annotations under the keys the hook reads, and nothing else: no
//! mounts, environment, devices or resources. The annotations are
//! [`crate::input::pod_annotations`]: the pod's identity from NRI's pod metadata (never from an
//! annotation) and the grouping keys, the container's value over the pod's. The catch-up decides
//! a running container over the very same annotations ([`crate::input::ContainerInput::from_pod`]),
//! so a container is decided alike whether the injected hook or the catch-up gives it its cookie.
//!
//! A pod's sandbox (pause) container gets no adjustment, should a runtime ever send one.

use std::collections::BTreeMap;

use crate::input::{ContainerMeta, PodMeta};
use crate::policy::CONTAINER_TYPE;

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

/// The annotations to set on a container ([`crate::input::pod_annotations`]).
pub fn annotations(pod: &PodSandbox, container: &Container) -> BTreeMap<String, String> {
    crate::input::pod_annotations(&pod_meta(pod), &container_meta(container))
}

/// The adjustment for a container being created; `None` for a sandbox container.
pub fn adjustment(pod: &PodSandbox, container: &Container, hook_path: &str) -> Option<ContainerAdjustment> {
    if is_sandbox(pod, container) {
        return None;
    }
    Some(ContainerAdjustment { annotations: annotations(pod, container), hooks: Some(hooks(hook_path)) })
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

    #[test]
    fn the_annotations_are_the_decision_inputs_and_read_nris_messages_whole() {
        let c = Container {
            linux: Some(super::super::messages::LinuxContainer { cgroups_path: "/kubepods/besteffort/p/c1".into() }),
            ..ctr(&[("oci-coresched-hook/group", "solo"), ("io.kubernetes.pod.namespace", "tenant-b")])
        };
        let p = pod(&[("oci-coresched-hook/group", "web"), ("koordinator.sh/qosClass", "BE")]);
        let got = annotations(&p, &c);
        assert_eq!(got, crate::input::pod_annotations(&pod_meta(&p), &container_meta(&c)));
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
}
