//! Every error says its cause once (issue 15, defect 3). The binary prints errors with anyhow's
//! `{:#}`, which appends each `source()` of the chain: a message that also interpolates its source
//! printed the cause twice ("…: No such file or directory (os error 2): No such file or directory
//! (os error 2)"), three times when two such levels were nested.
//!
//! Part one renders one value of every variant of every error type of the library with `{:#}`
//! (exhaustive matches make a new variant fail to compile here until it is added), and real
//! failures of library calls. Part two runs real failures through the binary and checks every
//! `error:` / `warn:` line it prints. Each check: no `: `-separated segment repeats, and where the
//! cause is known, it appears exactly once (so a fix cannot drop it either).

use crate::fakeworld;

use std::time::Duration;

use oci_coresched_hook::agent::nri::NriError;
use oci_coresched_hook::agent::nri::proto::DecodeError;
use oci_coresched_hook::agent::nri::wire::WireError;
use oci_coresched_hook::config::{Config, ConfigError};
use oci_coresched_hook::cookies::engine::EngineError;
use oci_coresched_hook::decide::policy::BadContainerId;
use oci_coresched_hook::hook::HookError;
use oci_coresched_hook::host::bundle::BundleError;
use oci_coresched_hook::host::cgroup::CgroupError;
use oci_coresched_hook::host::kernel::{CookieHex, KernelError};
use oci_coresched_hook::host::oci_state::StateError;
use oci_coresched_hook::host::state_dir::{DirError, StateDir};
use oci_coresched_hook::store::{Store, StoreError, Unusable};

/// The first `: `-separated segment that occurs twice in `line`, if any. A fail-open warning's
/// tail (" (failing open: …)") is left out: it is not part of the error.
fn repeated_segment(line: &str) -> Option<String> {
    let msg = line.split(" (failing open: ").next().unwrap_or(line);
    let segments: Vec<&str> = msg.split(": ").collect();
    segments.iter().enumerate().find(|(i, s)| segments[i + 1..].contains(s)).map(|(_, s)| s.to_string())
}

fn assert_said_once(what: &str, rendered: &str) {
    if let Some(seg) = repeated_segment(rendered) {
        panic!("{what}: segment {seg:?} is said twice in\n  {rendered}");
    }
}

/// `{:#}` through anyhow, as `cli::print_error` and the fail-open warning render errors.
fn chain<E: std::error::Error + Send + Sync + 'static>(e: E) -> String {
    format!("{:#}", anyhow::Error::new(e))
}

fn io_err() -> std::io::Error {
    std::io::Error::from_raw_os_error(libc::ENOENT)
}

const ENOENT: &str = "No such file or directory (os error 2)";

fn sqlite_err() -> rusqlite::Error {
    // What opening a database at a directory gives.
    let dir = tempfile::tempdir().unwrap();
    rusqlite::Connection::open(dir.path()).and_then(|c| c.execute_batch("SELECT 1")).unwrap_err()
}

fn kernel_errors() -> Vec<KernelError> {
    let all = vec![
        KernelError::Unsupported,
        KernelError::NoSmt,
        KernelError::NoSuchProcess(41),
        KernelError::PermissionDenied(42),
        KernelError::Other { pid: 43, errno: 22 },
        KernelError::SchedExt("the sched_ext scheduler \"simple\" is enabled".into()),
    ];
    for e in &all {
        match e {
            KernelError::Unsupported
            | KernelError::NoSmt
            | KernelError::NoSuchProcess(_)
            | KernelError::PermissionDenied(_)
            | KernelError::Other { .. }
            | KernelError::SchedExt(_) => {}
        }
    }
    all
}

fn store_errors() -> Vec<StoreError> {
    let all = vec![
        StoreError::Sqlite { path: "/run/x/cache.db".into(), source: sqlite_err().into() },
        StoreError::Quarantine { path: "/run/x/cache.db".into(), source: io_err() },
        StoreError::Unusable { path: "/run/x/cache.db".into(), why: Unusable::Newer(9) },
    ];
    for e in &all {
        match e {
            StoreError::Sqlite { .. } | StoreError::Quarantine { .. } | StoreError::Unusable { .. } => {}
        }
    }
    all
}

fn dir_errors() -> Vec<DirError> {
    let all = vec![
        DirError::Io { path: "/run/x".into(), source: io_err() },
        DirError::Unsafe { path: "/run/x".into(), problem: "not a directory".into() },
        DirError::LockTimeout { path: "/run/x/lock".into(), waited: Duration::from_millis(300) },
    ];
    for e in &all {
        match e {
            DirError::Io { .. } | DirError::Unsafe { .. } | DirError::LockTimeout { .. } => {}
        }
    }
    all
}

fn cgroup_errors() -> Vec<CgroupError> {
    let all = vec![
        CgroupError::BadPath("../x".into()),
        CgroupError::NoCgroup(41),
        CgroupError::NoIdleFile("/sys/fs/cgroup/x/cpu.idle".into()),
        CgroupError::Write { path: "/sys/fs/cgroup/x/cpu.idle".into(), source: io_err() },
        CgroupError::Read { path: "/sys/fs/cgroup/x/cpu.idle".into(), source: io_err() },
    ];
    for e in &all {
        match e {
            CgroupError::BadPath(_)
            | CgroupError::NoCgroup(_)
            | CgroupError::NoIdleFile(_)
            | CgroupError::Write { .. }
            | CgroupError::Read { .. } => {}
        }
    }
    all
}

fn bundle_errors() -> Vec<BundleError> {
    let path = std::path::PathBuf::from("/run/b/config.json");
    let json = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
    let all = vec![
        BundleError::Read { path: path.clone(), cause: io_err() },
        BundleError::TooLarge { path: path.clone() },
        BundleError::Json { path: path.clone(), cause: json },
        BundleError::Field { path, field: "linux.cgroupsPath", problem: "is not a string".into() },
    ];
    for e in &all {
        match e {
            BundleError::Read { .. }
            | BundleError::TooLarge { .. }
            | BundleError::Json { .. }
            | BundleError::Field { .. } => {}
        }
    }
    all
}

fn engine_errors() -> Vec<EngineError> {
    let mut all: Vec<EngineError> = kernel_errors()
        .into_iter()
        .map(|source| EngineError::Kernel { op: "share the cookie to c1 (pid 41)".into(), source })
        .collect();
    all.extend(store_errors().into_iter().map(EngineError::Store));
    all.extend([
        EngineError::Proc { pid: 41, source: io_err() },
        EngineError::TargetGone(628),
        EngineError::Verify { what: "pid 41".into(), expected: CookieHex(0x1234), found: CookieHex(0) },
        EngineError::NoZeroSource,
        EngineError::Unstable { group: "tenant-a/web".into(), attempts: 4 },
        EngineError::RelayPanicked,
    ]);
    for e in &all {
        match e {
            EngineError::Kernel { .. }
            | EngineError::Store(_)
            | EngineError::Proc { .. }
            | EngineError::TargetGone(_)
            | EngineError::Verify { .. }
            | EngineError::NoZeroSource
            | EngineError::Unstable { .. }
            | EngineError::RelayPanicked => {}
        }
    }
    all
}

fn hook_errors() -> Vec<HookError> {
    let mut all = vec![
        HookError::UnknownStatus("exploding".into()),
        HookError::BadId(BadContainerId("../etc".into())),
        HookError::InvalidAnnotation { id: "c1".into(), problem: "group \"-web-\" is invalid".into() },
    ];
    all.extend(kernel_errors().into_iter().filter(KernelError::is_unsupported).map(HookError::Unsupported));
    all.extend(dir_errors().into_iter().map(HookError::Dir));
    all.extend(store_errors().into_iter().map(HookError::Store));
    all.extend(engine_errors().into_iter().map(|source| HookError::Engine { id: "c1".into(), source }));
    all.extend(cgroup_errors().into_iter().map(HookError::Cgroup));
    all.push(HookError::Shim { id: "c1".into(), source: EngineError::TargetGone(500) });
    for e in &all {
        match e {
            HookError::UnknownStatus(_)
            | HookError::BadId(_)
            | HookError::InvalidAnnotation { .. }
            | HookError::Unsupported(_)
            | HookError::Dir(_)
            | HookError::Store(_)
            | HookError::Engine { .. }
            | HookError::Cgroup(_)
            | HookError::Shim { .. } => {}
        }
    }
    all
}

fn state_errors() -> Vec<StateError> {
    let all = vec![
        StateError::Read(io_err()),
        StateError::TooLarge,
        StateError::Empty,
        StateError::Json(serde_json::from_str::<serde_json::Value>("{").unwrap_err()),
        StateError::Field { field: "pid", problem: "is negative (-7)".into() },
    ];
    for e in &all {
        match e {
            StateError::Read(_)
            | StateError::TooLarge
            | StateError::Empty
            | StateError::Json(_)
            | StateError::Field { .. } => {}
        }
    }
    all
}

fn config_errors() -> Vec<ConfigError> {
    let all = vec![
        ConfigError::Read { path: "/etc/x.toml".into(), source: io_err() },
        ConfigError::Invalid { path: "/etc/x.toml".into(), message: "unknown field `fail_close`".into() },
    ];
    for e in &all {
        match e {
            ConfigError::Read { .. } | ConfigError::Invalid { .. } => {}
        }
    }
    all
}

fn wire_errors() -> Vec<WireError> {
    let all = vec![
        WireError::Read(io_err()),
        WireError::Write(io_err()),
        WireError::Closed,
        WireError::Truncated(5),
        WireError::MuxOversize { conn: 1, length: u32::MAX },
        WireError::Stopped,
        WireError::SendOversize(5 << 20),
    ];
    for e in &all {
        match e {
            WireError::Read(_)
            | WireError::Write(_)
            | WireError::Closed
            | WireError::Truncated(_)
            | WireError::MuxOversize { .. }
            | WireError::Stopped
            | WireError::SendOversize(_) => {}
        }
    }
    all
}

fn decode_errors() -> Vec<DecodeError> {
    let all = vec![
        DecodeError::Truncated("a varint field"),
        DecodeError::VarintTooLong,
        DecodeError::FieldNumber(0),
        DecodeError::BadWireType { field: 1, wire_type: 6 },
        DecodeError::WrongWireType { field: 1, got: 0, expected: 2 },
        DecodeError::Group(3),
        DecodeError::Utf8(2),
    ];
    for e in &all {
        match e {
            DecodeError::Truncated(_)
            | DecodeError::VarintTooLong
            | DecodeError::FieldNumber(_)
            | DecodeError::BadWireType { .. }
            | DecodeError::WrongWireType { .. }
            | DecodeError::Group(_)
            | DecodeError::Utf8(_) => {}
        }
    }
    all
}

fn nri_errors() -> Vec<NriError> {
    let mut all = vec![
        NriError::Connect { path: "/var/run/nri/nri.sock".into(), source: io_err() },
        NriError::Connect { path: "/x.sock".into(), source: std::io::Error::from_raw_os_error(libc::EACCES) },
        NriError::Refused { name: "10-oci-coresched-hook".into(), code: 3, message: "invalid plugin index".into() },
        NriError::Timeout("10-oci-coresched-hook".into()),
        NriError::Signal(io_err()),
    ];
    all.extend(wire_errors().into_iter().map(NriError::Wire));
    for e in &all {
        match e {
            NriError::Connect { .. }
            | NriError::Wire(_)
            | NriError::Refused { .. }
            | NriError::Timeout(_)
            | NriError::Signal(_) => {}
        }
    }
    all
}

#[test]
fn every_error_variant_says_its_cause_once() {
    let mut rendered: Vec<(String, String)> = Vec::new();
    let mut add = |what: String, text: String| rendered.push((what, text));
    for e in kernel_errors() {
        add(format!("{e:?}"), chain(e));
    }
    for e in store_errors() {
        add(format!("{e:?}"), chain(e));
    }
    for e in dir_errors() {
        add(format!("{e:?}"), chain(e));
    }
    for e in cgroup_errors() {
        add(format!("{e:?}"), chain(e));
    }
    for e in bundle_errors() {
        add(format!("{e:?}"), chain(e));
    }
    for e in engine_errors() {
        add(format!("{e:?}"), chain(e));
    }
    for e in hook_errors() {
        add(format!("{e:?}"), chain(e));
    }
    for e in state_errors() {
        add(format!("{e:?}"), chain(e));
    }
    for e in config_errors() {
        add(format!("{e:?}"), chain(e));
    }
    for e in nri_errors() {
        add(format!("{e:?}"), chain(e));
    }
    for e in decode_errors() {
        add(format!("{e:?}"), chain(e));
    }
    add("BadContainerId".into(), chain(BadContainerId("../etc".into())));
    // The contexts the binary adds on top.
    let cfg = ConfigError::Read { path: "/etc/x.toml".into(), source: io_err() };
    add("config error in a hook".into(), format!("{:#}", anyhow::Error::new(cfg).context("container c1")));

    let mut failures = Vec::new();
    for (what, text) in &rendered {
        if let Some(seg) = repeated_segment(text) {
            failures.push(format!("{what}\n    renders {text:?}\n    and says {seg:?} twice"));
        }
    }
    assert!(failures.is_empty(), "{} of {} errors repeat their cause:\n{}", failures.len(), rendered.len(), {
        failures.join("\n")
    });

    // Nested: the hook's error around the engine's around the kernel's says each level once.
    let nested = chain(HookError::Engine {
        id: "c1".into(),
        source: EngineError::Kernel {
            op: "share the cookie to c1 (pid 41)".into(),
            source: KernelError::NoSuchProcess(41),
        },
    });
    assert_eq!(
        nested,
        "failed to apply core scheduling to container c1: failed to share the cookie to c1 (pid 41): no such process 41"
    );
    let gone = chain(HookError::Engine { id: "c1".into(), source: EngineError::TargetGone(628) });
    assert_eq!(gone, "failed to apply core scheduling to container c1: container init pid 628 does not exist");
    let io = chain(ConfigError::Read { path: "/etc/x.toml".into(), source: io_err() });
    assert_eq!(io, format!("failed to read config file /etc/x.toml: {ENOENT}"));
}

/// Real failures of library calls, rendered as the binary renders them.
#[test]
fn real_library_failures_say_their_cause_once() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();

    let e = Config::load(&tmp.path().join("missing.toml"), true).unwrap_err();
    let text = chain(e);
    assert_said_once("Config::load of a missing file", &text);
    assert_eq!(text.matches(ENOENT).count(), 1, "{text}");

    let e = StateDir::open(&file.join("sub")).unwrap_err();
    let text = chain(e);
    assert_said_once("StateDir::open below a regular file", &text);
    assert_eq!(text.matches("Not a directory (os error 20)").count(), 1, "{text}");

    let db_dir = tmp.path().join("cache.db");
    std::fs::create_dir(&db_dir).unwrap();
    let e = Store::open(&db_dir).unwrap_err();
    let text = chain(HookError::Engine { id: "c1".into(), source: EngineError::Store(e) });
    assert_said_once("Store::open of a directory", &text);
    assert!(
        text.starts_with(&format!(
            "failed to apply core scheduling to container c1: failed to use the cache {}: ",
            db_dir.display()
        )),
        "{text}"
    );

    let cg = tmp.path().join("cg");
    std::fs::create_dir_all(&cg).unwrap();
    std::fs::create_dir(cg.join("cpu.idle")).unwrap();
    let e = oci_coresched_hook::host::cgroup::set_idle(tmp.path(), "/cg").unwrap_err();
    let text = chain(HookError::Cgroup(e));
    assert_said_once("set_idle on a directory", &text);
    assert_eq!(text.matches("Is a directory (os error 21)").count(), 1, "{text}");
}

/// Every `error:` / `warn:` line of a run; each must say its cause once.
fn check_lines(what: &str, out: &crate::common::Output) -> Vec<String> {
    let lines: Vec<String> =
        out.stderr.lines().filter(|l| l.contains(" error: ") || l.contains(" warn: ")).map(str::to_string).collect();
    assert!(!lines.is_empty(), "{what}: no error or warning line\n{out}");
    for l in &lines {
        if let Some(seg) = repeated_segment(l) {
            panic!("{what}: {seg:?} is said twice in\n  {l}\n{out}");
        }
    }
    lines
}

fn hook_bin(args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(crate::common::HOOK);
    c.env_remove("RUST_LOG").args(args);
    c
}

/// Failures any build shows: the config file, the state file, the metrics file.
#[test]
fn binary_failures_say_their_cause_once() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nonexistent.toml");
    let m = missing.display().to_string();
    for args in [vec!["--config", &m, "explain"], vec!["--config", &m, "list"]] {
        let out = fakeworld::run(hook_bin(&args), b"{}");
        assert_eq!(out.code(), Some(2), "{out}");
        let lines = check_lines(&format!("{args:?}"), &out);
        let text = lines.join("\n");
        assert!(text.contains(&format!("failed to read config file {m}: {ENOENT}")), "{args:?}:\n{out}");
        assert_eq!(text.matches(ENOENT).count(), 1, "{args:?}:\n{out}");
    }

    let cfg = tmp.path().join("config.toml");
    std::fs::write(&cfg, "syslog = false\n").unwrap();
    let c = cfg.display().to_string();
    let state_file = tmp.path().join("no-state.json").display().to_string();
    let out = fakeworld::run(hook_bin(&["--config", &c, "hook", "--state", &state_file]), b"");
    assert_eq!(out.code(), Some(2), "{out}");
    let text = check_lines("hook --state MISSING", &out).join("\n");
    assert!(text.contains(&format!("failed to open state file {state_file}: {ENOENT}")), "{out}");

    let sd = tmp.path().join("state").display().to_string();
    let metrics_out = tmp.path().join("no/such/dir/metrics.prom").display().to_string();
    let out = fakeworld::run(hook_bin(&["--config", &c, "--state-dir", &sd, "metrics", "--output", &metrics_out]), b"");
    assert_eq!(out.code(), Some(1), "{out}");
    let text = check_lines("metrics --output MISSING_DIR/FILE", &out).join("\n");
    assert!(text.contains(&format!("failed to write metrics to {metrics_out}: ")), "{out}");
}

#[cfg(not(feature = "fake-kernel"))]
#[test]
fn hook_failures_say_their_cause_once() {
    fakeworld::needs_feature("hook_failures_say_their_cause_once", "fake-kernel");
}

/// Hook failures on the cookie path (over the shared fake kernel), fail-open (the `warn:` line
/// syslog gets) and fail-closed (the `error:` line the runtime shows).
#[cfg(feature = "fake-kernel")]
#[test]
fn hook_failures_say_their_cause_once() {
    use std::os::unix::fs::PermissionsExt;

    use crate::common::World;
    use fakeworld::{pod, run, state};

    let w = World::fake_kernel("errmsg", "");
    for fail_closed in [false, true] {
        w.write_config(if fail_closed { "fail_closed = true" } else { "" });
        let code = Some(i32::from(fail_closed));

        // A dead init.
        let pid = w.dead_pid();
        let out = w.hook(&state("c1", "creating", Some(pid), &pod("tenant-a", "web")));
        assert_eq!(out.code(), code, "{out}");
        let text = check_lines("hook, dead pid", &out).join("\n");
        let gone = format!("container init pid {pid} does not exist");
        assert!(text.contains(&format!("failed to apply core scheduling to container c1: {gone}")), "{out}");
        assert_eq!(text.matches(&gone).count(), 1, "{out}");

        // A state dir that cannot be created (below a regular file).
        let file = w.path("plain-file");
        std::fs::write(&file, "x").unwrap();
        let below: std::path::PathBuf = file.join("state");
        let pid = w.spawn();
        let out = run(w.cmd_in(&below, &["hook"]), &state("c2", "creating", Some(pid), &pod("tenant-a", "web")));
        assert_eq!(out.code(), code, "{out}");
        let text = check_lines("hook, state dir below a file", &out).join("\n");
        assert!(
            text.contains(&format!("failed to prepare state dir {}: Not a directory (os error 20)", below.display())),
            "{out}"
        );
        assert_eq!(text.matches("Not a directory (os error 20)").count(), 1, "{out}");

        // A state dir that is a regular file.
        let out = run(w.cmd_in(&file, &["hook"]), &state("c3", "creating", Some(pid), &pod("tenant-a", "web")));
        assert_eq!(out.code(), code, "{out}");
        let text = check_lines("hook, state dir a file", &out).join("\n");
        assert!(text.contains(&format!("state dir {} is unusable: not a directory", file.display())), "{out}");

        // A cache that is a directory.
        let sd = w.path(&format!("dbdir-{fail_closed}"));
        std::fs::create_dir(&sd).unwrap();
        std::fs::set_permissions(&sd, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::create_dir(sd.join("cache.db")).unwrap();
        let out = run(w.cmd_in(&sd, &["hook"]), &state("c4", "creating", Some(pid), &pod("tenant-a", "web")));
        assert_eq!(out.code(), code, "{out}");
        let text = check_lines("hook, cache a directory", &out).join("\n");
        assert!(text.contains(&format!("failed to use the cache {}: ", sd.join("cache.db").display())), "{out}");
    }
}
