//! Shared support for the integration tests, a file per thing it provides: what a test needs
//! from the host ([`need`]: [`require`]), which tests must not overlap ([`overlap`]), the one
//! process runner ([`command`]: [`run_command`]), the one world fixture ([`world`]: [`World`]; its
//! fake-kernel side is in `tests/fakeworld`), busybox bundles wired to the real hook binary
//! ([`bundle`]), runc / crun ([`runtime`]) and podman ([`podman`]) with private roots and a
//! timeout, and the skip ([`skip`]), wait ([`wait`]), HTTP ([`http`]), promtool ([`promtool`]) and
//! rootless-user ([`rootless`]) helpers.
//!
//! Every command runs with stdin from `/dev/null` (tests run without a terminal in CI) or its input
//! written from a thread, stdout and stderr go to files (a detached container inherits them: pipes
//! would block), and a world records each of its commands so that a failing check prints the whole
//! transcript plus the hook's log.
//!
//! Set `OCSH_KEEP_TEMP=1` to keep the temp dirs for inspection.

#![allow(dead_code)]

use std::fmt;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub mod http;
pub mod promtool;
pub mod rootless;
mod skip;
pub mod wait;
pub use skip::skip;

/// The hook binary under test.
pub const HOOK: &str = env!("CARGO_BIN_EXE_oci-coresched-hook");

/// The crate root (fixtures, hooks.d).
pub const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// Timeout for one runtime command (create, start, run of a short container, ...).
pub const RUNTIME_TIMEOUT: Duration = Duration::from_secs(60);

/// Timeout for one run of the hook binary itself.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(20);

/// Annotations of a Kubernetes-like pod in namespace `tenant-a` whose container names group `web`.
pub fn k8s_annotations() -> Vec<(String, String)> {
    [
        ("io.kubernetes.cri.container-type", "container"),
        ("io.kubernetes.cri.container-name", "web"),
        ("io.kubernetes.cri.sandbox-id", "5f1c0e7d9a8b6c4d2e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d"),
        ("io.kubernetes.cri.sandbox-name", "web-0"),
        ("io.kubernetes.cri.sandbox-namespace", "tenant-a"),
        ("io.kubernetes.cri.sandbox-uid", "3f2b7c1e-5d4a-4e8b-9c6d-1a2b3c4d5e6f"),
        ("io.kubernetes.pod.namespace", "tenant-a"),
        ("io.kubernetes.pod.name", "web-0"),
        ("io.kubernetes.pod.uid", "3f2b7c1e-5d4a-4e8b-9c6d-1a2b3c4d5e6f"),
        ("io.kubernetes.container.name", "web"),
        ("oci-coresched-hook/group", "web"),
        ("koordinator.sh/qosClass", "LS"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Replaces (or adds) one annotation.
pub fn set_annotation(ann: &mut Vec<(String, String)>, key: &str, value: &str) {
    ann.retain(|(k, _)| k != key);
    ann.push((key.to_string(), value.to_string()));
}

mod need;
pub use need::*;
mod overlap;
pub use overlap::*;
mod command;
pub use command::*;
#[macro_use]
mod world;
pub use world::*;
mod bundle;
pub use bundle::*;
mod runtime;
pub use runtime::*;
mod podman;
pub use podman::*;
