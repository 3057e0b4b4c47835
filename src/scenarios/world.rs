//! The world a scenario runs in: real child processes as container inits, real `/proc`, a temp
//! state dir and cgroup tree, and either the fake kernel or the real one. Scenarios only talk to
//! it, so the same code runs on both kernels.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use crate::config::Config;
use crate::decide::policy::Decision;
use crate::hook::{self, Done, HookError, Stage};
use crate::host::kernel::fake::FakeKernel;
use crate::host::kernel::linux::Linux;
use crate::host::kernel::{CoreSched, Scope};
use crate::host::oci_state::State;
use crate::host::procfs::ProcFs;
use crate::host::state_dir::StateDir;
use crate::host::system::System;
use crate::store::{Member, Store};
use crate::values::{Cookie, Pid};

/// Which kernel a world uses.
pub enum Kernel {
    /// The in-memory double.
    Fake(Box<FakeKernel>),
    /// `prctl` on the running kernel (VM tier).
    Linux(Linux),
}

impl Kernel {
    pub fn get(&self) -> &dyn CoreSched {
        match self {
            Kernel::Fake(k) => &**k,
            Kernel::Linux(k) => k,
        }
    }
}

/// A scenario's world. Children are killed when it drops.
pub struct World {
    pub kernel: Kernel,
    pub proc: ProcFs,
    pub config: Config,
    dir: tempfile::TempDir,
    children: Mutex<BTreeMap<String, Child>>,
}

impl World {
    pub fn fake() -> Self {
        Self::with(Kernel::Fake(Box::new(FakeKernel::new(ProcFs::default()))))
    }

    pub fn linux() -> Self {
        Self::with(Kernel::Linux(Linux))
    }

    fn with(kernel: Kernel) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        Self { kernel, proc: ProcFs::default(), config: Config::default(), dir, children: Mutex::new(BTreeMap::new()) }
    }

    pub fn k(&self) -> &dyn CoreSched {
        self.kernel.get()
    }

    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    pub fn cgroup_root(&self) -> PathBuf {
        self.dir.path().join("cgroup")
    }

    /// Starts a process standing in for a container init (it inherits nothing from us:
    /// the test thread has cookie 0 unless a scenario gave it one).
    pub fn spawn(&self, id: &str) -> Pid {
        let child =
            Command::new("sleep").arg("1000").stdin(Stdio::null()).stdout(Stdio::null()).spawn().expect("spawn sleep");
        let pid = child.id() as Pid;
        self.children.lock().unwrap().insert(id.to_string(), child);
        pid
    }

    /// Kills the init of `id` and reaps it (the container's processes are gone).
    pub fn kill(&self, id: &str) {
        if let Some(mut c) = self.children.lock().unwrap().remove(id) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn state(&self, id: &str, status: &str, pid: Option<Pid>, ann: &[(&str, &str)]) -> State {
        State {
            id: id.to_string(),
            status: status.to_string(),
            pid: pid.map(i64::from),
            bundle: None,
            annotations: ann.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    /// Runs the hook exactly as the binary does, from a state. On a thread of its own, as each
    /// hook is a process of its own: the hook relays on its own thread and keeps that cookie, which
    /// must not reach this test's thread and the inits it forks afterwards.
    pub fn hook(&self, state: &State, stage: Option<Stage>) -> (Decision, Result<Done, HookError>) {
        let decision =
            crate::decide::policy::decide(&hook::input(state, stage).expect("input"), &self.config).expect("decision");
        let sys = System {
            kernel: self.k(),
            proc: self.proc.clone(),
            cgroup_root: self.cgroup_root(),
            state_dir: self.state_dir(),
            runtime_roots: Vec::new(),
            sys_root: self.dir.path().join("sys"),
        };
        let done = std::thread::scope(|s| {
            s.spawn(|| hook::run(&decision, &self.config, &sys)).join().expect("the hook panicked")
        });
        (decision, done)
    }

    /// Spawns an init for `id` and runs createRuntime for it; returns its pid.
    pub fn start(&self, id: &str, ann: &[(&str, &str)]) -> Pid {
        let pid = self.spawn(id);
        self.create_runtime(id, pid, ann).unwrap_or_else(|e| panic!("createRuntime of {id} failed: {e}"));
        pid
    }

    pub fn create_runtime(&self, id: &str, pid: Pid, ann: &[(&str, &str)]) -> Result<Done, HookError> {
        self.hook(&self.state(id, "creating", Some(pid), ann), Some(Stage::CreateRuntime)).1
    }

    /// Poststop as runc sends it (no pid), after the init died.
    pub fn stop(&self, id: &str) -> Result<Done, HookError> {
        self.kill(id);
        self.hook(&self.state(id, "stopped", None, &[]), None).1
    }

    pub fn cookie(&self, pid: Pid) -> Cookie {
        self.k().get(pid).unwrap_or_else(|e| panic!("GET on pid {pid}: {e}"))
    }

    /// Gives `pid` a brand-new cookie behind the hook's back.
    pub fn recookie(&self, pid: Pid) {
        self.k().create(pid, Scope::ThreadGroup).expect("create");
    }

    /// Clears `pid`'s cookie behind the hook's back, from a fresh thread (cookie 0).
    pub fn clear_behind(&self, pid: Pid) {
        let k = self.k();
        std::thread::scope(|s| {
            s.spawn(|| {
                assert_eq!(k.get(0).unwrap(), 0, "relay thread of the test must start at cookie 0");
                k.share_to(pid, Scope::ThreadGroup).unwrap();
            });
        });
    }

    /// Makes fresh threads of this test start with a cookie (the hook inherited one).
    pub fn give_threads_a_cookie(&self) {
        match &self.kernel {
            Kernel::Fake(f) => f.set_inherited(0x7777_0000),
            Kernel::Linux(l) => l.create(0, Scope::Thread).expect("create on the test thread"),
        }
    }

    /// The cache as any opener sees it: with the deferred forgets applied.
    pub fn store(&self) -> Store {
        let dir = StateDir::open(&self.state_dir()).expect("state dir");
        let store = Store::open(&dir.db_path()).expect("cache");
        crate::cookies::stopped::apply_now(dir.path(), &store, &self.proc).expect("deferred forgets");
        store
    }

    pub fn members(&self, group: &str) -> Vec<Member> {
        self.store().members(group).expect("members")
    }

    pub fn member(&self, id: &str) -> Option<Member> {
        self.store().member(id).expect("member")
    }

    pub fn groups(&self) -> Vec<String> {
        self.store().groups().expect("groups").into_iter().map(|g| g.key).collect()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for (_, mut c) in std::mem::take(&mut *self.children.lock().unwrap()) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
