//! The sched_ext guard through every entry point, end to end: the real binary over the shared fake
//! kernel (`OCH_FAKE_KERNEL`) and a fake sysfs tree (`OCH_FAKE_SYS`: `kernel/sched_ext/state` and
//! `root/ops`, SMT, a vulnerability file) whose scheduler a test loads and unloads by writing
//! `state`. Checked, each time against the fake kernel's own record of cookies:
//!
//! * the hook fails open counting reason `sched_ext` (the ledger, through `metrics`), and with
//!   `fail_closed` refuses; once the scheduler is unloaded the next run gives the cookie;
//! * `reconcile` gives an exec'd process no cookie while a scheduler is loaded (exit 1, one line
//!   saying why), and does once it is unloaded; the follower's exec follow the same, counting
//!   the refusal on its page and logging no warning per process, and its sweep after the hold
//!   ends gives the cookie;
//! * the follower's escape scan heals nothing while held off (one line when the hold starts, none
//!   per container or scan), and heals once the scheduler is unloaded (one line);
//! * the NRI plugin's catch-up gives no cookie while held off (one line), its page counts the
//!   refusal, and a catch-up after the scheduler is unloaded gives the cookie;
//! * both agents' `/readyz` stay 200 on a node that cannot isolate (the guard holding cookies
//!   off, a kernel without core scheduling), the body naming why, and both pages carry the
//!   node's families.
//!
//! Needs `--features fake-kernel` (and, for the exec'd processes, root and a cgroup2 hierarchy at
//! `/sys/fs/cgroup/unified`, as `follow.rs`); without them a test fails under `CI` and prints
//! `SKIPPED` otherwise.

#[cfg(not(feature = "fake-kernel"))]
#[test]
fn sched_ext_tests_need_the_fake_kernel() {
    crate::fakeworld::needs_feature("sched_ext", "fake-kernel");
}

#[cfg(feature = "fake-kernel")]
mod with_fake_kernel {
    use std::net::SocketAddr;
    use std::os::unix::net::UnixListener;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::Duration;

    use serde_json::Value;

    use crate::common::World;
    use crate::common::http::{get, sample, served_at};
    use crate::common::wait::{wait_for, wait_until};
    use crate::escapes::with_fake_kernel::{runc_container, with_roots};
    use crate::fakeworld::{pod, state};
    use crate::follow::with_fake_kernel::{Cgroup, exec_into, member, ready, wait_exec_d};
    use crate::nri::support::{HOOK_PATH, Runtime, accept, container};

    const WAIT: Duration = Duration::from_secs(30);
    const HELD: &str = "core scheduling is held off: the sched_ext scheduler \"simple\" is enabled";

    /// A fake sysfs tree in the world: sched_ext (disabled), SMT active, `vulnerabilities/mds`.
    struct Sys(PathBuf);

    impl Sys {
        fn new(w: &World) -> Self {
            let s = Self(w.path("sys"));
            std::fs::create_dir_all(s.0.join("kernel/sched_ext")).unwrap();
            std::fs::create_dir_all(s.0.join("devices/system/cpu/smt")).unwrap();
            std::fs::write(s.0.join("devices/system/cpu/smt/active"), "1\n").unwrap();
            std::fs::write(s.0.join("devices/system/cpu/smt/control"), "on\n").unwrap();
            std::fs::create_dir_all(s.0.join("devices/system/cpu/vulnerabilities")).unwrap();
            std::fs::write(
                s.0.join("devices/system/cpu/vulnerabilities/mds"),
                "Mitigation: Clear CPU buffers; SMT vulnerable\n",
            )
            .unwrap();
            s.unload();
            s
        }
        /// The scheduler "simple" attached, as the kernel shows one.
        fn load(&self) {
            std::fs::create_dir_all(self.0.join("kernel/sched_ext/root")).unwrap();
            std::fs::write(self.0.join("kernel/sched_ext/root/ops"), "simple\n").unwrap();
            std::fs::write(self.0.join("kernel/sched_ext/state"), "enabled\n").unwrap();
        }
        fn unload(&self) {
            std::fs::write(self.0.join("kernel/sched_ext/state"), "disabled\n").unwrap();
            let _ = std::fs::remove_dir_all(self.0.join("kernel/sched_ext/root"));
        }
        /// `cmd` reading this tree as `/sys`.
        fn on(&self, mut cmd: Command) -> Command {
            cmd.env("OCH_FAKE_SYS", &self.0);
            cmd
        }
    }

    /// The tasks the fake kernel holds a cookie for (its shared state file).
    fn cookies_made(w: &World) -> Vec<String> {
        let bytes = std::fs::read(w.kernel_file()).unwrap_or_default();
        let json = oci_coresched_hook::host::kernel::fake_file::json_of(&bytes);
        let v: Value = serde_json::from_slice(json).unwrap_or(Value::Null);
        let tasks = v["tasks"].as_object().cloned().unwrap_or_default();
        tasks.into_iter().filter(|(_, t)| t[1].as_u64().is_some_and(|c| c != 0)).map(|(tid, _)| tid).collect()
    }

    /// A long-running command of the binary, its stderr in a file of the world, killed on drop.
    struct Agent {
        child: Child,
        stderr: PathBuf,
    }

    impl Agent {
        fn spawn(mut cmd: Command, stderr: PathBuf) -> Self {
            let file = std::fs::File::create(&stderr).unwrap();
            cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(file);
            if !cmd.get_envs().any(|(k, _)| k == "OCH_NRI_BACKOFF_MS") {
                cmd.env("OCH_NRI_BACKOFF_MS", "50");
            }
            Self { child: cmd.spawn().expect("spawn"), stderr }
        }
        fn log(&self) -> String {
            std::fs::read_to_string(&self.stderr).unwrap_or_default()
        }
        fn wait_log(&self, what: &str) {
            wait_for(&format!("the log to say {what:?}"), WAIT, || {
                let log = self.log();
                if log.contains(what) { Ok(()) } else { Err(log) }
            });
        }
        fn served(&self) -> SocketAddr {
            wait_for("where it serves", WAIT, || served_at(&self.log()).ok_or_else(|| self.log()))
        }
        fn stop(&mut self) {
            // SAFETY: kill(2) has no memory-safety preconditions; the pid is our unreaped child.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let status =
                wait_for("the agent to stop on SIGTERM", WAIT, || self.child.try_wait().unwrap().ok_or("running"));
            assert!(status.success(), "{status}\n{}", self.log());
        }
    }

    impl Drop for Agent {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            if std::thread::panicking() {
                eprintln!("--- {} ---\n{}", self.stderr.display(), self.log());
            }
        }
    }

    /// A page from `addr` once `pred` holds of it.
    fn page_when(addr: SocketAddr, what: &str, pred: impl Fn(&str) -> bool) -> String {
        wait_for(what, WAIT, || {
            let (status, body) = get(addr, "/metrics");
            if status == 200 && pred(&body) { Ok(body) } else { Err(format!("{status}: {body}")) }
        })
    }

    /// The readiness answer, once it is `want`.
    fn readyz(addr: SocketAddr, want: &str) {
        wait_for(&format!("/readyz to say {want:?}"), WAIT, || {
            let r = get(addr, "/readyz");
            if r == (200, want.to_string()) { Ok(()) } else { Err(format!("{r:?}")) }
        });
    }

    /// The node's families, with the values a node with SMT, core scheduling and `mds` open
    /// through the sibling shows (`supported` the kernel's answer), on a page.
    fn node_families(page: &str, supported: bool, scheduler: Option<&str>) {
        let supported = if supported { 1.0 } else { 0.0 };
        assert_eq!(sample(page, "oci_coresched_hook_kernel_supported"), Some(supported), "{page}");
        assert_eq!(sample(page, "oci_coresched_hook_smt_active"), Some(1.0), "{page}");
        assert_eq!(sample(page, "oci_coresched_hook_sched_ext_guard"), Some(1.0), "{page}");
        let enabled = match scheduler {
            Some(s) => format!("oci_coresched_hook_sched_ext_enabled{{scheduler=\"{s}\"}} 1\n"),
            None => "oci_coresched_hook_sched_ext_enabled{scheduler=\"\"} 0\n".to_string(),
        };
        assert!(page.contains(&enabled), "no {enabled:?} in\n{page}");
        assert!(page.contains("oci_coresched_hook_cpu_vulnerable{vulnerability=\"mds\"} 1\n"), "{page}");
        assert!(page.contains("oci_coresched_hook_build_info{version=\""), "{page}");
    }

    /// The node's families and the guard's refusals: an agent's page.
    fn agent_families(page: &str, supported: bool, scheduler: Option<&str>) {
        node_families(page, supported, scheduler);
        assert!(page.contains("# TYPE oci_coresched_hook_sched_ext_refusals_total counter\n"), "{page}");
    }

    #[test]
    fn the_hook_fails_open_counting_sched_ext_and_with_fail_closed_refuses() {
        let w = World::fake_kernel("sx-hook", "");
        let sys = Sys::new(&w);
        // No state dir yet (a node where no hook has run): the run that fails before it would
        // open one makes it, so that the fail-open ledger counts.
        assert!(!w.state_dir().exists());
        let web = pod("tenant-a", "web");
        sys.load();
        let hook = |id: &str, pid: i32| {
            w.run_input(sys.on(w.cmd(&["hook"])), Some(state(id, "creating", Some(pid), &web)), WAIT)
        };

        let open = w.spawn();
        let out = hook("open", open);
        assert_eq!(out.code(), Some(0), "{out}");
        assert!(out.stderr.contains("reason sched_ext") && out.stderr.contains(HELD), "{out}");
        assert!(!out.stderr.contains("not counted"), "{out}");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(w.state_dir()).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o700, "the state dir as the hook makes it");
        assert_eq!(cookies_made(&w), Vec::<String>::new(), "no cookie was made");
        let metrics = w.run_input(sys.on(w.cmd(&["metrics"])), None, WAIT);
        assert!(metrics.success(), "{metrics}");
        assert_eq!(sample(&metrics.stdout, "oci_coresched_hook_fail_open_total{reason=\"sched_ext\"}"), Some(1.0));
        node_families(&metrics.stdout, true, Some("simple"));

        w.write_config("fail_closed = true");
        let closed = w.spawn();
        let out = hook("closed", closed);
        assert_eq!(out.code(), Some(1), "the runtime refuses the container: {out}");
        assert!(out.stderr.contains(HELD), "{out}");
        assert_eq!(cookies_made(&w), Vec::<String>::new(), "no cookie was made");

        // Unloaded: the guard reads the state at every call, and lets the next run through.
        sys.unload();
        let out = hook("closed", closed);
        assert_eq!(out.code(), Some(0), "{out}");
        assert_eq!(cookies_made(&w), vec![closed.to_string()]);
        assert_ne!(w.cookie(closed), "0x0");
        let metrics = w.run_input(sys.on(w.cmd(&["metrics"])), None, WAIT);
        assert_eq!(sample(&metrics.stdout, "oci_coresched_hook_fail_open_total{reason=\"sched_ext\"}"), Some(1.0));
        node_families(&metrics.stdout, true, None);
    }

    #[test]
    fn the_followers_escape_scan_heals_nothing_while_held_off_and_heals_once_unloaded() {
        let w = World::fake_kernel("sx-heal", "");
        let sys = Sys::new(&w);
        let web = pod("tenant-a", "web");
        let first = w.spawn();
        let out = w.run_input(sys.on(w.cmd(&["hook"])), Some(state("first", "creating", Some(first), &web)), WAIT);
        assert!(out.success(), "{out}");
        runc_container(&w, "first", first, &web);
        let group_cookie = w.cookie(first);
        sys.load();
        let late = w.spawn();
        runc_container(&w, "late", late, &web);
        let out = w.run_input(sys.on(w.cmd(&["hook"])), Some(state("late", "creating", Some(late), &web)), WAIT);
        assert!(out.stderr.contains("reason sched_ext"), "{out}");

        let cmd =
            w.cmd(&["--log-level", "debug", "reconcile", "--follow", "--interval", "60", "--listen", "127.0.0.1:0"]);
        let mut follower = Agent::spawn(sys.on(with_roots(&w, cmd)), w.path("follow.stderr"));
        let addr = follower.served();
        follower.wait_log(&format!("core scheduling held off: {}", &HELD["core scheduling is held off: ".len()..]));
        // Escape scans every 2 s; the page is rendered every 10 s: one with more than one scan
        // has seen the escaped container at least twice without healing it.
        let page = page_when(addr, "a page after a few escape scans", |p| {
            sample(p, "oci_coresched_hook_follow_escape_scans_total").is_some_and(|n| n >= 3.0)
        });
        assert_eq!(sample(&page, "oci_coresched_hook_escaped_containers"), Some(1.0), "{page}");
        assert_eq!(sample(&page, "oci_coresched_hook_follow_heal_failures_total"), Some(0.0), "{page}");
        agent_families(&page, true, Some("simple"));
        readyz(addr, &format!("ready; this node cannot isolate: {HELD}\n"));
        assert_eq!(w.cookie(late), "0x0", "not healed while held off");
        assert_eq!(cookies_made(&w), vec![first.to_string()]);

        sys.unload();
        wait_for("the follower to heal the escaped container", WAIT, || {
            let c = w.cookie(late);
            if c == group_cookie { Ok(()) } else { Err(format!("cookie {c}, its group's {group_cookie}")) }
        });
        follower.wait_log("core scheduling resumed: the sched_ext scheduler was unloaded");
        readyz(addr, "ready\n");
        follower.stop();
        let log = follower.log();
        assert_eq!(log.matches("core scheduling held off").count(), 1, "one line for the hold:\n{log}");
        assert_eq!(log.matches("core scheduling resumed").count(), 1, "{log}");
        assert!(!log.contains("failed to heal"), "no line per container:\n{log}");
    }

    #[test]
    fn reconcile_and_the_followers_exec_follow_give_no_cookie_while_held_off() {
        if !ready("reconcile_and_the_followers_exec_follow_give_no_cookie_while_held_off") {
            return;
        }
        let w = World::fake_kernel("sx-exec", "");
        let sys = Sys::new(&w);
        let cg = Cgroup::new("sx");
        let (init, cookie) = member(&w, &cg);
        sys.load();
        let one = exec_into(&cg);
        wait_exec_d(&cg, one);
        let out = w.run_input(sys.on(w.cmd(&["reconcile"])), None, WAIT);
        assert_eq!(out.code(), Some(1), "{out}");
        assert!(out.stdout.contains(&format!("error: failed to pull the cookie of pid {init}: {HELD}")), "{out}");
        assert_eq!(w.cookie(one), "0x0", "reconcile gave no cookie while held off");
        sys.unload();
        let out = w.run_input(sys.on(w.cmd(&["reconcile"])), None, WAIT);
        assert!(out.success(), "{out}");
        assert_eq!(w.cookie(one), cookie, "and gives it once the scheduler is unloaded");

        sys.load();
        let cmd = w.cmd(&["--log-level", "debug", "reconcile", "--follow", "--interval", "3600"]);
        let mut follower = Agent::spawn(sys.on(cmd), w.path("follow.stderr"));
        follower.wait_log("following process events");
        follower.wait_log("core scheduling held off");
        let two = exec_into(&cg);
        wait_exec_d(&cg, two);
        // The event was handled, and the guard refused the share (a debug line, no warning).
        follower.wait_log(&format!("follow: failed to give pid {two} the cookie"));
        assert_eq!(w.cookie(two), "0x0");
        sys.unload();
        // The hold's end starts a sweep at once (the interval is an hour).
        wait_for("the sweep after the hold to give the cookie", WAIT, || {
            let c = w.cookie(two);
            if c == cookie { Ok(()) } else { Err(format!("{c}\n{}", follower.log())) }
        });
        follower.wait_log("core scheduling resumed");
        follower.stop();
        let log = follower.log();
        assert!(!log.lines().any(|l| l.contains(": warn: follow: failed to give pid")), "{log}");
        let prom = std::fs::read_to_string(w.state_dir().join("follow.prom")).unwrap();
        let refused = sample(&prom, "oci_coresched_hook_sched_ext_refusals_total").unwrap_or(0.0);
        assert!(refused >= 1.0, "{prom}");
        // `metrics` appends follow.prom: the textfile route has the count too.
        let out = w.run_input(sys.on(w.cmd(&["metrics"])), None, WAIT);
        assert_eq!(sample(&out.stdout, "oci_coresched_hook_sched_ext_refusals_total"), Some(refused), "{out}");
    }

    /// The NRI plugin over the world's fake kernel and `sys`, serving on a port of its own.
    fn plugin(w: &World, sys: &Sys, socket: &Path) -> Agent {
        let cmd =
            w.cmd(&["nri", "--socket", socket.to_str().unwrap(), "--hook-path", HOOK_PATH, "--listen", "127.0.0.1:0"]);
        Agent::spawn(sys.on(cmd), w.path("nri.stderr"))
    }

    fn configured(listener: &UnixListener) -> Runtime {
        let mut rt = accept(listener);
        rt.expect_register();
        rt.configure();
        rt
    }

    #[test]
    fn the_nri_catch_up_gives_no_cookie_while_held_off_and_does_after() {
        let w = World::fake_kernel("sx-nri", "");
        let sys = Sys::new(&w);
        sys.load();
        let socket = w.path("nri.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let p1 = w.spawn();
        let mut plugin = plugin(&w, &sys, &socket);
        let addr = plugin.served();
        let rt = configured(&listener);
        let pod = crate::nri::support::pod();
        let c1 = container("c1", p1 as u32, &[("io.kubernetes.pod.namespace", "tenant-a")]);
        {
            let mut rt = rt;
            rt.synchronize(vec![pod.clone()], vec![c1.clone()]);
            plugin.wait_log("catch-up done: 0 ensured, 0 already set, 0 cleared, 1 skipped, 0 failed");
            assert!(plugin.log().contains(&format!("catch-up skipped: {HELD}")), "{}", plugin.log());
            plugin.wait_log("core scheduling held off");
            assert_eq!(cookies_made(&w), Vec::<String>::new());
            let page = page_when(addr, "the refusal counted", |p| {
                sample(p, "oci_coresched_hook_sched_ext_refusals_total").is_some_and(|n| n >= 1.0)
            });
            agent_families(&page, true, Some("simple"));
            readyz(addr, &format!("ready; this node cannot isolate: {HELD}\n"));
            sys.unload();
            plugin.wait_log("core scheduling resumed: the sched_ext scheduler was unloaded");
            readyz(addr, "ready\n");
        }
        // The runtime comes back (a reconnect): its Synchronize's catch-up gives the cookie now.
        let mut rt = configured(&listener);
        rt.synchronize(vec![pod], vec![c1]);
        plugin.wait_log("catch-up done: 1 ensured");
        assert_eq!(cookies_made(&w), vec![p1.to_string()]);
        assert_ne!(w.cookie(p1), "0x0");
        plugin.stop();
        let log = plugin.log();
        assert_eq!(log.matches("core scheduling held off").count(), 1, "{log}");
    }

    /// A kernel without core scheduling (the fake kernel's unsupported mode) with SMT active:
    /// both agents stay ready, the body saying why, and both pages say `kernel_supported 0`.
    #[test]
    fn both_agents_stay_ready_on_a_kernel_without_core_scheduling_and_say_why() {
        use oci_coresched_hook::host::kernel::fake::{FakeKernel, FakeMode};
        let w = World::fake_kernel("sx-unsupported", "");
        let sys = Sys::new(&w);
        FakeKernel::shared(oci_coresched_hook::host::procfs::ProcFs::default(), w.kernel_file())
            .set_mode(FakeMode::Unsupported);
        let why = "ready; this node cannot isolate: core scheduling is not supported by this kernel (it needs \
                   CONFIG_SCHED_CORE, Linux 5.14 or later)\n";

        let cmd = w.cmd(&["reconcile", "--follow", "--interval", "3600", "--listen", "127.0.0.1:0"]);
        let follower = Agent::spawn(sys.on(cmd), w.path("follow.stderr"));
        let addr = follower.served();
        readyz(addr, why);
        let page = page_when(addr, "the follower's page", |p| p.contains("oci_coresched_hook_follow_events_enabled"));
        agent_families(&page, false, None);

        let socket = w.path("nri.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let plugin = plugin(&w, &sys, &socket);
        let addr = plugin.served();
        let _rt = configured(&listener);
        readyz(addr, why);
        let page = page_when(addr, "the plugin's page", |p| p.contains("oci_coresched_hook_nri_ready 1"));
        agent_families(&page, false, None);
        wait_until("both still running", WAIT, || follower.log().contains("reconcile --follow"));
    }
}
