//! Shared support for the integration tests: the one world fixture ([`World`]: a per-test temp
//! dir, the hook's config and log file, `sleep` processes standing in for container inits, cleanup
//! that runs even when a test fails, failure dumps; its fake-kernel side is in `tests/fakeworld`),
//! the one process runner ([`run_command`]), busybox bundles wired to the real hook binary, runc /
//! crun (in a private mount namespace) / podman runs with private roots and a timeout, and the skip
//! ([`skip`]) and wait ([`wait`]) helpers.
//!
//! Every command runs with stdin from `/dev/null` (tests run without a terminal in CI) or its input
//! written from a thread, stdout and stderr go to files (a detached container inherits them: pipes
//! would block), and a world records each of its commands so that a failing check prints the whole
//! transcript plus the hook's log.
//!
//! Set `OCSH_KEEP_TEMP=1` to keep the temp dirs for inspection.

#![allow(dead_code)]

use std::fmt;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub mod http;
pub mod promtool;
pub mod rootless;
mod skip;
pub mod wait;
pub use skip::skip;

/// The hook binary under test.
pub const HOOK: &str = env!("CARGO_BIN_EXE_oci-coresched-hook");

/// The crate root (fixtures, hooks.d).
pub const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// Timeout for one runtime command (create, start, run of a short container, ...).
pub const RUNTIME_TIMEOUT: Duration = Duration::from_secs(60);

/// Timeout for one run of the hook binary itself.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(20);

/// Annotations of a Kubernetes-like pod in namespace `tenant-a` whose container names group `web`.
pub fn k8s_annotations() -> Vec<(String, String)> {
    [
        ("io.kubernetes.cri.container-type", "container"),
        ("io.kubernetes.cri.container-name", "web"),
        ("io.kubernetes.cri.sandbox-id", "5f1c0e7d9a8b6c4d2e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d"),
        ("io.kubernetes.cri.sandbox-name", "web-0"),
        ("io.kubernetes.cri.sandbox-namespace", "tenant-a"),
        ("io.kubernetes.cri.sandbox-uid", "3f2b7c1e-5d4a-4e8b-9c6d-1a2b3c4d5e6f"),
        ("io.kubernetes.pod.namespace", "tenant-a"),
        ("io.kubernetes.pod.name", "web-0"),
        ("io.kubernetes.pod.uid", "3f2b7c1e-5d4a-4e8b-9c6d-1a2b3c4d5e6f"),
        ("io.kubernetes.container.name", "web"),
        ("oci-coresched-hook/group", "web"),
        ("koordinator.sh/qosClass", "LS"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Replaces (or adds) one annotation.
pub fn set_annotation(ann: &mut Vec<(String, String)>, key: &str, value: &str) {
    ann.retain(|(k, _)| k != key);
    ann.push((key.to_string(), value.to_string()));
}

// ---------------------------------------------------------------------------------------------
// Requirements
// ---------------------------------------------------------------------------------------------

/// Something a test needs from the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Running as root (runtimes, cgroups, mounts).
    Root,
    /// `runc`.
    Runc,
    /// `crun`.
    Crun,
    /// `podman` (with conmon).
    Podman,
    /// `unshare` (util-linux), for crun's private mount namespace.
    Unshare,
    /// A statically linked busybox for the rootfs.
    BusyboxStatic,
    /// `newuidmap` and `newgidmap`, for rootless podman.
    Uidmap,
}

impl Need {
    fn what(self) -> &'static str {
        match self {
            Need::Root => "root",
            Need::Runc => "runc",
            Need::Crun => "crun",
            Need::Podman => "podman",
            Need::Unshare => "unshare",
            Need::BusyboxStatic => "busybox (static)",
            Need::Uidmap => "newuidmap",
        }
    }

    fn package(self) -> &'static str {
        match self {
            Need::Root => "",
            Need::Runc => "runc",
            Need::Crun => "crun",
            Need::Podman => "podman",
            Need::Unshare => "util-linux",
            Need::BusyboxStatic => "busybox-static",
            Need::Uidmap => "uidmap",
        }
    }

    fn available(self) -> bool {
        match self {
            // SAFETY: geteuid has no preconditions and cannot fail.
            Need::Root => (unsafe { libc::geteuid() }) == 0,
            Need::Runc => which("runc").is_some(),
            Need::Crun => which("crun").is_some(),
            Need::Podman => which("podman").is_some() && which("conmon").is_some(),
            Need::Unshare => which("unshare").is_some(),
            Need::BusyboxStatic => static_busybox().is_some(),
            Need::Uidmap => which("newuidmap").is_some() && which("newgidmap").is_some(),
        }
    }

    fn problem(self) -> String {
        match self {
            Need::Root => "root required (run the tests as root)".to_string(),
            Need::Podman if which("podman").is_some() => "conmon not installed (apt-get install conmon)".to_string(),
            _ => format!("{} not installed (apt-get install {})", self.what(), self.package()),
        }
    }
}

/// Checks what a test needs. When something is missing, [`skip`]s: panics if `CI` is set (a CI
/// host must have it), otherwise prints `SKIPPED <test>: <tool> not installed (apt-get install X)`
/// on stderr and returns false.
pub fn require(test: &str, needs: &[Need]) -> bool {
    for need in needs {
        if !need.available() {
            skip(test, &need.problem());
            return false;
        }
    }
    true
}

/// Finds an executable in `PATH` (and the sbin dirs, where Debian puts runc).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = ["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from);
    std::env::split_paths(&path).chain(extra).map(|d| d.join(name)).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false)
}

/// The first statically linked busybox among `$BUSYBOX`, `/bin/busybox`, `/usr/bin/busybox` (a
/// dynamic one would need the host's libc inside the rootfs).
pub fn static_busybox() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(b) = std::env::var_os("BUSYBOX") {
        candidates.push(b.into());
    }
    candidates.push("/bin/busybox".into());
    candidates.push("/usr/bin/busybox".into());
    candidates.into_iter().find(|p| is_executable(p) && is_static_elf(p))
}

/// An ELF file without a `PT_INTERP` program header (static or static-pie).
fn is_static_elf(p: &Path) -> bool {
    let mut head = Vec::new();
    if File::open(p).and_then(|f| f.take(1 << 20).read_to_end(&mut head)).is_err() {
        return false;
    }
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[5] != 1 {
        return false; // not ELF, or not little-endian
    }
    let u16_at = |o: usize| head.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as usize);
    let u32_at = |o: usize| head.get(o..o + 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()) as usize);
    let u64_at = |o: usize| head.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize);
    let (phoff, phentsize, phnum) = match head[4] {
        2 => (u64_at(0x20), u16_at(0x36), u16_at(0x38)),
        1 => (u32_at(0x1c), u16_at(0x2a), u16_at(0x2c)),
        _ => return false,
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (phoff, phentsize, phnum) else { return false };
    const PT_INTERP: usize = 3;
    for i in 0..phnum {
        match u32_at(phoff + i * phentsize) {
            Some(PT_INTERP) => return false,
            Some(_) => {}
            None => return false,
        }
    }
    true
}

/// What a hook that must give a cookie (createRuntime) reports when the state dir is broken and
/// `fail_closed = true`, on this kernel. The hook probes the kernel before it opens the state dir,
/// so on a kernel without core scheduling (or without SMT) the kernel's message wins; on a kernel
/// with it, the state dir's.
pub fn broken_state_dir_failure_text() -> &'static str {
    const PR_SCHED_CORE: libc::c_int = 62;
    const PR_SCHED_CORE_GET: libc::c_ulong = 0;
    let mut cookie: u64 = 0;
    // SAFETY: PR_SCHED_CORE_GET on the calling thread (pid 0, scope thread 0) writes one u64 to
    // the pointer passed as arg5, which points to a live local.
    let rc = unsafe {
        libc::prctl(PR_SCHED_CORE, PR_SCHED_CORE_GET, 0 as libc::c_ulong, 0 as libc::c_ulong, &mut cookie as *mut u64)
    };
    if rc == 0 {
        return "state dir";
    }
    match std::io::Error::last_os_error().raw_os_error() {
        Some(libc::ENODEV) => "core scheduling is unavailable",
        Some(libc::EINVAL) => "core scheduling is not supported",
        _ => "state dir",
    }
}

// ---------------------------------------------------------------------------------------------
// Tests that must not overlap
// ---------------------------------------------------------------------------------------------

/// All integration tests run in one process, two (one per CPU) at a time, whatever file they come
/// from. A test that loads the machine (a fork storm, two dozen hooks at once) must not run beside
/// a test that asserts a wall-clock bound: the bound would measure the other test. (When each file
/// was a test binary of its own, cargo ran the files one after another.)
static LOAD: RwLock<()> = RwLock::new(());

/// Held for its whole run by a test that loads the machine: it waits until no [`timed`] test
/// runs, and none starts until it is done.
pub fn heavy_load() -> RwLockWriteGuard<'static, ()> {
    LOAD.write().unwrap_or_else(PoisonError::into_inner)
}

/// Held by a test (or the part of one) that asserts a wall-clock bound: timed tests run beside each
/// other and beside any light test, never beside a [`heavy_load`] one.
pub fn timed() -> RwLockReadGuard<'static, ()> {
    LOAD.read().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

/// One finished (or timed-out) command.
#[derive(Debug, Clone)]
pub struct Output {
    /// The command line, `{:?}`-quoted.
    pub cmdline: String,
    /// Exit status; `None` when it timed out and was killed.
    pub status: Option<ExitStatus>,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
    /// Wall-clock time.
    pub elapsed: Duration,
}

impl Output {
    /// The exit code (`None`: killed by a signal or timed out).
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// The signal that killed it (`None`: it exited, or timed out).
    pub fn signal(&self) -> Option<i32> {
        self.status.and_then(|s| s.signal())
    }

    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.code() == Some(0)
    }
}

fn clip(s: &str) -> String {
    const MAX: usize = 8000;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut cut = s.len() - MAX;
    while !s.is_char_boundary(cut) {
        cut += 1;
    }
    format!("[... {cut} bytes cut ...]{}", &s[cut..])
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self.status {
            None => "TIMED OUT (killed)".to_string(),
            Some(s) => match (s.code(), s.signal()) {
                (Some(c), _) => format!("exit {c}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                _ => format!("{s}"),
            },
        };
        writeln!(f, "$ {}", self.cmdline)?;
        writeln!(f, "  status: {status} after {:.3}s", self.elapsed.as_secs_f64())?;
        writeln!(f, "  --- stdout ---\n{}", clip(&self.stdout))?;
        writeln!(f, "  --- stderr ---\n{}", clip(&self.stderr))
    }
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

fn seq() -> usize {
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// A file for a command's stdout or stderr: `dir/name` (kept with a kept temp dir), or an
/// anonymous temp file without `dir`. A file, not a pipe: a detached container inherits it, and
/// a pipe would keep the reader waiting for it.
fn capture_file(dir: Option<&Path>, name: &str) -> File {
    match dir {
        Some(d) => {
            let path = d.join(name);
            File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap_or_else(|e| panic!("create {}: {e}", path.display()))
        }
        None => tempfile::tempfile().expect("anonymous temp file"),
    }
}

/// What the command wrote to `file` (its copy of the descriptor shares the offset: rewind).
fn read_back(mut file: File) -> String {
    let mut bytes = Vec::new();
    let _ = file.rewind().and_then(|()| file.read_to_end(&mut bytes));
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The one way the tests run a process: `cmd` with stdin `/dev/null`, or `input` written from a
/// thread; in its own process group, killed with the group after `timeout`; stdout and stderr in
/// files (`cmd-<n>.stdout`, `cmd-<n>.stderr` under `dir`, or anonymous ones without `dir`).
pub fn run_command(dir: Option<&Path>, mut cmd: Command, input: Option<Vec<u8>>, timeout: Duration) -> Output {
    let n = seq();
    let out_file = capture_file(dir, &format!("cmd-{n}.stdout"));
    let err_file = capture_file(dir, &format!("cmd-{n}.stderr"));
    let cmdline = format!("{cmd:?}");
    cmd.stdout(out_file.try_clone().expect("dup stdout file"));
    cmd.stderr(err_file.try_clone().expect("dup stderr file"));
    cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
    cmd.process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("failed to spawn {cmdline}: {e}"));
    let writer = input.map(|bytes| {
        let mut stdin = child.stdin.take().expect("piped stdin");
        std::thread::spawn(move || {
            // The child may exit without reading everything: a broken pipe is not our failure.
            let _ = stdin.write_all(&bytes);
        })
    });
    let exited = wait::poll(timeout, Duration::from_millis(5), || match child.try_wait() {
        Ok(Some(status)) => Ok(status),
        Ok(None) => Err(()),
        Err(e) => panic!("failed to wait for {cmdline}: {e}"),
    });
    let status = match exited {
        Ok(status) => Some(status),
        Err(()) => {
            // SAFETY: kill(2) with a negative pid signals the process group we created with
            // process_group(0); it has no memory-safety preconditions.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            None
        }
    };
    let elapsed = start.elapsed();
    if let Some(w) = writer {
        let _ = w.join();
    }
    Output { cmdline, status, stdout: read_back(out_file), stderr: read_back(err_file), elapsed }
}

// ---------------------------------------------------------------------------------------------
// The per-test environment
// ---------------------------------------------------------------------------------------------

/// A cleanup step, run when the [`World`] is dropped (also when the test panics).
type Cleanup = Box<dyn FnOnce() + Send>;

/// Locks `m`, also after a panic elsewhere poisoned it (a failing test still cleans up).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What [`World::write_config`] puts in the hook's config besides `syslog = false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookLog {
    /// `log_file` in the temp dir ([`World::log_file`]): a runtime runs the hook and keeps its
    /// stderr to itself (crun) or shows it only in an error (runc), so the test reads the file.
    File,
    /// `log_level = "debug"`: the test runs the hook itself and reads its stderr.
    DebugStderr,
}

/// One test's world, the one fixture of the integration tests: a temp dir holding the hook
/// config, state dir, log file, bundles, the runtimes' private roots (or, with
/// [`World::fake_kernel`], the fake kernel's state); the processes standing in for container
/// inits ([`World::spawn`]); a transcript of every command; cleanups. Shared between threads
/// (`tests/it/stress.rs` runs hooks from 24 at once).
pub struct World {
    /// The test's name (for messages).
    pub name: String,
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    hook_log: HookLog,
    short_dirs: Mutex<Vec<tempfile::TempDir>>,
    transcript: Mutex<Vec<Output>>,
    cleanups: Mutex<Vec<Cleanup>>,
    children: Mutex<Vec<Child>>,
}

impl fmt::Debug for World {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("World").field("name", &self.name).field("root", &self.root).finish()
    }
}

impl World {
    /// A fresh temp dir for test `name`, whose hooks a runtime runs: the config (once written)
    /// logs to [`World::log_file`].
    pub fn new(name: &str) -> Self {
        Self::with_hook_log(name, HookLog::File)
    }

    /// A fresh temp dir for test `name`, the config (once written) set up as `hook_log` says.
    pub fn with_hook_log(name: &str, hook_log: HookLog) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("ocsh-{name}-"))
            .tempdir()
            .unwrap_or_else(|e| panic!("{name}: failed to create a temp dir: {e}"));
        let root = dir.path().to_path_buf();
        Self {
            name: name.to_string(),
            dir: Some(dir),
            root,
            hook_log,
            short_dirs: Mutex::new(Vec::new()),
            transcript: Mutex::new(Vec::new()),
            cleanups: Mutex::new(Vec::new()),
            children: Mutex::new(Vec::new()),
        }
    }

    /// The temp dir.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A path in the temp dir.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// An extra temp dir with a short path (podman wants its run root under 50 characters),
    /// removed with the test's.
    pub fn short_dir(&self) -> PathBuf {
        let d = tempfile::Builder::new().prefix("ocsh-").tempdir().expect("short temp dir");
        let p = d.path().to_path_buf();
        lock(&self.short_dirs).push(d);
        p
    }

    /// The hook's `--state-dir`.
    pub fn state_dir(&self) -> PathBuf {
        self.path("state")
    }

    /// The hook's `log_file`.
    pub fn log_file(&self) -> PathBuf {
        self.path("hook.log")
    }

    /// The hook's `--config`.
    pub fn config_path(&self) -> PathBuf {
        self.path("config.toml")
    }

    /// (Re)writes the hook config: `syslog = false`, then `log_file` in the temp dir or
    /// `log_level = "debug"` ([`HookLog`]), then `extra` lines.
    pub fn write_config(&self, extra: &str) {
        let log = match self.hook_log {
            HookLog::File => format!("log_file = {:?}", self.log_file().display().to_string()),
            HookLog::DebugStderr => "log_level = \"debug\"".to_string(),
        };
        std::fs::write(self.config_path(), format!("syslog = false\n{log}\n{extra}\n")).expect("write config");
    }

    /// Makes the state dir unusable on any kernel: a regular file where the directory should be.
    pub fn break_state_dir(&self) {
        std::fs::write(self.state_dir(), "not a directory\n").expect("write state-dir file");
    }

    /// A container id unique across tests, runs and processes (also usable as a cgroup name).
    pub fn container_id(&self, tag: &str) -> String {
        format!("ocsh-{tag}-{}-{}", std::process::id(), seq())
    }

    /// The argument vector `oci-coresched-hook --config CFG --state-dir DIR hook [--stage S]`.
    pub fn hook_args(&self, stage: Option<&str>) -> Vec<String> {
        let mut args = vec![
            "oci-coresched-hook".to_string(),
            "--config".to_string(),
            self.config_path().display().to_string(),
            "--state-dir".to_string(),
            self.state_dir().display().to_string(),
            "hook".to_string(),
        ];
        if let Some(s) = stage {
            args.push("--stage".into());
            args.push(s.into());
        }
        args
    }

    /// Runs a command with stdin `/dev/null` and a timeout, recording it in the transcript.
    pub fn run(&self, cmd: Command, timeout: Duration) -> Output {
        self.run_input(cmd, None, timeout)
    }

    /// Runs a command, writing `input` to its stdin from a thread when given.
    pub fn run_input(&self, cmd: Command, input: Option<Vec<u8>>, timeout: Duration) -> Output {
        let out = run_command(Some(&self.root), cmd, input, timeout);
        lock(&self.transcript).push(out.clone());
        out
    }

    /// Runs the hook binary with `args` (as they are: no `--config`, no `--state-dir`).
    pub fn binary(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(HOOK);
        cmd.args(args);
        self.run(cmd, HOOK_TIMEOUT)
    }

    /// `oci-coresched-hook --config CFG explain [--stage S] --state FILE`, with this test's config.
    pub fn explain(&self, state: &Path, stage: Option<&str>) -> Output {
        let cfg = self.config_path().display().to_string();
        let state = state.display().to_string();
        let mut args = vec!["--config", cfg.as_str(), "explain"];
        if let Some(s) = stage {
            args.extend(["--stage", s]);
        }
        args.extend(["--state", state.as_str()]);
        self.binary(&args)
    }

    /// The names of the entries of `dir`, sorted; an unreadable dir fails the test, naming it.
    pub fn file_names(&self, dir: &Path) -> Vec<String> {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| self.fail(&format!("read {}: {e}", dir.display())));
        let mut names: Vec<String> = entries
            .map(|e| e.unwrap_or_else(|e| self.fail(&format!("read {}: {e}", dir.display()))))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A JSON file's value; a missing or malformed file fails the test, naming it.
    pub fn read_json(&self, path: &Path) -> Value {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| self.fail(&format!("read {}: {e}", path.display())));
        serde_json::from_str(&text).unwrap_or_else(|e| self.fail(&format!("{} is not JSON: {e}", path.display())))
    }

    /// Registers a cleanup step (run in reverse order at drop, before the temp dir is removed).
    pub fn on_drop(&self, f: impl FnOnce() + Send + 'static) {
        lock(&self.cleanups).push(Box::new(f));
    }

    /// Starts a `sleep` standing in for a container init (killed and reaped at drop); its pid.
    pub fn spawn(&self) -> i32 {
        let mut cmd = Command::new("sleep");
        cmd.arg("600").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
        let child = cmd.spawn().expect("spawn sleep");
        let pid = child.id() as i32;
        lock(&self.children).push(child);
        pid
    }

    /// Kills and reaps a process started with [`World::spawn`].
    pub fn kill(&self, pid: i32) {
        let mut children = lock(&self.children);
        if let Some(i) = children.iter().position(|c| c.id() as i32 == pid) {
            let mut c = children.remove(i);
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A pid that is certainly dead: a process that was started, killed and reaped.
    pub fn dead_pid(&self) -> i32 {
        let pid = self.spawn();
        self.kill(pid);
        pid
    }

    /// The hook's log file, or a note that it does not exist.
    pub fn hook_log(&self) -> String {
        std::fs::read_to_string(self.log_file()).unwrap_or_else(|e| format!("(no hook log: {e})"))
    }

    /// Every `decision {...}` the hook logged (INFO lines of the log file), in order.
    pub fn decisions(&self) -> Vec<Value> {
        self.hook_log()
            .lines()
            .filter(|l| l.contains(" INFO oci-coresched-hook["))
            .filter_map(|l| l.split_once("]: decision ").map(|(_, json)| json))
            .map(|json| {
                serde_json::from_str(json).unwrap_or_else(|e| self.fail(&format!("bad decision JSON {json:?}: {e}")))
            })
            .collect()
    }

    /// The decisions about container `id`.
    pub fn decisions_for(&self, id: &str) -> Vec<Value> {
        self.decisions().into_iter().filter(|d| d["container_id"] == id).collect()
    }

    /// Waits (bounded) until the hook logged at least `n` decisions about `id`; returns them.
    /// Podman runs poststop hooks itself during its cleanup, which may lag behind `podman run`.
    pub fn wait_decisions(&self, id: &str, n: usize, timeout: Duration) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let d = self.decisions_for(id);
            if d.len() >= n || start.elapsed() >= timeout {
                return d;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Log lines of one level (`ERROR`, `WARN`, `INFO`, ...).
    pub fn log_lines(&self, level: &str) -> Vec<String> {
        let tag = format!(" {level} oci-coresched-hook[");
        self.hook_log().lines().filter(|l| l.contains(&tag)).map(str::to_string).collect()
    }

    /// Everything known about the test so far: every command with status/stdout/stderr, and the
    /// hook log.
    pub fn dump(&self) -> String {
        let mut s = format!("===== {} (temp dir {}) =====\n", self.name, self.root.display());
        for out in lock(&self.transcript).iter() {
            s.push_str(&out.to_string());
        }
        s.push_str(&format!("===== hook log {} =====\n{}\n", self.log_file().display(), clip(&self.hook_log())));
        s
    }

    /// Fails the test with `msg` and the dump.
    pub fn fail(&self, msg: &str) -> ! {
        panic!("{}: {msg}\n{}", self.name, self.dump())
    }
}

/// Processes (other than this one) whose command line mentions one of `paths`.
fn processes_mentioning(paths: &[String]) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
            paths.iter().any(|p| cmdline.contains(p.as_str())).then_some((pid, cmdline))
        })
        .collect()
}

impl Drop for World {
    fn drop(&mut self) {
        let cleanups: Vec<Cleanup> = lock(&self.cleanups).drain(..).collect();
        for c in cleanups.into_iter().rev() {
            c();
        }
        for mut c in lock(&self.children).drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Background helpers the test started (podman's conmon and its `container cleanup` exit
        // command) may outlive the commands: wait for them, or they recreate the dirs after removal.
        let mut paths = vec![self.root.display().to_string()];
        paths.extend(lock(&self.short_dirs).iter().map(|d| d.path().display().to_string()));
        let start = Instant::now();
        loop {
            let left = processes_mentioning(&paths);
            if left.is_empty() {
                break;
            }
            if start.elapsed() >= Duration::from_secs(10) {
                for (pid, cmdline) in left {
                    eprintln!("{}: killing leftover process {pid}: {cmdline}", self.name);
                    // SAFETY: kill(2) has no memory-safety preconditions; the pid runs a command
                    // line naming this test's private temp dir, so it is one of ours.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if std::env::var_os("OCSH_KEEP_TEMP").is_some() {
            let short: Vec<tempfile::TempDir> = lock(&self.short_dirs).drain(..).collect();
            for dir in self.dir.take().into_iter().chain(short) {
                eprintln!("{}: kept temp dir {}", self.name, dir.keep().display());
            }
        }
    }
}

/// `check!(env, cond, "fmt", args...)`: on failure, panics with the message, every command's
/// status/stdout/stderr and the hook log.
#[macro_export]
macro_rules! check {
    ($env:expr, $cond:expr, $($fmt:tt)+) => {
        if !$cond {
            $env.fail(&format!($($fmt)+));
        }
    };
}

/// `check_eq!(env, left, right, "what")`.
#[macro_export]
macro_rules! check_eq {
    ($env:expr, $left:expr, $right:expr, $($fmt:tt)+) => {{
        let (l, r) = (&$left, &$right);
        if l != r {
            $env.fail(&format!("{}: left {:?} != right {:?}", format!($($fmt)+), l, r));
        }
    }};
}

// ---------------------------------------------------------------------------------------------
// Rootfs and bundles
// ---------------------------------------------------------------------------------------------

/// Builds a busybox rootfs in `dir` (like `tests/support/mkrootfs.sh`).
pub fn make_rootfs(dir: &Path) {
    let busybox = static_busybox().expect("static busybox (checked by require)");
    for d in ["bin", "proc", "dev", "sys", "tmp", "etc", "run", "share"] {
        std::fs::create_dir_all(dir.join(d)).expect("mkdir rootfs dir");
    }
    std::fs::copy(&busybox, dir.join("bin/busybox")).expect("copy busybox");
    for applet in ["sh", "echo", "cat", "sleep", "true", "false", "test", "ls", "touch", "id"] {
        std::os::unix::fs::symlink("busybox", dir.join("bin").join(applet)).expect("applet symlink");
    }
    std::fs::write(dir.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").expect("passwd");
    std::fs::write(dir.join("etc/group"), "root:x:0:\n").expect("group");
}

/// How the hooks get their stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageArgs {
    /// `hook --stage createRuntime` etc.
    Flags,
    /// `hook` alone: the stage is inferred from the state.
    Inferred,
}

/// What the bundle's container is and does.
#[derive(Debug, Clone)]
pub struct BundleSpec {
    /// Container id (also the cgroup leaf name).
    pub id: String,
    /// config.json annotations.
    pub annotations: Vec<(String, String)>,
    /// How the hooks learn their stage.
    pub stages: StageArgs,
    /// Keep the pid namespace; without it the container's `$$` is its host pid.
    pub pid_namespace: bool,
    /// `process.args`.
    pub args: Vec<String>,
}

impl BundleSpec {
    /// A container that writes `$$` to `/share/marker` and exits.
    pub fn new(id: &str, annotations: Vec<(String, String)>, stages: StageArgs) -> Self {
        Self {
            id: id.to_string(),
            annotations,
            stages,
            pid_namespace: true,
            args: vec!["sh".into(), "-c".into(), "echo $$ > /share/marker".into()],
        }
    }
}

/// A bundle on disk.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// Bundle dir (config.json + rootfs).
    pub dir: PathBuf,
    /// Host dir bind-mounted at `/share` in the container.
    pub share: PathBuf,
    /// Container id.
    pub id: String,
}

impl Bundle {
    /// The marker the container writes, if it ran.
    pub fn marker(&self) -> Option<String> {
        std::fs::read_to_string(self.share.join("marker")).ok()
    }
}

/// One hook entry of config.json.
fn hook_entry(env: &World, stage: &str, stages: StageArgs) -> Value {
    let stage_flag = (stages == StageArgs::Flags).then_some(stage);
    json!({"path": HOOK, "args": env.hook_args(stage_flag), "timeout": 10})
}

/// Creates a bundle: rootfs, then `runc spec` (or `crun spec` when runc is absent) edited with
/// serde_json: no terminal, writable root, the annotations, `/share` bind mount, hooks at
/// createRuntime, poststart and poststop, `linux.cgroupsPath = /<id>` (a leaf of its own).
pub fn make_bundle(env: &World, spec: &BundleSpec) -> Bundle {
    let dir = env.path(&format!("bundle-{}", spec.id));
    let share = env.path(&format!("share-{}", spec.id));
    std::fs::create_dir_all(&dir).expect("mkdir bundle");
    std::fs::create_dir_all(&share).expect("mkdir share");
    make_rootfs(&dir.join("rootfs"));
    let spec_tool = which("runc").or_else(|| which("crun")).expect("runc or crun for `spec`");
    let mut cmd = Command::new(&spec_tool);
    cmd.arg("spec").current_dir(&dir);
    let out = env.run(cmd, RUNTIME_TIMEOUT);
    check!(env, out.success(), "`{} spec` failed", spec_tool.display());

    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).expect("read generated config.json");
    let mut config: Value = serde_json::from_str(&text).expect("generated config.json is JSON");
    config["process"]["terminal"] = json!(false);
    config["process"]["args"] = json!(spec.args);
    config["root"] = json!({"path": "rootfs", "readonly": false});
    config["mounts"]
        .as_array_mut()
        .expect("mounts array")
        .push(json!({"destination": "/share", "type": "bind", "source": share, "options": ["rbind", "rw"]}));
    let ann: serde_json::Map<String, Value> =
        spec.annotations.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    config["annotations"] = Value::Object(ann);
    config["hooks"] = json!({
        "createRuntime": [hook_entry(env, "createRuntime", spec.stages)],
        "poststart": [hook_entry(env, "poststart", spec.stages)],
        "poststop": [hook_entry(env, "poststop", spec.stages)],
    });
    config["linux"]["cgroupsPath"] = json!(format!("/{}", spec.id));
    if !spec.pid_namespace {
        config["linux"]["namespaces"].as_array_mut().expect("namespaces array").retain(|ns| ns["type"] != "pid");
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&config).unwrap()).expect("write config.json");
    Bundle { dir, share, id: spec.id.clone() }
}

/// Removes the cgroup dirs runc may leave for a leaf `/<name>` (every v1 hierarchy + unified).
pub fn remove_cgroup_leaf(name: &str) {
    let base = Path::new("/sys/fs/cgroup");
    let _ = std::fs::remove_dir(base.join(name));
    if let Ok(entries) = std::fs::read_dir(base) {
        for e in entries.flatten() {
            let _ = std::fs::remove_dir(e.path().join(name));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// runc and crun
// ---------------------------------------------------------------------------------------------

/// Which low-level runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rt {
    /// runc, with `--root` in the temp dir.
    Runc,
    /// crun, with `--root` in the temp dir; create/run inside `unshare -m` with a cgroup2 mount
    /// and `--cgroup-manager=disabled` (crun 1.8 refuses this host's hybrid layout otherwise).
    Crun,
}

impl Rt {
    /// The binary name.
    pub fn name(self) -> &'static str {
        match self {
            Rt::Runc => "runc",
            Rt::Crun => "crun",
        }
    }

    /// Requirements of a test using this runtime.
    pub fn needs(self) -> Vec<Need> {
        match self {
            Rt::Runc => vec![Need::Root, Need::Runc, Need::BusyboxStatic],
            Rt::Crun => vec![Need::Root, Need::Crun, Need::Unshare, Need::BusyboxStatic],
        }
    }
}

/// A runtime bound to a test's private root.
#[derive(Debug)]
pub struct Oci<'a> {
    env: &'a World,
    /// Which runtime.
    pub rt: Rt,
    bin: PathBuf,
    root: PathBuf,
}

impl<'a> Oci<'a> {
    /// The runtime with its state under `<temp>/<name>-root`.
    pub fn new(env: &'a World, rt: Rt) -> Self {
        let bin = which(rt.name()).expect("runtime binary (checked by require)");
        let root = env.path(&format!("{}-root", rt.name()));
        Self { env, rt, bin, root }
    }

    /// `<bin> --root R args...`, from the host.
    fn host_cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--root").arg(&self.root).args(args);
        c
    }

    /// A command that creates a container (create / run): crun's goes through the namespace recipe.
    fn creating_cmd(&self, args: &[&str]) -> Command {
        match self.rt {
            Rt::Runc => self.host_cmd(args),
            Rt::Crun => {
                let unshare = which("unshare").expect("unshare (checked by require)");
                let mut c = Command::new(unshare);
                c.args([
                    "-m",
                    "sh",
                    "-c",
                    "umount -R /sys/fs/cgroup && mount -t cgroup2 none /sys/fs/cgroup && exec \"$@\"",
                    "sh",
                ]);
                c.arg(&self.bin).arg("--root").arg(&self.root).arg("--cgroup-manager=disabled").args(args);
                c
            }
        }
    }

    /// Deletes the container (`delete -f`) and removes its cgroup leaf when the test ends, even on
    /// failure.
    pub fn guard(&self, id: &str) {
        let cmd = self.host_cmd(&["delete", "-f", id]);
        let id = id.to_string();
        let dir = self.env.root().to_path_buf();
        self.env.on_drop(move || {
            let out = run_command(Some(&dir), cmd, None, RUNTIME_TIMEOUT);
            if !out.success() {
                eprintln!("cleanup: {out}");
            }
            remove_cgroup_leaf(&id);
        });
    }

    /// `run --bundle B ID`, attached: returns when the container has exited and was destroyed.
    pub fn run_attached(&self, bundle: &Bundle) -> Output {
        self.guard(&bundle.id);
        let b = bundle.dir.display().to_string();
        self.env.run(self.creating_cmd(&["run", "--bundle", &b, &bundle.id]), RUNTIME_TIMEOUT)
    }

    /// `create --bundle B ID` (createRuntime; runc also runs poststart here).
    pub fn create(&self, bundle: &Bundle) -> Output {
        self.guard(&bundle.id);
        let b = bundle.dir.display().to_string();
        self.env.run(self.creating_cmd(&["create", "--bundle", &b, &bundle.id]), RUNTIME_TIMEOUT)
    }

    /// `start ID`.
    pub fn start(&self, id: &str) -> Output {
        self.env.run(self.host_cmd(&["start", id]), RUNTIME_TIMEOUT)
    }

    /// `delete ID` (poststop).
    pub fn delete(&self, id: &str) -> Output {
        self.env.run(self.host_cmd(&["delete", id]), RUNTIME_TIMEOUT)
    }

    /// `state ID`, parsed.
    pub fn state(&self, id: &str) -> Value {
        let out = self.env.run(self.host_cmd(&["state", id]), RUNTIME_TIMEOUT);
        check!(self.env, out.success(), "`{} state {id}` failed", self.rt.name());
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| self.env.fail(&format!("`{} state {id}` is not JSON: {e}", self.rt.name())))
    }

    /// Polls `state` until the status is `stopped` (bounded).
    pub fn wait_stopped(&self, id: &str, timeout: Duration) {
        let start = Instant::now();
        loop {
            // Not through env.run: a poll loop would flood the transcript.
            let out = run_command(Some(self.env.root()), self.host_cmd(&["state", id]), None, RUNTIME_TIMEOUT);
            let status = serde_json::from_str::<Value>(&out.stdout).ok().map(|v| v["status"].clone());
            if status == Some(json!("stopped")) {
                return;
            }
            if start.elapsed() >= timeout {
                self.env.run(self.host_cmd(&["state", id]), RUNTIME_TIMEOUT);
                self.env.fail(&format!("container {id} did not stop within {timeout:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// podman
// ---------------------------------------------------------------------------------------------

/// podman (with runc as its OCI runtime) with every root private to the test, and a hooks.d dir
/// made from the project's `hooks.d/oci-coresched-hook.json`.
#[derive(Debug)]
pub struct Podman<'a> {
    env: &'a World,
    bin: PathBuf,
    hooks_dir: PathBuf,
    runroot: PathBuf,
}

impl<'a> Podman<'a> {
    /// Sets up the hooks dir: the project's hooks.d file with only `hook.path` (the built binary)
    /// and `hook.args` (`--config`/`--state-dir` added before `hook`) rewritten.
    pub fn new(env: &'a World) -> Self {
        let bin = which("podman").expect("podman (checked by require)");
        let hooks_dir = env.path("hooks.d");
        std::fs::create_dir_all(&hooks_dir).expect("mkdir hooks.d");
        let src = Path::new(MANIFEST_DIR).join("hooks.d/oci-coresched-hook.json");
        let text = std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("read {}: {e}", src.display()));
        let mut hook: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", src.display()));
        let args: Vec<String> = hook["hook"]["args"]
            .as_array()
            .expect("hook.args")
            .iter()
            .map(|a| a.as_str().expect("string arg").to_string())
            .collect();
        let at = args.iter().position(|a| a == "hook").expect("hooks.d args contain `hook`");
        let mut new_args = args[..at].to_vec();
        new_args.extend(env.hook_args(None)[1..].iter().cloned());
        new_args.extend(args[at + 1..].iter().cloned());
        hook["hook"]["path"] = json!(HOOK);
        hook["hook"]["args"] = json!(new_args);
        std::fs::write(hooks_dir.join("oci-coresched-hook.json"), serde_json::to_vec_pretty(&hook).unwrap())
            .expect("write hooks.d file");
        Self { env, bin, hooks_dir, runroot: env.short_dir().join("run") }
    }

    /// `podman` with private storage, run root, tmp dir, runc root and our hooks dir.
    fn cmd(&self) -> Command {
        let e = self.env;
        let mut c = Command::new(&self.bin);
        c.args(podman_flags(e, &self.runroot, &self.hooks_dir));
        c
    }

    /// `podman run --rm` of a container named `id` from `rootfs` with `/share` bind-mounted, in the
    /// host pid namespace (so its `$$` is the init's host pid), the given annotations, running
    /// `echo $$ > /share/marker`. Returns the output and the container id podman chose.
    pub fn run(&self, id: &str, annotations: &[(String, String)]) -> (Output, Bundle, Option<String>) {
        let rootfs = self.env.path(&format!("rootfs-{id}"));
        let share = self.env.path(&format!("share-{id}"));
        make_rootfs(&rootfs);
        std::fs::create_dir_all(&share).expect("mkdir share");
        let cidfile = self.env.path(&format!("{id}.cid"));
        let mut rm = self.cmd();
        rm.args(["rm", "-f", "-t", "0", id]);
        let dir = self.env.root().to_path_buf();
        self.env.on_drop(move || {
            let out = run_command(Some(&dir), rm, None, RUNTIME_TIMEOUT);
            if !out.success() && !out.stderr.contains("no such container") {
                eprintln!("cleanup: {out}");
            }
        });
        let mut c = self.cmd();
        c.args(["run", "--rm", "--name", id, "--net=none", "--pid=host"])
            .args(["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"])
            .arg("--cidfile")
            .arg(&cidfile)
            .arg("-v")
            .arg(format!("{}:/share", share.display()));
        for (k, v) in annotations {
            c.arg("--annotation").arg(format!("{k}={v}"));
        }
        c.arg("--rootfs").arg(&rootfs).args(["sh", "-c", "echo $$ > /share/marker"]);
        let out = self.env.run(c, RUNTIME_TIMEOUT);
        let cid = std::fs::read_to_string(&cidfile).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
        (out, Bundle { dir: rootfs, share, id: id.to_string() }, cid)
    }
}

/// podman's flags for a test of its own: private storage, run root and tmp dir under `env`, runc
/// with its own root, vfs, cgroupfs, file events, and `hooks_dir` as the only hooks dir.
pub fn podman_flags(env: &World, runroot: &Path, hooks_dir: &Path) -> Vec<std::ffi::OsString> {
    let mut v: Vec<std::ffi::OsString> = vec![
        "--root".into(),
        env.path("podman-storage").into(),
        "--runroot".into(),
        runroot.into(),
        "--tmpdir".into(),
        env.path("podman-tmp").into(),
        "--runtime".into(),
        "runc".into(),
        "--runtime-flag".into(),
        format!("root={}", env.path("runc-root").display()).into(),
    ];
    for a in ["--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--hooks-dir"] {
        v.push(a.into());
    }
    v.push(hooks_dir.into());
    v
}
