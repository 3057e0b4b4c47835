//! What the operator commands compute, one module each: [`audit`] and [`escapes`] (read-only
//! checks of the node), [`doctor`], [`gc`], [`inspect`], [`list`], [`metrics`] with
//! [`forced_idle`], and [`reconcile`] (the only one that changes cookies); [`OpsError`] is their
//! error. `commands.rs` opens the session each needs and prints the result.

pub mod audit;
pub mod doctor;
pub mod escapes;
pub mod forced_idle;
pub mod gc;
pub mod inspect;
pub mod list;
pub mod metrics;
pub mod reconcile;

use crate::host::kernel::KernelError;
use crate::host::state_dir::DirError;
use crate::store::StoreError;
use crate::values::Pid;

/// Why an operator command's read of the cache or of a process failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The state dir or its lock.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// The cache.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The engine (a convergence, a reconcile).
    #[error(transparent)]
    Engine(#[from] crate::cookies::engine::EngineError),
    /// `/proc` of a process could not be read.
    #[error("failed to read /proc for pid {pid}")]
    Proc {
        /// The process.
        pid: Pid,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No such process.
    #[error("failed to inspect pid {0}: no such process")]
    NoSuchProcess(Pid),
    /// A cookie could not be read.
    #[error("failed to read the cookie of pid {pid}")]
    Kernel {
        /// The process.
        pid: Pid,
        /// Why.
        #[source]
        source: KernelError,
    },
}

impl From<crate::session::SessionError> for OpsError {
    fn from(e: crate::session::SessionError) -> Self {
        match e {
            crate::session::SessionError::Dir(e) => OpsError::Dir(e),
            crate::session::SessionError::Store(e) => OpsError::Store(e),
        }
    }
}

impl crate::session::Damage for OpsError {
    fn is_damage(&self) -> bool {
        match self {
            OpsError::Store(e) => e.is_corruption(),
            OpsError::Engine(e) => crate::session::Damage::is_damage(e),
            _ => false,
        }
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod view_tests;
