//! One container, three routes to its decision, one answer. A container of a CRI pod is decided:
//!
//! - by the hook, from the OCI state and the bundle's `config.json` the runtime hands it (on the
//!   NRI route, the spec carries containerd's own annotations with the plugin's adjustment set
//!   over them);
//! - by the NRI plugin's catch-up, from NRI's pod and container (`nri::catchup::input`);
//! - by `rebuild` (and the hook's reload of a damaged cache), from the runtime's state directory
//!   (runc's `state.json`, its annotations as labels and the bundle's config).
//!
//! Each case runs the same container through all three and requires the same decision; the
//! cases include annotations a tenant could forge (another namespace's key on the container).

use std::collections::BTreeMap;
use std::path::Path;

use oci_coresched_hook::agent::nri::adjust;
use oci_coresched_hook::agent::nri::catchup;
use oci_coresched_hook::agent::nri::messages::{Container, LinuxContainer, PodSandbox, state};
use oci_coresched_hook::config::Config;
use oci_coresched_hook::decide::policy::ContainerInput;
use oci_coresched_hook::decide::policy::{Decision, Lifecycle};
use oci_coresched_hook::host::runtimes::read_runc;
use serde_json::json;

const PID: i64 = 4242;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// One case: the pod's and the container's CRI annotations and the container's cgroup parent.
struct Case {
    name: &'static str,
    pod: &'static [(&'static str, &'static str)],
    container: &'static [(&'static str, &'static str)],
    cgroups_path: &'static str,
}

fn pod(c: &Case) -> PodSandbox {
    PodSandbox {
        id: "sb1".into(),
        name: "web-0".into(),
        uid: "0c5e9a8e-uid".into(),
        namespace: "tenant-a".into(),
        annotations: map(c.pod),
    }
}

fn container(c: &Case) -> Container {
    Container {
        id: "c1".into(),
        pod_sandbox_id: "sb1".into(),
        name: "app".into(),
        state: state::RUNNING,
        pid: PID as u32,
        annotations: map(c.container),
        linux: Some(LinuxContainer { cgroups_path: c.cgroups_path.into() }),
    }
}

/// The spec's annotations under containerd with NRI and no annotation pass-through: containerd's
/// own keys, with the plugin's adjustment set over them.
fn spec_annotations(p: &PodSandbox, c: &Container) -> BTreeMap<String, String> {
    let mut ann = map(&[
        ("io.kubernetes.cri.container-type", "container"),
        ("io.kubernetes.cri.container-name", "app"),
        ("io.kubernetes.cri.image-name", "docker.io/local/field:1"),
        ("io.kubernetes.cri.sandbox-id", "sb1"),
        ("io.kubernetes.cri.sandbox-name", "web-0"),
        ("io.kubernetes.cri.sandbox-namespace", "tenant-a"),
        ("io.kubernetes.cri.sandbox-uid", "0c5e9a8e-uid"),
    ]);
    let adjustment = adjust::adjustment(p, c, "/usr/bin/oci-coresched-hook").expect("an app container is adjusted");
    ann.extend(adjustment.annotations);
    ann
}

fn write_json(path: &Path, v: &serde_json::Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, serde_json::to_vec_pretty(v).unwrap()).unwrap();
}

/// The three decisions of one case: (route, decision).
fn decisions(dir: &Path, case: &Case, config: &Config) -> Vec<(&'static str, Decision)> {
    let (p, c) = (pod(case), container(case));
    let ann = spec_annotations(&p, &c);

    // The hook: the state on stdin, the spec in the bundle.
    let bundle = dir.join("bundle");
    write_json(
        &bundle.join("config.json"),
        &json!({"ociVersion": "1.2.0", "annotations": ann, "linux": {"cgroupsPath": case.cgroups_path}}),
    );
    let state = json!({"ociVersion": "1.2.0", "id": "c1", "status": "creating", "pid": PID,
                       "bundle": bundle.display().to_string(), "annotations": ann});
    let state = oci_coresched_hook::host::oci_state::parse_state(&serde_json::to_vec(&state).unwrap()).unwrap();
    let hook = ContainerInput::from_state(&state, Lifecycle::Ensure);

    // The catch-up: NRI's pod and container.
    let nri = catchup::input(&p, &c, PID);

    // rebuild: runc's state dir (annotations as labels, the bundle's path among them).
    let mut labels: Vec<String> = ann.iter().map(|(k, v)| format!("{k}={v}")).collect();
    labels.push(format!("bundle={}", bundle.display()));
    let runc = dir.join("runc/c1");
    write_json(
        &runc.join("state.json"),
        &json!({"init_process_pid": PID, "init_process_start": 1,
                "config": {"labels": labels, "cgroups": {"path": case.cgroups_path}}}),
    );
    let rebuild = ContainerInput::from_runtime(&read_runc(&runc, "c1").unwrap());

    [("hook", hook), ("NRI catch-up", nri), ("rebuild", rebuild)]
        .into_iter()
        .map(|(route, input)| {
            (
                route,
                oci_coresched_hook::decide::policy::decide(&input, config)
                    .unwrap_or_else(|e| panic!("{}: {route}: {e}", case.name)),
            )
        })
        .collect()
}

const CASES: &[Case] = &[
    Case {
        name: "the pod as the group",
        pod: &[],
        container: &[],
        cgroups_path: "/kubepods/burstable/pod0c5e9a8e-uid",
    },
    Case {
        name: "a pod group, a forged namespace on the container",
        pod: &[("oci-coresched-hook/group", "web")],
        container: &[("io.kubernetes.pod.namespace", "tenant-b"), ("io.kubernetes.cri.sandbox-namespace", "tenant-b")],
        cgroups_path: "/kubepods/burstable/pod0c5e9a8e-uid",
    },
    Case {
        name: "the container's group over the pod's, BestEffort by its cgroup parent",
        pod: &[("oci-coresched-hook/group", "web")],
        container: &[("oci-coresched-hook/group", "solo")],
        cgroups_path: "/kubepods/besteffort/pod0c5e9a8e-uid",
    },
    Case {
        name: "systemd cgroup driver, Guaranteed, exclusive",
        pod: &[("oci-coresched-hook/policy", "exclusive")],
        container: &[],
        cgroups_path: "kubepods-pod0c5e9a8e_uid.slice:cri-containerd:c1",
    },
    Case {
        name: "policy none",
        pod: &[("oci-coresched-hook/policy", "none"), ("oci-coresched-hook/group", "web")],
        container: &[],
        cgroups_path: "kubepods-besteffort-pod0c5e9a8e_uid.slice:cri-containerd:c1",
    },
    Case {
        name: "Koordinator's keys, the class from the annotation",
        pod: &[("koordinator.sh/qosClass", "BE"), ("koordinator.sh/core-sched-group-id", "batch")],
        container: &[],
        cgroups_path: "/kubepods/pod0c5e9a8e-uid",
    },
    Case {
        name: "an invalid group",
        pod: &[],
        container: &[("oci-coresched-hook/group", "not a group!")],
        cgroups_path: "/kubepods/burstable/pod0c5e9a8e-uid",
    },
    Case {
        name: "SYSTEM is never touched",
        pod: &[("koordinator.sh/qosClass", "SYSTEM")],
        container: &[],
        cgroups_path: "/kubepods/burstable/pod0c5e9a8e-uid",
    },
];

#[test]
fn every_route_decides_a_container_alike() {
    let be = "[qos.BE]\nenable = true\ncore_expeller = true\nsched_idle = true\n[qos.LSR]\nenable = true\n";
    let configs = [
        ("defaults", Config::default()),
        ("BE expeller + idle, LSR on", Config::parse(be, Path::new("test.toml")).unwrap()),
    ];
    for (config_name, config) in &configs {
        for case in CASES {
            let dir = tempfile::tempdir().unwrap();
            let got = decisions(dir.path(), case, config);
            let (first_route, first) = &got[0];
            for (route, d) in &got[1..] {
                assert_eq!(d, first, "{} ({config_name}): {route} and {first_route} disagree", case.name);
            }
        }
    }
}

#[test]
fn a_forged_namespace_on_the_container_changes_no_route() {
    let dir = tempfile::tempdir().unwrap();
    let got = decisions(dir.path(), &CASES[1], &Config::default());
    for (route, d) in got {
        assert_eq!(d.group(), Some("tenant-a/web"), "{route}: {d:?}");
        assert_eq!(d.invalid, None, "{route}: {d:?}");
    }
}
