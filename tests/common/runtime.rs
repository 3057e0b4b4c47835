//! runc and crun with private roots (crun in a private mount namespace) and a timeout.

#[allow(unused_imports)]
use super::*;

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

    /// `run -d --bundle B ID`: returns once the container runs and its poststart hooks are done
    /// (deleted with `delete -f` when the test ends).
    pub fn run_detached(&self, bundle: &Bundle) -> Output {
        self.guard(&bundle.id);
        let b = bundle.dir.display().to_string();
        self.env.run(self.creating_cmd(&["run", "-d", "--bundle", &b, &bundle.id]), RUNTIME_TIMEOUT)
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
        let stopped = wait::poll(timeout, wait::POLL, || {
            // Not through env.run: a poll loop would flood the transcript.
            let out = run_command(Some(self.env.root()), self.host_cmd(&["state", id]), None, RUNTIME_TIMEOUT);
            let status = serde_json::from_str::<Value>(&out.stdout).ok().map(|v| v["status"].clone());
            if status == Some(json!("stopped")) { Ok(()) } else { Err(()) }
        });
        if stopped.is_err() {
            self.env.run(self.host_cmd(&["state", id]), RUNTIME_TIMEOUT);
            self.env.fail(&format!("container {id} did not stop within {timeout:?}"));
        }
    }
}
