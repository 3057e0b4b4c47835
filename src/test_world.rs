//! The unit tests' one world: a temp dir holding a fake `/proc` (`proc/`), the fake kernel over
//! it, an open cache (`cache.db`) and an empty cgroup tree (`cg/`), and the [`System`] over them.
//! Each test module adds its own helpers in an `impl World` block.

use std::path::PathBuf;

use crate::kernel::fake::{FakeKernel, FakeProc};
use crate::procfs::ProcFs;
use crate::store::Store;
use crate::system::System;

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

    /// `name` below the temp dir.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The [`System`] over this world: its kernel, `/proc` and `cg/`, the state dir `state_dir`,
    /// no runtime roots.
    pub(crate) fn sys(&self, state_dir: PathBuf) -> System<&FakeKernel> {
        System {
            kernel: &self.kernel,
            proc: self.fp.procfs(),
            cgroup_root: self.path("cg"),
            state_dir,
            runtime_roots: Vec::new(),
        }
    }
}
