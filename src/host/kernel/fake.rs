//! A fake core-scheduling kernel for tests (and the non-default `fake-kernel` feature).
//!
//! It models what the engine relies on: per-thread cookies, the three scopes, inheritance of the
//! creating thread's cookie by a fresh thread, pid reuse (a task is identified by pid + start time
//! read from a `/proc` tree, real or fake), ESRCH for dead pids, EPERM for denied pids, and EINVAL /
//! ENODEV for kernels without core scheduling or SMT. The VM test tier runs the same scenarios on
//! the real kernel, which is what makes this double trustworthy.
//!
//! Fresh threads inherit a configurable cookie (`set_inherited`). Cookie values come from a counter
//! and never repeat, so the reuse of a value is exercised only on the real kernel.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::fake_file::{Acquired, SharedFile};
use super::{Cookie, CoreSched, KernelError, Scope};
use crate::host::procfs::ProcFs;
use crate::values::Pid;

/// What the fake kernel claims to support.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FakeMode {
    /// Core scheduling works.
    Supported,
    /// Every call fails with EINVAL (no `CONFIG_SCHED_CORE`).
    Unsupported,
    /// Every call fails with ENODEV (SMT off).
    NoSmt,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct State {
    mode: FakeMode,
    denied: HashSet<Pid>,
    /// tid -> (start time, cookie). An entry whose start time no longer matches is a dead task.
    tasks: HashMap<Pid, (u64, Cookie)>,
    /// Cookie a fresh thread inherits (the cookie of the hook's main thread in the model).
    inherited: Cookie,
    next: Cookie,
    /// Calls made, for tests that count kernel traffic.
    #[serde(skip)]
    calls: Vec<String>,
}

/// The state and, for a shared kernel, the file it is shared through.
#[derive(Debug)]
struct Inner {
    state: State,
    /// When set, the state lives in this file, shared by every process using it (each call
    /// holds its flock and reloads the state when another process changed it), so separate hook
    /// processes see one kernel.
    file: Option<SharedFile>,
}

/// An in-memory core-scheduling kernel over a `/proc` tree.
#[derive(Debug)]
pub struct FakeKernel {
    id: u64,
    proc: ProcFs,
    inner: Mutex<Inner>,
}

/// The state for one call: loaded from the shared file (if any) and written back on drop.
struct Guard<'a> {
    inner: std::sync::MutexGuard<'a, Inner>,
    proc: &'a ProcFs,
    /// False for calls that only read (GET): nothing to write back.
    dirty: bool,
}

impl std::ops::Deref for Guard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.inner.state
    }
}

impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.inner.state
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let Inner { state, file } = &mut *self.inner;
        let Some(file) = file else { return };
        if self.dirty {
            // Forget tasks that exited once there are many, so the shared file stays about as
            // small as the set of live tasks instead of growing with every container ever
            // started (a check per entry on every write would cost more than it saves). A pid
            // reused meanwhile keeps its entry, which the start-time check already ignores.
            if state.tasks.len() > PRUNE_ABOVE {
                let proc = self.proc;
                state.tasks.retain(|tid, _| proc.exists(*tid));
            }
            let bytes = serde_json::to_vec(&*state).expect("fake kernel state serializes");
            if let Err(e) = file.store(&bytes) {
                panic!("fake kernel: failed to store its state in {}: {e}", file.path().display());
            }
        }
        file.release();
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A shared state with more task entries than this is pruned of exited tasks when written.
const PRUNE_ABOVE: usize = 64;

thread_local! {
    /// Per fake instance, the cookie of the calling thread once it has changed.
    static SELF_COOKIE: RefCell<HashMap<u64, Cookie>> = RefCell::new(HashMap::new());
}

impl FakeKernel {
    /// A supporting kernel whose tasks are those of `proc`.
    pub fn new(proc: ProcFs) -> Self {
        Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            proc,
            inner: Mutex::new(Inner {
                state: State {
                    mode: FakeMode::Supported,
                    denied: HashSet::new(),
                    tasks: HashMap::new(),
                    inherited: 0,
                    // Cookies look like kernel pointer hashes, not small counters.
                    next: 0x5eed_0000_1000,
                    calls: Vec::new(),
                },
                file: None,
            }),
        }
    }

    /// A kernel whose state is shared through `file` by every process that opens it (created
    /// empty if missing). Used by benchmarks and multi-process tests of the real binary.
    pub fn shared(proc: ProcFs, file: impl Into<std::path::PathBuf>) -> Self {
        let k = Self::new(proc);
        k.inner.lock().unwrap_or_else(|e| e.into_inner()).file = Some(SharedFile::new(file.into()));
        k
    }

    fn lock(&self) -> Guard<'_> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Inner { state, file } = &mut *inner;
        if let Some(file) = file {
            let path = file.path().display().to_string();
            match file.acquire() {
                Ok(Acquired::Current | Acquired::Empty) => {}
                Ok(Acquired::Changed(json)) => {
                    let loaded: State = serde_json::from_slice(&json)
                        .unwrap_or_else(|e| panic!("fake kernel: {path} is not a fake kernel state: {e}"));
                    let calls = std::mem::take(&mut state.calls);
                    *state = State { calls, ..loaded };
                }
                Err(e) => panic!("fake kernel: failed to load {path}: {e}"),
            }
        }
        Guard { inner, proc: &self.proc, dirty: true }
    }

    /// Switch support on or off.
    pub fn set_mode(&self, mode: FakeMode) {
        self.lock().mode = mode;
    }

    /// Make every call on `pid` fail with EPERM.
    pub fn deny(&self, pid: Pid) {
        self.lock().denied.insert(pid);
    }

    /// Undo [`FakeKernel::deny`].
    pub fn allow(&self, pid: Pid) {
        self.lock().denied.remove(&pid);
    }

    /// Set the cookie that fresh threads of the calling process inherit.
    pub fn set_inherited(&self, cookie: Cookie) {
        self.lock().inherited = cookie;
    }

    /// Force the cookie of every thread of `pid` (models a cookie inherited from the runtime).
    pub fn force(&self, pid: Pid, cookie: Cookie) {
        let mut st = self.lock();
        for tid in self.targets(&st, pid, Scope::ThreadGroup).unwrap_or_default() {
            self.set_task(&mut st, tid, cookie);
        }
    }

    /// Every call made so far, as `"op pid"` strings.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    fn start_time(&self, tid: Pid) -> Option<u64> {
        self.proc.task(tid).ok().flatten().map(|t| t.start_time)
    }

    /// The cookie of `pid` (0: the calling thread), whose start time is now `now` (from
    /// [`FakeKernel::check`]).
    fn cookie_of(&self, st: &State, pid: Pid, now: Option<u64>) -> Cookie {
        if pid == 0 {
            return self.self_cookie(st);
        }
        match (st.tasks.get(&pid), now) {
            (Some(&(start, cookie)), Some(now)) if start == now => cookie,
            _ => 0,
        }
    }

    fn set_task(&self, st: &mut State, tid: Pid, cookie: Cookie) {
        if let Some(start) = self.start_time(tid) {
            st.tasks.insert(tid, (start, cookie));
        }
    }

    /// Fails as the kernel would for `pid`; else the start time of `pid` (`None` for pid 0,
    /// the calling thread).
    fn check(&self, st: &State, pid: Pid) -> Result<Option<u64>, KernelError> {
        match st.mode {
            FakeMode::Unsupported => return Err(KernelError::Unsupported),
            FakeMode::NoSmt => return Err(KernelError::NoSmt),
            FakeMode::Supported => {}
        }
        if pid < 0 {
            return Err(KernelError::NoSuchProcess(pid));
        }
        let start = if pid > 0 { Some(self.start_time(pid).ok_or(KernelError::NoSuchProcess(pid))?) } else { None };
        if st.denied.contains(&pid) {
            return Err(KernelError::PermissionDenied(pid));
        }
        Ok(start)
    }

    fn targets(&self, _st: &State, pid: Pid, scope: Scope) -> Result<Vec<Pid>, KernelError> {
        let io = |_| KernelError::NoSuchProcess(pid);
        Ok(match scope {
            Scope::Thread => vec![pid],
            Scope::ThreadGroup => {
                let mut t = self.proc.threads(pid).map_err(io)?;
                if t.is_empty() {
                    t.push(pid);
                }
                t
            }
            Scope::ProcessGroup => {
                let pgid = self.proc.process_group(pid).map_err(io)?.ok_or(KernelError::NoSuchProcess(pid))?;
                let mut all = Vec::new();
                for p in self.proc.pids().map_err(io)? {
                    if self.proc.process_group(p).ok().flatten() == Some(pgid) {
                        all.extend(self.proc.threads(p).map_err(io)?);
                    }
                }
                all
            }
        })
    }

    fn self_cookie(&self, st: &State) -> Cookie {
        SELF_COOKIE.with(|m| m.borrow().get(&self.id).copied()).unwrap_or(st.inherited)
    }

    fn set_self(&self, cookie: Cookie) {
        SELF_COOKIE.with(|m| m.borrow_mut().insert(self.id, cookie));
    }
}

impl CoreSched for FakeKernel {
    fn get(&self, pid: Pid) -> Result<Cookie, KernelError> {
        let mut st = self.lock();
        st.dirty = false;
        st.calls.push(format!("get {pid}"));
        let start = self.check(&st, pid)?;
        Ok(self.cookie_of(&st, pid, start))
    }

    fn create(&self, pid: Pid, scope: Scope) -> Result<(), KernelError> {
        let mut st = self.lock();
        st.calls.push(format!("create {pid}"));
        self.check(&st, pid)?;
        st.next += 0x40;
        let cookie = st.next;
        if pid == 0 {
            self.set_self(cookie);
            return Ok(());
        }
        for tid in self.targets(&st, pid, scope)? {
            self.set_task(&mut st, tid, cookie);
        }
        Ok(())
    }

    fn share_to(&self, pid: Pid, scope: Scope) -> Result<(), KernelError> {
        let mut st = self.lock();
        st.calls.push(format!("share_to {pid}"));
        self.check(&st, pid)?;
        let cookie = self.self_cookie(&st);
        for tid in self.targets(&st, pid, scope)? {
            self.set_task(&mut st, tid, cookie);
        }
        Ok(())
    }

    fn share_from(&self, pid: Pid) -> Result<(), KernelError> {
        let mut st = self.lock();
        st.calls.push(format!("share_from {pid}"));
        let start = self.check(&st, pid)?;
        let cookie = self.cookie_of(&st, pid, start);
        self.set_self(cookie);
        Ok(())
    }
}

/// Builds a fake `/proc` tree in a directory: processes with a start time, threads, a process
/// group and a cgroup file. Used by unit tests that need pids without real processes.
#[derive(Debug)]
pub struct FakeProc {
    root: std::path::PathBuf,
}

impl FakeProc {
    /// A fake tree at `root` (created if missing).
    pub fn new(root: impl Into<std::path::PathBuf>) -> std::io::Result<Self> {
        let root = root.into();
        std::fs::create_dir_all(&root)?;
        Ok(Self { root })
    }

    /// The tree as a [`ProcFs`].
    pub fn procfs(&self) -> ProcFs {
        ProcFs::new(&self.root)
    }

    /// Adds (or replaces) process `pid` started at `start_time` with `threads` extra threads
    /// numbered `pid+1..`, in process group `pid` and cgroup `cgroup`.
    pub fn spawn(&self, pid: Pid, start_time: u64, threads: u32, cgroup: &str) -> std::io::Result<()> {
        let _ = std::fs::remove_dir_all(self.root.join(pid.to_string()));
        let tids: Vec<Pid> = std::iter::once(pid).chain((1..=threads).map(|i| pid + i as Pid)).collect();
        for &tid in &tids {
            let dir = self.root.join(tid.to_string());
            std::fs::create_dir_all(dir.join("task"))?;
            let stat = format!("{tid} (fake) S 1 {pid} {pid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start_time} 0 0");
            std::fs::write(dir.join("stat"), stat)?;
            std::fs::write(dir.join("cgroup"), format!("0::{cgroup}\n"))?;
        }
        for &tid in &tids {
            std::fs::create_dir_all(self.root.join(pid.to_string()).join("task").join(tid.to_string()))?;
        }
        Ok(())
    }

    /// Gives process `pid` (spawned with [`FakeProc::spawn`]) the command name `comm` and the
    /// parent `ppid` in its `stat`.
    pub fn set_lineage(&self, pid: Pid, comm: &str, ppid: Pid) -> std::io::Result<()> {
        let file = self.root.join(pid.to_string()).join("stat");
        let stat = std::fs::read_to_string(&file)?;
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
        let mut fields: Vec<&str> = rest.split_ascii_whitespace().collect();
        let ppid = ppid.to_string();
        fields[1] = &ppid;
        std::fs::write(&file, format!("{pid} ({comm}) {}", fields.join(" ")))
    }

    /// Removes process `pid` and its threads numbered `pid+1..=pid+threads`.
    pub fn kill(&self, pid: Pid, threads: u32) -> std::io::Result<()> {
        for tid in std::iter::once(pid).chain((1..=threads).map(|i| pid + i as Pid)) {
            let _ = std::fs::remove_dir_all(self.root.join(tid.to_string()));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "fake_tests.rs"]
mod tests;
