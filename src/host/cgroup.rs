//! The cgroup filesystem: where it is mounted ([`root`]), the one check of a cgroup path as
//! `/proc/PID/cgroup` gives it ([`relative`]), the directory of a cgroup in a v2, hybrid or v1
//! layout, the processes below it, and the one write the hook makes there: `cpu.idle` for QoS
//! classes whose rule has `sched_idle`.
//!
//! The path helpers: `parse_proc_file` (the path out of `/proc/PID/cgroup`), `join` (a path below a
//! cgroup namespace's root), `key` (the cgroup a member is known by), `file` and `dir` (v2, hybrid or
//! v1 `cpu`), `procs`, `within`; for `cpu.idle`, `idle_target` (the container's own cgroup: under a
//! systemd driver the scope `linux.cgroupsPath` names, not crun's child `container`), `set_idle` and
//! `restore_idle`; `forced_idle_usec` reads a v2 `cpu.stat`.

use std::io;
use std::path::{Path, PathBuf};

use crate::values::Pid;

/// Problems writing a cgroup file.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// The cgroup path from `/proc` is not a plain absolute path.
    #[error("failed to use cgroup path {0:?}: not a plain path below the cgroup mount")]
    BadPath(String),
    /// The init's cgroup is unknown (`/proc/PID/cgroup` unreadable or naming no usable hierarchy).
    #[error("failed to set cpu.idle: the cgroup of pid {0} could not be read from /proc")]
    NoCgroup(Pid),
    /// The file does not exist there (cgroup v1, a cgroup without the cpu controller, or a kernel
    /// before 5.15).
    #[error(
        "failed to set cpu.idle: {0} does not exist (it needs cgroup v2, the cpu controller enabled for the cgroup, and Linux 5.15 or later)"
    )]
    NoIdleFile(PathBuf),
    /// The write failed.
    #[error("failed to write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A read failed.
    #[error("failed to read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The cgroup mount.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The cgroup mount the hook and the commands use: [`CGROUP_ROOT`], or with feature `fake-kernel`
/// the directory `OCH_FAKE_CGROUP_ROOT` names (tests over the fake kernel never write the host's
/// cgroups); a release build has no such code path.
pub fn root() -> PathBuf {
    #[cfg(feature = "fake-kernel")]
    if let Some(dir) = std::env::var_os("OCH_FAKE_CGROUP_ROOT") {
        return PathBuf::from(dir);
    }
    PathBuf::from(CGROUP_ROOT)
}

/// `cgroup` (a path as `/proc/PID/cgroup` gives it) relative to the mount, without its slashes at
/// either end: `None` unless it is a plain absolute path (no `.`, `..` or empty segment). The root
/// cgroup gives `Some("")`.
pub fn relative(cgroup: &str) -> Option<&str> {
    let rel = cgroup.strip_prefix('/')?.trim_end_matches('/');
    if !rel.is_empty() && rel.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return None;
    }
    Some(rel)
}

/// `rel` (a `/proc/PID/cgroup` path, maybe with leading `..`) below the cgroup `root`, normalized:
/// `/a/b/c` + `/../../x` is `/a/x`. `..` never climbs above `/`.
pub fn join(root: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = root.split('/').filter(|c| !c.is_empty()).collect();
    for c in rel.split('/').filter(|c| !c.is_empty() && *c != ".") {
        if c == ".." {
            parts.pop();
        } else {
            parts.push(c);
        }
    }
    format!("/{}", parts.join("/"))
}

/// Picks the cgroup path out of a `/proc/PID/cgroup` file: `0::PATH` (v2) first, else the v1
/// hierarchy that carries the `cpu` controller.
pub fn parse_proc_file(text: &str) -> Option<String> {
    in_proc_file(text).map(str::to_string)
}

/// [`parse_proc_file`] without a copy.
pub fn in_proc_file(text: &str) -> Option<&str> {
    let mut v1_cpu = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if id == "0" && ctrls.is_empty() {
            return Some(path);
        }
        if ctrls.split(',').any(|c| c == "cpu") {
            v1_cpu = Some(path);
        }
    }
    v1_cpu
}

/// The cgroup a member is known by: `recorded` (as `/proc/PID/cgroup` showed it) when it is a
/// plain absolute path other than the root, without a trailing `/`; `None` otherwise (nothing
/// recorded, the root, a relative path, `.` or `..` components, e.g. a `/..`-relative path seen
/// from a private cgroup namespace).
pub fn key(recorded: Option<&str>) -> Option<String> {
    let rel = recorded.and_then(relative).filter(|r| !r.is_empty())?;
    Some(format!("/{rel}"))
}

/// The file for `name` in cgroup `cgroup` (as `/proc/PID/cgroup` gives it) under `root`.
pub fn file(root: &Path, cgroup: &str, name: &str) -> Result<PathBuf, CgroupError> {
    let rel = relative(cgroup).ok_or_else(|| CgroupError::BadPath(cgroup.to_string()))?;
    Ok(root.join(rel).join(name))
}

/// Writes `cpu.idle = 1` in the cgroup.
pub fn set_idle(root: &Path, cgroup: &str) -> Result<PathBuf, CgroupError> {
    let path = file(root, cgroup, "cpu.idle")?;
    if !path.exists() {
        return Err(CgroupError::NoIdleFile(path));
    }
    std::fs::write(&path, "1").map_err(|source| CgroupError::Write { path: path.clone(), source })?;
    Ok(path)
}

/// Writes `cpu.idle = 1` in the cgroup unless it reads 1 already. `Ok(None)` when it was 1 or the
/// cgroup is gone (its container stopped); `Ok(Some(file))` when it had been reset and is 1 again.
pub fn restore_idle(root: &Path, cgroup: &str) -> Result<Option<PathBuf>, CgroupError> {
    let path = file(root, cgroup, "cpu.idle")?;
    match std::fs::read_to_string(&path) {
        Ok(v) if v.trim() == "1" => Ok(None),
        Ok(_) => {
            std::fs::write(&path, "1").map_err(|source| CgroupError::Write { path: path.clone(), source })?;
            Ok(Some(path))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENODEV) => Ok(None),
        Err(source) => Err(CgroupError::Read { path, source }),
    }
}

/// The cgroup whose `cpu.idle` a container of a `sched_idle` class gets: the container's own one,
/// whose weight its runtime sets. The init's cgroup (`init`, as `/proc/PID/cgroup` gives it),
/// except under a systemd cgroup driver: there `linux.cgroupsPath` reads `SLICE:PREFIX:NAME`, the
/// container's cgroup is the unit the runtime asked systemd for (`PREFIX-NAME.scope`), and crun
/// runs the init one level below it (in a child cgroup `container`), where `cpu.idle` would only
/// rank it against its own siblings. The deepest component of `init` named like that unit ends
/// the path; without one, `init` it is.
pub fn idle_target(init: &str, cgroups_path: Option<&str>) -> String {
    let unit = cgroups_path.and_then(|p| {
        let mut parts = p.split(':');
        let (Some(slice), Some(prefix), Some(name), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        if slice.contains('/') || name.is_empty() {
            return None;
        }
        Some(if name.ends_with(".slice") || name.ends_with(".scope") {
            name.to_string()
        } else if prefix.is_empty() {
            format!("{name}.scope")
        } else {
            format!("{prefix}-{name}.scope")
        })
    });
    let Some(unit) = unit else { return init.to_string() };
    let parts: Vec<&str> = init.split('/').collect();
    match parts.iter().rposition(|c| *c == unit) {
        Some(i) => parts[..=i].join("/"),
        None => init.to_string(),
    }
}

/// The directory of cgroup `cgroup` (a path as `/proc/PID/cgroup` gives it) under the cgroup
/// mount `cgroup_root`: the unified (v2) hierarchy at the root itself, then a hybrid layout's
/// `unified/`, then the v1 `cpu` hierarchy (`cpu`, `cpu,cpuacct`, `cpuacct,cpu`). The first that
/// exists and has a `cgroup.procs` wins. `None` for the root cgroup (never a container's own),
/// for a path that is not a plain absolute one (`..`, relative), or when no hierarchy has it.
pub fn dir(cgroup_root: &Path, cgroup: &str) -> Option<PathBuf> {
    let rel = relative(cgroup).filter(|r| !r.is_empty())?;
    ["", "unified", "cpu", "cpu,cpuacct", "cpuacct,cpu"]
        .iter()
        .map(|h| if h.is_empty() { cgroup_root.join(rel) } else { cgroup_root.join(h).join(rel) })
        .find(|d| d.join("cgroup.procs").is_file())
}

/// Every process (thread-group id) listed in `cgroup.procs` of `dir` and of all its descendant
/// cgroups, sorted and deduplicated. Cgroups that vanish during the walk are skipped.
pub fn procs(dir: &Path) -> io::Result<Vec<Pid>> {
    fn gone(e: &io::Error) -> bool {
        e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENODEV)
    }
    let mut pids = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        match std::fs::read_to_string(d.join("cgroup.procs")) {
            Ok(text) => pids.extend(text.lines().filter_map(|l| l.trim().parse::<Pid>().ok())),
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e),
        }
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e),
        };
        for entry in entries.flatten() {
            // Child cgroups are directories; `file_type` does not follow symlinks.
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(entry.path());
            }
        }
    }
    pids.sort_unstable();
    pids.dedup();
    Ok(pids)
}

/// The cgroup v2 hierarchy under the cgroup mount: the mount itself (unified) or its `unified/`
/// (hybrid). `None` on a cgroup v1 only node.
pub fn v2_root(cgroup_root: &Path) -> Option<PathBuf> {
    [cgroup_root.to_path_buf(), cgroup_root.join("unified")]
        .into_iter()
        .find(|d| d.join("cgroup.controllers").is_file())
}

/// The forced idle of core scheduling charged to `cgroup` (a path as `/proc/PID/cgroup` gives
/// it; the root for "/") and its descendants, in microseconds: `core_sched.force_idle_usec` of its
/// v2 `cpu.stat` (the time its tasks ran while the SMT sibling was held idle for them; counted
/// only while `kernel.sched_schedstats` is 1). `Ok(None)` when there is no such figure: no cgroup
/// v2 (v1 has none), the cgroup is gone, or the kernel does not keep it.
pub fn forced_idle_usec(cgroup_root: &Path, cgroup: &str) -> Result<Option<u64>, CgroupError> {
    let Some(v2) = v2_root(cgroup_root) else { return Ok(None) };
    let rel = relative(cgroup).ok_or_else(|| CgroupError::BadPath(cgroup.to_string()))?;
    let path = v2.join(rel).join("cpu.stat");
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text
            .lines()
            .find_map(|l| l.strip_prefix("core_sched.force_idle_usec "))
            .and_then(|v| v.trim().parse().ok())),
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ENODEV) => Ok(None),
        Err(source) => Err(CgroupError::Read { path, source }),
    }
}

/// True when cgroup `inner` is `outer` or below it (whole path components).
pub fn within(inner: &str, outer: &str) -> bool {
    let outer = outer.trim_end_matches('/');
    inner == outer || (inner.starts_with(outer) && inner[outer.len()..].starts_with('/'))
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
