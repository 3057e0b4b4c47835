//! The runtimes' own state directories, read-only: which roots exist by default, their two
//! layouts, and what one container's directory says (id, init pid and start time, annotations,
//! cgroupsPath, bundle). Used by [`crate::session::running`]; knows nothing of the cache or the kernel.
//!
//! - runc-style roots (`/run/runc`, containerd's `/run/containerd/runc/<namespace>`):
//!   `<root>/<id>/state.json`, libcontainer's internal format: `init_process_pid`,
//!   `init_process_start` (`/proc/PID/stat` field 22), annotations as `config.labels` `"k=v"`
//!   strings with the bundle in the `bundle=` label, `config.cgroups.path`;
//! - crun roots (`/run/crun`): `<root>/<id>/status` (`pid`, `process-start-time`, `bundle`) and
//!   `<root>/<id>/config.json` (a copy of the bundle's config: annotations, `linux.cgroupsPath`).
//!
//! Every `config.json` (crun's copy, a bundle's) is read with the hook's own reader,
//! [`crate::host::bundle`], so a reload and the hook take the same annotations and cgroupsPath from it.
//!
//! The default roots are [`RuntimeRoot::of_this_process`]'s, which `OCH_FAKE_RUNTIME_ROOTS` replaces
//! with the `fake-kernel` feature.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::host::bundle::BundleConfig;

/// runc-style roots scanned by default: runc's own, and containerd's runc shim per namespace.
pub const DEFAULT_RUNC_ROOTS: [&str; 3] = ["/run/runc", "/run/containerd/runc/k8s.io", "/run/containerd/runc/default"];
/// crun roots scanned by default.
pub const DEFAULT_CRUN_ROOTS: [&str; 1] = ["/run/crun"];

/// Largest runtime state file read (runc's `state.json` holds the whole libcontainer config;
/// a bundle's `config.json` is bounded by [`crate::host::bundle::MAX_CONFIG_BYTES`]).
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Why a runtime root or one container's state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeStateError {
    /// A file or directory could not be read.
    #[error("failed to read {}", path.display())]
    Read {
        /// What was read.
        path: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// A state file larger than any runtime writes.
    #[error("{} is larger than {MAX_FILE_BYTES} bytes", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// A state file that is not JSON.
    #[error("{} is not valid JSON", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A state file without a field every container's state has.
    #[error("{file} has no {field} in {}", dir.display())]
    Missing {
        /// `state.json` or `status`.
        file: &'static str,
        /// The field.
        field: &'static str,
        /// The container's directory.
        dir: PathBuf,
    },
}

/// The layout of a runtime state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    /// `<root>/<id>/state.json` (runc, containerd's runc shim, podman with runc).
    Runc,
    /// `<root>/<id>/status` + `<root>/<id>/config.json`.
    Crun,
}

impl RuntimeKind {
    /// `runc` or `crun`.
    pub fn name(self) -> &'static str {
        match self {
            RuntimeKind::Runc => "runc",
            RuntimeKind::Crun => "crun",
        }
    }
}

/// A runtime state directory to scan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeRoot {
    /// Its layout.
    pub kind: RuntimeKind,
    /// The directory.
    pub path: PathBuf,
}

impl RuntimeRoot {
    /// A runc-style root.
    pub fn runc(path: impl Into<PathBuf>) -> Self {
        Self { kind: RuntimeKind::Runc, path: path.into() }
    }

    /// A crun root.
    pub fn crun(path: impl Into<PathBuf>) -> Self {
        Self { kind: RuntimeKind::Crun, path: path.into() }
    }

    /// The roots this process scans: [`RuntimeRoot::defaults`], or with feature `fake-kernel`
    /// those `OCH_FAKE_RUNTIME_ROOTS` names (`runc:DIR` and `crun:DIR`, separated by commas; empty
    /// for none), so that tests over the fake kernel never read the host's containers. A release
    /// build has no such code path.
    pub fn of_this_process() -> Vec<Self> {
        #[cfg(feature = "fake-kernel")]
        if let Some(v) = std::env::var_os("OCH_FAKE_RUNTIME_ROOTS") {
            return v
                .to_string_lossy()
                .split(',')
                .filter_map(|r| match r.split_once(':') {
                    Some(("runc", dir)) => Some(Self::runc(dir)),
                    Some(("crun", dir)) => Some(Self::crun(dir)),
                    _ => None,
                })
                .collect();
        }
        Self::defaults()
    }

    /// [`DEFAULT_RUNC_ROOTS`] then [`DEFAULT_CRUN_ROOTS`].
    pub fn defaults() -> Vec<Self> {
        DEFAULT_RUNC_ROOTS
            .iter()
            .map(|p| Self::runc(*p))
            .chain(DEFAULT_CRUN_ROOTS.iter().map(|p| Self::crun(*p)))
            .collect()
    }
}

/// What a runtime state directory says about one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeContainer {
    /// Container id.
    pub id: String,
    /// Init pid (host pid namespace).
    pub pid: i64,
    /// Init start time recorded by the runtime.
    pub start_time: u64,
    /// Annotations: the runtime's copy, completed by the bundle's config.
    pub annotations: BTreeMap<String, String>,
    /// `linux.cgroupsPath`.
    pub cgroups_path: Option<String>,
    /// Bundle directory.
    pub bundle: Option<PathBuf>,
    /// The container's directory in its root (where `exec.fifo` waits until it starts).
    pub dir: PathBuf,
    /// Its spec runs this hook at a stage that gives the cookie ([`crate::host::bundle::names_hook`]).
    pub names_hook: bool,
}

impl RuntimeContainer {
    /// Whether the runtime still waits to start it: its `exec.fifo` (runc, crun) is there until
    /// `start` opens it, so its init has not yet run the container's process.
    pub fn waits_to_start(&self) -> bool {
        self.dir.join(EXEC_FIFO).exists()
    }
}

/// The fifo runc and crun keep in a created container's directory until `start`.
pub const EXEC_FIFO: &str = "exec.fifo";

fn read_json(path: &Path) -> Result<Value, RuntimeStateError> {
    let read = |source| RuntimeStateError::Read { path: path.to_path_buf(), source };
    if std::fs::metadata(path).map_err(read)?.len() > MAX_FILE_BYTES {
        return Err(RuntimeStateError::TooLarge { path: path.to_path_buf() });
    }
    let bytes = std::fs::read(path).map_err(read)?;
    serde_json::from_slice(&bytes).map_err(|source| RuntimeStateError::Json { path: path.to_path_buf(), source })
}

/// A number that some runtime versions write as a string.
fn number(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Reads a `config.json` with the hook's reader ([`crate::host::bundle`]), so both decide alike. A
/// missing file is normal (a bundle already removed); an unusable one is worth a warning.
fn read_config(id: &str, path: &Path, fallback: &str) -> Option<BundleConfig> {
    match crate::host::bundle::read_with(path, crate::host::bundle::Hooks::Read) {
        Ok(c) => Some(c),
        Err(e) if e.is_not_found() => {
            log::debug!("rebuild: container {id}: {}; {fallback}", crate::error::Chain(&e));
            None
        }
        Err(e) => {
            log::warn!("rebuild: container {id}: {}; {fallback}", crate::error::Chain(&e));
            None
        }
    }
}

/// Completes `c` from `<bundle>/config.json` when readable (annotations it lacks; cgroupsPath).
fn add_bundle_config(c: &mut RuntimeContainer) {
    let Some(bundle) = &c.bundle else { return };
    let fallback = "using the runtime's copy of its annotations";
    if let Some(config) = read_config(&c.id, &bundle.join("config.json"), fallback) {
        config.complete(&mut c.annotations);
        if config.cgroups_path.is_some() {
            c.cgroups_path = config.cgroups_path;
        }
        c.names_hook |= config.names_hook;
    }
}

/// Reads `<dir>/state.json` of a runc-style root.
pub fn read_runc(dir: &Path, id: &str) -> Result<RuntimeContainer, RuntimeStateError> {
    let state = read_json(&dir.join("state.json"))?;
    let missing = |field| RuntimeStateError::Missing { file: "state.json", field, dir: dir.to_path_buf() };
    let pid = state.get("init_process_pid").and_then(Value::as_i64).ok_or_else(|| missing("init_process_pid"))?;
    let start_time = number(state.get("init_process_start")).ok_or_else(|| missing("init_process_start"))?;
    let mut annotations = BTreeMap::new();
    let mut bundle = None;
    for label in state.pointer("/config/labels").and_then(Value::as_array).into_iter().flatten() {
        let Some((k, v)) = label.as_str().and_then(|l| l.split_once('=')) else { continue };
        if k == "bundle" {
            bundle = Some(PathBuf::from(v));
        } else {
            annotations.insert(k.to_string(), v.to_string());
        }
    }
    let cgroups_path =
        state.pointer("/config/cgroups/path").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    // libcontainer keeps the spec's hooks in its config, in the spec's shape, under `Hooks`
    // (a Go field without a JSON tag).
    let names_hook =
        ["/config/Hooks", "/config/hooks"].iter().filter_map(|p| state.pointer(p)).any(crate::host::bundle::names_hook);
    let mut c = RuntimeContainer {
        id: id.to_string(),
        pid,
        start_time,
        annotations,
        cgroups_path,
        bundle,
        dir: dir.to_path_buf(),
        names_hook,
    };
    add_bundle_config(&mut c);
    Ok(c)
}

/// Reads `<dir>/status` and `<dir>/config.json` of a crun root.
pub fn read_crun(dir: &Path, id: &str) -> Result<RuntimeContainer, RuntimeStateError> {
    let status = read_json(&dir.join("status"))?;
    let missing = |field| RuntimeStateError::Missing { file: "status", field, dir: dir.to_path_buf() };
    let pid = status.get("pid").and_then(Value::as_i64).ok_or_else(|| missing("pid"))?;
    let start_time = number(status.get("process-start-time")).ok_or_else(|| missing("process-start-time"))?;
    let bundle = status.get("bundle").and_then(Value::as_str).filter(|s| !s.is_empty()).map(PathBuf::from);
    let mut c = RuntimeContainer {
        id: id.to_string(),
        pid,
        start_time,
        annotations: BTreeMap::new(),
        cgroups_path: None,
        bundle,
        dir: dir.to_path_buf(),
        names_hook: false,
    };
    match read_config(id, &dir.join("config.json"), "trying the bundle's config") {
        Some(config) => {
            c.annotations = config.annotations;
            c.cgroups_path = config.cgroups_path;
            c.names_hook = config.names_hook;
        }
        None => add_bundle_config(&mut c),
    }
    Ok(c)
}

/// Reads one container's directory of a `kind` root; a directory in the other layout is read in
/// its own (containerd with crun keeps crun's `status` under its runc-style root).
pub fn read(kind: RuntimeKind, dir: &Path, id: &str) -> Result<RuntimeContainer, RuntimeStateError> {
    let other = match kind {
        RuntimeKind::Runc => (RUNC_STATE, CRUN_STATUS, RuntimeKind::Crun),
        RuntimeKind::Crun => (CRUN_STATUS, RUNC_STATE, RuntimeKind::Runc),
    };
    let kind = if !dir.join(other.0).exists() && dir.join(other.1).exists() { other.2 } else { kind };
    match kind {
        RuntimeKind::Runc => read_runc(dir, id),
        RuntimeKind::Crun => read_crun(dir, id),
    }
}

const RUNC_STATE: &str = "state.json";
const CRUN_STATUS: &str = "status";

/// The runtimes' state read again only where it changed: one container's directory is parsed
/// again when its state file (`state.json`, `status`) is another file, or was written, since the
/// last read. For a caller that scans every few seconds (the follower's escape scan).
#[derive(Debug, Default)]
pub struct StateCache {
    entries: BTreeMap<PathBuf, (FileStamp, RuntimeContainer)>,
    seen: std::collections::BTreeSet<PathBuf>,
}

/// What tells a state file's versions apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

fn stamp(dir: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir.join(RUNC_STATE)).or_else(|_| std::fs::metadata(dir.join(CRUN_STATUS))).ok()?;
    Some(FileStamp {
        ino: m.ino(),
        len: m.len(),
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
    })
}

impl StateCache {
    /// [`read`], or the last read's result when the state file is the same.
    pub fn read(&mut self, kind: RuntimeKind, dir: &Path, id: &str) -> Result<RuntimeContainer, RuntimeStateError> {
        self.seen.insert(dir.to_path_buf());
        let now = stamp(dir);
        if let (Some(now), Some((then, c))) = (now, self.entries.get(dir))
            && now == *then
        {
            return Ok(c.clone());
        }
        let c = read(kind, dir, id)?;
        match now {
            Some(now) => {
                self.entries.insert(dir.to_path_buf(), (now, c.clone()));
            }
            None => {
                self.entries.remove(dir);
            }
        }
        Ok(c)
    }

    /// Forgets the directories not read since the last call (containers that are gone).
    pub fn forget_unseen(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        self.entries.retain(|dir, _| seen.contains(dir));
    }
}

/// The runtimes whose lifecycle commands are watched ([`busy_ids`]).
pub const RUNTIMES: [&str; 4] = ["runc", "crun", "youki", "runsc"];

/// The container ids that a live runtime command is creating or starting: every argument of each
/// process whose program is one of [`RUNTIMES`] and whose subcommand is `create`, `start` or
/// `run`. Such a container is still inside its createRuntime or poststart hooks (runc runs
/// poststart before `create` returns, crun in `start`), so its cookie may not be there yet.
pub fn busy_ids(proc: &crate::host::procfs::ProcFs) -> std::io::Result<std::collections::BTreeSet<String>> {
    let mut ids = std::collections::BTreeSet::new();
    for pid in proc.pids()? {
        let Ok(Some(args)) = proc.cmdline(pid) else { continue };
        let Some(program) = args.first().and_then(|a| Path::new(a).file_name()).and_then(|f| f.to_str()) else {
            continue;
        };
        if RUNTIMES.contains(&program) && args.iter().any(|a| matches!(a.as_str(), "create" | "start" | "run")) {
            ids.extend(args.into_iter().skip(1));
        }
    }
    Ok(ids)
}

/// The container directories of a root (sorted), or `None` when the root does not exist.
pub fn container_dirs(root: &Path) -> Result<Option<Vec<(String, PathBuf)>>, RuntimeStateError> {
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(RuntimeStateError::Read { path: root.to_path_buf(), source }),
    };
    let mut dirs: Vec<(String, PathBuf)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            if !e.file_type().ok()?.is_dir() {
                return None;
            }
            Some((e.file_name().to_str()?.to_string(), e.path()))
        })
        .collect();
    dirs.sort();
    Ok(Some(dirs))
}
