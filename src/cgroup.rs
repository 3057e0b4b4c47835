//! Writes to the container's cgroup (root passed in, `/sys/fs/cgroup` in production): `cpu.idle`
//! for QoS classes whose rule has `sched_idle`.

use std::path::{Component, Path, PathBuf};

use crate::kernel::Pid;

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
}

/// The file for `name` in cgroup `cgroup` (as `/proc/PID/cgroup` gives it) under `root`.
pub fn cgroup_file(root: &Path, cgroup: &str, name: &str) -> Result<PathBuf, CgroupError> {
    let rel = Path::new(cgroup);
    if !rel.is_absolute() || rel.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)) {
        return Err(CgroupError::BadPath(cgroup.to_string()));
    }
    Ok(root.join(cgroup.trim_start_matches('/')).join(name))
}

/// Writes `cpu.idle = 1` in the cgroup.
pub fn set_idle(root: &Path, cgroup: &str) -> Result<PathBuf, CgroupError> {
    let path = cgroup_file(root, cgroup, "cpu.idle")?;
    if !path.exists() {
        return Err(CgroupError::NoIdleFile(path));
    }
    std::fs::write(&path, "1").map_err(|source| CgroupError::Write { path: path.clone(), source })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_idle_and_refuses_odd_paths() {
        let root = tempfile::tempdir().unwrap();
        let cg = root.path().join("kubepods/besteffort/pod1/c1");
        std::fs::create_dir_all(&cg).unwrap();
        std::fs::write(cg.join("cpu.idle"), "0").unwrap();
        set_idle(root.path(), "/kubepods/besteffort/pod1/c1").unwrap();
        assert_eq!(std::fs::read_to_string(cg.join("cpu.idle")).unwrap(), "1");
        assert!(matches!(set_idle(root.path(), "/kubepods/x"), Err(CgroupError::NoIdleFile(_))));
        assert!(matches!(set_idle(root.path(), "/a/../../etc"), Err(CgroupError::BadPath(_))));
        assert!(matches!(set_idle(root.path(), "relative"), Err(CgroupError::BadPath(_))));
    }
}
