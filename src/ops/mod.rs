//! Operator commands that read (and later repair) what the hook did: `inspect`, `list`.

pub mod audit;
pub mod forced_idle;
pub mod gc;
pub mod inspect;
pub mod list;
pub mod metrics;
pub mod reconcile;

use crate::kernel::KernelError;
use crate::state_dir::DirError;
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
        matches!(self, OpsError::Store(e) if e.is_corruption())
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod view_tests;

/// What the rebuild and reconcile tests start from: a temp dir holding a fake `/proc` (`proc/`),
/// the fake kernel over it, an open cache and an empty cgroup tree (`cg/`). Each test module adds
/// its own helpers in an `impl World` block.
#[cfg(test)]
pub(crate) mod test_world {
    use crate::kernel::fake::{FakeKernel, FakeProc};
    use crate::procfs::ProcFs;
    use crate::store::Store;

    pub(crate) struct World {
        pub(crate) dir: tempfile::TempDir,
        pub(crate) fp: FakeProc,
        pub(crate) proc: ProcFs,
        pub(crate) kernel: FakeKernel,
        pub(crate) store: Store,
    }

    impl World {
        pub(crate) fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let fp = FakeProc::new(dir.path().join("proc")).unwrap();
            let proc = fp.procfs();
            let kernel = FakeKernel::new(fp.procfs());
            let store = Store::open(&dir.path().join("cache.db")).unwrap();
            std::fs::create_dir_all(dir.path().join("cg")).unwrap();
            Self { dir, fp, proc, kernel, store }
        }
    }
}
