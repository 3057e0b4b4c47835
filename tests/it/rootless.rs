//! The real hook binary under rootless podman (runc), run by a dedicated unprivileged user
//! (`tests/common/rootless.rs`). Podman runs the OCI runtime, and so the hook, inside its user
//! namespace: the hook is uid 0 there, `/proc/self/uid_map` maps it to the user's host uid, its
//! environment is only the hooks.d file's `env` (no `XDG_RUNTIME_DIR`), and the system state dir
//! `/run/oci-coresched-hook` is not its own.
//!
//! Checked: with `/run/user/<uid>` present, the hook keeps its cache in
//! `/run/user/<uid>/oci-coresched-hook`, where `list` run by the same user finds it; two
//! containers of one group share a cookie (the fake kernel: this host may lack core scheduling);
//! poststop forgets; `/run/oci-coresched-hook` is untouched. Without a usable per-user dir each
//! hook run logs one warning naming the problem and the container starts; with `fail_closed` the
//! runtime refuses it with that message.
//!
//! Needs root (to set the user up), podman, runc, newuidmap (uidmap), a static busybox and
//! `--features fake-kernel`; without one, a test fails under `CI` and prints `SKIPPED` otherwise.

#[cfg(not(feature = "fake-kernel"))]
mod skipped {
    #[test]
    fn rootless_podman_uses_the_per_user_state_dir() {
        crate::common::skip("rootless_podman_uses_the_per_user_state_dir", "needs --features fake-kernel");
    }
    #[test]
    fn rootless_podman_without_a_per_user_dir_fails_open_with_one_line() {
        crate::common::skip(
            "rootless_podman_without_a_per_user_dir_fails_open_with_one_line",
            "needs --features fake-kernel",
        );
    }
    #[test]
    fn rootless_podman_without_a_per_user_dir_fails_closed_when_configured() {
        crate::common::skip(
            "rootless_podman_without_a_per_user_dir_fails_closed_when_configured",
            "needs --features fake-kernel",
        );
    }
}

#[cfg(feature = "fake-kernel")]
mod fake {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::time::{Duration, SystemTime};

    use serde_json::{Value, json};

    use crate::common::rootless::RootlessUser;
    use crate::common::{self, HOOK, MANIFEST_DIR, Need, Output, RUNTIME_TIMEOUT, World, k8s_annotations};

    const NEEDS: [Need; 5] = [Need::Root, Need::Podman, Need::Runc, Need::Uidmap, Need::BusyboxStatic];
    const WAIT: Duration = Duration::from_secs(20);
    const SYSTEM_STATE_DIR: &str = "/run/oci-coresched-hook";

    /// What exists at the system state dir (to show that a rootless run leaves it alone).
    fn system_dir_snapshot() -> Vec<(String, Option<SystemTime>)> {
        let mut s =
            vec![(SYSTEM_STATE_DIR.to_string(), std::fs::metadata(SYSTEM_STATE_DIR).and_then(|m| m.modified()).ok())];
        if let Ok(rd) = std::fs::read_dir(SYSTEM_STATE_DIR) {
            for e in rd.flatten() {
                s.push((e.path().display().to_string(), e.metadata().and_then(|m| m.modified()).ok()));
            }
        }
        s.sort();
        s
    }

    /// One rootless world: the user, the test's dirs (owned by the user), a hooks.d dir that runs
    /// the hook without `--state-dir` over a shared fake kernel, and podman as the user.
    struct RootlessWorld {
        env: World,
        user: RootlessUser,
        xdg: PathBuf,
        runroot: PathBuf,
        fake_kernel: PathBuf,
    }

    impl RootlessWorld {
        /// With `run_user`, podman's runtime dir is `/run/user/<uid>` (made here, as a login
        /// session would); otherwise a private dir the hook never learns of.
        fn new(test: &str, run_user: bool) -> Option<Self> {
            if !common::require(test, &NEEDS) {
                return None;
            }
            let user = match RootlessUser::setup() {
                Ok(u) => u,
                Err(e) => {
                    common::skip(test, &format!("failed to set up the rootless user: {e}"));
                    return None;
                }
            };
            let env = World::new(test);
            user.give(env.root());
            let xdg = if run_user { user.run_user_dir() } else { env.path("xdg") };
            if run_user && !xdg.exists() {
                let made = xdg.clone();
                env.on_drop(move || {
                    let _ = std::fs::remove_dir_all(made);
                });
            } else if run_user {
                let state = xdg.join("oci-coresched-hook");
                env.on_drop(move || {
                    let _ = std::fs::remove_dir_all(state);
                });
            }
            let runroot = env.short_dir();
            user.give(&runroot);
            for d in [env.path("home"), env.path("cgroup"), xdg.clone()] {
                std::fs::create_dir_all(&d).expect("mkdir");
                std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).expect("chmod");
                user.give(&d);
            }
            env.write_config("");
            let fake_kernel = env.path("fake-kernel");
            std::fs::write(&fake_kernel, "").expect("create the fake kernel file");
            user.give(&fake_kernel);
            let w = Self { env, user, xdg, runroot, fake_kernel };
            w.write_hooks_d();
            // Podman's rootless pause process keeps its user namespace; it names no test path, so
            // the World's leftover sweep misses it: stop it by the pid podman recorded.
            let pause = w.env.path("podman-tmp/pause.pid");
            w.env.on_drop(move || {
                if let Some(pid) = std::fs::read_to_string(&pause).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
                    // SAFETY: kill(2) has no memory-safety preconditions; the pid is the pause
                    // process this test's podman started and recorded in its private tmp dir.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            });
            // Registered last, so it runs first: while podman's pause process still lives.
            let rm = w.podman_cmd(&["rm", "-a", "-f", "-t", "0"]);
            let dir = w.env.root().to_path_buf();
            w.env.on_drop(move || {
                let out = common::run_command(Some(&dir), rm, None, RUNTIME_TIMEOUT);
                if !out.success() {
                    eprintln!("cleanup: {out}");
                }
            });
            Some(w)
        }

        /// The project's hooks.d file with `hook.path` the built binary, `--config` added (no
        /// `--state-dir`: the hook chooses) and the fake kernel in `hook.env`.
        fn write_hooks_d(&self) {
            let dir = self.env.path("hooks.d");
            std::fs::create_dir_all(&dir).expect("mkdir hooks.d");
            let src = Path::new(MANIFEST_DIR).join("hooks.d/oci-coresched-hook.json");
            let mut hook: Value = serde_json::from_str(&std::fs::read_to_string(src).expect("read hooks.d")).unwrap();
            let cfg = self.env.config_path().display().to_string();
            hook["hook"]["path"] = json!(HOOK);
            hook["hook"]["args"] = json!(["oci-coresched-hook", "--config", cfg, "hook"]);
            let env = hook["hook"]["env"].as_array_mut().expect("hook.env");
            env.push(json!(format!("OCH_FAKE_KERNEL={}", self.fake_kernel.display())));
            env.push(json!(format!("OCH_FAKE_CGROUP_ROOT={}", self.env.path("cgroup").display())));
            std::fs::write(dir.join("oci-coresched-hook.json"), serde_json::to_vec_pretty(&hook).unwrap())
                .expect("write hooks.d file");
        }

        fn vars(&self) -> Vec<(&'static str, String)> {
            vec![
                ("XDG_RUNTIME_DIR", self.xdg.display().to_string()),
                ("OCH_FAKE_KERNEL", self.fake_kernel.display().to_string()),
            ]
        }

        /// Rootless podman with private storage, run root, tmp dir, runc root and our hooks dir.
        fn podman_cmd(&self, args: &[&str]) -> Command {
            let e = &self.env;
            let mut c = self.user.command(&e.path("home"), &self.vars(), "podman");
            c.args(common::podman_flags(e, &self.runroot.join("run"), &e.path("hooks.d"))).args(args);
            c
        }

        fn podman(&self, args: &[&str]) -> Output {
            self.env.run(self.podman_cmd(args), RUNTIME_TIMEOUT)
        }

        /// `podman run` of container `name` in the host pid namespace (its `$$` is its host pid),
        /// writing `$$` to its marker, then running `rest` (`-d` when `detach`). Checks that it
        /// succeeded; returns the container id and its share dir.
        fn run(&self, name: &str, detach: bool, rest: &str) -> (String, PathBuf) {
            let (out, cid, share) = self.try_run(name, detach, rest);
            let e = &self.env;
            check!(e, out.success(), "rootless `podman run` of {name} failed");
            let Some(cid) = cid else { e.fail(&format!("podman wrote no --cidfile for {name}")) };
            (cid, share)
        }

        /// [`RootlessWorld::run`] without the checks: the output, the container id if podman wrote one,
        /// the share dir.
        fn try_run(&self, name: &str, detach: bool, rest: &str) -> (Output, Option<String>, PathBuf) {
            let e = &self.env;
            let rootfs = e.path(&format!("rootfs-{name}"));
            common::make_rootfs(&rootfs);
            self.user.give_tree(&rootfs);
            let share = e.path(&format!("share-{name}"));
            std::fs::create_dir_all(&share).expect("mkdir share");
            self.user.give(&share);
            let cidfile = e.path(&format!("{name}.cid"));
            let mut args: Vec<String> = vec!["run".into(), "--rm".into(), "--name".into(), name.into()];
            if detach {
                args.push("-d".into());
            }
            args.extend(["--net=none", "--pid=host"].map(String::from));
            args.extend(["--cidfile".into(), cidfile.display().to_string()]);
            args.extend(["-v".into(), format!("{}:/share", share.display())]);
            for (k, v) in k8s_annotations() {
                args.extend(["--annotation".into(), format!("{k}={v}")]);
            }
            args.extend(["--rootfs".into(), rootfs.display().to_string(), "sh".into(), "-c".into()]);
            args.push(format!("echo $$ > /share/marker{rest}"));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = self.podman(&args);
            let cid = std::fs::read_to_string(&cidfile).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
            (out, cid, share)
        }

        /// `oci-coresched-hook --config CFG list --json`, run by the user on the host.
        fn list(&self) -> Value {
            let e = &self.env;
            let mut c = self.user.command(&e.path("home"), &self.vars(), HOOK);
            c.arg("--config").arg(e.config_path()).args(["list", "--json"]);
            let out = e.run(c, common::HOOK_TIMEOUT);
            check!(e, out.success(), "`list --json` run by the rootless user failed");
            serde_json::from_str(&out.stdout).unwrap_or_else(|err| e.fail(&format!("list output is not JSON: {err}")))
        }

        fn wait_marker(&self, share: &Path) -> i64 {
            let marker = || std::fs::read_to_string(share.join("marker")).ok().and_then(|s| s.trim().parse().ok());
            common::wait::poll(WAIT, Duration::from_millis(50), || marker().ok_or(())).unwrap_or_else(|()| {
                self.env.fail(&format!("the container did not write {}", share.join("marker").display()))
            })
        }
    }

    #[test]
    fn rootless_podman_uses_the_per_user_state_dir() {
        let test = "rootless_podman_uses_the_per_user_state_dir";
        let Some(w) = RootlessWorld::new(test, true) else { return };
        let e = &w.env;
        let state = w.user.run_user_dir().join("oci-coresched-hook");
        let before = system_dir_snapshot();

        let (a, share_a) = w.run("rl-a", true, "; exec sleep 120");
        let (b, share_b) = w.run("rl-b", true, "; exec sleep 120");
        let (pid_a, pid_b) = (w.wait_marker(&share_a), w.wait_marker(&share_b));
        for (id, pid) in [(&a, pid_a), (&b, pid_b)] {
            let ds = e.wait_decisions(id, 2, WAIT);
            check!(e, ds.len() >= 2, "no createRuntime + poststart decisions for {id}");
            check_eq!(e, ds[0]["action"], json!("ensure"), "{id}: createRuntime action");
            check_eq!(e, ds[0]["pid"], json!(pid), "{id}: createRuntime pid (the init's host pid)");
            check_eq!(e, ds[0]["group"], json!("tenant-a/web"), "{id}: group");
        }

        let meta = std::fs::symlink_metadata(&state)
            .unwrap_or_else(|err| e.fail(&format!("no per-user state dir {}: {err}", state.display())));
        check!(e, meta.is_dir(), "{} is not a directory", state.display());
        check_eq!(e, meta.uid(), w.user.uid, "owner of {}", state.display());
        check_eq!(e, meta.mode() & 0o777, 0o700, "mode of {}", state.display());
        check!(e, state.join("cache.db").exists(), "no cache in {}", state.display());

        let groups = w.list();
        let g = groups.as_array().and_then(|gs| gs.iter().find(|g| g["group"] == "tenant-a/web")).cloned();
        let Some(g) = g else { e.fail(&format!("`list` has no group tenant-a/web: {groups}")) };
        let members = g["members"].as_array().cloned().unwrap_or_default();
        let mut ids: Vec<&str> = members.iter().filter_map(|m| m["id"].as_str()).collect();
        ids.sort();
        let mut want = vec![a.as_str(), b.as_str()];
        want.sort();
        check_eq!(e, ids, want, "members of tenant-a/web in the per-user cache");
        for m in &members {
            check_eq!(e, m["live"], json!(true), "member {} is live", m["id"]);
            check!(
                e,
                m["cookie_now"] == m["cookie_cached"],
                "member {}: the kernel's cookie is the cached one",
                m["id"]
            );
        }
        check!(
            e,
            members[0]["cookie_cached"] == members[1]["cookie_cached"] && members[0]["cookie_cached"] != json!("0x0"),
            "the two containers of tenant-a/web do not share one non-zero cookie: {members:?}"
        );
        check_eq!(e, g["live_cookies"], json!(1), "distinct live cookies of tenant-a/web");

        let out = w.podman(&["rm", "-f", "-t", "0", &a, &b]);
        check!(e, out.success(), "`podman rm -f` failed");
        let forgotten = common::wait::poll(WAIT, Duration::from_millis(200), || {
            let left = w.list();
            let n =
                left.as_array().map_or(0, |gs| gs.iter().map(|g| g["members"].as_array().map_or(0, Vec::len)).sum());
            if n == 0 { Ok(()) } else { Err(left) }
        });
        if let Err(left) = forgotten {
            check!(e, false, "poststop did not forget the containers: {left}");
        }
        check!(e, e.log_lines("ERROR").is_empty(), "the hook logged errors");
        check!(e, e.log_lines("WARN").is_empty(), "the hook logged warnings");
        check_eq!(e, system_dir_snapshot(), before, "{SYSTEM_STATE_DIR} changed");
    }

    #[test]
    fn rootless_podman_without_a_per_user_dir_fails_open_with_one_line() {
        let test = "rootless_podman_without_a_per_user_dir_fails_open_with_one_line";
        // Podman gets a runtime dir of its own, which the hook never sees (hooks.d `env` only).
        let Some(w) = RootlessWorld::new(test, false) else { return };
        let e = &w.env;
        let run_user = w.user.run_user_dir();
        check!(e, !run_user.exists(), "{} exists: this test needs a user without one", run_user.display());
        let before = system_dir_snapshot();

        let (id, share) = w.run("rl-none", false, "");
        let pid = w.wait_marker(&share);
        let ds = e.wait_decisions(&id, 3, WAIT);
        check_eq!(e, ds.len(), 3, "decision lines for {id} (createRuntime, poststart, poststop)");
        check_eq!(e, ds[0]["pid"], json!(pid), "createRuntime pid");

        let warns = e.log_lines("WARN");
        check_eq!(e, warns.len(), 3, "warnings: one per hook run");
        let dir = run_user.display().to_string();
        for w in &warns {
            check!(
                e,
                w.contains("per-user state dir") && w.contains(&dir) && w.contains("failing open"),
                "the warning does not name the missing per-user dir {dir}: {w}"
            );
        }
        check!(e, e.log_lines("ERROR").is_empty(), "fail-open must not log errors");
        check!(e, !run_user.exists(), "the hook created {}", run_user.display());
        check_eq!(e, system_dir_snapshot(), before, "{SYSTEM_STATE_DIR} changed");
    }

    #[test]
    fn rootless_podman_without_a_per_user_dir_fails_closed_when_configured() {
        let test = "rootless_podman_without_a_per_user_dir_fails_closed_when_configured";
        let Some(w) = RootlessWorld::new(test, false) else { return };
        let e = &w.env;
        e.write_config("fail_closed = true");
        let run_user = w.user.run_user_dir();
        check!(e, !run_user.exists(), "{} exists: this test needs a user without one", run_user.display());

        let (out, _cid, share) = w.try_run("rl-closed", false, "");
        check!(e, out.status.is_some() && !out.success(), "`podman run` should fail when the hook fails closed");
        check!(
            e,
            share.join("marker").symlink_metadata().is_err(),
            "the container ran although the hook failed closed"
        );
        let want = format!("failed to find a per-user state dir for host uid {}", w.user.uid);
        check!(e, out.stderr.contains(&want), "podman's error lacks the hook's message {want:?}");
        let errors = e.log_lines("ERROR");
        check_eq!(e, errors.len(), 1, "ERROR lines (the createRuntime hook's one)");
        check!(e, errors[0].contains(&want), "the ERROR line lacks {want:?}");
    }
}
