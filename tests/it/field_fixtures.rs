//! `explain` over the OCI states and bundle `config.json` files in `tests/fixtures/field/`,
//! captured in the field tier (tests/field/, Debian 13 guest) exactly as containerd 1.7 CRI (with
//! runc and crun) and podman 5 (with crun and runc) sent them to the hook: the real binary must
//! infer the stage from each state and decide as the lifecycle table (ARCHITECTURE.md §3) says, `--stage` must
//! override the inference, and the engines' real `config.json` files must parse and give the QoS
//! class their `linux.cgroupsPath` implies (kubelet cgroup parent → LS or BE; podman's own parent →
//! none). What the hook does when the bundle is gone (as it is on this host for the captured paths)
//! is pinned too.
//!
//! The hook config is a file in the test's temp dir, so the host's
//! `/etc/oci-coresched-hook/config.toml` never leaks in; bundles are temp dirs holding the captured
//! `config.json` byte for byte.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use common::{HOOK, HOOK_TIMEOUT, MANIFEST_DIR, Output, World};

/// Families captured at all three stages the engines run the hook at; their container names group
/// `web` (own annotation, or the pod's passed through by containerd) in namespace `tenant-a`.
const FAMILIES: [&str; 4] = ["containerd-runc", "containerd-crun", "podman-crun", "podman-runc"];

/// The BestEffort pod: no group annotation (the pod is the group), createRuntime and poststart only.
const BE: &str = "containerd-runc-be";

/// The stages the fixtures were captured at.
const STAGES: [&str; 3] = ["createRuntime", "poststart", "poststop"];

/// Every `--stage` value.
const STAGE_FLAGS: [&str; 6] =
    ["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"];

/// The BE rule the field tier's guest config has.
const BE_RULE: &str = "[qos.BE]\ncore_expeller = true\nsched_idle = true";

/// containerd's pod sandbox id annotation.
const SANDBOX_ID: &str = "io.kubernetes.cri.sandbox-id";

fn fixtures_dir() -> PathBuf {
    Path::new(MANIFEST_DIR).join("tests/fixtures/field")
}

fn fixture(family: &str, stage: &str) -> PathBuf {
    fixtures_dir().join(format!("{family}-{stage}.json"))
}

/// The stages a family was captured at.
fn stages_of(family: &str) -> &'static [&'static str] {
    if family == BE { &STAGES[..2] } else { &STAGES }
}

/// `oci-coresched-hook --config CFG explain` with the fixture's raw bytes on stdin, as the engine
/// sent them.
fn explain_stdin(env: &World, state: &Path) -> Output {
    let bytes = std::fs::read(state).unwrap_or_else(|e| env.fail(&format!("read {}: {e}", state.display())));
    let mut cmd = Command::new(HOOK);
    cmd.arg("--config").arg(env.config_path()).arg("explain");
    env.run_input(cmd, Some(bytes), HOOK_TIMEOUT)
}

/// The decision `explain` printed: exit 0 and exactly one JSON line on stdout.
fn decision(env: &World, out: &Output, what: &str) -> Value {
    check!(env, out.success(), "{what}: explain failed");
    let lines: Vec<&str> = out.stdout.lines().collect();
    check_eq!(env, lines.len(), 1, "{what}: lines on stdout");
    serde_json::from_str(lines[0]).unwrap_or_else(|e| env.fail(&format!("{what}: stdout is not JSON: {e}")))
}

/// The state's `bundle`.
fn bundle_of(env: &World, state: &Value, what: &str) -> String {
    state["bundle"].as_str().map(str::to_string).unwrap_or_else(|| env.fail(&format!("{what}: no bundle in the state")))
}

/// The captured bundle paths are the guest's: the missing-bundle expectations need them absent here.
fn check_guest_bundle_absent(env: &World, state: &Value, what: &str) {
    let config = Path::new(&bundle_of(env, state, what)).join("config.json");
    check!(env, !config.exists(), "{what}: {} exists on this host; these tests need it absent", config.display());
}

/// The warning the hook logs (stderr and log file) when the bundle's config.json cannot be read.
fn missing_bundle_warning(bundle: &str) -> String {
    format!(
        "warn: failed to read bundle config {bundle}/config.json: No such file or directory (os error 2); \
         using the state's annotations only"
    )
}

/// The group and reason a family's ensure decision has with the default rule.
fn expected_group(env: &World, family: &str, state: &Value) -> (String, &'static str) {
    if family != BE {
        return ("tenant-a/web".to_string(), "group named by oci-coresched-hook/group");
    }
    let sandbox = state["annotations"][SANDBOX_ID]
        .as_str()
        .unwrap_or_else(|| env.fail(&format!("{family}: state has no {SANDBOX_ID}")));
    check!(
        env,
        sandbox.len() == 64 && sandbox.bytes().all(|b| b.is_ascii_hexdigit()),
        "{family}: sandbox id {sandbox:?}"
    );
    (format!("tenant-a/pod:{sandbox}"), "default group: the pod")
}

/// What the lifecycle table says for a stage (given or inferred) and a state, its bundle absent:
/// the guest's path is not on this host, so the decision comes from the state's annotations alone
/// and has no QoS class (neither engine puts `koordinator.sh/qosClass` in these states).
fn expect(env: &World, d: &Value, out: &Output, family: &str, state: &Value, stage: &str, what: &str) {
    let pid = state.get("pid").cloned().unwrap_or(Value::Null);
    let host_pid = pid.as_i64().is_some_and(|p| p > 1);
    check_eq!(env, d["container_id"], state["id"], "{what}: container_id");
    check_eq!(env, d["pid"], pid, "{what}: pid (as the state gives it)");
    check_eq!(env, d["namespace"], json!("tenant-a"), "{what}: namespace");
    check_eq!(env, d["policy"], json!("default"), "{what}: policy");
    check_eq!(env, d["qos"], Value::Null, "{what}: qos (no bundle, no qosClass annotation)");
    check_eq!(env, d["invalid"], Value::Null, "{what}: invalid");
    check_eq!(env, d["sched_idle"], json!(false), "{what}: sched_idle");
    let ensure_stage = matches!(stage, "prestart" | "createRuntime" | "poststart");
    match stage {
        _ if ensure_stage && host_pid => {
            let (group, reason) = expected_group(env, family, state);
            check_eq!(env, d["action"], json!("ensure"), "{what}: action");
            check_eq!(env, d["group"], json!(group), "{what}: group");
            check_eq!(env, d["reason"], json!(reason), "{what}: reason");
        }
        // An ensure stage without a usable pid (runc's and podman's poststop have none, crun's 0).
        _ if ensure_stage => {
            check_eq!(env, d["action"], json!("skip"), "{what}: action");
            check_eq!(env, d["group"], Value::Null, "{what}: group");
        }
        "createContainer" | "startContainer" => {
            check_eq!(env, d["action"], json!("skip"), "{what}: action");
            check_eq!(env, d["group"], Value::Null, "{what}: group");
            check_eq!(env, d["reason"], json!("nothing to do at this stage"), "{what}: reason");
        }
        "poststop" => {
            check_eq!(env, d["action"], json!("forget"), "{what}: action");
            check_eq!(env, d["group"], Value::Null, "{what}: group");
            check_eq!(env, d["reason"], json!("container stopped: forget it and drop its group when empty"), "{what}");
        }
        other => env.fail(&format!("unknown stage {other}")),
    }
    // The bundle is read only at an ensure stage; its absence is a warning, never an error.
    let warning = missing_bundle_warning(&bundle_of(env, state, what));
    check_eq!(env, out.stderr.contains(&warning), ensure_stage, "{what}: stderr has {warning:?}");
    check_eq!(env, out.stderr.lines().count(), usize::from(ensure_stage), "{what}: lines on stderr");
}

#[test]
fn every_fixture_is_covered() {
    let env = World::new("every_fixture_is_covered");
    let mut expected: Vec<String> = FAMILIES
        .iter()
        .chain([&BE])
        .flat_map(|f| stages_of(f).iter().chain(&["config"]).map(move |s| format!("{f}-{s}.json")))
        .chain(["README.md".to_string()])
        .collect();
    expected.sort();
    let found = env.file_names(&fixtures_dir());
    check_eq!(env, found, expected, "files in {} (a new fixture needs a test here)", fixtures_dir().display());
}

/// The pid key of a captured state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pid {
    /// A pid of the guest's pid namespace (the container's init).
    Host,
    /// `"pid": 0` (crun's "no pid").
    Zero,
    /// No `pid` key.
    Absent,
}

/// One captured state's shape: family, stage, ociVersion, status, pid, keys (sorted).
type Shape = (&'static str, &'static str, &'static str, &'static str, Pid, &'static [&'static str]);

/// The states have the shape tests/fixtures/field/README.md documents (a recapture that changes
/// one must update the README and the expectations above).
#[test]
fn states_have_the_documented_shape() {
    let env = World::new("states_have_the_documented_shape");
    // runc writes these keys, crun adds its non-spec `root`; podman's poststop state is its own.
    let runc: &[&str] = &["annotations", "bundle", "id", "ociVersion", "pid", "status"];
    let crun: &[&str] = &["annotations", "bundle", "id", "ociVersion", "pid", "root", "status"];
    let no_pid: &[&str] = &["annotations", "bundle", "id", "ociVersion", "status"];
    let table: [Shape; 14] = [
        ("containerd-runc", "createRuntime", "1.2.0", "creating", Pid::Host, runc),
        ("containerd-runc", "poststart", "1.2.0", "created", Pid::Host, runc),
        ("containerd-runc", "poststop", "1.2.0", "stopped", Pid::Absent, no_pid),
        ("containerd-crun", "createRuntime", "1.0", "created", Pid::Host, crun),
        ("containerd-crun", "poststart", "1.0", "running", Pid::Host, crun),
        ("containerd-crun", "poststop", "1.0", "stopped", Pid::Zero, crun),
        (BE, "createRuntime", "1.2.0", "creating", Pid::Host, runc),
        (BE, "poststart", "1.2.0", "created", Pid::Host, runc),
        ("podman-crun", "createRuntime", "1.0", "created", Pid::Host, crun),
        ("podman-crun", "poststart", "1.0", "running", Pid::Host, crun),
        ("podman-crun", "poststop", "1.2.0", "stopped", Pid::Absent, no_pid),
        ("podman-runc", "createRuntime", "1.2.0", "creating", Pid::Host, runc),
        ("podman-runc", "poststart", "1.2.0", "created", Pid::Host, runc),
        ("podman-runc", "poststop", "1.2.0", "stopped", Pid::Absent, no_pid),
    ];
    for (family, stage, version, status, pid, keys) in table {
        let what = format!("{family}-{stage}");
        let bytes = std::fs::read(fixture(family, stage)).expect("read fixture");
        check_eq!(env, bytes.last(), Some(&b'}'), "{what}: raw bytes end in '}}' (no newline)");
        let state = env.read_json(&fixture(family, stage));
        let mut got_keys: Vec<&str> = state.as_object().expect("object").keys().map(String::as_str).collect();
        got_keys.sort();
        check_eq!(env, got_keys, keys.to_vec(), "{what}: keys (sorted)");
        check_eq!(env, state["ociVersion"], json!(version), "{what}: ociVersion");
        check_eq!(env, state["status"], json!(status), "{what}: status");
        let got_pid = match state.get("pid") {
            None => Pid::Absent,
            Some(p) if *p == json!(0) => Pid::Zero,
            Some(p) => {
                check!(env, p.as_i64().is_some_and(|p| p > 1), "{what}: pid {p}");
                Pid::Host
            }
        };
        check_eq!(env, got_pid, pid, "{what}: pid");
        // One container per family: same id and bundle at every stage, same init pid while it lives.
        let first = env.read_json(&fixture(family, "createRuntime"));
        check_eq!(env, state["id"], first["id"], "{what}: id");
        check_eq!(env, state["bundle"], first["bundle"], "{what}: bundle");
        if pid == Pid::Host {
            check_eq!(env, state["pid"], first["pid"], "{what}: pid");
        }
        let id = state["id"].as_str().expect("id");
        check!(env, bundle_of(&env, &state, &what).contains(id), "{what}: bundle names the id");
    }
    // Podman builds the poststop state itself, from its own annotations only.
    for family in ["podman-crun", "podman-runc"] {
        let state = env.read_json(&fixture(family, "poststop"));
        check_eq!(
            env,
            state["annotations"],
            json!({"io.kubernetes.pod.namespace": "tenant-a", "oci-coresched-hook/group": "web"}),
            "{family}-poststop: annotations"
        );
    }
    // The configs: the cgroup parent the QoS class is read from, and the hook stages the engine
    // wired (podman runs hooks.d poststop hooks itself, so its config.json has none).
    let configs = [
        ("containerd-runc", "/kubepods/burstable/poduid-web2/", ["createRuntime", "poststart", "poststop"].as_slice()),
        ("containerd-crun", "/kubepods/burstable/poduid-crun1/", &["createRuntime", "poststart", "poststop"]),
        (BE, "/kubepods/besteffort/poduid-be/", &["createRuntime", "poststart", "poststop"]),
        ("podman-crun", "/libpod_parent/libpod-", &["createRuntime", "poststart"]),
        ("podman-runc", "/libpod_parent/libpod-", &["createRuntime", "poststart"]),
    ];
    for (family, parent, hooks) in configs {
        let what = format!("{family}-config");
        let config = env.read_json(&fixture(family, "config"));
        let id = env.read_json(&fixture(family, "createRuntime"))["id"].as_str().expect("id").to_string();
        check_eq!(env, config["linux"]["cgroupsPath"], json!(format!("{parent}{id}")), "{what}: cgroupsPath");
        let mut got: Vec<&str> = config["hooks"].as_object().expect("hooks").keys().map(String::as_str).collect();
        got.sort();
        let mut want = hooks.to_vec();
        want.sort();
        check_eq!(env, got, want, "{what}: hook stages (sorted)");
    }
}

/// Every fixture of a family, stage inferred from its status (given as a file and as the raw bytes
/// on stdin): ensure at createRuntime and poststart, forget at poststop.
fn infers_the_stage(test: &str, family: &str) {
    let env = World::new(test);
    env.write_config("");
    for &stage in stages_of(family) {
        let path = fixture(family, stage);
        let state = env.read_json(&path);
        let what = format!("{family}-{stage} (inferred from status {})", state["status"]);
        check_guest_bundle_absent(&env, &state, &what);
        let out = env.explain(&path, None);
        let d = decision(&env, &out, &what);
        expect(&env, &d, &out, family, &state, stage, &what);
        let want = if stage == "poststop" { "forget" } else { "ensure" };
        check_eq!(env, d["action"], json!(want), "{what}: action");
        let on_stdin = decision(&env, &explain_stdin(&env, &path), &format!("{what} on stdin"));
        check_eq!(env, on_stdin, d, "{what}: the same decision from stdin");
    }
}

/// Every fixture of a family with every `--stage`: the flag wins over the status.
fn stage_flag_overrides_the_status(test: &str, family: &str) {
    let env = World::new(test);
    env.write_config("");
    for &state_stage in stages_of(family) {
        let path = fixture(family, state_stage);
        let state = env.read_json(&path);
        check_guest_bundle_absent(&env, &state, &format!("{family}-{state_stage}"));
        for stage in STAGE_FLAGS {
            let what = format!("{family}-{state_stage} with --stage {stage}");
            let out = env.explain(&path, Some(stage));
            let d = decision(&env, &out, &what);
            expect(&env, &d, &out, family, &state, stage, &what);
        }
    }
}

#[test]
fn containerd_runc_fixtures_infer_the_stage() {
    infers_the_stage("containerd_runc_fixtures_infer_the_stage", "containerd-runc");
}

#[test]
fn containerd_crun_fixtures_infer_the_stage() {
    infers_the_stage("containerd_crun_fixtures_infer_the_stage", "containerd-crun");
}

#[test]
fn containerd_runc_be_fixtures_infer_the_stage() {
    infers_the_stage("containerd_runc_be_fixtures_infer_the_stage", BE);
}

#[test]
fn podman_crun_fixtures_infer_the_stage() {
    infers_the_stage("podman_crun_fixtures_infer_the_stage", "podman-crun");
}

#[test]
fn podman_runc_fixtures_infer_the_stage() {
    infers_the_stage("podman_runc_fixtures_infer_the_stage", "podman-runc");
}

#[test]
fn containerd_runc_fixtures_stage_flag_overrides_the_status() {
    stage_flag_overrides_the_status("containerd_runc_fixtures_stage_flag_overrides_the_status", "containerd-runc");
}

#[test]
fn containerd_crun_fixtures_stage_flag_overrides_the_status() {
    stage_flag_overrides_the_status("containerd_crun_fixtures_stage_flag_overrides_the_status", "containerd-crun");
}

#[test]
fn containerd_runc_be_fixtures_stage_flag_overrides_the_status() {
    stage_flag_overrides_the_status("containerd_runc_be_fixtures_stage_flag_overrides_the_status", BE);
}

#[test]
fn podman_crun_fixtures_stage_flag_overrides_the_status() {
    stage_flag_overrides_the_status("podman_crun_fixtures_stage_flag_overrides_the_status", "podman-crun");
}

#[test]
fn podman_runc_fixtures_stage_flag_overrides_the_status() {
    stage_flag_overrides_the_status("podman_runc_fixtures_stage_flag_overrides_the_status", "podman-runc");
}

/// A bundle dir in the temp dir holding `config` as `config.json`, and the family's captured
/// `stage` state with `bundle` rewritten to that dir, written to a state file. Returns the file.
fn state_with_bundle(env: &World, family: &str, stage: &str, config: &[u8]) -> PathBuf {
    let bundle = env.path(&format!("bundle-{family}"));
    std::fs::create_dir_all(&bundle).expect("mkdir bundle");
    std::fs::write(bundle.join("config.json"), config).expect("write config.json");
    let mut state = env.read_json(&fixture(family, stage));
    state["bundle"] = json!(bundle.display().to_string());
    let path = env.path(&format!("{family}-{stage}-with-bundle.json"));
    std::fs::write(&path, serde_json::to_vec(&state).expect("serialize state")).expect("write state");
    path
}

/// The same, with the family's captured config.json unchanged.
fn state_with_captured_bundle(env: &World, family: &str, stage: &str) -> PathBuf {
    let config = std::fs::read(fixture(family, "config")).expect("read captured config.json");
    state_with_bundle(env, family, stage, &config)
}

/// `explain` of a state whose bundle is present: the config.json must have been read (no warning).
fn decision_with_bundle(env: &World, state: &Path, what: &str) -> Value {
    let out = env.explain(state, None);
    let d = decision(env, &out, what);
    check_eq!(env, out.stderr.as_str(), "", "{what}: stderr (a config.json the hook failed to read?)");
    d
}

/// The decision of the captured state as is (its guest bundle absent here), stage inferred: a
/// warning when the bundle is read (every status but `stopped`), nothing on stderr otherwise.
fn decision_without_bundle(env: &World, family: &str, stage: &str) -> Value {
    let path = fixture(family, stage);
    let state = env.read_json(&path);
    let what = format!("{family}-{stage} without its bundle");
    check_guest_bundle_absent(env, &state, &what);
    let out = env.explain(&path, None);
    let d = decision(env, &out, &what);
    if state["status"] == "stopped" {
        check_eq!(env, out.stderr.as_str(), "", "{what}: stderr (the bundle is not read at poststop)");
    } else {
        let warning = missing_bundle_warning(&bundle_of(env, &state, &what));
        check!(env, out.stderr.contains(&warning), "{what}: stderr lacks {warning:?}");
    }
    d
}

/// containerd's config.json (CRI spec from the base runtime spec) parses, and its kubelet cgroup
/// parent `/kubepods/burstable/…` gives QoS class LS; nothing else changes. At poststop the bundle
/// is not read, so nothing changes there.
#[test]
fn containerd_configs_give_qos_ls() {
    let env = World::new("containerd_configs_give_qos_ls");
    env.write_config("");
    for family in ["containerd-runc", "containerd-crun"] {
        for stage in ["createRuntime", "poststart"] {
            let what = format!("{family}-{stage} with its config.json");
            let d = decision_with_bundle(&env, &state_with_captured_bundle(&env, family, stage), &what);
            check_eq!(env, d["action"], json!("ensure"), "{what}: action");
            check_eq!(env, d["group"], json!("tenant-a/web"), "{what}: group");
            check_eq!(env, d["qos"], json!("LS"), "{what}: qos (burstable cgroup parent)");
            let mut want = decision_without_bundle(&env, family, stage);
            want["qos"] = json!("LS");
            check_eq!(env, d, want, "{what}: the decision without the bundle, but for qos");
        }
        let what = format!("{family}-poststop with its config.json");
        let d = decision_with_bundle(&env, &state_with_captured_bundle(&env, family, "poststop"), &what);
        check_eq!(env, d, decision_without_bundle(&env, family, "poststop"), "{what}: as without the bundle");
        check_eq!(env, d["qos"], Value::Null, "{what}: qos (the bundle is not read at poststop)");
    }
}

/// The BestEffort pod under the field tier's BE rule: with its config.json the cgroup parent
/// `/kubepods/besteffort/…` gives BE, so the pod's expeller group and `cpu.idle`. Without the
/// bundle (the guest's path is absent here) the hook logs a warning, decides from the state's
/// annotations alone and exits 0: no QoS class, so the default rule (the pod's plain group, no
/// sched_idle). The BE rule is lost, but the container still shares only with its pod.
#[test]
fn containerd_best_effort_config_gives_the_be_rule() {
    let env = World::new("containerd_best_effort_config_gives_the_be_rule");
    env.write_config(BE_RULE);
    for stage in ["createRuntime", "poststart"] {
        let state = env.read_json(&fixture(BE, stage));
        let sandbox = state["annotations"][SANDBOX_ID].as_str().expect("sandbox id").to_string();

        let what = format!("{BE}-{stage} with its config.json, BE rule");
        let d = decision_with_bundle(&env, &state_with_captured_bundle(&env, BE, stage), &what);
        check_eq!(env, d["action"], json!("ensure"), "{what}: action");
        check_eq!(env, d["container_id"], state["id"], "{what}: container_id");
        check_eq!(env, d["pid"], state["pid"], "{what}: pid");
        check_eq!(env, d["namespace"], json!("tenant-a"), "{what}: namespace");
        check_eq!(env, d["policy"], json!("default"), "{what}: policy");
        check_eq!(env, d["qos"], json!("BE"), "{what}: qos (besteffort cgroup parent)");
        check_eq!(env, d["sched_idle"], json!(true), "{what}: sched_idle");
        // An internal key (`pod:<id>`) takes ":expeller" (policy::INTERNAL_EXPELLER_SUFFIX).
        check_eq!(env, d["group"], json!(format!("tenant-a/pod:{sandbox}:expeller")), "{what}: group");
        check_eq!(env, d["reason"], json!("default group: the pod, expeller group of QoS class BE"), "{what}");
        check_eq!(env, d["invalid"], Value::Null, "{what}: invalid");

        let what = format!("{BE}-{stage} without its bundle, BE rule");
        let d = decision_without_bundle(&env, BE, stage);
        check_eq!(env, d["action"], json!("ensure"), "{what}: action");
        check_eq!(env, d["qos"], Value::Null, "{what}: qos");
        check_eq!(env, d["sched_idle"], json!(false), "{what}: sched_idle");
        check_eq!(env, d["group"], json!(format!("tenant-a/pod:{sandbox}")), "{what}: group");
        check_eq!(env, d["reason"], json!("default group: the pod"), "{what}: reason");
        check_eq!(env, d["invalid"], Value::Null, "{what}: invalid");
    }
    // The default rule for BE: the class is still read, but neither expeller nor cpu.idle.
    env.write_config("");
    let what = format!("{BE}-createRuntime with its config.json, default config");
    let d = decision_with_bundle(&env, &state_with_captured_bundle(&env, BE, "createRuntime"), &what);
    let sandbox = env.read_json(&fixture(BE, "createRuntime"))["annotations"][SANDBOX_ID].clone();
    check_eq!(env, d["qos"], json!("BE"), "{what}: qos");
    check_eq!(env, d["sched_idle"], json!(false), "{what}: sched_idle");
    check_eq!(env, d["group"], json!(format!("tenant-a/pod:{}", sandbox.as_str().unwrap_or_default())), "{what}");
}

/// podman 5.4's config.json (its whole generated spec, seccomp profile and all) parses, and its
/// cgroup parent `/libpod_parent/libpod-<id>` is no kubelet one: the decision is the same with the
/// bundle as without, at every stage and under the BE rule.
#[test]
fn podman_configs_change_nothing() {
    let env = World::new("podman_configs_change_nothing");
    for config in ["", BE_RULE] {
        env.write_config(config);
        for family in ["podman-crun", "podman-runc"] {
            for stage in STAGES {
                let what = format!("{family}-{stage} with its config.json, config {config:?}");
                let d = decision_with_bundle(&env, &state_with_captured_bundle(&env, family, stage), &what);
                check_eq!(env, d, decision_without_bundle(&env, family, stage), "{what}: as without the bundle");
                check_eq!(env, d["qos"], Value::Null, "{what}: qos");
            }
        }
    }
}

/// The `linux.cgroupsPath` of podman's full spec is read: with a kubelet BestEffort parent put in
/// its place (everything else of the captured spec unchanged) the BE rule applies.
#[test]
fn podman_config_cgroups_path_is_read() {
    let env = World::new("podman_config_cgroups_path_is_read");
    env.write_config(BE_RULE);
    for family in ["podman-crun", "podman-runc"] {
        let mut config = env.read_json(&fixture(family, "config"));
        config["linux"]["cgroupsPath"] = json!("/kubepods/besteffort/poduid-x/c1");
        let bytes = serde_json::to_vec(&config).expect("serialize config");
        let what = format!("{family}-createRuntime with a besteffort cgroupsPath in its config.json");
        let d = decision_with_bundle(&env, &state_with_bundle(&env, family, "createRuntime", &bytes), &what);
        check_eq!(env, d["action"], json!("ensure"), "{what}: action");
        check_eq!(env, d["qos"], json!("BE"), "{what}: qos");
        check_eq!(env, d["sched_idle"], json!(true), "{what}: sched_idle");
        check_eq!(env, d["group"], json!("tenant-a/web-expeller"), "{what}: group (a named group takes -expeller)");
    }
}
