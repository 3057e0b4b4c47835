//! How the runtimes of a node are wired to run this binary, read-only, each file under a host
//! root (`/`, or where the node's filesystem is mounted): the hooks.d files podman and CRI-O read
//! ([`hooks_d`], [`read_hook_file`]), CRI-O's and podman's configured `hooks_dir`
//! ([`crio_hooks_dirs`], [`podman_hooks_dirs`]), containerd's `base_runtime_spec` files
//! ([`containerd_base_specs`]) and the hooks such a spec holds ([`base_spec_hooks`]), which
//! engines the node has ([`Engines::read`]), and whether two paths hold the same binary
//! ([`same_binary`]). One reader per kind of file; nothing here judges what it reads.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::host::bundle::HOOK_NAME;
/// The hooks.d file the packages install.
pub const HOOK_FILE: &str = "oci-coresched-hook.json";
/// The hooks.d directories podman and CRI-O read when their `hooks_dir` is not set (the first),
/// and the one the DaemonSet's installer falls back to where `/usr` is read-only (the second).
pub const HOOKS_DIRS: [&str; 2] = ["/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d"];
/// containerd's config file.
pub const CONTAINERD_CONFIG: &str = "/etc/containerd/config.toml";
/// containerd's NRI socket (its default `socket_path`).
pub const NRI_SOCKET: &str = "/var/run/nri/nri.sock";
/// CRI-O's config file, then its drop-in directory (files read in name order, later ones win).
pub const CRIO_CONFIGS: (&str, &str) = ("/etc/crio/crio.conf", "/etc/crio/crio.conf.d");
/// podman's containers.conf files, in the order podman reads them (later ones win).
pub const PODMAN_CONFIGS: [&str; 2] = ["/usr/share/containers/containers.conf", "/etc/containers/containers.conf"];

/// Why a wiring file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WiringError {
    /// The file or directory could not be read.
    #[error("failed to read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// Not the JSON or TOML it should be.
    #[error("failed to parse {}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
}

/// `host_path` (absolute, as the node names it) under `root`.
pub fn under(root: &Path, host_path: impl AsRef<Path>) -> PathBuf {
    let p = host_path.as_ref();
    root.join(p.strip_prefix("/").unwrap_or(p))
}

fn read_text(path: &Path) -> Result<Option<String>, WiringError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(WiringError::Read { path: path.to_path_buf(), source }),
    }
}

/// One OCI hook: the executable (a host path) and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// `path`.
    pub path: PathBuf,
    /// `args`.
    pub args: Vec<String>,
}

impl Hook {
    fn of(v: &serde_json::Value) -> Option<Self> {
        let path = PathBuf::from(v.get("path")?.as_str()?);
        let args = v
            .get("args")
            .and_then(|a| a.as_array())
            .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        Some(Self { path, args })
    }

    /// Whether it runs this binary: its executable is named [`HOOK_NAME`].
    pub fn runs_this_binary(&self) -> bool {
        self.path.file_name().is_some_and(|n| n == HOOK_NAME)
    }
}

/// A hooks.d file (the OCI hooks configuration of podman and CRI-O, version 1.0.0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookFile {
    /// The file.
    pub file: PathBuf,
    /// `hook`, when it has a `path`.
    pub hook: Option<Hook>,
    /// `stages`.
    pub stages: Vec<String>,
    /// `when.always`.
    pub always: bool,
}

/// A JSON file that must exist.
fn read_json(file: &Path) -> Result<serde_json::Value, WiringError> {
    let text = read_text(file)?.ok_or_else(|| WiringError::Read {
        path: file.to_path_buf(),
        source: io::Error::from(io::ErrorKind::NotFound),
    })?;
    serde_json::from_str(&text).map_err(|e| WiringError::Parse { path: file.to_path_buf(), message: e.to_string() })
}

/// Reads one hooks.d file.
pub fn read_hook_file(file: &Path) -> Result<HookFile, WiringError> {
    let v = read_json(file)?;
    let stages = v
        .get("stages")
        .and_then(|s| s.as_array())
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let always = v.pointer("/when/always").and_then(|a| a.as_bool()).unwrap_or(false);
    Ok(HookFile { file: file.to_path_buf(), hook: v.get("hook").and_then(Hook::of), stages, always })
}

/// The hooks.d files in `dir` (a path already under the host root) that concern this binary: the
/// one named [`HOOK_FILE`] and every `*.json` whose hook runs [`HOOK_NAME`], each read (or why it
/// could not be). `Ok(None)`: no such directory.
pub fn hooks_d(dir: &Path) -> Result<Option<Vec<Result<HookFile, WiringError>>>, WiringError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(WiringError::Read { path: dir.to_path_buf(), source }),
    };
    let mut names: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    let mut out = Vec::new();
    for file in names {
        let read = read_hook_file(&file);
        let ours = file.file_name().is_some_and(|n| n == HOOK_FILE)
            || matches!(&read, Ok(h) if h.hook.as_ref().is_some_and(Hook::runs_this_binary));
        if ours {
            out.push(read);
        }
    }
    Ok(Some(out))
}

/// The TOML files `first` and then the files of `drop_in_dir` in name order, each parsed.
fn toml_files(first: &Path, drop_in_dir: Option<&Path>) -> Result<Vec<(PathBuf, toml::Table)>, WiringError> {
    let mut files = vec![first.to_path_buf()];
    if let Some(dir) = drop_in_dir {
        match std::fs::read_dir(dir) {
            Ok(entries) => {
                let mut more: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
                more.sort();
                files.extend(more.into_iter().filter(|p| p.is_file()));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(WiringError::Read { path: dir.to_path_buf(), source }),
        }
    }
    let mut out = Vec::new();
    for f in files {
        if let Some(text) = read_text(&f)? {
            let table = toml::from_str::<toml::Table>(&text).map_err(|e| WiringError::Parse {
                path: f.clone(),
                message: e.to_string().trim_end().replace('\n', " "),
            })?;
            out.push((f, table));
        }
    }
    Ok(out)
}

/// The string array at `keys` in `table`.
fn strings_at(table: &toml::Table, keys: &[&str]) -> Option<Vec<String>> {
    let (last, path) = keys.split_last()?;
    let mut t = table;
    for k in path {
        t = t.get(*k)?.as_table()?;
    }
    let a = t.get(*last)?.as_array()?;
    Some(a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
}

/// A configured `hooks_dir` and the file that set it last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HooksDirSetting {
    /// The directories (host paths).
    pub dirs: Vec<PathBuf>,
    /// The file that set them.
    pub file: PathBuf,
}

fn last_setting(files: Vec<(PathBuf, toml::Table)>, keys: &[&str], root: &Path) -> Option<HooksDirSetting> {
    files.into_iter().rev().find_map(|(file, t)| {
        let dirs = strings_at(&t, keys)?;
        let file = Path::new("/").join(file.strip_prefix(root).unwrap_or(&file));
        Some(HooksDirSetting { dirs: dirs.into_iter().map(PathBuf::from).collect(), file })
    })
}

/// CRI-O's `hooks_dir` (`[crio.runtime]` of [`CRIO_CONFIGS`]) as the last file that sets it says,
/// `None` when none does (CRI-O then reads the first of [`HOOKS_DIRS`]).
pub fn crio_hooks_dirs(root: &Path) -> Result<Option<HooksDirSetting>, WiringError> {
    let files = toml_files(&under(root, CRIO_CONFIGS.0), Some(&under(root, CRIO_CONFIGS.1)))?;
    Ok(last_setting(files, &["crio", "runtime", "hooks_dir"], root))
}

/// podman's `hooks_dir` (`[engine]` of [`PODMAN_CONFIGS`]) as the last file that sets it says,
/// `None` when none does (podman then reads the first of [`HOOKS_DIRS`]).
pub fn podman_hooks_dirs(root: &Path) -> Result<Option<HooksDirSetting>, WiringError> {
    let mut files = Vec::new();
    for f in PODMAN_CONFIGS {
        let f = under(root, f);
        let drop_in = f.with_extension("conf.d");
        files.extend(toml_files(&f, Some(&drop_in))?);
    }
    Ok(last_setting(files, &["engine", "hooks_dir"], root))
}

/// Every `base_runtime_spec` containerd's config ([`CONTAINERD_CONFIG`], and the files its
/// `imports` name; a `*` in an import's file name is matched) names, as host paths with the
/// file that names each. `Ok(None)`: no config file.
pub fn containerd_base_specs(root: &Path) -> Result<Option<Vec<(PathBuf, PathBuf)>>, WiringError> {
    let main = under(root, CONTAINERD_CONFIG);
    let Some(text) = read_text(&main)? else { return Ok(None) };
    let parse = |f: &Path, text: &str| {
        toml::from_str::<toml::Table>(text).map_err(|e| WiringError::Parse {
            path: f.to_path_buf(),
            message: e.to_string().trim_end().replace('\n', " "),
        })
    };
    let table = parse(&main, &text)?;
    let mut files = vec![(PathBuf::from(CONTAINERD_CONFIG), table.clone())];
    for import in table.get("imports").and_then(|i| i.as_array()).into_iter().flatten().filter_map(|i| i.as_str()) {
        for f in matching(root, Path::new(import))? {
            if let Some(text) = read_text(&under(root, &f))? {
                files.push((f.clone(), parse(&under(root, &f), &text)?));
            }
        }
    }
    let mut out = Vec::new();
    for (file, t) in &files {
        collect_base_specs(t, file, &mut out);
    }
    Ok(Some(out))
}

/// The host paths an `imports` entry names (a relative one is relative to containerd's config
/// directory; a `*` matches in the file name only).
fn matching(root: &Path, import: &Path) -> Result<Vec<PathBuf>, WiringError> {
    let import = if import.is_absolute() { import.to_path_buf() } else { Path::new("/etc/containerd").join(import) };
    let name = import.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some((prefix, suffix)) = name.split_once('*') else { return Ok(vec![import]) };
    let parent = import.parent().unwrap_or(Path::new("/"));
    let dir = under(root, parent);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(WiringError::Read { path: dir, source }),
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix) && n.ends_with(suffix) && n.len() >= prefix.len() + suffix.len())
        .map(|n| parent.join(n))
        .collect();
    out.sort();
    Ok(out)
}

fn collect_base_specs(t: &toml::Table, file: &Path, out: &mut Vec<(PathBuf, PathBuf)>) {
    for (k, v) in t {
        match v {
            toml::Value::String(s) if k == "base_runtime_spec" && !s.is_empty() => {
                out.push((PathBuf::from(s), file.to_path_buf()));
            }
            toml::Value::Table(inner) => collect_base_specs(inner, file, out),
            _ => {}
        }
    }
}

/// The hooks of a base runtime spec (`file` under the host root) that run [`HOOK_NAME`], with their
/// stage.
pub fn base_spec_hooks(file: &Path) -> Result<Vec<(String, Hook)>, WiringError> {
    let v = read_json(file)?;
    let mut out = Vec::new();
    for (stage, hooks) in v.get("hooks").and_then(|h| h.as_object()).into_iter().flatten() {
        for h in hooks.as_array().into_iter().flatten().filter_map(Hook::of) {
            if h.runs_this_binary() {
                out.push((stage.clone(), h));
            }
        }
    }
    Ok(out)
}

/// Which engines the node has, from their binaries and sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Engines {
    /// containerd: its binary, config or socket.
    pub containerd: bool,
    /// CRI-O: its binary or config.
    pub crio: bool,
    /// podman: its binary.
    pub podman: bool,
    /// The NRI socket exists.
    pub nri_socket: bool,
}

impl Engines {
    /// The engines under `root`.
    pub fn read(root: &Path) -> Self {
        let any = |paths: &[&str]| paths.iter().any(|p| under(root, p).exists());
        let bin = |name: &str| {
            ["/usr/bin", "/usr/local/bin", "/usr/sbin", "/opt/bin"].iter().any(|d| under(root, d).join(name).exists())
        };
        Self {
            containerd: bin("containerd") || any(&[CONTAINERD_CONFIG, "/run/containerd/containerd.sock"]),
            crio: bin("crio") || any(&[CRIO_CONFIGS.0, "/run/crio/crio.sock"]),
            podman: bin("podman"),
            nri_socket: any(&[NRI_SOCKET, "/run/nri/nri.sock"]),
        }
    }
}

/// Whether `a` and `b` hold the same binary: the same file, or the same bytes.
pub fn same_binary(a: &Path, b: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let (ma, mb) = (std::fs::metadata(a)?, std::fs::metadata(b)?);
    if ma.dev() == mb.dev() && ma.ino() == mb.ino() {
        return Ok(true);
    }
    if ma.len() != mb.len() {
        return Ok(false);
    }
    let (mut fa, mut fb) = (std::fs::File::open(a)?, std::fs::File::open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = fa.read(&mut ba)?;
        if n == 0 {
            return Ok(fb.read(&mut bb[..1])? == 0);
        }
        fb.read_exact(&mut bb[..n])?;
        if ba[..n] != bb[..n] {
            return Ok(false);
        }
    }
}

#[cfg(test)]
#[path = "wiring_tests.rs"]
mod tests;
