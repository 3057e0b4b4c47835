//! The kernel seam: the four `PR_SCHED_CORE` operations behind one narrow trait.
//!
//! [`linux::Linux`] is the only implementation that calls `prctl`; [`fake::FakeKernel`]
//! (tests and the non-default `fake-kernel` feature only) models the same semantics in memory.
//! Everything above this module speaks [`CoreSched`] and never sees an errno.
//!
//! Besides the four operations and the support probe, the trait has `probe_kernel` (the kernel's own
//! probe beneath a guard, [`guard`]) and `held_off` (why a guard refuses cookies now), both defaulted
//! for a bare kernel. [`system()`] gives the kernel of a run: `OCH_FAKE_KERNEL` is read only with the
//! `fake-kernel` feature, so a release build cannot select the fake.

pub mod guard;
pub mod linux;

#[cfg(any(test, feature = "fake-kernel"))]
pub mod fake;
#[cfg(any(test, feature = "fake-kernel"))]
pub mod fake_file;

use std::fmt;

use crate::values::{Cookie, Pid};

/// Which tasks a CREATE or SHARE_TO applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only the thread `pid`.
    Thread,
    /// Every thread of the process whose thread-group leader is `pid`.
    ThreadGroup,
    /// Every process in the process group `pid`.
    ProcessGroup,
}

/// Why a core-scheduling call failed, in kernel terms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// EINVAL from every call: the kernel was built without `CONFIG_SCHED_CORE` (or is older than 5.14).
    #[error("core scheduling is not supported by this kernel (it needs CONFIG_SCHED_CORE, Linux 5.14 or later)")]
    Unsupported,
    /// ENODEV: the kernel supports core scheduling but SMT is off or absent.
    #[error("core scheduling is unavailable: SMT is off or this CPU has no SMT siblings")]
    NoSmt,
    /// Held off by the sched_ext guard ([`guard`]): a sched_ext scheduler is loaded (or its
    /// state cannot be told), and a cookie on such an SMT host can hang it. The text names it.
    #[error(
        "core scheduling is held off: {0}, and making a cookie on an SMT host that runs sched_ext can hang \
         it (https://github.com/sched-ext/scx/issues/3715); set sched_ext_guard = false in the config only \
         on a kernel known to be fixed"
    )]
    SchedExt(String),
    /// ESRCH: no such task.
    #[error("no such process {0}")]
    NoSuchProcess(Pid),
    /// EPERM: not allowed to ptrace-read the task.
    #[error("permission denied for process {0}")]
    PermissionDenied(Pid),
    /// Any other errno.
    #[error("prctl(PR_SCHED_CORE) failed with errno {errno} on process {pid}")]
    Other {
        /// The pid the call was about.
        pid: Pid,
        /// The raw errno.
        errno: i32,
    },
}

impl KernelError {
    /// True when the error means "this machine cannot do core scheduling at all".
    pub fn is_unsupported(&self) -> bool {
        matches!(self, KernelError::Unsupported | KernelError::NoSmt | KernelError::SchedExt(_))
    }
}

/// The four core-scheduling operations. `pid == 0` always means the calling thread.
///
/// Implementations must be usable from several threads: the engine runs every SHARE on a fresh
/// relay thread, because SHARE_FROM changes the cookie of the thread that calls it.
pub trait CoreSched: Sync {
    /// Cookie of the single thread `pid` (`0`: the calling thread).
    fn get(&self, pid: Pid) -> Result<Cookie, KernelError>;
    /// Give `pid` (in `scope`) a brand-new cookie.
    fn create(&self, pid: Pid, scope: Scope) -> Result<(), KernelError>;
    /// Push the calling thread's cookie to `pid` in `scope`.
    fn share_to(&self, pid: Pid, scope: Scope) -> Result<(), KernelError>;
    /// Pull the cookie of thread `pid` into the calling thread.
    fn share_from(&self, pid: Pid) -> Result<(), KernelError>;

    /// Side-effect-free support probe: a GET on the calling thread.
    fn probe(&self) -> Result<(), KernelError> {
        self.get(0).map(|_| ())
    }

    /// The kernel's own support probe, beneath any guard in front of it ([`guard::Guarded`]):
    /// whether the kernel could do core scheduling, whatever the guard says (the pages'
    /// `oci_coresched_hook_kernel_supported`). Never counted as a refusal.
    fn probe_kernel(&self) -> Result<(), KernelError> {
        self.probe()
    }

    /// Why a guard in front of the kernel refuses cookies now, as [`KernelError::SchedExt`] names
    /// it; `None` without a guard or while it lets cookies through. Read afresh at every call and
    /// never counted as a refusal: the long-running commands ask it before work the guard would
    /// refuse.
    fn held_off(&self) -> Option<String> {
        None
    }
}

/// `CoreSched` through a pointer: a borrowed kernel (`&K`) and the binary's boxed one.
macro_rules! forward_core_sched {
    ($($ptr:ty),*) => {$(
        impl<K: CoreSched + ?Sized> CoreSched for $ptr {
            fn get(&self, pid: Pid) -> Result<Cookie, KernelError> {
                (**self).get(pid)
            }
            fn create(&self, pid: Pid, scope: Scope) -> Result<(), KernelError> {
                (**self).create(pid, scope)
            }
            fn share_to(&self, pid: Pid, scope: Scope) -> Result<(), KernelError> {
                (**self).share_to(pid, scope)
            }
            fn share_from(&self, pid: Pid) -> Result<(), KernelError> {
                (**self).share_from(pid)
            }
            fn probe(&self) -> Result<(), KernelError> {
                (**self).probe()
            }
            fn probe_kernel(&self) -> Result<(), KernelError> {
                (**self).probe_kernel()
            }
            fn held_off(&self) -> Option<String> {
                (**self).held_off()
            }
        }
    )*};
}
forward_core_sched!(&K, Box<K>);

/// The kernel the binary uses behind the sched_ext guard ([`guard::Guarded`]) when `guard` names
/// the sysfs tree to read, or bare when the config opted out.
pub fn guarded(guard: Option<std::path::PathBuf>) -> Box<dyn CoreSched> {
    match guard {
        Some(sys_root) => Box::new(guard::Guarded::new(system(), sys_root)),
        None => system(),
    }
}

/// The kernel the binary uses: `prctl` on the running kernel. Builds with the non-default
/// `fake-kernel` feature (benchmarks, multi-process tests) use the shared fake instead when
/// `OCH_FAKE_KERNEL=<state file>` is set; a release build has no such code path.
pub fn system() -> Box<dyn CoreSched> {
    #[cfg(feature = "fake-kernel")]
    if let Some(file) = std::env::var_os("OCH_FAKE_KERNEL") {
        return Box::new(fake::FakeKernel::shared(crate::host::procfs::ProcFs::default(), file));
    }
    Box::new(linux::Linux)
}

/// Formats a cookie the way logs and JSON show it: hexadecimal, like util-linux `coresched`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieHex(pub Cookie);

impl fmt::Display for CookieHex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
