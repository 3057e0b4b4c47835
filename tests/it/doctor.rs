//! `doctor`, `status`, `check-config` and `list`'s first line, through the real binary:
//!
//! * `check-config` exits 0 for a valid file, 1 for an invalid one (naming the key), 2 for one it
//!   cannot read; `FILE` wins over `--config`; a bad config makes the long-running commands exit
//!   2 with one line naming the key (what the packaged units' `RestartPreventExitStatus=2` keeps
//!   from a restart loop);
//! * `doctor` and `status` refuse bad usage with 2, and run with a config that does not parse;
//! * over a fake sysfs (`OCH_FAKE_SYS`) and the shared fake kernel (feature `fake-kernel`): SMT on
//!   with the packaged hooks.d file naming this binary isolates; a loaded sched_ext scheduler
//!   fails (exit 1), `status` then shows only what is not ok, and `list` says first that the node
//!   cannot isolate; SMT off is nothing to isolate (exit 0), even without a state dir; a mistyped
//!   `--state-dir` warns and creates nothing; a broken config fails naming the key.
//!
//! The follower's fact is not asserted where another test's follower may run at the same time.

use std::path::Path;

use crate::common::{Output, World};

/// `oci-coresched-hook ARGS` with the world's config and no state dir argument.
fn run(env: &World, args: &[&str]) -> Output {
    let config = env.config_path().display().to_string();
    let mut all = vec!["--config", config.as_str()];
    all.extend_from_slice(args);
    env.binary(&all)
}

#[test]
fn check_config_exits_0_valid_1_invalid_2_unreadable() {
    let env = World::new("check-config");
    env.write_config("fail_closed = true");
    let good = env.config_path().display().to_string();
    let out = env.binary(&["check-config", &good]);
    check!(env, out.code() == Some(0) && out.stdout == format!("{good} is valid\n"), "valid file");
    let out = run(&env, &["check-config"]);
    check!(env, out.code() == Some(0) && out.stdout.contains("is valid"), "check-config of --config");

    let bad = env.path("bad.toml");
    std::fs::write(&bad, "fail_closed = true\n[qos.LS]\nenabel = false\n").unwrap();
    let bad = bad.display().to_string();
    let out = env.binary(&["check-config", &bad]);
    check!(env, out.code() == Some(1), "invalid file: exit 1");
    check!(env, out.stderr.contains("unknown field `enabel`") && out.stderr.contains("line 3"), "names the key");
    check!(env, out.stdout.is_empty(), "nothing on stdout for an invalid file");
    let out = env.binary(&["--config", &bad, "check-config"]);
    check!(env, out.code() == Some(1), "invalid --config: exit 1");
    let out = env.binary(&["--config", &bad, "check-config", &good]);
    check!(env, out.code() == Some(0), "FILE wins over --config");

    let missing = env.path("missing.toml").display().to_string();
    let out = env.binary(&["check-config", &missing]);
    check!(env, out.code() == Some(2) && out.stderr.contains("failed to read config file"), "missing FILE: exit 2");
    let out = env.binary(&["--config", &missing, "check-config"]);
    check!(env, out.code() == Some(2), "missing --config: exit 2");
    let dir = env.root().display().to_string();
    let out = env.binary(&["check-config", &dir]);
    check!(env, out.code() == Some(2), "a directory: exit 2");
}

#[test]
fn the_long_running_commands_exit_2_with_one_line_on_a_bad_config() {
    let env = World::new("bad-config-services");
    std::fs::write(env.config_path(), "lock_timout_ms = 10\n").unwrap();
    let state = env.path("state").display().to_string();
    for args in [&["reconcile", "--follow"][..], &["nri", "--socket", "/nonexistent/nri.sock"][..]] {
        let mut all = vec!["--state-dir", state.as_str()];
        all.extend_from_slice(args);
        let out = run(&env, &all);
        check!(env, out.code() == Some(2), "{args:?}: exit 2, so that systemd does not restart it");
        check_eq!(env, out.stderr.lines().count(), 1, "{args:?}: one line");
        check!(env, out.stderr.contains("unknown field `lock_timout_ms`"), "{args:?}: the line names the key");
    }
}

#[test]
fn doctor_and_status_refuse_bad_usage_with_2() {
    let env = World::new("doctor-usage");
    env.write_config("");
    for args in [&["doctor", "--no-such-flag"][..], &["status", "extra"][..], &["--log-level", "loud", "doctor"][..]] {
        let out = run(&env, args);
        check!(env, out.code() == Some(2), "{args:?}: exit 2");
        check!(env, out.stdout.is_empty(), "{args:?}: no report");
    }
}

#[test]
fn doctor_runs_with_a_config_that_does_not_parse() {
    let env = World::new("doctor-bad-config");
    std::fs::write(env.config_path(), "sched_ext_gaurd = false\n").unwrap();
    let state = env.path("state").display().to_string();
    let out = run(&env, &["--state-dir", &state, "doctor", "--json"]);
    check!(env, out.code() == Some(1), "a broken config: exit 1");
    let v: serde_json::Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| env.fail(&format!("not JSON: {e}")));
    let config = v["facts"].as_array().unwrap().iter().find(|f| f["name"] == "config").cloned().unwrap_or_default();
    check_eq!(env, config["level"], "fail", "the config fact");
    check!(env, config["summary"].as_str().unwrap_or("").contains("sched_ext_gaurd"), "it names the key: {config}");
    check!(env, !Path::new(&state).exists(), "doctor created the state dir");
}

#[cfg(not(feature = "fake-kernel"))]
#[test]
fn doctor_over_a_fake_node_needs_the_fake_kernel() {
    crate::fakeworld::needs_feature("doctor_over_a_fake_node", "fake-kernel");
}

#[cfg(feature = "fake-kernel")]
mod with_fake_kernel {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};

    use serde_json::Value;

    use crate::common::{HOOK, Output, World};
    use crate::fakeworld::RUN_TIMEOUT;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A world whose node has SMT on, sched_ext disabled, podman with the packaged hooks.d file
    /// naming this binary, and a state dir.
    fn node(tag: &str) -> World {
        let w = World::fake_kernel(tag, "");
        smt(&w, true);
        write(&w.path("sys/kernel/sched_ext/state"), "disabled\n");
        write(&w.path("sys/devices/system/cpu/vulnerabilities/mds"), "Mitigation: Clear CPU buffers; SMT vulnerable\n");
        let bin = w.path("host/usr/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(HOOK, bin.join("oci-coresched-hook")).unwrap();
        write(&bin.join("podman"), "");
        std::fs::set_permissions(bin.join("podman"), std::fs::Permissions::from_mode(0o755)).unwrap();
        write(
            &w.path("host/usr/share/containers/oci/hooks.d/oci-coresched-hook.json"),
            include_str!("../../hooks.d/oci-coresched-hook.json"),
        );
        std::fs::create_dir(w.state_dir()).unwrap();
        std::fs::set_permissions(w.state_dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
        w
    }

    fn smt(w: &World, on: bool) {
        write(&w.path("sys/devices/system/cpu/smt/control"), if on { "on\n" } else { "off\n" });
        write(&w.path("sys/devices/system/cpu/smt/active"), if on { "1\n" } else { "0\n" });
    }

    fn doctor(w: &World, state_dir: &Path, args: &[&str]) -> Output {
        let host = w.path("host").display().to_string();
        let mut all: Vec<&str> = args.to_vec();
        if matches!(args.first(), Some(&"doctor" | &"status")) {
            all.extend(["--host-root", host.as_str()]);
        }
        let mut cmd = w.cmd_in(state_dir, &all);
        cmd.env("OCH_FAKE_SYS", w.path("sys"));
        w.run(cmd, RUN_TIMEOUT)
    }

    fn json(w: &World, out: &Output) -> Value {
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| w.fail(&format!("not JSON: {e}")))
    }

    fn fact(v: &Value, name: &str) -> Value {
        v["facts"].as_array().unwrap().iter().find(|f| f["name"] == name).cloned().unwrap_or(Value::Null)
    }

    #[test]
    fn smt_on_with_the_packaged_hooks_d_file_isolates() {
        let w = node("doctor-isolates");
        let out = doctor(&w, &w.state_dir(), &["doctor", "--json"]);
        let v = json(&w, &out);
        for (name, level) in [
            ("kernel", "ok"),
            ("smt", "ok"),
            ("sched_ext", "ok"),
            ("config", "ok"),
            ("state_dir", "ok"),
            ("hooks.d", "ok"),
            ("routes", "ok"),
            ("audit", "ok"),
            ("fail_open", "ok"),
            ("vulnerabilities", "info"),
        ] {
            check_eq!(w, fact(&v, name)["level"], level, "fact {name}: {}", fact(&v, name));
        }
        check_eq!(w, fact(&v, "routes")["summary"], "the hook runs from podman (hooks.d)", "routes");
        check_eq!(w, fact(&v, "vulnerabilities")["summary"], "core scheduling is needed: mds", "vulnerabilities");
        // Another test's follower may run meanwhile: isolates with it, at risk without.
        let (verdict, code) = (v["verdict"].as_str().unwrap_or(""), out.code());
        check!(
            w,
            (verdict == "isolates" && code == Some(0)) || (verdict == "at_risk" && code == Some(1)),
            "verdict {verdict} with exit {code:?}"
        );
        check_eq!(w, v["exit_code"].as_i64(), code.map(i64::from), "exit_code matches the exit status");
    }

    #[test]
    fn a_loaded_sched_ext_scheduler_fails_and_status_and_list_say_so() {
        let w = node("doctor-sched-ext");
        write(&w.path("sys/kernel/sched_ext/state"), "enabled\n");
        write(&w.path("sys/kernel/sched_ext/root/ops"), "rusty\n");
        let out = doctor(&w, &w.state_dir(), &["doctor"]);
        check!(w, out.code() == Some(1), "exit 1");
        let first = out.stdout.lines().next().unwrap_or("");
        check!(w, first.starts_with("this node does not isolate (1 failure"), "first line: {first}");
        check!(w, first.contains("sched_ext: cookies are held off while the sched_ext scheduler \"rusty\""), "{first}");
        check!(w, out.stdout.lines().nth(1).unwrap_or("").starts_with("fail  sched_ext "), "worst first");
        check!(w, out.stdout.contains("\nok    smt "), "doctor shows the ok facts");

        let status = doctor(&w, &w.state_dir(), &["status"]);
        check!(w, status.code() == Some(1), "status: exit 1");
        check_eq!(w, status.stdout.lines().next(), Some(first), "status: the same verdict");
        check!(w, status.stdout.contains("\nfail  sched_ext "), "status: the failing fact");
        check!(
            w,
            !status.stdout.lines().any(|l| l.starts_with("ok ") || l.starts_with("info ") || l.starts_with(' ')),
            "status shows only what is not ok, without detail"
        );
        let sj = json(&w, &doctor(&w, &w.state_dir(), &["status", "--json"]));
        check_eq!(w, sj["verdict"], "does_not_isolate", "status --json");
        check!(w, sj["facts"].as_array().is_some_and(|f| f.len() > 10), "status --json has every fact");

        let list = doctor(&w, &w.state_dir(), &["list"]);
        check!(w, list.success(), "list exits 0");
        let first = list.stdout.lines().next().unwrap_or("");
        check!(w, first.starts_with("this node cannot isolate: cookies are held off while"), "list: {first}");
        check!(w, first.ends_with("(run oci-coresched-hook doctor)"), "list: {first}");
        check!(w, list.stdout.contains("no groups in the cache"), "list still lists");
        let lj = doctor(&w, &w.state_dir(), &["list", "--json"]);
        check_eq!(w, lj.stdout.trim(), "[]", "list --json keeps its shape");

        write(&w.path("sys/kernel/sched_ext/state"), "disabled\n");
        let list = doctor(&w, &w.state_dir(), &["list"]);
        check_eq!(w, list.stdout.lines().next(), Some("no groups in the cache"), "no line when the node can isolate");
    }

    #[test]
    fn smt_off_is_nothing_to_isolate_even_without_a_state_dir() {
        let w = node("doctor-smt-off");
        smt(&w, false);
        let missing: PathBuf = w.path("never-made");
        let out = doctor(&w, &missing, &["doctor", "--json"]);
        let v = json(&w, &out);
        check!(w, out.code() == Some(0), "exit 0");
        check_eq!(w, v["verdict"], "nothing_to_isolate", "verdict");
        check_eq!(w, fact(&v, "smt")["level"], "info", "smt");
        check_eq!(w, fact(&v, "state_dir")["level"], "info", "a missing state dir is no risk with SMT off");
        let status = doctor(&w, &missing, &["status"]);
        check!(w, status.code() == Some(0), "status: exit 0");
        check_eq!(w, status.stdout.lines().count(), 1, "status: the verdict alone");
        check!(w, !missing.exists(), "doctor created the state dir");
    }

    #[test]
    fn a_mistyped_state_dir_warns_and_nothing_is_created() {
        let w = node("doctor-mistyped");
        let typo = w.path("stat");
        let out = doctor(&w, &typo, &["doctor", "--json"]);
        let v = json(&w, &out);
        check!(w, out.code() == Some(1), "exit 1");
        let s = fact(&v, "state_dir");
        check_eq!(w, s["level"], "warn", "state_dir");
        check!(w, s["summary"].as_str().unwrap_or("").contains("--state-dir is mistyped"), "{s}");
        check!(w, !typo.exists(), "doctor created the state dir");
    }
}
