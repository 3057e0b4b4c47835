//! `inspect PID`: the cookie of every thread of a process and which cached container and group
//! it belongs to (like util-linux `coresched get`, but knowing our groups).
//!
//! Every thread is read (`uniform`: whether they all match); the cached member whose pid it is, and
//! whether it is this very process (`same_process`). The cache is read under the lock without a
//! transaction.

use serde::Serialize;

use super::OpsError;
use crate::host::kernel::{CookieHex, CoreSched};
use crate::host::procfs::ProcFs;
use crate::store::Store;
use crate::values::Pid;

/// One thread's cookie.
#[derive(Debug, Serialize)]
pub struct ThreadCookie {
    /// Thread id.
    pub tid: Pid,
    /// Cookie, hexadecimal.
    pub cookie: String,
}

/// The cached container a pid is the init of.
#[derive(Debug, Serialize)]
pub struct CachedContainer {
    /// Container id.
    pub id: String,
    /// Group key.
    pub group: String,
    /// Cookie recorded at the last check.
    pub cookie_cached: String,
    /// Whether the cached start time still matches (false: the pid was reused).
    pub same_process: bool,
    /// Other members of the group.
    pub group_members: Vec<String>,
    /// The forced idle charged to the group's containers, seconds (`None`: not available).
    #[serde(rename = "group_force_idle_seconds")]
    pub group_forced_idle_seconds: Option<f64>,
}

/// What `inspect` reports.
#[derive(Debug, Serialize)]
pub struct Report {
    /// The pid asked about.
    pub pid: Pid,
    /// Cookie of the thread-group leader.
    pub cookie: String,
    /// Whether every thread has the leader's cookie.
    pub uniform: bool,
    /// Per thread.
    pub threads: Vec<ThreadCookie>,
    /// The cached container, if the pid is a known init.
    pub container: Option<CachedContainer>,
}

/// Builds the report.
pub fn inspect<K: CoreSched>(
    pid: Pid,
    kernel: &K,
    proc: &ProcFs,
    store: Option<&Store>,
    forced_idle: &crate::ops::forced_idle::ForcedIdle,
) -> Result<Report, OpsError> {
    let proc_err = |source| OpsError::Proc { pid, source };
    let me = proc.task(pid).map_err(proc_err)?.ok_or(OpsError::NoSuchProcess(pid))?;
    let leader = kernel.get(pid).map_err(|source| OpsError::Kernel { pid, source })?;
    let mut threads = Vec::new();
    for tid in proc.threads(pid).map_err(proc_err)? {
        // A thread may exit between listing and GET; skip it rather than fail.
        if let Ok(c) = kernel.get(tid) {
            threads.push(ThreadCookie { tid, cookie: CookieHex(c).to_string() });
        }
    }
    let leader_hex = CookieHex(leader).to_string();
    let uniform = threads.iter().all(|t| t.cookie == leader_hex);
    let mut container = None;
    if let Some(store) = store
        && let Some(m) = store.all_members()?.into_iter().find(|m| m.pid == pid)
    {
        let group_members =
            store.members(&m.group)?.into_iter().map(|o| o.container_id).filter(|id| *id != m.container_id).collect();
        container = Some(CachedContainer {
            same_process: m.init() == me,
            group_forced_idle_seconds: forced_idle.of(&m.group),
            id: m.container_id,
            group: m.group,
            cookie_cached: CookieHex(m.cookie).to_string(),
            group_members,
        });
    }
    Ok(Report { pid, cookie: leader_hex, uniform, threads, container })
}

/// Human-readable form.
pub fn render(r: &Report) -> String {
    let mut s = format!("pid {}: cookie {}", r.pid, r.cookie);
    if !r.uniform {
        s.push_str(" (threads differ)");
    }
    s.push('\n');
    for t in &r.threads {
        s.push_str(&format!("  thread {}: {}\n", t.tid, t.cookie));
    }
    match &r.container {
        Some(c) => {
            s.push_str(&format!("container {} in group {} (cached cookie {})\n", c.id, c.group, c.cookie_cached));
            if !c.same_process {
                s.push_str("  warning: the cached start time differs: this pid now belongs to another process\n");
            }
            if !c.group_members.is_empty() {
                s.push_str(&format!("  other members: {}\n", c.group_members.join(", ")));
            }
            if let Some(idle) = c.group_forced_idle_seconds {
                s.push_str(&format!("  forced idle charged to the group: {idle:.3} s\n"));
            }
        }
        None => s.push_str("not a container init known to the cache\n"),
    }
    s
}
