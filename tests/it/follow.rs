//! `reconcile --follow` on this host's kernel (real proc connector events) over the shared fake
//! kernel: a member container is a `sleep` moved into a cgroup of its own in the host's cgroup2
//! hierarchy (`/sys/fs/cgroup/unified`, no controllers); "exec'd" processes join that cgroup and
//! exec, as `runc exec` does. Checked: the exec'd process gets the group's cookie from the event;
//! 1,000 quick forks all end with it (and the follower's CPU time per event is printed); host
//! processes never get one; killed and restarted, the follower's start-up sweep fixes what it
//! missed; in a network namespace of its own (no events) it says so in one line and sweeps; a
//! member whose init exits without a poststop (a container the NRI plugin caught up) leaves the
//! cache.
//!
//! Needs root and `--features fake-kernel`; without them a test fails under `CI` and prints
//! `SKIPPED` otherwise.

#[cfg(not(feature = "fake-kernel"))]
#[test]
fn follow_tests_need_the_fake_kernel() {
    crate::fakeworld::needs_feature("follow", "fake-kernel");
}

#[cfg(feature = "fake-kernel")]
pub(crate) mod with_fake_kernel {
    use std::io::{BufRead, BufReader};
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use crate::common::World;
    use crate::common::wait::{POLL, poll, wait_for, wait_until};
    use crate::fakeworld::pod;

    const V2: &str = "/sys/fs/cgroup/unified";

    /// A cgroup of the host's cgroup2 hierarchy, removed on drop (its processes killed first).
    pub(crate) struct Cgroup(PathBuf);

    impl Cgroup {
        pub(crate) fn new(tag: &str) -> Self {
            let p = Path::new(V2).join(format!("ocsh-follow-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
            Self(p)
        }
        fn name(&self) -> String {
            format!("/{}", self.0.file_name().unwrap().to_string_lossy())
        }
        fn procs(&self) -> Vec<i32> {
            std::fs::read_to_string(self.0.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect()
        }
        fn enter(&self, pid: i32) {
            std::fs::write(self.0.join("cgroup.procs"), pid.to_string()).expect("move into the cgroup");
        }
    }

    impl Drop for Cgroup {
        fn drop(&mut self) {
            // Bounded, and no panic in a drop: a cgroup left behind is only an rmdir that fails.
            let _ = poll(Duration::from_millis(2500), Duration::from_millis(50), || {
                let procs = self.procs();
                for &p in &procs {
                    // SAFETY: kill(2) has no memory-safety preconditions; these are this test's
                    // processes, in this test's cgroup.
                    unsafe { libc::kill(p, libc::SIGKILL) };
                }
                if procs.is_empty() { Ok(()) } else { Err(()) }
            });
            let _ = std::fs::remove_dir(&self.0);
        }
    }

    /// The follower, stopped with SIGTERM (or killed) on drop; its stderr is collected.
    struct Follower {
        child: Child,
        log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
        /// The thread that collects the stderr lines; it ends when the follower's stderr closes.
        reader: std::thread::JoinHandle<()>,
    }

    impl Follower {
        /// `wrap... oci-coresched-hook ... reconcile --follow --interval INTERVAL`.
        fn start(w: &World, wrap: &[&str], interval: &str) -> Self {
            Self::start_with(w, wrap, interval, &[])
        }
        /// [`Follower::start`] with more arguments.
        fn start_with(w: &World, wrap: &[&str], interval: &str, extra: &[&str]) -> Self {
            let mut args = vec!["--log-level", "debug", "reconcile", "--follow", "--interval", interval];
            args.extend_from_slice(extra);
            let inner = w.cmd(&args);
            let mut cmd = match wrap.split_first() {
                None => inner,
                Some((prog, args)) => {
                    let mut c = Command::new(prog);
                    c.args(args).arg(inner.get_program()).args(inner.get_args());
                    for (k, v) in inner.get_envs() {
                        match v {
                            Some(v) => c.env(k, v),
                            None => c.env_remove(k),
                        };
                    }
                    c
                }
            };
            cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
            let mut child = cmd.spawn().expect("start the follower");
            let err = child.stderr.take().unwrap();
            let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let l = log.clone();
            let reader = std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    l.lock().unwrap().push(line);
                }
            });
            Self { child, log, reader }
        }
        fn lines(&self) -> Vec<String> {
            self.log.lock().unwrap().clone()
        }
        fn wait_line(&self, pat: &str, timeout: Duration) -> String {
            wait_for(&format!("a follower log line with {pat:?}"), timeout, || {
                let lines = self.lines();
                lines.iter().find(|l| l.contains(pat)).cloned().ok_or_else(|| lines.join("\n"))
            })
        }
        fn stop(mut self) -> std::process::ExitStatus {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let log = &self.log;
            let status = wait_for("the follower to stop on SIGTERM", Duration::from_secs(10), || {
                self.child.try_wait().unwrap().ok_or_else(|| log.lock().unwrap().join("\n"))
            });
            // Its last lines are in once the reader has read its stderr to the end.
            wait_until("the follower's stderr to be read to its end", Duration::from_secs(10), || {
                self.reader.is_finished()
            });
            status
        }
        fn kill9(mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    impl Drop for Follower {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    /// A process that joins `cg` and then execs `sleep 600` (what `runc exec` does): its pid.
    pub(crate) fn exec_into(cg: &Cgroup) -> i32 {
        let script = format!("echo $$ > {}/cgroup.procs && exec sleep 600", cg.0.display());
        let child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn sh");
        let pid = child.id() as i32;
        std::mem::forget(child); // killed with the cgroup
        pid
    }

    /// Whether `pid` has the cookie `want` within `timeout` (the callers say what failed, with
    /// the follower's log).
    fn wait_cookie(w: &World, pid: i32, want: &str, timeout: Duration) -> bool {
        poll(timeout, POLL, || if w.cookie(pid) == want { Ok(()) } else { Err(()) }).is_ok()
    }

    /// Waits until `pid`, started by [`exec_into`], is in `cg` and has exec'd `sleep`.
    pub(crate) fn wait_exec_d(cg: &Cgroup, pid: i32) {
        wait_for(&format!("pid {pid} to join {} and exec sleep", cg.name()), Duration::from_secs(10), || {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let procs = cg.procs();
            if procs.contains(&pid) && comm.trim() == "sleep" {
                Ok(())
            } else {
                Err(format!("comm {:?}, cgroup.procs {procs:?}", comm.trim()))
            }
        });
    }

    /// A member container `c1` of group web: a `sleep` in a cgroup of its own.
    pub(crate) fn member(w: &World, cg: &Cgroup) -> (i32, String) {
        // The sweep walks the cgroup under the hook's cgroup mount (`OCH_FAKE_CGROUP_ROOT`): there
        // it finds the host's cgroup2 hierarchy as the hybrid layout's `unified`.
        std::fs::create_dir_all(w.cgroup_root()).unwrap();
        std::os::unix::fs::symlink(V2, w.cgroup_root().join("unified")).unwrap();
        let init = w.spawn();
        cg.enter(init);
        w.ensure("c1", init, &pod("tenant-a", "web"));
        let cookie = w.cookie(init);
        assert_ne!(cookie, "0x0");
        let list = w.list();
        assert_eq!(list[0]["members"][0]["cgroup"].as_str(), Some(cg.name().as_str()), "{list}");
        (init, cookie)
    }

    /// Root and a cgroup2 hierarchy at [`V2`]; otherwise a loud skip (a failure under `CI`).
    pub(crate) fn ready(test: &str) -> bool {
        // SAFETY: geteuid(2) has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            crate::common::skip(test, "needs root (a cgroup of its own, the proc connector)");
            return false;
        }
        if !Path::new(V2).join("cgroup.procs").is_file() {
            crate::common::skip(test, &format!("needs a cgroup2 hierarchy at {V2}"));
            return false;
        }
        true
    }

    fn prom(w: &World, name: &str) -> f64 {
        let text = std::fs::read_to_string(w.state_dir().join("follow.prom")).expect("follow.prom");
        crate::common::http::sample(&text, name).unwrap_or_else(|| panic!("no {name} in follow.prom:\n{text}"))
    }

    #[test]
    fn exec_d_and_forked_processes_get_the_cookie_and_host_processes_never() {
        if !ready("exec_d_and_forked_processes_get_the_cookie_and_host_processes_never") {
            return;
        }
        // A storm of 1,000 forks, each an event the follower handles: no test with a wall-clock
        // bound beside it.
        let _alone = crate::common::heavy_load();
        let w = World::fake_kernel("follow", "");
        let cg = Cgroup::new("a");
        let (_init, cookie) = member(&w, &cg);
        let host_before = w.spawn();
        let f = Follower::start(&w, &[], "3600");
        f.wait_line("following process events", Duration::from_secs(10));

        let pid = exec_into(&cg);
        assert!(wait_cookie(&w, pid, &cookie, Duration::from_secs(5)), "exec'd pid {pid}:\n{}", f.lines().join("\n"));
        f.wait_line(&format!("gave pid {pid} of container c1"), Duration::from_secs(5));

        // 1,000 quick forks from a shell that entered the cgroup (and execs nothing more).
        let script = format!("echo $$ > {}/cgroup.procs; for i in $(seq 1000); do sleep 600 & done", cg.0.display());
        let t0 = Instant::now();
        let out = Command::new("sh").args(["-c", &script]).stdin(Stdio::null()).stdout(Stdio::null()).status();
        assert!(out.unwrap().success());
        let forked = t0.elapsed();
        let host_after = w.spawn();
        let procs = cg.procs();
        assert!(procs.len() >= 1000, "{} processes in the cgroup", procs.len());
        // All of them, soon: `reconcile --dry-run` (a GET on every process of the cgroup) would fix
        // none. The fake kernel does not model inheritance at fork, so here every child needs its
        // own fix from its fork event (the real kernel's children inherit the parent's cookie).
        // Polled every 200 ms: each look is a process that reads every process of the cgroup.
        let look = poll(Duration::from_secs(60), Duration::from_millis(200), || {
            let out = w.cli(&["reconcile", "--dry-run", "--json"], b"");
            let r: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out}"));
            let seen = r["members"][0]["processes"].as_u64().unwrap_or(0);
            let unfixed = r["members"][0]["fixed"].as_array().map_or(usize::MAX, Vec::len);
            if unfixed == 0 { Ok((seen, unfixed)) } else { Err((seen, unfixed)) }
        });
        let (Ok((seen, unfixed)) | Err((seen, unfixed))) = look;
        let settled = t0.elapsed();
        assert!(seen >= 1000, "reconcile saw {seen} processes");
        assert_eq!(unfixed, 0, "{unfixed} of {seen} processes still without the cookie after 60 s");
        for pid in [host_before, host_after] {
            assert_eq!(w.cookie(pid), "0x0", "host process {pid} got a cookie");
        }
        assert!(f.stop().success());
        let events = prom(&w, "oci_coresched_hook_follow_events_total{kind=\"fork\"}")
            + prom(&w, "oci_coresched_hook_follow_events_total{kind=\"exec\"}");
        let cpu = prom(&w, "oci_coresched_hook_follow_cpu_seconds_total");
        let fixed = prom(&w, "oci_coresched_hook_follow_processes_fixed_total{via=\"event\"}");
        assert!(fixed >= 1.0 && events >= 2000.0, "fixed {fixed}, events {events}");
        eprintln!(
            "follow (host, fake kernel): 1000 forks in {forked:?}, all fixed after {settled:?}; {events} events, {fixed} fixed, {:.1} us CPU per event",
            cpu / events * 1e6
        );
    }

    #[test]
    fn a_member_whose_init_exits_without_a_poststop_leaves_the_cache() {
        if !ready("a_member_whose_init_exits_without_a_poststop_leaves_the_cache") {
            return;
        }
        let w = World::fake_kernel("follow-gone", "");
        let cg = Cgroup::new("c");
        let (init, _cookie) = member(&w, &cg);
        let f = Follower::start(&w, &[], "3600");
        f.wait_line("following process events", Duration::from_secs(10));
        w.kill(init); // no poststop follows
        let line = f.wait_line("removed container c1 from group", Duration::from_secs(20));
        assert!(line.contains(&format!("its init (pid {init}) exited")), "{line}");
        let rows = crate::fakeworld::members(&w.list());
        assert!(rows.is_empty(), "{rows:?}");
        assert!(f.stop().success());
        assert_eq!(prom(&w, "oci_coresched_hook_follow_members_removed_total"), 1.0);
    }

    #[test]
    fn a_killed_follower_catches_up_at_restart_and_without_net_admin_it_sweeps() {
        if !ready("a_killed_follower_catches_up_at_restart_and_without_net_admin_it_sweeps") {
            return;
        }
        let w = World::fake_kernel("follow-restart", "");
        let cg = Cgroup::new("b");
        let (_init, cookie) = member(&w, &cg);
        let f = Follower::start(&w, &[], "3600");
        f.wait_line("following process events", Duration::from_secs(10));
        f.kill9();
        let missed = exec_into(&cg);
        wait_exec_d(&cg, missed);
        // The follower is dead and reaped: nothing else sets cookies, so no observation window.
        assert_eq!(w.cookie(missed), "0x0", "nobody follows now");
        let f = Follower::start(&w, &[], "3600");
        assert!(wait_cookie(&w, missed, &cookie, Duration::from_secs(10)), "{}", f.lines().join("\n"));
        f.wait_line("the sweep gave 1 processes", Duration::from_secs(5));
        assert!(f.stop().success());

        // In a network namespace of its own (systemd's PrivateNetwork=yes, a pod without
        // hostNetwork) there are no process events: one line, a sweep every interval (1 s here),
        // exit 0 on SIGTERM.
        let f = Follower::start(&w, &["unshare", "--net", "--"], "1");
        let line = f.wait_line("reconcile --follow: failed to", Duration::from_secs(10));
        assert!(line.contains("next sweep"), "{line}");
        let late = exec_into(&cg);
        assert!(wait_cookie(&w, late, &cookie, Duration::from_secs(10)), "{}", f.lines().join("\n"));
        assert!(f.stop().success());
        assert_eq!(prom(&w, "oci_coresched_hook_follow_events_enabled"), 0.0);
    }

    /// `--listen`: the page is every family of `metrics` plus the follower's counters, valid for
    /// promtool; ready once events flow, live throughout.
    #[test]
    fn the_endpoint_serves_the_metrics_families_and_the_follower_counters() {
        use crate::common::http::{get, sample, served_at};
        if !ready("the_endpoint_serves_the_metrics_families_and_the_follower_counters") {
            return;
        }
        let w = World::fake_kernel("follow-endpoint", "");
        let cg = Cgroup::new("e");
        let (_init, cookie) = member(&w, &cg);
        let f = Follower::start_with(&w, &[], "3600", &["--listen", "127.0.0.1:0"]);
        let line = f.wait_line("/readyz on http://", Duration::from_secs(10));
        let addr = served_at(&line).expect("an address");
        let page = wait_for("the follower's page", Duration::from_secs(20), || {
            let (status, body) = get(addr, "/metrics");
            if status == 200 && body.contains("oci_coresched_hook_follow_events_enabled") {
                Ok(body)
            } else {
                Err(body)
            }
        });
        // The `metrics` command's families (the member with its cookie, its group), then the follower's.
        assert!(page.contains("oci_coresched_hook_container_cookie{"), "{page}");
        assert!(page.contains(&format!("core_sched_cookie=\"{cookie}\"")), "{page}");
        assert_eq!(sample(&page, "oci_coresched_hook_follow_events_enabled"), Some(1.0), "{page}");
        assert!(page.contains("oci_coresched_hook_group_members{core_sched_group=\"tenant-a/web\"} 1"), "{page}");
        assert_eq!(get(addr, "/readyz"), (200, "ready\n".to_string()));
        assert_eq!(get(addr, "/healthz"), (200, "ok\n".to_string()));
        crate::common::promtool::check("follow: promtool check metrics", &page, crate::common::skip);
        assert!(f.stop().success());
    }
}
