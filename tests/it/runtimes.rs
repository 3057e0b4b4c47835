//! The real hook binary under real runc, crun and podman (tier 2 of ARCHITECTURE.md §9).
//!
//! Each test has its own temp dir, container ids, runtime roots, hook config, state dir and log
//! file, so they run in parallel. What is checked is what the hook logged (`decision {...}` lines
//! in its log file), what the runtime did (exit code, its error text) and whether the container's
//! command ran (it writes `$$` to a bind-mounted marker file).
//!
//! The host kernel may lack core scheduling; then the hook fails open by default (exit 0, a
//! warning) and fails closed with `fail_closed = true`. The fail-closed tests use a state dir that
//! is a regular file, which makes the hook fail on any kernel.

use crate::common;

use std::time::Duration;

use serde_json::{Value, json};

use common::{
    Bundle, BundleSpec, Need, Oci, Podman, Rt, StageArgs, World, broken_state_dir_failure_text, k8s_annotations,
    make_bundle, set_annotation,
};

/// How long to wait for hook log lines that may lag (podman's poststop runs during its cleanup).
const LOG_WAIT: Duration = Duration::from_secs(15);

const GROUP: &str = "tenant-a/web";

/// The spec of a container that writes `$$` to its marker. Under attached `crun run` it then
/// lingers: crun 1.8.1 waits for a hook with `sigtimedwait(SIGCHLD)` and accepts only the hook's
/// pid; when the container's init and the poststart hook both exit before crun dequeues the first
/// SIGCHLD, the two coalesce into one (the init's), and crun fails the run after the hook's full
/// timeout with `timeout expired for .../oci-coresched-hook` (seen here under load, with an init
/// that exited at once).
fn container_spec(rt: Rt, id: &str, annotations: Vec<(String, String)>, stages: StageArgs) -> BundleSpec {
    let mut s = BundleSpec::new(id, annotations, stages);
    if rt == Rt::Crun {
        s.args = vec!["sh".into(), "-c".into(), "echo $$ > /share/marker; sleep 0.5".into()];
    }
    s
}

/// Checks an `ensure` decision of the default policy for container `id`.
fn check_ensure(env: &World, d: &Value, id: &str, pid: i64, group: &str, what: &str) {
    check_eq!(env, d["action"], json!("ensure"), "{what}: action");
    check_eq!(env, d["container_id"], json!(id), "{what}: container_id");
    check_eq!(env, d["pid"], json!(pid), "{what}: pid (the init's host pid)");
    check_eq!(env, d["policy"], json!("default"), "{what}: policy");
    check_eq!(env, d["group"], json!(group), "{what}: group");
    check_eq!(env, d["namespace"], json!("tenant-a"), "{what}: namespace");
    check_eq!(env, d["qos"], json!("LS"), "{what}: qos");
    check_eq!(env, d["invalid"], Value::Null, "{what}: invalid");
}

/// Checks the poststop decision.
fn check_forget(env: &World, d: &Value, id: &str, what: &str) {
    check_eq!(env, d["action"], json!("forget"), "{what}: action");
    check_eq!(env, d["container_id"], json!(id), "{what}: container_id");
    check!(env, d["pid"].is_null() || d["pid"] == json!(0), "{what}: poststop has no pid (null or 0)");
}

/// createRuntime and poststart ensure with `pid`, then poststop forgets; nothing else.
fn check_lifecycle(env: &World, id: &str, pid: i64) {
    let ds = env.wait_decisions(id, 3, LOG_WAIT);
    check_eq!(env, ds.len(), 3, "decision lines for {id} (createRuntime, poststart, poststop)");
    check_ensure(env, &ds[0], id, pid, GROUP, "createRuntime");
    check_ensure(env, &ds[1], id, pid, GROUP, "poststart");
    check_forget(env, &ds[2], id, "poststop");
    // The line format is a contract (admins grep for it), not only its JSON.
    let log = env.hook_log();
    check!(
        env,
        log.contains(" INFO oci-coresched-hook[")
            && log.contains(&format!("]: decision {{\"action\":\"ensure\",\"container_id\":\"{id}\",\"pid\":{pid},")),
        "the log has no `decision {{\"action\":\"ensure\",...` line in the documented format"
    );
    check!(env, log.contains(&format!("\"group\":\"{GROUP}\"")), "the log lacks \"group\":\"{GROUP}\"");
    check!(env, env.log_lines("ERROR").is_empty(), "the hook logged errors for a valid container");
}

/// The host pid the container wrote to its marker (it runs in the host pid namespace).
fn marker_pid(env: &World, bundle: &Bundle) -> i64 {
    let Some(m) = bundle.marker() else { env.fail("the container did not run: no marker") };
    let pid: i64 = m.trim().parse().unwrap_or_else(|e| env.fail(&format!("marker {m:?} is not a pid: {e}")));
    check!(env, pid > 1, "marker pid {pid} is not a host pid");
    pid
}

// ---------------------------------------------------------------------------------------------
// runc and crun
// ---------------------------------------------------------------------------------------------

/// (a) attached `run`, stage inferred: ensure at createRuntime and poststart with the init's host
/// pid, forget at poststop, default fail-open config.
fn attached_lifecycle(rt: Rt, test: &str) {
    if !common::require(test, &rt.needs()) {
        return;
    }
    let env = World::new(test);
    env.write_config("");
    let id = env.container_id(rt.name());
    let mut spec = container_spec(rt, &id, k8s_annotations(), StageArgs::Inferred);
    spec.pid_namespace = false; // so `$$` in the container is the init's host pid
    let bundle = make_bundle(&env, &spec);
    let oci = Oci::new(&env, rt);
    let out = oci.run_attached(&bundle);
    check!(env, out.success(), "`{} run` of a valid container failed", rt.name());
    let pid = marker_pid(&env, &bundle);
    check_lifecycle(&env, &id, pid);
}

/// (a) two-step create / state / start / delete, `--stage` flags: the pid in the decisions is the
/// one the runtime reports for the created container.
fn detached_lifecycle(rt: Rt, test: &str) {
    if !common::require(test, &rt.needs()) {
        return;
    }
    let env = World::new(test);
    env.write_config("");
    let id = env.container_id(rt.name());
    let bundle = make_bundle(&env, &container_spec(rt, &id, k8s_annotations(), StageArgs::Flags));
    let oci = Oci::new(&env, rt);
    let out = oci.create(&bundle);
    check!(env, out.success(), "`{} create` failed", rt.name());
    let state = oci.state(&id);
    check_eq!(env, state["status"], json!("created"), "status after create");
    let Some(pid) = state["pid"].as_i64().filter(|p| *p > 1) else {
        env.fail(&format!("`{} state` has no host pid: {state}", rt.name()))
    };
    // createRuntime has run (runc 1.1 also runs poststart at create; crun at start).
    let early = env.decisions_for(&id);
    check!(env, !early.is_empty(), "no decision logged by createRuntime during create");
    check_ensure(&env, &early[0], &id, pid, GROUP, "createRuntime");
    let out = oci.start(&id);
    check!(env, out.success(), "`{} start` failed", rt.name());
    oci.wait_stopped(&id, Duration::from_secs(20));
    check!(env, bundle.marker().is_some(), "the container's command did not run (no marker)");
    let out = oci.delete(&id);
    check!(env, out.success(), "`{} delete` failed", rt.name());
    check_lifecycle(&env, &id, pid);
}

/// (b) broken state dir + `fail_closed = true`: the runtime refuses the container.
fn fail_closed_refuses(rt: Rt, test: &str) {
    if !common::require(test, &rt.needs()) {
        return;
    }
    let env = World::new(test);
    env.write_config("fail_closed = true");
    env.break_state_dir();
    let id = env.container_id(rt.name());
    let bundle = make_bundle(&env, &container_spec(rt, &id, k8s_annotations(), StageArgs::Flags));
    let oci = Oci::new(&env, rt);
    let out = oci.run_attached(&bundle);
    check!(env, out.status.is_some() && !out.success(), "`{} run` should fail when the hook fails closed", rt.name());
    check!(env, bundle.marker().is_none(), "the container's command ran although the hook failed closed");
    let want = broken_state_dir_failure_text();
    match rt {
        // runc embeds the failing hook's stderr in its error.
        Rt::Runc => {
            check!(env, out.stderr.contains("error running hook"), "runc's error does not name the hook");
            check!(env, out.stderr.contains(want), "runc's error lacks the hook's message {want:?}");
        }
        // crun discards hook output: only the exit code and the hook's own log are observable.
        Rt::Crun => {}
    }
    let errors = env.log_lines("ERROR");
    check!(env, errors.iter().any(|l| l.contains(want)), "the hook log has no ERROR line with {want:?}");
    let ds = env.decisions_for(&id);
    check!(
        env,
        !ds.is_empty() && ds[0]["action"] == "ensure",
        "createRuntime logged no ensure decision before failing"
    );
}

/// (c) the same broken state dir, fail-open: the container runs.
fn fail_open_runs(rt: Rt, test: &str) {
    if !common::require(test, &rt.needs()) {
        return;
    }
    let env = World::new(test);
    env.write_config("fail_closed = false");
    env.break_state_dir();
    let id = env.container_id(rt.name());
    let mut spec = container_spec(rt, &id, k8s_annotations(), StageArgs::Inferred);
    spec.pid_namespace = false;
    let bundle = make_bundle(&env, &spec);
    let oci = Oci::new(&env, rt);
    let out = oci.run_attached(&bundle);
    check!(env, out.success(), "`{} run` should succeed when the hook fails open", rt.name());
    let pid = marker_pid(&env, &bundle);
    let ds = env.wait_decisions(&id, 3, LOG_WAIT);
    check_eq!(env, ds.len(), 3, "decision lines for {id}");
    check_ensure(&env, &ds[0], &id, pid, GROUP, "createRuntime");
    check_ensure(&env, &ds[1], &id, pid, GROUP, "poststart");
    check_forget(&env, &ds[2], &id, "poststop");
    let warns = env.log_lines("WARN");
    check!(
        env,
        warns.iter().filter(|l| l.contains("failing open")).count() >= 3,
        "expected a `failing open` warning per hook run"
    );
    check!(env, env.log_lines("ERROR").is_empty(), "fail-open must not log errors");
}

/// (d) policy `none` clears; an invalid group falls back to a cookie of the container's own.
fn policy_none_and_invalid_group(rt: Rt, test: &str) {
    if !common::require(test, &rt.needs()) {
        return;
    }
    let env = World::new(test);
    env.write_config("");
    let oci = Oci::new(&env, rt);

    let none_id = env.container_id(&format!("{}-none", rt.name()));
    let mut ann = k8s_annotations();
    set_annotation(&mut ann, "oci-coresched-hook/policy", "none");
    let none = make_bundle(&env, &container_spec(rt, &none_id, ann, StageArgs::Flags));
    let out = oci.run_attached(&none);
    check!(env, out.success(), "`{} run` (policy none) failed", rt.name());
    check!(env, none.marker().is_some(), "policy none: the container did not run");

    let bad_id = env.container_id(&format!("{}-bad", rt.name()));
    let mut ann = k8s_annotations();
    set_annotation(&mut ann, "oci-coresched-hook/group", "../etc");
    let mut spec = container_spec(rt, &bad_id, ann, StageArgs::Inferred);
    spec.pid_namespace = false;
    let bad = make_bundle(&env, &spec);
    let out = oci.run_attached(&bad);
    check!(env, out.success(), "`{} run` (invalid group, fail-open) failed", rt.name());
    let bad_pid = marker_pid(&env, &bad);

    let ds = env.wait_decisions(&none_id, 3, LOG_WAIT);
    check_eq!(env, ds.len(), 3, "decision lines for {none_id}");
    for (d, stage) in ds.iter().zip(["createRuntime", "poststart"]) {
        check_eq!(env, d["action"], json!("clear"), "policy none, {stage}: action");
        check_eq!(env, d["policy"], json!("none"), "policy none, {stage}: policy");
        check!(env, d["pid"].as_i64().is_some_and(|p| p > 1), "policy none, {stage}: no host pid");
        check_eq!(env, d["invalid"], Value::Null, "policy none, {stage}: invalid");
    }
    check_forget(&env, &ds[2], &none_id, "policy none, poststop");

    let ds = env.wait_decisions(&bad_id, 3, LOG_WAIT);
    check_eq!(env, ds.len(), 3, "decision lines for {bad_id}");
    let own = format!("tenant-a/container:{bad_id}");
    for (d, stage) in ds.iter().zip(["createRuntime", "poststart"]) {
        check_eq!(env, d["action"], json!("ensure"), "invalid group, {stage}: action");
        check_eq!(env, d["group"], json!(own), "invalid group, {stage}: group");
        check_eq!(env, d["pid"], json!(bad_pid), "invalid group, {stage}: pid");
        let invalid = d["invalid"].as_str().unwrap_or_default();
        check!(
            env,
            invalid.contains("oci-coresched-hook/group") && invalid.contains("../etc"),
            "invalid group, {stage}: `invalid` is {:?}",
            d["invalid"]
        );
    }
    check_forget(&env, &ds[2], &bad_id, "invalid group, poststop");
    let errors = env.log_lines("ERROR");
    check!(
        env,
        errors.iter().any(|l| l.contains(&format!("invalid annotation for container {bad_id}"))),
        "no ERROR line about the invalid annotation"
    );
}

#[test]
fn runc_attached_lifecycle_inferred_stage() {
    attached_lifecycle(Rt::Runc, "runc_attached_lifecycle_inferred_stage");
}

#[test]
fn runc_detached_lifecycle_stage_flags() {
    detached_lifecycle(Rt::Runc, "runc_detached_lifecycle_stage_flags");
}

#[test]
fn runc_fail_closed_refuses_container() {
    fail_closed_refuses(Rt::Runc, "runc_fail_closed_refuses_container");
}

#[test]
fn runc_fail_open_runs_container() {
    fail_open_runs(Rt::Runc, "runc_fail_open_runs_container");
}

#[test]
fn runc_policy_none_and_invalid_group() {
    policy_none_and_invalid_group(Rt::Runc, "runc_policy_none_and_invalid_group");
}

#[test]
fn crun_attached_lifecycle_inferred_stage() {
    attached_lifecycle(Rt::Crun, "crun_attached_lifecycle_inferred_stage");
}

#[test]
fn crun_detached_lifecycle_stage_flags() {
    detached_lifecycle(Rt::Crun, "crun_detached_lifecycle_stage_flags");
}

#[test]
fn crun_fail_closed_refuses_container() {
    fail_closed_refuses(Rt::Crun, "crun_fail_closed_refuses_container");
}

#[test]
fn crun_fail_open_runs_container() {
    fail_open_runs(Rt::Crun, "crun_fail_open_runs_container");
}

#[test]
fn crun_policy_none_and_invalid_group() {
    policy_none_and_invalid_group(Rt::Crun, "crun_policy_none_and_invalid_group");
}

// ---------------------------------------------------------------------------------------------
// podman with the project's hooks.d file (stage inferred)
// ---------------------------------------------------------------------------------------------

const PODMAN_NEEDS: [Need; 4] = [Need::Root, Need::Podman, Need::Runc, Need::BusyboxStatic];

/// The container id podman chose (from `--cidfile`).
fn podman_cid(env: &World, cid: Option<String>) -> String {
    cid.unwrap_or_else(|| env.fail("podman wrote no --cidfile"))
}

#[test]
fn podman_hooks_d_lifecycle() {
    let test = "podman_hooks_d_lifecycle";
    if !common::require(test, &PODMAN_NEEDS) {
        return;
    }
    let env = World::new(test);
    env.write_config("");
    let podman = Podman::new(&env);
    let name = env.container_id("podman");
    let (out, bundle, cid) = podman.run(&name, &k8s_annotations());
    check!(env, out.success(), "`podman run` of a valid container failed");
    let pid = marker_pid(&env, &bundle);
    let cid = podman_cid(&env, cid);
    // createRuntime and poststart come from runc (podman's config.json); poststop is run by podman
    // itself during cleanup (its config.json has no poststop hook).
    check_lifecycle(&env, &cid, pid);
}

#[test]
fn podman_fail_closed_refuses_container() {
    let test = "podman_fail_closed_refuses_container";
    if !common::require(test, &PODMAN_NEEDS) {
        return;
    }
    let env = World::new(test);
    env.write_config("fail_closed = true");
    env.break_state_dir();
    let podman = Podman::new(&env);
    let name = env.container_id("podman");
    let (out, bundle, _cid) = podman.run(&name, &k8s_annotations());
    check!(env, out.status.is_some() && !out.success(), "`podman run` should fail when the hook fails closed");
    check!(env, bundle.marker().is_none(), "the container's command ran although the hook failed closed");
    let want = broken_state_dir_failure_text();
    check!(env, out.stderr.contains(want), "podman's error lacks the hook's message {want:?}");
    check!(
        env,
        env.log_lines("ERROR").iter().any(|l| l.contains(want)),
        "the hook log has no ERROR line with {want:?}"
    );
}

#[test]
fn podman_fail_open_runs_container() {
    let test = "podman_fail_open_runs_container";
    if !common::require(test, &PODMAN_NEEDS) {
        return;
    }
    let env = World::new(test);
    env.write_config("fail_closed = false");
    env.break_state_dir();
    let podman = Podman::new(&env);
    let name = env.container_id("podman");
    let (out, bundle, cid) = podman.run(&name, &k8s_annotations());
    check!(env, out.success(), "`podman run` should succeed when the hook fails open");
    let pid = marker_pid(&env, &bundle);
    let cid = podman_cid(&env, cid);
    let ds = env.wait_decisions(&cid, 3, LOG_WAIT);
    check_eq!(env, ds.len(), 3, "decision lines for {cid}");
    check_ensure(&env, &ds[0], &cid, pid, GROUP, "createRuntime");
    check_ensure(&env, &ds[1], &cid, pid, GROUP, "poststart");
    check_forget(&env, &ds[2], &cid, "poststop");
    check!(env, env.log_lines("WARN").iter().any(|l| l.contains("failing open")), "no `failing open` warning");
}

#[test]
fn podman_policy_none_and_invalid_group() {
    let test = "podman_policy_none_and_invalid_group";
    if !common::require(test, &PODMAN_NEEDS) {
        return;
    }
    let env = World::new(test);
    env.write_config("");
    let podman = Podman::new(&env);

    let mut ann = k8s_annotations();
    set_annotation(&mut ann, "oci-coresched-hook/policy", "none");
    let (out, none, none_cid) = podman.run(&env.container_id("podman-none"), &ann);
    check!(env, out.success(), "`podman run` (policy none) failed");
    check!(env, none.marker().is_some(), "policy none: the container did not run");
    let none_cid = podman_cid(&env, none_cid);

    let mut ann = k8s_annotations();
    set_annotation(&mut ann, "oci-coresched-hook/group", "../etc");
    let (out, bad, bad_cid) = podman.run(&env.container_id("podman-bad"), &ann);
    check!(env, out.success(), "`podman run` (invalid group, fail-open) failed");
    let bad_pid = marker_pid(&env, &bad);
    let bad_cid = podman_cid(&env, bad_cid);

    let ds = env.wait_decisions(&none_cid, 3, LOG_WAIT);
    check_eq!(env, ds.len(), 3, "decision lines for {none_cid}");
    for (d, stage) in ds.iter().zip(["createRuntime", "poststart"]) {
        check_eq!(env, d["action"], json!("clear"), "policy none, {stage}: action");
        check_eq!(env, d["policy"], json!("none"), "policy none, {stage}: policy");
    }
    check_forget(&env, &ds[2], &none_cid, "policy none, poststop");

    let ds = env.wait_decisions(&bad_cid, 3, LOG_WAIT);
    check_eq!(env, ds.len(), 3, "decision lines for {bad_cid}");
    let own = format!("tenant-a/container:{bad_cid}");
    for (d, stage) in ds.iter().zip(["createRuntime", "poststart"]) {
        check_eq!(env, d["action"], json!("ensure"), "invalid group, {stage}: action");
        check_eq!(env, d["group"], json!(own), "invalid group, {stage}: group");
        check_eq!(env, d["pid"], json!(bad_pid), "invalid group, {stage}: pid");
        check!(env, !d["invalid"].is_null(), "invalid group, {stage}: `invalid` is null");
    }
    check_forget(&env, &ds[2], &bad_cid, "invalid group, poststop");
}
