//! Escapes, end to end through the real binary over the shared fake kernel: every fail-open is
//! counted by reason in the ledger that `metrics` reads, and its warning names the container, its
//! group and the reason; a container whose hook failed open while the state lock was held is
//! named by `audit` (also while the cache cannot be opened), and the follower gives it its
//! group's cookie once the lock is free, which its page, through `metrics` (the textfile route),
//! counts. Under a burst of starts through real runc and crun, whose poststart hooks take a
//! second, an audit looping meanwhile never calls a container on its way up escaped, and calls
//! one whose hook failed open so (each of the rule's `exec.fifo` and live-runtime conditions,
//! removed alone, makes this test fail: checked by hand).
//!
//! Needs `--features fake-kernel` (and root, runc, crun, a static busybox for the burst); without
//! them the tests fail under `CI` and print `SKIPPED` otherwise.

#[cfg(not(feature = "fake-kernel"))]
#[test]
fn escapes_tests_need_the_fake_kernel() {
    crate::fakeworld::needs_feature("escapes", "fake-kernel");
}

#[cfg(feature = "fake-kernel")]
pub(crate) mod with_fake_kernel {
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    use serde_json::{Value, json};

    use crate::common::World;
    use crate::common::wait::wait_for;
    use crate::fakeworld::{pod, state};

    /// `flock -x LOCK sleep 600` in a process group of its own, holding the state lock until
    /// dropped.
    struct Holder(Child);

    impl Holder {
        fn new(w: &World) -> Self {
            std::fs::create_dir_all(w.state_dir()).unwrap();
            let mut c = Command::new("flock");
            c.arg("-x").arg(w.state_dir().join("lock")).args(["sleep", "600"]).stdin(Stdio::null()).process_group(0);
            let child = c.spawn().expect("flock (util-linux)");
            let h = Self(child);
            // Held once a hook with a short timeout cannot take it.
            let lock = w.state_dir().join("lock");
            wait_for("the lock to be held", Duration::from_secs(10), || {
                let f = std::fs::File::open(&lock).map_err(|e| e.to_string())?;
                // SAFETY: flock(2) on a file descriptor this closure owns; no memory is shared.
                let r = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&f), libc::LOCK_EX | libc::LOCK_NB) };
                if r != 0 { Ok(()) } else { Err("the lock is still free".to_string()) }
            });
            h
        }
    }

    impl Drop for Holder {
        fn drop(&mut self) {
            // SAFETY: kill(2) has no memory-safety preconditions; the group is this test's flock and sleep.
            unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
            let _ = self.0.wait();
        }
    }

    /// The value of `name{reason="REASON"}` in a Prometheus page.
    fn sample(page: &str, series: &str) -> Option<f64> {
        page.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    fn metrics(w: &World) -> String {
        let out = w.cli(&["metrics"], b"");
        assert_eq!(out.code(), Some(0), "metrics failed:\n{out}");
        out.stdout.clone()
    }

    fn counted(w: &World, reason: &str) -> f64 {
        let page = metrics(w);
        sample(&page, &format!("oci_coresched_hook_fail_open_total{{reason=\"{reason}\"}}"))
            .unwrap_or_else(|| panic!("no fail_open_total for {reason} in\n{page}"))
    }

    #[test]
    fn every_fail_open_is_counted_by_reason_and_its_warning_names_container_group_and_reason() {
        let w = World::fake_kernel("failopen", "lock_timeout_ms = 300");
        let web = pod("tenant-a", "web");
        w.ensure("seed", w.spawn(), &web);
        for r in ["bad_input", "config", "lock_timeout", "state_dir"] {
            assert_eq!(counted(&w, r), 0.0, "{r} before any fail-open");
        }

        let out = w.hook(b"");
        assert_eq!(out.code(), Some(0), "{out}");
        assert!(out.stderr.contains("(failing open: group -, reason bad_input:"), "{out}");
        assert_eq!(counted(&w, "bad_input"), 1.0);

        std::fs::write(w.config_path(), "log_level = [\n").unwrap();
        let out = w.hook(&state("cfg", "creating", Some(w.spawn()), &web));
        w.write_config("lock_timeout_ms = 300");
        assert_eq!(out.code(), Some(0), "{out}");
        assert!(out.stderr.contains("container cfg: invalid config file"), "{out}");
        assert!(out.stderr.contains("(failing open: group -, reason config:"), "{out}");
        assert_eq!(counted(&w, "config"), 1.0);

        {
            let _held = Holder::new(&w);
            let out = w.hook(&state("locked", "creating", Some(w.spawn()), &web));
            assert_eq!(out.code(), Some(0), "{out}");
            assert!(out.stderr.contains("container locked: failed to take the state lock"), "{out}");
            assert!(out.stderr.contains("(failing open: group tenant-a/web, reason lock_timeout:"), "{out}");
            // A poststop that fails open leaves no container without its cookie: not counted.
            let out = w.cli(&["hook", "--stage", "poststop"], b"");
            assert_eq!(out.code(), Some(0), "{out}");
            assert!(out.stderr.contains("failing open"), "{out}");
            // Fail closed: the runtime refuses the container, so nothing ran without its cookie.
            w.write_config("lock_timeout_ms = 300\nfail_closed = true");
            let out = w.hook(&state("closed", "creating", Some(w.spawn()), &web));
            w.write_config("lock_timeout_ms = 300");
            assert_eq!(out.code(), Some(1), "{out}");
            // While the lock is held, `metrics` shows the count without the cache.
            assert_eq!(counted(&w, "lock_timeout"), 1.0, "only the createRuntime that failed open");
        }

        // A state dir open to others: the hook refuses to use it, the ledger still counts, and
        // `metrics` shows the count once the directory is usable again.
        std::fs::set_permissions(w.state_dir(), std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
        let out = w.hook(&state("open", "creating", Some(w.spawn()), &web));
        std::fs::set_permissions(w.state_dir(), std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        assert_eq!(out.code(), Some(0), "{out}");
        assert!(out.stderr.contains("(failing open: group tenant-a/web, reason state_dir:"), "{out}");
        assert!(!out.stderr.contains("not counted"), "{out}");
        assert_eq!(counted(&w, "state_dir"), 1.0);
    }

    /// The start time of `pid` (`/proc/PID/stat` field 22).
    pub(crate) fn start_time(pid: i32) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat[stat.rfind(')').unwrap() + 2..].split(' ').nth(19).unwrap().parse().unwrap()
    }

    /// A runc-style root in the world with container `id`, its init `pid`, its bundle's spec
    /// running this hook at createRuntime with `annotations`.
    pub(crate) fn runc_container(w: &World, id: &str, pid: i32, annotations: &[(&str, &str)]) {
        let bundle = w.path(&format!("bundles/{id}"));
        std::fs::create_dir_all(&bundle).unwrap();
        let ann: serde_json::Map<String, Value> = annotations.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        let spec = json!({
            "annotations": ann,
            "hooks": {"createRuntime": [{"path": "/usr/bin/oci-coresched-hook", "args": ["oci-coresched-hook", "hook"]}]},
        });
        std::fs::write(bundle.join("config.json"), spec.to_string()).unwrap();
        let dir = w.path(&format!("runc/{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        let st = json!({
            "id": id,
            "init_process_pid": pid,
            "init_process_start": start_time(pid),
            "config": {"labels": [format!("bundle={}", bundle.display())]},
        });
        std::fs::write(dir.join("state.json"), st.to_string()).unwrap();
    }

    pub(crate) fn with_roots(w: &World, mut cmd: Command) -> Command {
        cmd.env("OCH_FAKE_RUNTIME_ROOTS", format!("runc:{}", w.path("runc").display()));
        cmd
    }

    fn audit(w: &World) -> (Option<i32>, Value) {
        let out = w.run_input(with_roots(w, w.cmd(&["audit", "--json"])), Some(Vec::new()), Duration::from_secs(60));
        let v = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("audit --json is not JSON ({e}):\n{out}"));
        (out.code(), v)
    }

    #[test]
    fn a_container_that_failed_open_is_named_by_audit_and_healed_by_the_follower() {
        let w = World::fake_kernel("escape", "lock_timeout_ms = 300");
        let web = pod("tenant-a", "web");
        let first = w.spawn();
        w.ensure("first", first, &web);
        runc_container(&w, "first", first, &web);
        let escaped = w.spawn();
        runc_container(&w, "late", escaped, &web);
        {
            let _held = Holder::new(&w);
            let out = w.hook(&state("late", "creating", Some(escaped), &web));
            assert!(out.stderr.contains("reason lock_timeout"), "{out}");
            // The cache cannot be opened; the escape is still found, and said to be.
            let (code, report) = audit(&w);
            assert_eq!(code, Some(1), "{report:#}");
            assert!(report["cache_error"].as_str().is_some_and(|e| e.contains("state lock")), "{report:#}");
            assert_eq!(report["escaped"][0]["id"], "late", "{report:#}");
            assert_eq!(report["violations"][0]["rule"], "escaped", "{report:#}");
            assert_eq!(report["violations"][0]["container"], "late", "{report:#}");
            assert_eq!(report["violations"][0]["have"], "0x0", "it runs without core scheduling: {report:#}");
        }
        assert_eq!(w.cookie(escaped), "0x0", "nothing gave it a cookie since");
        let (code, report) = audit(&w);
        assert_eq!((code, report["escaped"].as_array().map(Vec::len)), (Some(1), Some(1)), "{report:#}");

        let mut follower = with_roots(&w, w.cmd(&["reconcile", "--follow", "--interval", "60"]));
        follower.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
        let mut child = follower.spawn().expect("start the follower");
        let group_cookie = w.cookie(first);
        wait_for("the follower to heal the escaped container", Duration::from_secs(60), || {
            let c = w.cookie(escaped);
            if c == group_cookie { Ok(()) } else { Err(format!("cookie {c}, its group's {group_cookie}")) }
        });
        // Its page, through `metrics` (follow.prom, the textfile route), counts the heal.
        wait_for("follow.prom to count the heal", Duration::from_secs(30), || {
            let page = metrics(&w);
            match (
                sample(&page, "oci_coresched_hook_follow_escapes_healed_total"),
                sample(&page, "oci_coresched_hook_escaped_containers"),
                sample(&page, "oci_coresched_hook_follow_events_total{kind=\"fork\"}"),
            ) {
                (Some(1.0), Some(0.0), Some(_)) => Ok(()),
                _ => Err(page),
            }
        });
        // SAFETY: kill(2) has no memory-safety preconditions; the group is this test's follower.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
        let _ = child.wait();
        let (code, report) = audit(&w);
        assert_eq!(code, Some(0), "clean after the heal: {report:#}");
    }
}

/// The escape rule under a burst of starts, through real runc and crun: containers whose poststart hook
/// takes a second (a wrapper named like the hook, sleeping, then the hook) run at cookie 0 after
/// their `exec.fifo` is gone, while `runc run` waits for that hook. An audit looping meanwhile
/// must never call one escaped; a container whose hook fails open must be (the negative
/// control, so that the loop could see one).
#[cfg(feature = "fake-kernel")]
mod burst {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use serde_json::{Value, json};

    use crate::common::{self, BundleSpec, HOOK, Oci, Rt, StageArgs, World, make_bundle};

    fn fake_env(w: &World) -> Vec<String> {
        vec![
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            format!("OCH_FAKE_KERNEL={}", w.kernel_file().display()),
            format!("OCH_FAKE_CGROUP_ROOT={}", w.cgroup_root().display()),
            "OCH_FAKE_RUNTIME_ROOTS=".into(),
        ]
    }

    /// runc runs poststart inside `create`, its `exec.fifo` still there; crun inside `start`,
    /// after the fifo is gone, so there only the live `crun` command keeps it from being called
    /// escaped.
    #[test]
    fn runc_burst() {
        burst(Rt::Runc, "runc_burst");
    }

    #[test]
    fn crun_burst() {
        burst(Rt::Crun, "crun_burst");
    }

    fn burst(rt: Rt, test: &str) {
        if !common::require(test, &rt.needs()) {
            return;
        }
        let w = World::fake_kernel(test, "lock_timeout_ms = 20000");
        // A wrapper named like the hook, so the spec names it: a second's sleep, then the hook.
        let wrap = w.path("wrap/oci-coresched-hook");
        std::fs::create_dir_all(wrap.parent().unwrap()).unwrap();
        std::fs::write(&wrap, format!("#!/bin/sh\nsleep 1\nexec {HOOK} \"$@\"\n")).unwrap();
        std::fs::set_permissions(&wrap, std::fs::Permissions::from_mode(0o755)).unwrap();
        let oci = Oci::new(&w, rt);
        let bundle = |id: &str, config: &std::path::Path| {
            let ann = vec![
                ("io.kubernetes.pod.namespace".to_string(), "tenant-a".to_string()),
                ("oci-coresched-hook/group".to_string(), "web".to_string()),
            ];
            let mut spec = BundleSpec::new(id, ann, StageArgs::Flags);
            spec.pid_namespace = false;
            spec.args = vec!["sleep".into(), "60".into()];
            let b = make_bundle(&w, &spec);
            let path = b.dir.join("config.json");
            let mut c: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let args = ["oci-coresched-hook", "--config", &config.display().to_string(), "--state-dir"]
                .iter()
                .map(|s| s.to_string())
                .chain([w.state_dir().display().to_string(), "hook".into(), "--stage".into(), "poststart".into()])
                .collect::<Vec<_>>();
            c["hooks"] = json!({"poststart": [{"path": wrap, "args": args, "env": fake_env(&w), "timeout": 20}]});
            std::fs::write(&path, serde_json::to_vec_pretty(&c).unwrap()).unwrap();
            b
        };
        let root = w.path(&format!("{}-root", rt.name()));
        let audit_cmd = || {
            let mut c = w.cmd(&["--log-level", "off", "audit", "--json"]);
            c.env("OCH_FAKE_RUNTIME_ROOTS", format!("{}:{}", rt.name(), root.display()));
            c
        };
        let done = AtomicBool::new(false);
        let (audits, false_alarms) = std::thread::scope(|s| {
            let looper = s.spawn(|| {
                let (mut n, mut alarms) = (0, Vec::new());
                while !done.load(Ordering::Relaxed) {
                    let out = common::run_command(None, audit_cmd(), None, Duration::from_secs(60));
                    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("audit: {e}\n{out}"));
                    if v["escaped"].as_array().is_some_and(|a| !a.is_empty()) {
                        alarms.push(v);
                    }
                    n += 1;
                }
                (n, alarms)
            });
            let starts: Vec<_> = (0..6)
                .map(|i| {
                    let b = bundle(&w.container_id(&format!("burst{i}")), &w.config_path());
                    let oci = &oci;
                    s.spawn(move || {
                        let out = oci.run_detached(&b);
                        assert!(out.success(), "{} run -d: {out}", oci.rt.name());
                    })
                })
                .collect();
            for t in starts {
                t.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
            looper.join().unwrap()
        });
        assert!(audits >= 3, "the audit ran {audits} times during the burst");
        assert!(false_alarms.is_empty(), "a container on its way up was called escaped: {false_alarms:#?}");

        // The negative control: a hook that fails open (its config does not parse) leaves its
        // container escaped, and the same audit says so.
        let broken = w.path("broken.toml");
        std::fs::write(&broken, "log_level = [\n").unwrap();
        let b = bundle(&w.container_id("control"), &broken);
        assert!(oci.run_detached(&b).success());
        let out = common::run_command(None, audit_cmd(), None, Duration::from_secs(60));
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        let escaped: Vec<&str> = v["escaped"].as_array().unwrap().iter().filter_map(|e| e["id"].as_str()).collect();
        assert_eq!(escaped, [b.id.as_str()], "{v:#}");
    }
}
