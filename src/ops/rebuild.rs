//! `rebuild`: reloads the cache from the containers the runtimes say are running, after the cache
//! was lost, moved aside as corrupt, or the hook was installed on a node with running containers.
//!
//! Runtime state directories scanned:
//! - runc-style roots (`/run/runc`, containerd's `/run/containerd/runc/<namespace>`):
//!   `<root>/<id>/state.json`, libcontainer's internal format: `init_process_pid`,
//!   `init_process_start` (`/proc/PID/stat` field 22), annotations as `config.labels` `"k=v"`
//!   strings with the bundle in the `bundle=` label, `config.cgroups.path`;
//! - crun roots (`/run/crun`): `<root>/<id>/status` (`pid`, `process-start-time`, `bundle`) and
//!   `<root>/<id>/config.json` (a copy of the bundle's config: annotations, `linux.cgroupsPath`).
//!
//! Every `config.json` (crun's copy, a bundle's) is read with the hook's own reader,
//! [`crate::bundle`], so rebuild and the hook take the same annotations and cgroupsPath from it.
//!
//! For each container whose init is alive with the recorded start time, the decision is computed
//! exactly as the hook would ([`policy::decide`], lifecycle ensure), the cookie on the init is read
//! with a GET, and the container is recorded as a member of its group with the cookie as seen.
//! Rebuild never changes a cookie (GET only): a group whose live members hold more than one cookie
//! is reported, and the next ensure of the group converges it (the oldest member's cookie wins,
//! so members are recorded oldest first, by start time).
//!
//! The caller holds the state lock and wraps the call in one cache transaction.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::bundle::BundleConfig;
use crate::config::Config;
use crate::engine::EngineError;
use crate::kernel::{Cookie, CookieHex, CoreSched, KernelError};
use crate::policy::{self, Action, Decision, Lifecycle};
use crate::procfs::{Pid, ProcFs, TaskId};
use crate::store::{Member, Store};

/// runc-style roots scanned by default: runc's own, and containerd's runc shim per namespace.
pub const DEFAULT_RUNC_ROOTS: [&str; 3] = ["/run/runc", "/run/containerd/runc/k8s.io", "/run/containerd/runc/default"];
/// crun roots scanned by default.
pub const DEFAULT_CRUN_ROOTS: [&str; 1] = ["/run/crun"];

/// Largest runtime state file read (runc's `state.json` holds the whole libcontainer config;
/// a bundle's `config.json` is bounded by [`crate::bundle::MAX_CONFIG_BYTES`]).
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

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

    /// [`DEFAULT_RUNC_ROOTS`] then [`DEFAULT_CRUN_ROOTS`].
    pub fn defaults() -> Vec<Self> {
        DEFAULT_RUNC_ROOTS
            .iter()
            .map(|p| Self::runc(*p))
            .chain(DEFAULT_CRUN_ROOTS.iter().map(|p| Self::crun(*p)))
            .collect()
    }
}

/// One scanned root.
#[derive(Debug, Clone, Serialize)]
pub struct RootScan {
    /// Its layout.
    pub kind: RuntimeKind,
    /// The directory.
    pub path: PathBuf,
    /// Whether it exists (a missing default root is normal).
    pub present: bool,
    /// Container directories found in it.
    pub containers: usize,
}

/// A container recorded in the cache.
#[derive(Debug, Clone, Serialize)]
pub struct Rebuilt {
    /// Container id.
    pub id: String,
    /// Group key.
    pub group: String,
    /// Init pid.
    pub pid: Pid,
    /// Cookie on the init now (`0x0`: none yet; the next ensure of the group gives it one).
    pub cookie: String,
    /// The root it was found in.
    pub root: PathBuf,
}

/// A container not recorded, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// Container id (the directory name).
    pub id: String,
    /// The root it was found in.
    pub root: PathBuf,
    /// Why.
    pub reason: String,
}

/// A group whose live members hold more than one non-zero cookie.
#[derive(Debug, Clone, Serialize)]
pub struct Conflict {
    /// Group key.
    pub group: String,
    /// Distinct non-zero cookies, sorted.
    pub cookies: Vec<String>,
    /// Live members with the cookie each holds, oldest first.
    pub members: Vec<(String, String)>,
}

/// What `rebuild` reports.
#[derive(Debug, Clone, Serialize)]
pub struct RebuildReport {
    /// Roots scanned.
    pub roots: Vec<RootScan>,
    /// Containers recorded, oldest first.
    pub members: Vec<Rebuilt>,
    /// Containers not recorded.
    pub skipped: Vec<Skipped>,
    /// Groups with more than one cookie among live members (the next ensure converges them).
    pub conflicts: Vec<Conflict>,
}

impl RebuildReport {
    /// Text form.
    pub fn render(&self) -> String {
        let present = self.roots.iter().filter(|r| r.present).count();
        let groups: BTreeSet<&str> = self.members.iter().map(|m| m.group.as_str()).collect();
        let mut s = format!(
            "rebuild: scanned {} runtime roots ({present} present); recorded {} containers in {} groups; {} skipped; {} groups with more than one cookie\n",
            self.roots.len(),
            self.members.len(),
            groups.len(),
            self.skipped.len(),
            self.conflicts.len()
        );
        for r in &self.roots {
            let what = if r.present { format!("{} containers", r.containers) } else { "absent".into() };
            s.push_str(&format!("  {} root {}: {what}\n", r.kind.name(), r.path.display()));
        }
        if !self.members.is_empty() {
            s.push_str(&format!("{:<40} {:<20} {:>8} COOKIE\n", "GROUP", "CONTAINER", "PID"));
            for m in &self.members {
                let id: String = m.id.chars().take(20).collect();
                let note =
                    if m.cookie == "0x0" { " (no cookie yet: the next ensure of the group gives it one)" } else { "" };
                s.push_str(&format!("{:<40} {:<20} {:>8} {}{note}\n", m.group, id, m.pid, m.cookie));
            }
        }
        for k in &self.skipped {
            s.push_str(&format!("skipped {} ({}): {}\n", k.id, k.root.display(), k.reason));
        }
        for c in &self.conflicts {
            let who: Vec<String> = c.members.iter().map(|(id, ck)| format!("{id}={ck}")).collect();
            s.push_str(&format!(
                "WARNING: group {} has {} cookies among live members ({}); the next ensure converges it\n",
                c.group,
                c.cookies.len(),
                who.join(", ")
            ));
        }
        s
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
}

fn read_json(path: &Path) -> Result<Value, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("failed to read {}: {e}", path.display()))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("{} is larger than {MAX_FILE_BYTES} bytes", path.display()));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("failed to read {}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{} is not valid JSON: {e}", path.display()))
}

/// A number that some runtime versions write as a string.
fn number(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// Reads a `config.json` with the hook's reader ([`crate::bundle`]), so both decide alike. A
/// missing file is normal (a bundle already removed); an unusable one is worth a warning.
fn read_config(id: &str, path: &Path, fallback: &str) -> Option<BundleConfig> {
    match crate::bundle::read(path) {
        Ok(c) => Some(c),
        Err(e) if e.is_not_found() => {
            log::debug!("rebuild: container {id}: {e}; {fallback}");
            None
        }
        Err(e) => {
            log::warn!("rebuild: container {id}: {e}; {fallback}");
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
    }
}

/// Reads `<dir>/state.json` of a runc-style root.
pub fn read_runc(dir: &Path, id: &str) -> Result<RuntimeContainer, String> {
    let state = read_json(&dir.join("state.json"))?;
    let pid = state
        .get("init_process_pid")
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("state.json has no init_process_pid in {}", dir.display()))?;
    let start_time = number(state.get("init_process_start"))
        .ok_or_else(|| format!("state.json has no init_process_start in {}", dir.display()))?;
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
    let mut c = RuntimeContainer { id: id.to_string(), pid, start_time, annotations, cgroups_path, bundle };
    add_bundle_config(&mut c);
    Ok(c)
}

/// Reads `<dir>/status` and `<dir>/config.json` of a crun root.
pub fn read_crun(dir: &Path, id: &str) -> Result<RuntimeContainer, String> {
    let status = read_json(&dir.join("status"))?;
    let pid =
        status.get("pid").and_then(Value::as_i64).ok_or_else(|| format!("status has no pid in {}", dir.display()))?;
    let start_time = number(status.get("process-start-time"))
        .ok_or_else(|| format!("status has no process-start-time in {}", dir.display()))?;
    let bundle = status.get("bundle").and_then(Value::as_str).filter(|s| !s.is_empty()).map(PathBuf::from);
    let mut c = RuntimeContainer {
        id: id.to_string(),
        pid,
        start_time,
        annotations: BTreeMap::new(),
        cgroups_path: None,
        bundle,
    };
    match read_config(id, &dir.join("config.json"), "trying the bundle's config") {
        Some(config) => {
            c.annotations = config.annotations;
            c.cgroups_path = config.cgroups_path;
        }
        None => add_bundle_config(&mut c),
    }
    Ok(c)
}

/// The container directories of a root (sorted), or `None` when the root does not exist.
fn container_dirs(root: &Path) -> Result<Option<Vec<(String, PathBuf)>>, String> {
    let entries = match std::fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("failed to read runtime root {}: {e}", root.display())),
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

/// A live container and what the hook would decide for it.
struct Candidate {
    c: RuntimeContainer,
    root: PathBuf,
    decision: Decision,
    task: TaskId,
    cookie: Cookie,
}

/// Scans `roots` and records every running container as a member of its group. See the module
/// documentation. `Err` only for the cache, `/proc` failures on the cache's own members, or a
/// kernel without core scheduling.
pub fn rebuild<K: CoreSched>(
    store: &Store,
    kernel: &K,
    proc: &ProcFs,
    roots: &[RuntimeRoot],
    config: &Config,
) -> Result<RebuildReport, EngineError> {
    let mut report =
        RebuildReport { roots: Vec::new(), members: Vec::new(), skipped: Vec::new(), conflicts: Vec::new() };
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut candidates = Vec::new();
    for root in roots {
        let mut scan = RootScan { kind: root.kind, path: root.path.clone(), present: false, containers: 0 };
        let dirs = match container_dirs(&root.path) {
            Ok(Some(d)) => d,
            Ok(None) => {
                report.roots.push(scan);
                continue;
            }
            Err(reason) => {
                scan.present = true;
                report.skipped.push(Skipped { id: "-".into(), root: root.path.clone(), reason });
                report.roots.push(scan);
                continue;
            }
        };
        scan.present = true;
        scan.containers = dirs.len();
        report.roots.push(scan);
        for (id, dir) in dirs {
            let skip = |reason: String| Skipped { id: id.clone(), root: root.path.clone(), reason };
            if let Some(first) = seen.get(&id) {
                report.skipped.push(skip(format!("already found in {}", first.display())));
                continue;
            }
            seen.insert(id.clone(), root.path.clone());
            let parsed = match root.kind {
                RuntimeKind::Runc => read_runc(&dir, &id),
                RuntimeKind::Crun => read_crun(&dir, &id),
            };
            let c = match parsed {
                Ok(c) => c,
                Err(reason) => {
                    report.skipped.push(skip(format!("unreadable: {reason}")));
                    continue;
                }
            };
            let pid = match Pid::try_from(c.pid) {
                Ok(p) if p > 0 => p,
                _ => {
                    report.skipped.push(skip(format!("not running (pid {})", c.pid)));
                    continue;
                }
            };
            let task = match proc.task(pid) {
                Ok(Some(t)) if t.start_time == c.start_time => t,
                Ok(Some(_)) => {
                    report.skipped.push(skip(format!("dead: pid {pid} now belongs to another process")));
                    continue;
                }
                Ok(None) => {
                    report.skipped.push(skip(format!("dead: pid {pid} does not exist")));
                    continue;
                }
                Err(e) => {
                    report.skipped.push(skip(format!("failed to read /proc for pid {pid}: {e}")));
                    continue;
                }
            };
            let input = policy::Input {
                lifecycle: Lifecycle::Ensure,
                container_id: &c.id,
                pid: Some(c.pid),
                annotations: &c.annotations,
                cgroups_path: c.cgroups_path.as_deref(),
            };
            let mut decision = match policy::decide(&input, config) {
                Ok(d) => d,
                Err(e) => {
                    report.skipped.push(skip(e.to_string()));
                    continue;
                }
            };
            // Pod and container names, as the hook records them (metrics labels only).
            decision.pod = policy::PodLabels::from_annotations(&c.annotations);
            if matches!(decision.action, Action::Skip | Action::Forget) {
                report.skipped.push(skip(format!("the policy skips it: {}", decision.reason)));
                continue;
            }
            let cookie = match kernel.get(pid) {
                Ok(c) => c,
                Err(KernelError::NoSuchProcess(_)) => {
                    report.skipped.push(skip(format!("dead: pid {pid} exited")));
                    continue;
                }
                Err(e) if e.is_unsupported() => {
                    return Err(EngineError::Kernel { op: format!("read the cookie of pid {pid}"), source: e });
                }
                Err(e) => {
                    report.skipped.push(skip(format!("failed to read the cookie of pid {pid}: {e}")));
                    continue;
                }
            };
            if decision.action == Action::Clear {
                let reason = if cookie == 0 {
                    format!("{} (cookie 0, as it should be)", decision.reason)
                } else {
                    format!(
                        "{}, but it holds cookie {} (rebuild changes no cookie; the next ensure or a restart clears it)",
                        decision.reason,
                        CookieHex(cookie)
                    )
                };
                // A cached row would put it in a group it must not be in.
                if store.member(&c.id)?.is_some() {
                    store.remove_member(&c.id)?;
                }
                report.skipped.push(skip(reason));
                continue;
            }
            candidates.push(Candidate { c, root: root.path.clone(), decision, task, cookie });
        }
    }

    // Oldest first, so that the cache's join order (which decides whose cookie wins when a group
    // has two) follows the containers' age.
    candidates.sort_by_key(|k| (k.task.start_time, k.task.pid));
    let mut groups = BTreeSet::new();
    for k in &candidates {
        let group = k.decision.group.clone().unwrap_or_else(|| format!("container:{}", k.c.id));
        let previous = store.member(&k.c.id)?;
        let cgroup = proc.cgroup(k.task.pid).map_err(|source| EngineError::Proc { pid: k.task.pid, source })?;
        store.upsert_member(&Member {
            cookie: k.cookie,
            cgroup,
            namespace: k.decision.namespace.clone(),
            pod_name: k.decision.pod.name.clone(),
            pod_uid: k.decision.pod.uid.clone(),
            container_name: k.decision.pod.container_name.clone(),
            ..Member::new(&k.c.id, &group, k.task.pid, k.task.start_time)
        })?;
        if let Some(old) = previous.filter(|p| p.group != group) {
            store.drop_group_if_empty(&old.group)?;
        }
        log::info!(
            "rebuild: container {} (pid {}) recorded in group {group} with cookie {}",
            k.c.id,
            k.task.pid,
            CookieHex(k.cookie)
        );
        report.members.push(Rebuilt {
            id: k.c.id.clone(),
            group: group.clone(),
            pid: k.task.pid,
            cookie: CookieHex(k.cookie).to_string(),
            root: k.root.clone(),
        });
        groups.insert(group);
    }

    // Groups whose live members (found now or cached before) disagree.
    for group in groups {
        let mut members = Vec::new();
        for m in store.members(&group)? {
            let id = TaskId { pid: m.pid, start_time: m.start_time };
            if !proc.is_same(id).map_err(|source| EngineError::Proc { pid: m.pid, source })? {
                continue;
            }
            if let Ok(cookie) = kernel.get(m.pid) {
                members.push((m.container_id, cookie));
            }
        }
        let cookies: BTreeSet<Cookie> = members.iter().map(|(_, c)| *c).filter(|c| *c != 0).collect();
        if cookies.len() > 1 {
            report.conflicts.push(Conflict {
                group,
                cookies: cookies.iter().map(|c| CookieHex(*c).to_string()).collect(),
                members: members.into_iter().map(|(id, c)| (id, CookieHex(c).to_string())).collect(),
            });
        }
    }
    Ok(report)
}

#[cfg(test)]
#[path = "rebuild_tests.rs"]
mod tests;
