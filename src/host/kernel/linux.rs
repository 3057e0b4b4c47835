//! The real kernel: the only module in the project that calls `prctl(PR_SCHED_CORE, …)`.
//!
//! GET and SHARE_FROM always pass the thread scope; errno maps to [`KernelError`] in one place
//! (`map_errno`: EINVAL unsupported, ENODEV no SMT, ESRCH no such process, EPERM denied).

use super::{Cookie, CoreSched, KernelError, Scope};
use crate::values::Pid;

/// `prctl(PR_SCHED_CORE)` on the running kernel.
#[derive(Debug, Default, Clone, Copy)]
pub struct Linux;

fn scope_arg(scope: Scope) -> libc::c_ulong {
    let v = match scope {
        Scope::Thread => libc::PR_SCHED_CORE_SCOPE_THREAD,
        Scope::ThreadGroup => libc::PR_SCHED_CORE_SCOPE_THREAD_GROUP,
        Scope::ProcessGroup => libc::PR_SCHED_CORE_SCOPE_PROCESS_GROUP,
    };
    v as libc::c_ulong
}

fn map_errno(pid: Pid) -> KernelError {
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    match errno {
        libc::EINVAL => KernelError::Unsupported,
        libc::ENODEV => KernelError::NoSmt,
        libc::ESRCH => KernelError::NoSuchProcess(pid),
        libc::EPERM => KernelError::PermissionDenied(pid),
        errno => KernelError::Other { pid, errno },
    }
}

fn prctl(cmd: libc::c_int, pid: Pid, scope: libc::c_ulong, out: libc::c_ulong) -> Result<(), KernelError> {
    let pid_arg = libc::c_ulong::try_from(pid).map_err(|_| KernelError::NoSuchProcess(pid))?;
    // SAFETY: PR_SCHED_CORE takes (cmd, pid, scope, uaddr). For GET, `out` is the address of a
    // live, writable, properly aligned u64 owned by the caller for the duration of the call; for
    // every other command it is 0. No other memory is touched by the kernel.
    let rc = unsafe { libc::prctl(libc::PR_SCHED_CORE, cmd as libc::c_ulong, pid_arg, scope, out) };
    if rc == 0 { Ok(()) } else { Err(map_errno(pid)) }
}

impl CoreSched for Linux {
    fn get(&self, pid: Pid) -> Result<Cookie, KernelError> {
        let mut cookie: u64 = 0;
        let addr = std::ptr::addr_of_mut!(cookie) as libc::c_ulong;
        // GET must use the thread scope; anything else is EINVAL.
        prctl(libc::PR_SCHED_CORE_GET, pid, scope_arg(Scope::Thread), addr)?;
        Ok(cookie)
    }

    fn create(&self, pid: Pid, scope: Scope) -> Result<(), KernelError> {
        prctl(libc::PR_SCHED_CORE_CREATE, pid, scope_arg(scope), 0)
    }

    fn share_to(&self, pid: Pid, scope: Scope) -> Result<(), KernelError> {
        prctl(libc::PR_SCHED_CORE_SHARE_TO, pid, scope_arg(scope), 0)
    }

    fn share_from(&self, pid: Pid) -> Result<(), KernelError> {
        // SHARE_FROM only accepts the thread scope: it pulls into the calling thread.
        prctl(libc::PR_SCHED_CORE_SHARE_FROM, pid, scope_arg(Scope::Thread), 0)
    }
}
