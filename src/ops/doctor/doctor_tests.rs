//! The fixture every doctor test starts from (a node that isolates, over fake `/proc`, `/sys` and
//! host trees), and the verdict, the exit codes, the text and JSON forms and `list`'s line.

use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::store::Store;
use crate::test_world::Ground;

/// The follower's pid in the fixture.
pub(super) const FOLLOWER: Pid = 900;

/// A node that isolates: SMT on, the kernel supports core scheduling, sched_ext disabled,
/// schedstats on, a valid config, a state dir with a current cache, podman with the packaged
/// hooks.d file naming a copy of this binary, the follower running this binary.
pub(super) struct Fixture {
    pub(super) g: Ground,
    pub(super) config: Config,
    pub(super) probe: Result<(), KernelError>,
    pub(super) config_path: PathBuf,
    pub(super) explicit: bool,
    pub(super) config_error: Option<ConfigError>,
    pub(super) state_dir_error: Option<String>,
    pub(super) state_dir: PathBuf,
}

impl Fixture {
    pub(super) fn new() -> Self {
        let g = Ground::new();
        let f = Self {
            config: Config::default(),
            probe: Ok(()),
            config_path: g.path("config.toml"),
            explicit: true,
            config_error: None,
            state_dir_error: None,
            state_dir: g.path("state"),
            g,
        };
        f.write("config.toml", "fail_closed = false\n");
        f.write("sys/devices/system/cpu/smt/control", "on\n");
        f.write("sys/devices/system/cpu/smt/active", "1\n");
        f.write("sys/devices/system/cpu/vulnerabilities/mds", "Mitigation: Clear CPU buffers; SMT vulnerable\n");
        f.write("sys/devices/system/cpu/vulnerabilities/meltdown", "Not affected\n");
        f.write("sys/kernel/sched_ext/state", "disabled\n");
        f.write("proc/sys/kernel/osrelease", "6.12.0-test\n");
        f.write("proc/sys/kernel/sched_schedstats", "1\n");
        std::fs::create_dir(&f.state_dir).unwrap();
        std::fs::set_permissions(&f.state_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        drop(Store::open(&f.state_dir.join("cache.db")).unwrap());
        f.exe("bin/oci-coresched-hook", "build A");
        f.exe("host/usr/bin/oci-coresched-hook", "build A");
        f.exe("host/usr/bin/podman", "podman");
        f.write(
            "host/usr/share/containers/oci/hooks.d/oci-coresched-hook.json",
            include_str!("../../../hooks.d/oci-coresched-hook.json"),
        );
        f.agent(FOLLOWER, &["/usr/bin/oci-coresched-hook", "reconcile", "--follow"], "bin/oci-coresched-hook");
        f
    }

    /// Writes `text` at `rel` below the temp dir.
    pub(super) fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.g.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// An executable file at `rel` holding `text`.
    pub(super) fn exe(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.write(rel, text);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// A process `pid` with command line `args` whose executable is the file at `exe`.
    pub(super) fn agent(&self, pid: Pid, args: &[&str], exe: &str) {
        self.g.fp.spawn(pid, 5000 + pid as u64, 0, "/system.slice/agent").unwrap();
        self.write(&format!("proc/{pid}/cmdline"), &args.iter().map(|a| format!("{a}\0")).collect::<String>());
        std::os::unix::fs::symlink(self.g.path(exe), self.g.path(&format!("proc/{pid}/exe"))).unwrap();
    }

    /// Runs doctor over the fixture's system.
    pub(super) fn examine(&self) -> Result<Report, DoctorError> {
        let mut sys = self.g.sys(self.state_dir.clone());
        sys.kernel = &self.g.kernel;
        let node = Node {
            sys: &sys,
            probe: self.probe.clone(),
            config: &self.config,
            config_file: ConfigFile {
                path: &self.config_path,
                explicit: self.explicit,
                error: self.config_error.as_ref(),
            },
            state_dir_error: self.state_dir_error.clone(),
            host_root: &self.g.path("host"),
            self_exe: &self.g.path("bin/oci-coresched-hook"),
            self_pid: 1,
        };
        examine(&node)
    }

    pub(super) fn report(&self) -> Report {
        self.examine().unwrap()
    }

    /// The fact `name` of the report.
    pub(super) fn fact(&self, name: &str) -> Fact {
        let r = self.report();
        r.facts.iter().find(|f| f.name == name).cloned().unwrap_or_else(|| panic!("no fact {name}: {r:#?}"))
    }
}

/// The facts not at `ok` or `info`: (name, level).
fn problems(r: &Report) -> Vec<(&'static str, Level)> {
    r.facts.iter().filter(|f| f.level < Level::Info).map(|f| (f.name, f.level)).collect()
}

#[test]
fn a_node_that_isolates_exits_0_with_every_fact_ok_or_info() {
    let f = Fixture::new();
    let r = f.report();
    assert_eq!(problems(&r), [], "{r:#?}");
    assert_eq!((r.verdict, r.exit_code), (Verdict::Isolates, 0));
    let names: Vec<&str> = r.facts.iter().map(|f| f.name).collect();
    for want in [
        "kernel",
        "smt",
        "vulnerabilities",
        "schedstats",
        "sched_ext",
        "config",
        "state_dir",
        "cache",
        "hooks.d",
        "containerd",
        "routes",
        "follower",
        "nri",
        "audit",
        "fail_open",
    ] {
        assert!(names.contains(&want), "no fact {want}: {names:?}");
    }
    assert!(r.facts.windows(2).all(|w| w[0].level <= w[1].level), "not worst first: {r:#?}");
}

#[test]
fn a_warning_is_at_risk_and_a_failure_does_not_isolate_both_exit_1() {
    let f = Fixture::new();
    std::fs::remove_dir_all(f.g.path(&format!("proc/{FOLLOWER}"))).unwrap();
    let r = f.report();
    assert_eq!(problems(&r), [("follower", Level::Warn)]);
    assert_eq!((r.verdict, r.exit_code), (Verdict::AtRisk, 1));
    assert!(r.summary.starts_with("this node isolates, at risk (1 warning); worst: follower:"), "{}", r.summary);

    f.write("sys/kernel/sched_ext/state", "enabled\n");
    let r = f.report();
    assert_eq!(problems(&r), [("sched_ext", Level::Fail), ("follower", Level::Warn)]);
    assert_eq!((r.verdict, r.exit_code), (Verdict::DoesNotIsolate, 1));
    assert!(
        r.summary.starts_with("this node does not isolate (1 failure, 1 warning); worst: sched_ext:"),
        "{}",
        r.summary
    );
}

#[test]
fn smt_off_is_nothing_to_isolate_exit_0_but_a_broken_config_still_fails() {
    let f = Fixture::new();
    f.write("sys/devices/system/cpu/smt/control", "off\n");
    f.write("sys/devices/system/cpu/smt/active", "0\n");
    std::fs::remove_dir_all(&f.state_dir).unwrap();
    std::fs::remove_dir_all(f.g.path(&format!("proc/{FOLLOWER}"))).unwrap();
    let mut f = f;
    f.probe = Err(KernelError::Unsupported);
    let r = f.report();
    assert_eq!(problems(&r), [], "with SMT off, isolation facts are info at most: {r:#?}");
    assert_eq!((r.verdict, r.exit_code), (Verdict::NothingToIsolate, 0));
    assert!(r.summary.contains("cookies"), "{}", r.summary);

    f.config_error = Some(Config::parse("fail_closd = true\n", &f.config_path).unwrap_err());
    let r = f.report();
    assert_eq!(problems(&r), [("config", Level::Fail)]);
    assert_eq!(r.exit_code, 1);
}

#[test]
fn nothing_readable_is_an_error_exit_2() {
    let f = Fixture::new();
    std::fs::remove_dir_all(f.g.path("proc")).unwrap();
    assert!(f.examine().is_ok(), "/sys alone is enough to run");
    std::fs::remove_dir_all(f.g.path("sys")).unwrap();
    let e = f.examine().unwrap_err();
    assert!(e.to_string().starts_with("failed to read the node: neither"), "{e}");
}

#[test]
fn the_text_form_puts_the_verdict_first_and_status_shows_only_problems() {
    let f = Fixture::new();
    std::fs::remove_dir_all(f.g.path(&format!("proc/{FOLLOWER}"))).unwrap();
    let r = f.report();
    let full = render(&r, false);
    let lines: Vec<&str> = full.lines().collect();
    assert_eq!(lines[0], r.summary);
    assert!(lines[1].starts_with("warn  follower "), "{full}");
    assert!(full.contains("ok    kernel           core scheduling is supported (Linux 6.12.0-test)"), "{full}");
    assert!(full.contains("                       uname -r: 6.12.0-test"), "{full}");
    let short = render(&r, true);
    assert_eq!(short.lines().count(), 3, "{short}");
    assert!(short.lines().nth(1).unwrap().starts_with("warn  follower "), "{short}");
    assert!(short.ends_with("(oci-coresched-hook doctor says more about each)\n"), "{short}");
    let clean = Fixture::new().report();
    assert_eq!(render(&clean, true), format!("{}\n", clean.summary));
}

#[test]
fn the_json_form_is_one_stable_object() {
    let r = Fixture::new().report();
    let v = serde_json::to_value(&r).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["exit_code", "exit_codes", "facts", "summary", "verdict"]);
    assert_eq!(v["verdict"], "isolates");
    assert_eq!(v["exit_code"], 0);
    let fact = &v["facts"][0];
    let keys: Vec<&String> = fact.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["detail", "level", "name", "summary"]);
    assert!(["ok", "info"].contains(&fact["level"].as_str().unwrap()));
}

#[test]
fn list_says_when_the_kernel_cannot_isolate() {
    let f = Fixture::new();
    let sys = f.g.path("sys");
    assert_eq!(cannot_isolate(&sys, &Ok(()), true), None);
    let line = cannot_isolate(&sys, &Err(KernelError::Unsupported), true).unwrap();
    assert!(line.starts_with("this node cannot isolate: core scheduling is not supported by this kernel"), "{line}");
    assert!(line.ends_with("(run oci-coresched-hook doctor)"), "{line}");
    f.write("sys/kernel/sched_ext/state", "enabled\n");
    let line = cannot_isolate(&sys, &Ok(()), true).unwrap();
    assert!(line.contains("cookies are held off while a sched_ext scheduler is enabled"), "{line}");
    assert_eq!(cannot_isolate(&sys, &Ok(()), false), None, "the guard off holds nothing off");
    f.write("sys/devices/system/cpu/smt/active", "0\n");
    assert_eq!(cannot_isolate(&sys, &Err(KernelError::Unsupported), true), None, "SMT off: nothing to isolate");
}
