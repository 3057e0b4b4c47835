//! The sched_ext guard: a [`CoreSched`] that refuses every call able to make or spread a cookie
//! (CREATE, SHARE_TO, SHARE_FROM, and the support probe that precedes them) while
//! [`crate::host::sched_ext`] says a sched_ext scheduler is loaded, or cannot say. Reads (GET)
//! pass. The state is read again at every call, so a long-running command follows a scheduler
//! being loaded and unloaded; only a kernel without sched_ext at all (no `/sys/kernel/sched_ext`,
//! a build-time fact that cannot change until a reboot) is remembered once seen, so that the
//! hook's several calls read sysfs once there.
//!
//! Every refusal is counted in this process ([`refusals`]); the hook counts its own through its
//! failure reason `sched_ext`.
//!
//! `held_off` says why it holds cookies off now (not counted) and `probe_kernel` is the kernel's own
//! probe beneath it, for `doctor` and the agents. [`crate::host::system::System::new`] wraps the
//! kernel in the guard unless the config's `sched_ext_guard` is false.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::{CoreSched, KernelError, Scope};
use crate::host::sched_ext::{SchedExt, State};
use crate::values::{Cookie, Pid};

static REFUSALS: AtomicU64 = AtomicU64::new(0);

/// Calls this process's guards refused.
pub fn refusals() -> u64 {
    REFUSALS.load(Ordering::Relaxed)
}

/// `inner` behind the guard, reading sched_ext under the sysfs tree `sys_root`.
#[derive(Debug)]
pub struct Guarded<K> {
    inner: K,
    sys_root: PathBuf,
    /// This kernel has no sched_ext at all (seen once, true until a reboot).
    absent: AtomicBool,
}

impl<K> Guarded<K> {
    /// `inner` guarded by the sched_ext state under `sys_root` (`/sys`).
    pub fn new(inner: K, sys_root: PathBuf) -> Self {
        Self { inner, sys_root, absent: AtomicBool::new(false) }
    }

    fn check(&self) -> Result<(), KernelError> {
        if self.absent.load(Ordering::Relaxed) {
            return Ok(());
        }
        let s = SchedExt::read(&self.sys_root);
        if s.state == State::Absent {
            self.absent.store(true, Ordering::Relaxed);
        }
        if s.blocks_cookies() {
            REFUSALS.fetch_add(1, Ordering::Relaxed);
            return Err(KernelError::SchedExt(s.describe()));
        }
        Ok(())
    }
}

impl<K: CoreSched> CoreSched for Guarded<K> {
    fn get(&self, pid: Pid) -> Result<Cookie, KernelError> {
        self.inner.get(pid)
    }

    fn create(&self, pid: Pid, scope: Scope) -> Result<(), KernelError> {
        self.check()?;
        self.inner.create(pid, scope)
    }

    fn share_to(&self, pid: Pid, scope: Scope) -> Result<(), KernelError> {
        self.check()?;
        self.inner.share_to(pid, scope)
    }

    fn share_from(&self, pid: Pid) -> Result<(), KernelError> {
        self.check()?;
        self.inner.share_from(pid)
    }

    /// The kernel's own answer first (a kernel without support says so, whatever sched_ext
    /// does), then the guard's.
    fn probe(&self) -> Result<(), KernelError> {
        self.inner.probe()?;
        self.check()
    }

    fn probe_kernel(&self) -> Result<(), KernelError> {
        self.inner.probe_kernel()
    }

    fn held_off(&self) -> Option<String> {
        let s = SchedExt::read(&self.sys_root);
        s.blocks_cookies().then(|| s.describe())
    }
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
