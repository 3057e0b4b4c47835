//! podman with every root private to the test and a hooks.d dir made from the project's.

#[allow(unused_imports)]
use super::*;

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
