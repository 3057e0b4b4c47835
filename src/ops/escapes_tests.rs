//! The escape rule over the fake kernel, a fake `/proc` and runc-style state: each of its six
//! conditions, broken alone, keeps a container at cookie 0 from being reported.

use std::path::Path;

use serde_json::json;

use super::*;
use crate::config::Config;
use crate::host::kernel::fake::FakeMode;
use crate::host::runtimes::RuntimeRoot;
use crate::test_world::Ground;

const OURS: &str =
    r#"{"createRuntime": [{"path": "/usr/bin/oci-coresched-hook", "args": ["oci-coresched-hook", "hook"]}]}"#;

/// A runc-style container `id` under `<dir>/runc`: its state, its bundle's config.json with
/// `annotations` and `hooks`, its init `pid` in `/pod/<id>`.
pub(crate) fn container(g: &Ground, id: &str, pid: Pid, hooks: &str, annotations: serde_json::Value) {
    g.fp.spawn(pid, 1000 + pid as u64, 1, &format!("/pod/{id}")).unwrap();
    let bundle = g.path("bundles").join(id);
    std::fs::create_dir_all(&bundle).unwrap();
    let spec = json!({"annotations": annotations, "hooks": serde_json::from_str::<serde_json::Value>(hooks).unwrap()});
    std::fs::write(bundle.join("config.json"), spec.to_string()).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/runtime-state/runc-state.json");
    let mut st: serde_json::Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    st["id"] = json!(id);
    st["init_process_pid"] = json!(pid);
    st["init_process_start"] = json!(1000 + pid as u64);
    st["config"]["labels"] = json!([format!("bundle={}", bundle.display())]);
    st["config"]["Hooks"] = json!(null);
    let d = g.path("runc").join(id);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("state.json"), st.to_string()).unwrap();
}

pub(crate) fn roots(g: &Ground) -> Vec<RuntimeRoot> {
    vec![RuntimeRoot::runc(g.path("runc"))]
}

fn escaped(g: &Ground) -> Vec<String> {
    let scan = crate::session::running::scan(&roots(g), &g.proc, &Config::default());
    find(&scan.running, &g.kernel, &g.proc)
        .unwrap()
        .into_iter()
        .map(|e| format!("{}:{}:{}", e.id, e.group, e.pid))
        .collect()
}

#[test]
fn a_started_container_of_the_hook_at_cookie_0_is_escaped_and_nothing_else_is() {
    let g = Ground::new();
    let group = json!({"oci-coresched-hook/group": "web", "io.kubernetes.pod.namespace": "tenant-a"});
    container(&g, "esc", 100, OURS, group.clone());
    // Each of these breaks one condition.
    container(&g, "has-cookie", 200, OURS, group.clone());
    g.kernel.force(200, 0x77);
    container(&g, "unhooked", 300, r#"{"createRuntime": [{"path": "/usr/bin/other"}]}"#, group.clone());
    container(&g, "cleared", 400, OURS, json!({"oci-coresched-hook/policy": "none"}));
    container(&g, "created", 500, OURS, group.clone());
    std::fs::write(g.path("runc/created/exec.fifo"), "").unwrap();
    container(&g, "starting", 600, OURS, group.clone());
    g.fp.spawn(650, 6500, 1, "/system.slice/containerd.service").unwrap();
    std::fs::write(g.path("proc/650/cmdline"), b"/usr/sbin/runc\0--root\0/run/runc\0start\0starting\0").unwrap();
    container(&g, "reused", 700, OURS, group.clone());
    g.fp.kill(700, 1).unwrap();
    g.fp.spawn(700, 9999, 1, "/pod/reused").unwrap();
    assert_eq!(escaped(&g), ["esc:tenant-a/web:100"]);

    // The runtime command gone, the container it was starting is one too.
    g.fp.kill(650, 1).unwrap();
    assert_eq!(escaped(&g), ["esc:tenant-a/web:100", "starting:tenant-a/web:600"]);
}

#[test]
fn a_node_that_cannot_isolate_reports_no_escape_but_an_error() {
    let g = Ground::new();
    container(&g, "esc", 100, OURS, json!({}));
    g.kernel.set_mode(FakeMode::Unsupported);
    let scan = crate::session::running::scan(&roots(&g), &g.proc, &Config::default());
    let e = find(&scan.running, &g.kernel, &g.proc).unwrap_err();
    assert!(matches!(e, OpsError::Kernel { .. }), "{e}");
}

/// The DaemonSet's follower sees the runtimes' roots, not containerd's bundles: runc's
/// `state.json` alone (libcontainer's `Hooks`, its labels) says the hook runs for it.
#[test]
fn runcs_state_alone_names_the_hook_when_the_bundle_is_out_of_sight() {
    let g = Ground::new();
    container(&g, "esc", 100, "{}", json!({}));
    assert!(escaped(&g).is_empty(), "no hook in the spec: not an escape");
    let file = g.path("runc/esc/state.json");
    let mut st: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    st["config"]["Hooks"] = serde_json::from_str(OURS).unwrap();
    std::fs::write(&file, st.to_string()).unwrap();
    std::fs::remove_dir_all(g.path("bundles/esc")).unwrap();
    let found = escaped(&g);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("esc:"), "{found:?}");
}
