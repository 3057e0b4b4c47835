//! `explain` over the real OCI states in `tests/fixtures/states/` (captured from runc, crun and
//! podman at every stage): the real binary must infer the stage from each state and decide as
//! the lifecycle table (ARCHITECTURE.md §3) says, `--stage` must override the inference, and bad input must be
//! a usage error (exit 2) that names the problem.
//!
//! The hook config is a file in the test's temp dir, so the host's
//! `/etc/oci-coresched-hook/config.toml` never leaks in.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use common::{HOOK, HOOK_TIMEOUT, MANIFEST_DIR, Output, World};

/// Fixture families: file prefix, and whether its states carry the pod namespace `default`
/// (runc/crun bundles have Kubernetes annotations; podman was run with `--annotation` only).
const FAMILIES: [(&str, bool); 5] =
    [("runc", true), ("runc-detached", true), ("crun", true), ("crun-detached", true), ("podman", false)];

const STAGES: [&str; 6] = ["prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"];

fn fixtures_dir() -> PathBuf {
    Path::new(MANIFEST_DIR).join("tests/fixtures/states")
}

fn fixture(family: &str, stage: &str) -> PathBuf {
    fixtures_dir().join(format!("{family}-{stage}.json"))
}

/// The decision `explain` printed: exit 0 and exactly one JSON line on stdout.
fn decision(env: &World, out: &Output, what: &str) -> Value {
    check!(env, out.success(), "{what}: explain failed");
    let lines: Vec<&str> = out.stdout.lines().collect();
    check_eq!(env, lines.len(), 1, "{what}: lines on stdout");
    serde_json::from_str(lines[0]).unwrap_or_else(|e| env.fail(&format!("{what}: stdout is not JSON: {e}")))
}

/// What the lifecycle table says for a stage (given or inferred) and a state.
fn expect(env: &World, d: &Value, state: &Value, stage: &str, namespaced: bool, what: &str) {
    let id = &state["id"];
    let pid = state.get("pid").cloned().unwrap_or(Value::Null);
    let host_pid = pid.as_i64().is_some_and(|p| p > 1);
    let ns = if namespaced { json!("default") } else { Value::Null };
    let group = if namespaced { "default/web" } else { "web" };
    check_eq!(env, d["container_id"], *id, "{what}: container_id");
    check_eq!(env, d["pid"], pid, "{what}: pid (as the state gives it)");
    check_eq!(env, d["qos"], json!("LS"), "{what}: qos");
    check_eq!(env, d["namespace"], ns, "{what}: namespace");
    check_eq!(env, d["policy"], json!("default"), "{what}: policy");
    check_eq!(env, d["invalid"], Value::Null, "{what}: invalid");
    check_eq!(env, d["sched_idle"], json!(false), "{what}: sched_idle");
    match stage {
        "prestart" | "createRuntime" | "poststart" if host_pid => {
            check_eq!(env, d["action"], json!("ensure"), "{what}: action");
            check_eq!(env, d["group"], json!(group), "{what}: group");
            check_eq!(env, d["reason"], json!("group named by oci-coresched-hook/group"), "{what}: reason");
        }
        // An ensure stage without a usable pid: nothing to give a cookie to.
        "prestart" | "createRuntime" | "poststart" | "createContainer" | "startContainer" => {
            check_eq!(env, d["action"], json!("skip"), "{what}: action");
            check_eq!(env, d["group"], Value::Null, "{what}: group");
        }
        "poststop" => {
            check_eq!(env, d["action"], json!("forget"), "{what}: action");
            check_eq!(env, d["group"], Value::Null, "{what}: group");
        }
        other => env.fail(&format!("unknown stage {other}")),
    }
}

#[test]
fn every_fixture_is_covered() {
    let env = World::new("every_fixture_is_covered");
    let mut expected: Vec<String> = FAMILIES
        .iter()
        .flat_map(|(f, _)| STAGES.iter().map(move |s| format!("{f}-{s}.json")))
        .chain(FAMILIES.iter().map(|(f, _)| format!("{f}-config.json")))
        .chain(["podman-hooks.d-example.json".to_string(), "README.md".to_string()])
        .collect();
    expected.sort();
    let found = env.file_names(&fixtures_dir());
    check_eq!(env, found, expected, "files in {} (a new fixture needs a test here)", fixtures_dir().display());
}

/// Every fixture of a family, stage inferred from its status: ensure exactly at the host-pid
/// stages (prestart, createRuntime, poststart), skip at createContainer/startContainer, forget at
/// poststop.
fn infers_the_stage(test: &str, family: &str, namespaced: bool) {
    let env = World::new(test);
    env.write_config("");
    for stage in STAGES {
        let path = fixture(family, stage);
        let state = env.read_json(&path);
        let what = format!("{family}-{stage} (inferred from status {})", state["status"]);
        let d = decision(&env, &env.explain(&path, None), &what);
        expect(&env, &d, &state, stage, namespaced, &what);
        let ensure = matches!(stage, "prestart" | "createRuntime" | "poststart");
        check_eq!(env, d["action"] == "ensure", ensure, "{what}: ensure iff a host-pid stage");
    }
}

/// Every fixture of a family with every `--stage`: the flag wins over the status.
fn stage_flag_overrides_the_status(test: &str, family: &str, namespaced: bool) {
    let env = World::new(test);
    env.write_config("");
    for state_stage in STAGES {
        let path = fixture(family, state_stage);
        let state = env.read_json(&path);
        for stage in STAGES {
            let what = format!("{family}-{state_stage} with --stage {stage}");
            let d = decision(&env, &env.explain(&path, Some(stage)), &what);
            expect(&env, &d, &state, stage, namespaced, &what);
        }
    }
}

#[test]
fn runc_fixtures_infer_the_stage() {
    infers_the_stage("runc_fixtures_infer_the_stage", "runc", true);
}

#[test]
fn runc_detached_fixtures_infer_the_stage() {
    infers_the_stage("runc_detached_fixtures_infer_the_stage", "runc-detached", true);
}

#[test]
fn crun_fixtures_infer_the_stage() {
    infers_the_stage("crun_fixtures_infer_the_stage", "crun", true);
}

#[test]
fn crun_detached_fixtures_infer_the_stage() {
    infers_the_stage("crun_detached_fixtures_infer_the_stage", "crun-detached", true);
}

#[test]
fn podman_fixtures_infer_the_stage() {
    infers_the_stage("podman_fixtures_infer_the_stage", "podman", false);
}

#[test]
fn runc_fixtures_stage_flag_overrides_the_status() {
    stage_flag_overrides_the_status("runc_fixtures_stage_flag_overrides_the_status", "runc", true);
}

#[test]
fn runc_detached_fixtures_stage_flag_overrides_the_status() {
    stage_flag_overrides_the_status("runc_detached_fixtures_stage_flag_overrides_the_status", "runc-detached", true);
}

#[test]
fn crun_fixtures_stage_flag_overrides_the_status() {
    stage_flag_overrides_the_status("crun_fixtures_stage_flag_overrides_the_status", "crun", true);
}

#[test]
fn crun_detached_fixtures_stage_flag_overrides_the_status() {
    stage_flag_overrides_the_status("crun_detached_fixtures_stage_flag_overrides_the_status", "crun-detached", true);
}

#[test]
fn podman_fixtures_stage_flag_overrides_the_status() {
    stage_flag_overrides_the_status("podman_fixtures_stage_flag_overrides_the_status", "podman", false);
}

#[test]
fn explain_reads_the_state_from_stdin() {
    let env = World::new("explain_reads_the_state_from_stdin");
    env.write_config("");
    let path = fixture("crun", "poststart");
    let bytes = std::fs::read(&path).expect("read fixture");
    let state = env.read_json(&path);
    let mut cmd = Command::new(HOOK);
    cmd.arg("--config").arg(env.config_path()).arg("explain");
    let out = env.run_input(cmd, Some(bytes), HOOK_TIMEOUT);
    let d = decision(&env, &out, "crun-poststart on stdin");
    expect(&env, &d, &state, "poststart", true, "crun-poststart on stdin");
}

#[test]
fn explain_follows_the_config() {
    let env = World::new("explain_follows_the_config");
    let runc = fixture("runc", "createRuntime");
    let cases = [
        ("allow_cross_namespace_groups = true", "ensure", json!("web")),
        ("[qos.LS]\ncore_expeller = true", "ensure", json!("default/web-expeller")),
        ("[qos.LS]\nenable = false", "clear", Value::Null),
    ];
    for (config, action, group) in cases {
        env.write_config(config);
        let what = format!("runc-createRuntime with config {config:?}");
        let d = decision(&env, &env.explain(&runc, None), &what);
        check_eq!(env, d["action"], json!(action), "{what}: action");
        check_eq!(env, d["group"], group, "{what}: group");
    }
}

/// `explain` of a bad state: exit 2, nothing on stdout, and stderr naming the problem.
fn check_usage_error(env: &World, out: &Output, wants: &[&str], what: &str) {
    check_eq!(env, out.code(), Some(2), "{what}: exit code");
    check!(env, out.stdout.is_empty(), "{what}: printed a decision");
    check!(env, out.stderr.contains("oci-coresched-hook: error:"), "{what}: no error line");
    for want in wants {
        check!(env, out.stderr.contains(want), "{what}: stderr lacks {want:?}");
    }
}

#[test]
fn explain_rejects_a_non_json_state() {
    let env = World::new("explain_rejects_a_non_json_state");
    env.write_config("");
    let bad = env.path("state.json");
    std::fs::write(&bad, "this is not { json").unwrap();
    let out = env.explain(&bad, None);
    check_usage_error(&env, &out, &["not valid JSON", &bad.display().to_string()], "non-JSON state");
}

#[test]
fn explain_rejects_a_missing_state_file() {
    let env = World::new("explain_rejects_a_missing_state_file");
    env.write_config("");
    let missing = env.path("no-such-state.json");
    let out = env.explain(&missing, None);
    check_usage_error(&env, &out, &["failed to open state file", &missing.display().to_string()], "missing state");
}

#[test]
fn explain_rejects_bad_states() {
    let env = World::new("explain_rejects_bad_states");
    env.write_config("");
    let cases: [(&str, &str, &[&str]); 4] = [
        ("empty", "", &["empty"]),
        ("array", "[1, 2]", &["JSON object"]),
        ("no id", r#"{"status":"created","pid":42}"#, &["`id` is missing"]),
        (
            "unknown status",
            r#"{"id":"c1","status":"paused-ish","pid":42}"#,
            &["failed to infer the hook stage", "--stage"],
        ),
    ];
    for (name, text, wants) in cases {
        let path = env.path(&format!("{}.json", name.replace(' ', "-")));
        std::fs::write(&path, text).unwrap();
        let out = env.explain(&path, None);
        check_usage_error(&env, &out, wants, name);
    }
}
