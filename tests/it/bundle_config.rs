//! The bundle's `config.json` as the hook and `rebuild` read it (issue 15). runc and crun run specs
//! with values no spec crate knows yet (a newer capability, a new seccomp action, a newer
//! `ociVersion`, vendor fields); the hook must still take `linux.cgroupsPath` (the kubelet QoS
//! class) and the annotations from them, and decide as `rebuild` does for the same container.
//!
//! For every captured config (`tests/fixtures/field/*-config.json`, `tests/fixtures/states/*-config.json`),
//! as captured and with such values added, the hook's read of the bundle and `rebuild`'s reads of a
//! runc and a crun state directory all give the file's cgroupsPath and annotations. A config.json
//! that is not JSON, too large or whose cgroupsPath is no string gives one warning naming the file,
//! and the hook decides from the state's annotations alone, exactly as without the file.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use oci_coresched_hook::decide::policy::ContainerInput;
use oci_coresched_hook::decide::policy::Lifecycle;
use oci_coresched_hook::host::oci_state::State;
use oci_coresched_hook::host::runtimes::{read_crun, read_runc};

use common::{MANIFEST_DIR, Output, World};

/// Largest config.json the hook reads.
const LIMIT: usize = oci_coresched_hook::host::bundle::MAX_CONFIG_BYTES as usize;

/// Every captured config.json.
fn captured_configs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["tests/fixtures/field", "tests/fixtures/states"] {
        for e in std::fs::read_dir(Path::new(MANIFEST_DIR).join(dir)).expect("fixture dir") {
            let p = e.expect("dir entry").path();
            if p.to_string_lossy().ends_with("-config.json") {
                out.push(p);
            }
        }
    }
    out.sort();
    assert!(out.len() >= 10, "captured configs missing: {out:?}");
    out
}

fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).expect("read fixture")).expect("fixture is JSON")
}

/// `v[key]` as an object, created when absent.
fn obj<'a>(v: &'a mut Value, key: &str) -> &'a mut serde_json::Map<String, Value> {
    if !v.get(key).is_some_and(Value::is_object) {
        v[key] = json!({});
    }
    v[key].as_object_mut().expect("object")
}

/// The captured config and what newer engines put in specs, each named.
fn variants(config: &Value) -> Vec<(&'static str, Value)> {
    let mut caps = config.clone();
    let sets = obj(&mut caps, "process").entry("capabilities").or_insert(json!({}));
    for set in ["bounding", "effective", "permitted"] {
        let list = sets.as_object_mut().expect("capabilities").entry(set).or_insert(json!([]));
        list.as_array_mut().expect("capability list").push(json!("CAP_FROM_A_NEWER_KERNEL"));
    }

    let mut fields = config.clone();
    fields["vendor.example/extension"] = json!({"knob": [1, 2, {"deep": null}]});
    obj(&mut fields, "linux").insert("intelRdtNext".into(), json!({"closID": 7}));
    obj(&mut fields, "process").insert("ioPriorityNext".into(), json!(3));

    let mut seccomp = config.clone();
    let sc = obj(&mut seccomp, "linux")
        .entry("seccomp")
        .or_insert(json!({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []}));
    sc["defaultAction"] = json!("SCMP_ACT_FROM_THE_FUTURE");
    let rule = json!({"names": ["futex2"], "action": "SCMP_ACT_KILL_FUTURE"});
    sc.as_object_mut()
        .expect("seccomp")
        .entry("syscalls")
        .or_insert(json!([]))
        .as_array_mut()
        .expect("list")
        .push(rule);

    let mut version = config.clone();
    version["ociVersion"] = json!("1.3.0");

    vec![
        ("as captured", config.clone()),
        ("an unknown capability", caps),
        ("unknown fields", fields),
        ("an unknown seccomp action", seccomp),
        ("ociVersion 1.3.0", version),
    ]
}

/// What the hook's bundle read, rebuild's runc read and rebuild's crun read give for a bundle
/// holding `bytes`: `(annotations, cgroupsPath)` each.
type Seen = (BTreeMap<String, String>, Option<String>);

fn reads(dir: &Path, bytes: &[u8]) -> [(&'static str, Seen); 3] {
    let bundle = dir.join("bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    std::fs::write(bundle.join("config.json"), bytes).unwrap();
    let state = State {
        id: "c1".into(),
        status: "creating".into(),
        pid: Some(4242),
        bundle: Some(bundle.clone()),
        annotations: BTreeMap::new(),
    };
    let hook = ContainerInput::from_state(&state, Lifecycle::Ensure);

    // runc: state.json with no annotations and no cgroup path of its own, the bundle in a label.
    let runc = dir.join("runc/c1");
    std::fs::create_dir_all(&runc).unwrap();
    let st = json!({"init_process_pid": 4242, "init_process_start": 1,
                    "config": {"labels": [format!("bundle={}", bundle.display())]}});
    std::fs::write(runc.join("state.json"), serde_json::to_vec(&st).unwrap()).unwrap();
    let r = ContainerInput::from_runtime(&read_runc(&runc, "c1").expect("runc state"));

    // crun: status + its copy of the config.
    let crun = dir.join("crun/c1");
    std::fs::create_dir_all(&crun).unwrap();
    let status = json!({"pid": 4242, "process-start-time": 1, "bundle": bundle.display().to_string()});
    std::fs::write(crun.join("status"), serde_json::to_vec(&status).unwrap()).unwrap();
    std::fs::write(crun.join("config.json"), bytes).unwrap();
    let c = ContainerInput::from_runtime(&read_crun(&crun, "c1").expect("crun state"));

    [
        ("hook", (hook.annotations, hook.cgroups_path)),
        ("rebuild (runc)", (r.annotations, r.cgroups_path)),
        ("rebuild (crun)", (c.annotations, c.cgroups_path)),
    ]
}

#[test]
fn hook_and_rebuild_read_every_captured_config_alike_whatever_newer_values_it_holds() {
    let tmp = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for path in captured_configs() {
        let config = read_json(&path);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let want_cg = config["linux"]["cgroupsPath"].as_str().map(str::to_string);
        assert!(want_cg.is_some(), "{name} has no cgroupsPath: the check would prove nothing");
        let want_ann: BTreeMap<String, String> = serde_json::from_value(config["annotations"].clone()).unwrap();
        for (what, v) in variants(&config) {
            let dir = tmp.path().join(format!("{name}-{}", what.replace(' ', "-")));
            for (reader, seen) in reads(&dir, &serde_json::to_vec_pretty(&v).unwrap()) {
                if seen != (want_ann.clone(), want_cg.clone()) {
                    failures.push(format!("{name} with {what}: {reader} read cgroupsPath {:?}", seen.1));
                }
            }
        }
    }
    assert!(failures.is_empty(), "readers lost the config's fields:\n{}", failures.join("\n"));
}

/// Bad files: nothing is taken from them, by any reader.
fn bad_configs() -> Vec<(&'static str, Vec<u8>)> {
    let base = read_json(&Path::new(MANIFEST_DIR).join("tests/fixtures/field/containerd-runc-be-config.json"));
    let mut wrong = base.clone();
    wrong["linux"]["cgroupsPath"] = json!(17);
    let mut big = base.clone();
    big["padding"] = json!("x".repeat(LIMIT));
    vec![
        ("not JSON", b"{\"ociVersion\": \"1.0.2\", \"linux\": {".to_vec()),
        ("too large", serde_json::to_vec(&big).unwrap()),
        ("a cgroupsPath that is no string", serde_json::to_vec(&wrong).unwrap()),
    ]
}

#[test]
fn bad_configs_give_nothing_to_hook_and_rebuild_alike() {
    let tmp = tempfile::tempdir().unwrap();
    for (what, bytes) in bad_configs() {
        for (reader, seen) in reads(&tmp.path().join(what.replace(' ', "-")), &bytes) {
            assert_eq!(seen, (BTreeMap::new(), None), "{what}: {reader}");
        }
    }
}

/// `explain --state FILE` of the BestEffort pod's captured createRuntime state, its bundle
/// holding `config` (or none).
fn explain(env: &World, config: Option<&[u8]>) -> (Output, Value, String) {
    let fixture = Path::new(MANIFEST_DIR).join("tests/fixtures/field/containerd-runc-be-createRuntime.json");
    let mut state = read_json(&fixture);
    let bundle = env.path("bundle");
    let _ = std::fs::remove_dir_all(&bundle);
    std::fs::create_dir_all(&bundle).unwrap();
    if let Some(c) = config {
        std::fs::write(bundle.join("config.json"), c).unwrap();
    }
    state["bundle"] = json!(bundle.display().to_string());
    let state_file = env.path("state.json");
    std::fs::write(&state_file, serde_json::to_vec(&state).unwrap()).unwrap();
    let cfg = env.config_path().display().to_string();
    let out = env.binary(&["--config", &cfg, "explain", "--state", &state_file.display().to_string()]);
    check!(env, out.success(), "explain failed:\n{out}");
    let d = serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| env.fail(&format!("not JSON ({e}):\n{out}")));
    (out, d, bundle.join("config.json").display().to_string())
}

#[test]
fn a_newer_spec_keeps_the_be_rule() {
    let env = World::new("a_newer_spec_keeps_the_be_rule");
    env.write_config("[qos.BE]\ncore_expeller = true\nsched_idle = true");
    let config = read_json(&Path::new(MANIFEST_DIR).join("tests/fixtures/field/containerd-runc-be-config.json"));
    for (what, v) in variants(&config) {
        let (out, d, _) = explain(&env, Some(&serde_json::to_vec(&v).unwrap()));
        check_eq!(env, out.stderr.as_str(), "", "{what}: stderr");
        check_eq!(env, d["qos"], json!("BE"), "{what}: qos (besteffort cgroupsPath)");
        check_eq!(env, d["sched_idle"], json!(true), "{what}: sched_idle");
    }
}

#[test]
fn a_bad_config_is_a_warning_naming_the_file_and_the_state_decides() {
    let env = World::new("a_bad_config_is_a_warning_naming_the_file_and_the_state_decides");
    env.write_config("[qos.BE]\ncore_expeller = true\nsched_idle = true");
    let (_, without, _) = explain(&env, None);
    let want_problem = [
        ("not JSON", "failed to parse bundle config {file}: EOF while parsing"),
        ("too large", "failed to read bundle config {file}: it is larger than the {LIMIT}-byte limit"),
        (
            "a cgroupsPath that is no string",
            "failed to parse bundle config {file}: `linux.cgroupsPath` is not a string",
        ),
    ];
    for ((what, bytes), (what2, problem)) in bad_configs().into_iter().zip(want_problem) {
        assert_eq!(what, what2);
        let (out, d, file) = explain(&env, Some(&bytes));
        let warnings: Vec<&str> = out.stderr.lines().filter(|l| l.contains("warn: ")).collect();
        check_eq!(env, warnings.len(), 1, "{what}: one warning:\n{out}");
        let (head, tail) = (
            format!("warn: {}", problem.replace("{file}", &file).replace("{LIMIT}", &LIMIT.to_string())),
            "; using the state's annotations only",
        );
        check!(
            env,
            warnings[0].contains(&head) && warnings[0].ends_with(tail),
            "{what}: warning {:?}, expected {head:?} … {tail:?}",
            warnings[0]
        );
        check_eq!(env, d, without, "{what}: the decision is the one without the file");
    }
}

/// A Guaranteed pod (kubelet cgroup parent with neither `besteffort` nor `burstable`, under the
/// cgroupfs and the systemd driver) follows the LSR rule when the config enables LSR, as
/// Koordinator's core-sched rule does, and the LS rule otherwise; a Burstable pod stays LS.
#[test]
fn a_guaranteed_pod_follows_the_lsr_rule_when_enabled() {
    let env = World::new("a_guaranteed_pod_follows_the_lsr_rule_when_enabled");
    let config = read_json(&Path::new(MANIFEST_DIR).join("tests/fixtures/field/containerd-runc-be-config.json"));
    let captured = config["linux"]["cgroupsPath"].as_str().expect("cgroupsPath").to_string();
    let id = captured.rsplit('/').next().expect("container id").to_string();
    let guaranteed = [format!("/kubepods/poduid-be/{id}"), format!("kubepods-poduid_be.slice:cri-containerd:{id}")];
    let lsr_why = "Guaranteed pod (kubelet cgroup parent) follows the LSR rule, as in Koordinator when LSR is enabled";
    let ls_why = "Guaranteed pod (kubelet cgroup parent) follows the LS rule: the config enables no [qos.LSR]";
    let cases = [
        ("[qos.LSR]\ncore_expeller = true", "LSR", ":expeller", lsr_why),
        ("[qos.LSR]\nenable = false\n[qos.LS]\ncore_expeller = true", "LS", ":expeller", ls_why),
        ("", "LS", "", ls_why),
    ];
    for (rules, qos, suffix, why) in cases {
        env.write_config(rules);
        for path in &guaranteed {
            let mut v = config.clone();
            v["linux"]["cgroupsPath"] = json!(path);
            let (out, d, _) = explain(&env, Some(&serde_json::to_vec(&v).unwrap()));
            let what = format!("cgroupsPath {path:?}, config {rules:?}");
            check_eq!(env, out.stderr.as_str(), "", "{what}: stderr");
            check_eq!(env, d["action"], json!("ensure"), "{what}: action");
            check_eq!(env, d["qos"], json!(qos), "{what}: qos (the class whose rule applied)");
            let group = d["group"].as_str().unwrap_or_default();
            check!(env, group.starts_with("tenant-a/pod:") && group.ends_with(suffix), "{what}: group {group:?}");
            let reason = d["reason"].as_str().unwrap_or_default();
            check!(env, reason.ends_with(why), "{what}: reason {reason:?} does not end with {why:?}");
        }
    }
    // The captured Burstable path is unaffected by an LSR rule.
    env.write_config("[qos.LSR]\ncore_expeller = true");
    let mut v = config.clone();
    v["linux"]["cgroupsPath"] = json!(captured.replace("besteffort", "burstable"));
    let (_, d, _) = explain(&env, Some(&serde_json::to_vec(&v).unwrap()));
    check_eq!(env, d["qos"], json!("LS"), "burstable: qos");
    check_eq!(env, d["reason"], json!("default group: the pod"), "burstable: reason");
}
