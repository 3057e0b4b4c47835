//! Reads of `/proc` (root passed in, so tests point it at a temp dir): task identity by
//! pid + start time, the threads of a process, and its cgroup (the cgroup tree itself is
//! [`crate::host::cgroup`]'s).
//!
//! [`CgroupReader`] is the follower's per-event read of `/proc/PID/cgroup`, into reused buffers.

use std::io;
use std::path::{Path, PathBuf};

use crate::values::Pid;

/// A task identity that survives pid reuse: the pid plus its start time
/// (`/proc/PID/stat` field 22, clock ticks since boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskId {
    /// The pid in the host pid namespace.
    pub pid: Pid,
    /// Start time in clock ticks since boot.
    pub start_time: u64,
}

/// A process, its parent and its command name (`/proc/PID/stat` fields 2, 4 and 22).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    /// The process's identity.
    pub id: TaskId,
    /// Its parent's pid (0 for the first process of a pid namespace).
    pub ppid: Pid,
    /// Its command name (`comm`: at most 15 bytes, set by the kernel from the executable's name).
    pub comm: String,
}

/// A `/proc` tree.
#[derive(Debug, Clone)]
pub struct ProcFs {
    root: PathBuf,
    /// The host path of the reader's cgroup namespace root, when that is not the host's
    /// ([`crate::host::cgroup_ns`]): `/proc/PID/cgroup` paths are relative to it.
    cgroup_ns_root: Option<String>,
}

impl Default for ProcFs {
    fn default() -> Self {
        Self::new("/proc")
    }
}

/// The fields of a `/proc/PID/stat` line after the command name, field 3 first. An iterator, so
/// that reading one field parses the line only up to it (collecting all ~50 of them into a `Vec`
/// cost 4,700 instructions more a read, and the share path reads 29).
fn stat_fields(stat: &str) -> Option<std::str::SplitAsciiWhitespace<'_>> {
    // The command name (field 2) is in parentheses and may itself contain spaces and ')'.
    let close = stat.rfind(')')?;
    Some(stat[close + 1..].split_ascii_whitespace())
}

/// Reads a small text file, such as one under `/proc`, in as few syscalls as possible: `/proc`
/// files report size 0, so `fs::read_to_string` would probe with 32-byte reads and a `statx`;
/// here a 1 KiB buffer takes a whole `stat` line (typically ~300 bytes) in one `read`, plus the
/// `read` that sees the end. Longer files are still read whole.
fn read_small(path: &Path) -> io::Result<String> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(1024);
    std::fs::File::open(path)?.read_to_end(&mut buf)?;
    String::from_utf8(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

impl ProcFs {
    /// A `/proc` tree rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into(), cgroup_ns_root: None }
    }

    /// The same tree read from a private cgroup namespace whose root is the host's cgroup
    /// `ns_root`: [`ProcFs::cgroup`] then gives host paths.
    pub fn with_cgroup_ns_root(mut self, ns_root: String) -> Self {
        self.cgroup_ns_root = Some(ns_root);
        self
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn read(&self, pid: Pid, file: &str) -> io::Result<Option<String>> {
        match read_small(&self.root.join(pid.to_string()).join(file)) {
            Ok(s) => Ok(Some(s)),
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn stat_field(&self, pid: Pid, field: usize) -> io::Result<Option<u64>> {
        let Some(stat) = self.read(pid, "stat")? else { return Ok(None) };
        // Field numbers are 1-based and the fields after the name start at field 3.
        let value = stat_fields(&stat)
            .and_then(|mut f| f.nth(field - 3).and_then(|v| v.parse::<i64>().ok()))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("malformed /proc/{pid}/stat")))?;
        Ok(Some(value as u64))
    }

    /// True when `/proc/PID` exists (a live process or thread), without reading anything.
    pub fn exists(&self, pid: Pid) -> bool {
        pid > 0 && std::fs::symlink_metadata(self.root.join(pid.to_string())).is_ok()
    }

    /// The identity of `pid` now, or `None` when no such process exists.
    pub fn task(&self, pid: Pid) -> io::Result<Option<TaskId>> {
        if pid <= 0 {
            return Ok(None);
        }
        Ok(self.stat_field(pid, 22)?.map(|start_time| TaskId { pid, start_time }))
    }

    /// The identity, parent and command name of `pid`, or `None` when no such process exists.
    pub fn lineage(&self, pid: Pid) -> io::Result<Option<Lineage>> {
        if pid <= 0 {
            return Ok(None);
        }
        let Some(stat) = self.read(pid, "stat")? else { return Ok(None) };
        let bad = || io::Error::new(io::ErrorKind::InvalidData, format!("malformed /proc/{pid}/stat"));
        let open = stat.find('(').ok_or_else(bad)?;
        let close = stat.rfind(')').ok_or_else(bad)?;
        let comm = stat.get(open + 1..close).ok_or_else(bad)?.to_string();
        let fields: Vec<&str> = stat_fields(&stat).ok_or_else(bad)?.collect();
        let num = |field: usize| fields.get(field - 3).and_then(|v| v.parse::<u64>().ok()).ok_or_else(bad);
        Ok(Some(Lineage { id: TaskId { pid, start_time: num(22)? }, ppid: num(4)? as Pid, comm }))
    }

    /// The CPU time `pid` used, user + system, in clock ticks (`/proc/PID/stat` fields 14, 15).
    pub fn cpu_ticks(&self, pid: Pid) -> io::Result<Option<u64>> {
        let (Some(user), Some(system)) = (self.stat_field(pid, 14)?, self.stat_field(pid, 15)?) else {
            return Ok(None);
        };
        Ok(Some(user + system))
    }

    /// The arguments of `pid` (`/proc/PID/cmdline`, lossily UTF-8), or `None` when no such
    /// process exists. A kernel thread has none.
    pub fn cmdline(&self, pid: Pid) -> io::Result<Option<Vec<String>>> {
        match std::fs::read(self.root.join(pid.to_string()).join("cmdline")) {
            Ok(b) => Ok(Some(
                b.split(|c| *c == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect(),
            )),
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The running kernel's release (`sys/kernel/osrelease`, what `uname -r` prints).
    pub fn kernel_release(&self) -> io::Result<String> {
        Ok(std::fs::read_to_string(self.root.join("sys/kernel/osrelease"))?.trim().to_string())
    }

    /// The process group of `pid`, or `None` when no such process exists.
    pub fn process_group(&self, pid: Pid) -> io::Result<Option<Pid>> {
        Ok(self.stat_field(pid, 5)?.map(|v| v as Pid))
    }

    /// The thread ids of process `pid` (empty when it does not exist).
    pub fn threads(&self, pid: Pid) -> io::Result<Vec<Pid>> {
        let dir = self.root.join(pid.to_string()).join("task");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
                return Ok(Vec::new());
            }
            Err(e) => return Err(e),
        };
        let mut tids: Vec<Pid> = entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
        tids.sort_unstable();
        Ok(tids)
    }

    /// Every pid currently listed at the top of the tree.
    pub fn pids(&self) -> io::Result<Vec<Pid>> {
        let mut pids: Vec<Pid> =
            std::fs::read_dir(&self.root)?.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
        pids.sort_unstable();
        Ok(pids)
    }

    /// The cgroup of `pid` as a path relative to the cgroup mount: the unified (v2) entry when
    /// there is one, else the v1 `cpu` controller's. `None` when the process does not exist.
    /// Read from a private cgroup namespace ([`ProcFs::with_cgroup_ns_root`]), the host path.
    pub fn cgroup(&self, pid: Pid) -> io::Result<Option<String>> {
        let Some(text) = self.read(pid, "cgroup")? else { return Ok(None) };
        Ok(crate::host::cgroup::parse_proc_file(&text).map(|p| match &self.cgroup_ns_root {
            Some(root) => crate::host::cgroup::join(root, &p),
            None => p,
        }))
    }

    /// The cgroup of `pid` exactly as this process's `/proc` shows it (relative to its own cgroup
    /// namespace).
    pub fn cgroup_as_shown(&self, pid: Pid) -> io::Result<Option<String>> {
        Ok(self.read(pid, "cgroup")?.and_then(|t| crate::host::cgroup::parse_proc_file(&t)))
    }
}

/// [`ProcFs::cgroup`] for a caller that reads it for every process event (the follower): the
/// path and the buffer are reused, and the file is read with one `read` when it fits (a
/// `/proc/PID/cgroup` is produced whole at the first read, so a short read is all of it).
#[derive(Debug)]
pub struct CgroupReader {
    proc: ProcFs,
    path: PathBuf,
    pid_text: String,
    buf: Vec<u8>,
    joined: String,
}

impl CgroupReader {
    /// A reader of `proc`'s cgroup files.
    pub fn new(proc: &ProcFs) -> Self {
        Self {
            proc: proc.clone(),
            path: PathBuf::new(),
            pid_text: String::new(),
            buf: vec![0; 4096],
            joined: String::new(),
        }
    }

    /// What [`ProcFs::cgroup`] returns, borrowed from the reader until the next call.
    pub fn read(&mut self, pid: Pid) -> io::Result<Option<&str>> {
        use std::fmt::Write as _;
        use std::io::Read as _;
        self.pid_text.clear();
        let _ = write!(self.pid_text, "{pid}");
        self.path.as_mut_os_string().clear();
        self.path.push(&self.proc.root);
        self.path.push(&self.pid_text);
        self.path.push("cgroup");
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut len = 0;
        loop {
            match file.read(&mut self.buf[len..]) {
                Ok(0) => break,
                Ok(n) => {
                    len += n;
                    if len < self.buf.len() {
                        break;
                    }
                    self.buf.resize(self.buf.len() * 2, 0);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        let text = std::str::from_utf8(&self.buf[..len]).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let Some(path) = crate::host::cgroup::in_proc_file(text) else { return Ok(None) };
        Ok(Some(match &self.proc.cgroup_ns_root {
            Some(root) => {
                self.joined = crate::host::cgroup::join(root, path);
                &self.joined
            }
            None => path,
        }))
    }
}

#[cfg(test)]
#[path = "procfs_tests.rs"]
mod tests;
