//! The unit tests' one world: a temp dir holding a fake `/proc` (`proc/`), the fake kernel over
//! it and an empty cgroup tree (`cg/`), the [`System`] over them ([`Ground`]); and, for tests of
//! what reads and writes the cache, the same with an open cache `cache.db` ([`World`], which
//! derefs to its ground). Tests of the hook and the session, whose code opens the cache in a
//! state dir of its own, take the ground alone. Each test module adds its own helpers in an
//! `impl World` or `impl Ground` block.

use std::path::PathBuf;

use crate::host::kernel::fake::{FakeKernel, FakeProc};
use crate::host::procfs::ProcFs;
use crate::host::system::System;
use crate::store::Store;

/// A temp dir with a fake `/proc`, the fake kernel over it and a cgroup tree; no cache.
pub(crate) struct Ground {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) fp: FakeProc,
    pub(crate) proc: ProcFs,
    pub(crate) kernel: FakeKernel,
}

/// A [`Ground`] with an open cache, `cache.db`.
pub(crate) struct World {
    ground: Ground,
    pub(crate) store: Store,
}

impl Ground {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fp = FakeProc::new(dir.path().join("proc")).unwrap();
        let proc = fp.procfs();
        let kernel = FakeKernel::new(fp.procfs());
        std::fs::create_dir_all(dir.path().join("cg")).unwrap();
        Self { dir, fp, proc, kernel }
    }

    /// `name` below the temp dir.
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The [`System`] over this ground: its kernel, `/proc` and `cg/`, the state dir
    /// `state_dir`, no runtime roots.
    pub(crate) fn sys(&self, state_dir: PathBuf) -> System<&FakeKernel> {
        System {
            kernel: &self.kernel,
            proc: self.fp.procfs(),
            cgroup_root: self.path("cg"),
            state_dir,
            runtime_roots: Vec::new(),
            sys_root: self.path("sys"),
        }
    }
}

impl World {
    pub(crate) fn new() -> Self {
        let ground = Ground::new();
        let store = Store::open(&ground.path("cache.db")).unwrap();
        Self { ground, store }
    }

    /// The ground and the cache, for a test that keeps them apart.
    pub(crate) fn into_parts(self) -> (Ground, Store) {
        (self.ground, self.store)
    }
}

impl std::ops::Deref for World {
    type Target = Ground;

    fn deref(&self) -> &Ground {
        &self.ground
    }
}
