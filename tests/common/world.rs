//! The per-test environment ([`World`]): a temp dir, the hook's config and log file, `sleep`
//! processes standing in for container inits, cleanup that runs even when a test fails, and the
//! dump a failing check prints.

#[allow(unused_imports)]
use super::*;

/// A cleanup step, run when the [`World`] is dropped (also when the test panics).
pub(crate) type Cleanup = Box<dyn FnOnce() + Send>;

/// Locks `m`, also after a panic elsewhere poisoned it (a failing test still cleans up).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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
        let d = wait::poll(timeout, wait::POLL, || {
            let d = self.decisions_for(id);
            if d.len() >= n { Ok(d) } else { Err(d) }
        });
        d.unwrap_or_else(|d| d)
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
pub(crate) fn processes_mentioning(paths: &[String]) -> Vec<(i32, String)> {
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
        let gone = wait::poll(Duration::from_secs(10), wait::POLL, || {
            let left = processes_mentioning(&paths);
            if left.is_empty() { Ok(()) } else { Err(left) }
        });
        if let Err(left) = gone {
            for (pid, cmdline) in left {
                eprintln!("{}: killing leftover process {pid}: {cmdline}", self.name);
                // SAFETY: kill(2) has no memory-safety preconditions; the pid runs a command line
                // naming this test's private temp dir, so it is one of ours.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
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
