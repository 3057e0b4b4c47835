//! Busybox root filesystems and OCI bundles wired to the real hook binary.

#[allow(unused_imports)]
use super::*;

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
pub(crate) fn hook_entry(env: &World, stage: &str, stages: StageArgs) -> Value {
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
