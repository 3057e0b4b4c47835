//! The reader's cgroup namespace. A long-running command in a container (the DaemonSet's
//! follower) usually has a cgroup namespace of its own: `/proc/PID/cgroup` then shows paths
//! relative to that namespace's root (`/../../kubepods/…` for other pods), while the hook, run by
//! the runtime on the host, recorded host paths. [`host_root`] finds the host path of the
//! namespace's root, so that [`ProcFs::cgroup`] can give host paths again.
//!
//! How: the host's init (pid 1, visible with hostPID) shows one `..` per level of the namespace
//! root below the host's root; the host's cgroup tree (the host's `/sys/fs/cgroup` mounted into the
//! container) is searched at that depth, below the own cgroup's depth in the namespace, for the
//! directory whose `cgroup.procs` lists the reader itself.

use std::io;
use std::path::{Path, PathBuf};

use crate::host::procfs::ProcFs;
use crate::values::Pid;

/// Why the namespace's root could not be found.
#[derive(Debug, thiserror::Error)]
pub enum CgroupNsError {
    /// A `/proc` read failed.
    #[error("failed to read {0}")]
    Proc(PathBuf, #[source] io::Error),
    /// The own cgroup is not in the host's tree at the depth pid 1 implies.
    #[error(
        "failed to find this process's cgroup in the host's cgroup tree at {0} (a private cgroup \
         namespace needs the host's /sys/fs/cgroup mounted there, and pid 1 must be the host's init: hostPID)"
    )]
    NotFound(PathBuf),
}

fn depth(p: &str) -> usize {
    p.split('/').filter(|c| !c.is_empty()).count()
}

/// `None` when the reader shares pid 1's cgroup namespace: paths are the host's. Otherwise the host path of the namespace's root, found under the cgroup mount
/// `mount`.
pub fn host_root(proc: &ProcFs, mount: &Path) -> Result<Option<String>, CgroupNsError> {
    let link = |who: &str| {
        let p = proc.root().join(who).join("ns/cgroup");
        std::fs::read_link(&p).map_err(|e| CgroupNsError::Proc(p, e))
    };
    let me = std::process::id() as Pid;
    let shown = |pid: Pid| {
        proc.cgroup_as_shown(pid)
            .map_err(|e| CgroupNsError::Proc(proc.root().join(pid.to_string()).join("cgroup"), e))
            .map(Option::unwrap_or_default)
    };
    // The namespace links say it when pid 1's is readable (CAP_SYS_PTRACE); otherwise a `..` in
    // pid 1's cgroup does. The links come first: they settle the common case (the hook, run by
    // the runtime in the host's namespace) without reading a file.
    let links = (link("self"), link("1"));
    if let (Ok(mine), Ok(init)) = &links
        && mine == init
    {
        return Ok(None);
    }
    let init_shown = shown(1)?;
    let ups = init_shown.split('/').take_while(|c| c.is_empty() || *c == "..").filter(|c| *c == "..").count();
    if !matches!(links, (Ok(_), Ok(_))) && ups == 0 {
        return Ok(None);
    }
    let own = shown(me)?;
    let target = ups + depth(&own);
    let v2 = [mount.to_path_buf(), mount.join("unified")].into_iter().find(|m| m.join("cgroup.procs").is_file());
    let Some(base) = v2 else { return Err(CgroupNsError::NotFound(mount.to_path_buf())) };
    let found = find_member(&base, Path::new(""), target, me).ok_or_else(|| CgroupNsError::NotFound(base.clone()))?;
    let host_own = format!("/{}", found.display());
    // The namespace root is the host path of the own cgroup minus the own path in the namespace.
    let keep = depth(&host_own) - depth(&own);
    let root: Vec<&str> = host_own.split('/').filter(|c| !c.is_empty()).take(keep).collect();
    Ok(Some(format!("/{}", root.join("/"))))
}

/// The cgroup `depth` levels below `base` whose `cgroup.procs` lists `pid`, relative to `base`.
fn find_member(base: &Path, rel: &Path, depth: usize, pid: Pid) -> Option<PathBuf> {
    let dir = base.join(rel);
    if depth == 0 {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
        return procs.lines().any(|l| l.trim().parse() == Ok(pid)).then(|| rel.to_path_buf());
    }
    for e in std::fs::read_dir(&dir).ok()?.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir())
            && let Some(found) = find_member(base, &rel.join(e.file_name()), depth - 1, pid)
        {
            return Some(found);
        }
    }
    None
}

/// `proc` as every command reads it ([`crate::host::system::System::new`]): in a private cgroup
/// namespace, with its host root found under the cgroup `mount` (one info line says so; one
/// warning when it cannot be found, and then paths stay as shown).
pub fn host_procfs(proc: ProcFs, mount: &Path) -> ProcFs {
    match host_root(&proc, mount) {
        Ok(None) => proc,
        Ok(Some(root)) => {
            log::info!(
                "in a private cgroup namespace whose root is the host's cgroup {root}: reading cgroups as host paths"
            );
            proc.with_cgroup_ns_root(root)
        }
        Err(e) => {
            log::warn!("{}; processes will not match the cgroups the hook recorded", crate::error::Chain(&e));
            proc
        }
    }
}

#[cfg(test)]
#[path = "cgroup_ns_tests.rs"]
mod tests;
