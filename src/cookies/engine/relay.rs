//! The relay: every cookie pushed to another task goes through a relay thread that pulls the
//! cookie from a live source (pid + start time checked after the pull), verifies its own cookie
//! with a GET, and only then pushes it; each target is verified afterwards. No cache: the engine
//! uses it for ensure, `reconcile` and the follower for processes that entered a container
//! without a hook.
//!
//! The relay thread is a fresh one per share in long-running commands, whose own threads must
//! keep cookie 0. A hook process exits right after its one ensure and nothing runs on its behalf
//! afterwards, so there the calling thread relays ([`RelayOn::CallingThread`]): it then holds
//! the group's cookie for the rest of its short life, which only restricts where the hook itself
//! may run. Each share still pulls before it pushes and checks what it pulled.

use crate::cookies::membership;
use crate::host::kernel::{CookieHex, CoreSched, KernelError, Scope};
use crate::host::procfs::{ProcFs, TaskId};
use crate::values::{Cookie, Pid};

use super::{EngineError, kerr};

/// The relay over one kernel and one `/proc`.
#[derive(Debug)]
pub struct Relay<'a, K: CoreSched> {
    kernel: &'a K,
    proc: &'a ProcFs,
    on: RelayOn,
}

/// Which thread relays a share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelayOn {
    /// The calling thread, which keeps the last cookie it relayed: only for a process that exits
    /// after its work (the hook).
    CallingThread,
    /// A fresh thread per share: the calling thread keeps its cookie (long-running commands).
    FreshThread,
}

impl<'a, K: CoreSched> Relay<'a, K> {
    /// A relay over `kernel` and `proc` that shares through a fresh thread each time.
    pub fn new(kernel: &'a K, proc: &'a ProcFs) -> Self {
        Self::on(kernel, proc, RelayOn::FreshThread)
    }

    /// A relay over `kernel` and `proc` that shares on the thread `on` says.
    pub fn on(kernel: &'a K, proc: &'a ProcFs, on: RelayOn) -> Self {
        Self { kernel, proc, on }
    }

    /// The `/proc` the relay checks identities in.
    pub(crate) fn proc(&self) -> &'a ProcFs {
        self.proc
    }

    pub(crate) fn identity(&self, pid: Pid) -> Result<TaskId, EngineError> {
        self.proc.task(pid).map_err(|source| EngineError::Proc { pid, source })?.ok_or(EngineError::TargetGone(pid))
    }

    pub(crate) fn same(&self, id: TaskId) -> Result<bool, EngineError> {
        membership::liveness(self.proc, id).known().map_err(|source| EngineError::Proc { pid: id.pid, source })
    }

    /// GET on `pid` and check it (`None`: any non-zero cookie).
    pub(crate) fn verify(&self, pid: Pid, expected: Option<Cookie>) -> Result<Cookie, EngineError> {
        let found = self.kernel.get(pid).map_err(kerr(format!("read back the cookie of pid {pid}")))?;
        match expected {
            Some(want) if found != want => Err(EngineError::Verify {
                what: format!("pid {pid}"),
                expected: CookieHex(want),
                found: CookieHex(found),
            }),
            None if found == 0 => {
                Err(EngineError::Verify { what: format!("pid {pid}"), expected: CookieHex(1), found: CookieHex(0) })
            }
            _ => Ok(found),
        }
    }

    /// On the relay thread: pull `cookie` from `src`, check it, push it to every target; then
    /// verify each target from this thread.
    pub(super) fn share(&self, src: TaskId, cookie: Cookie, targets: &[(String, Pid)]) -> Result<(), RelayError> {
        let (kernel, proc) = (self.kernel, self.proc);
        let relay = || -> Result<(), RelayError> {
            kernel.share_from(src.pid).map_err(|e| match e {
                KernelError::NoSuchProcess(_) => RelayError::SourceGone,
                e => RelayError::Engine(kerr(format!("pull the cookie of pid {}", src.pid))(e)),
            })?;
            // The pid must still be the member we verified, or we pulled a stranger's cookie.
            let same = membership::liveness(proc, src)
                .known()
                .map_err(|source| RelayError::Engine(EngineError::Proc { pid: src.pid, source }))?;
            if !same {
                return Err(RelayError::SourceGone);
            }
            let mine = kernel.get(0).map_err(|e| RelayError::Engine(kerr("read the relay thread's cookie")(e)))?;
            if mine != cookie {
                return Err(RelayError::Engine(EngineError::Verify {
                    what: "the relay thread".into(),
                    expected: CookieHex(cookie),
                    found: CookieHex(mine),
                }));
            }
            for (id, pid) in targets {
                kernel
                    .share_to(*pid, Scope::ThreadGroup)
                    .map_err(|e| RelayError::Engine(kerr(format!("share the cookie to {id} (pid {pid})"))(e)))?;
            }
            Ok(())
        };
        match self.on {
            RelayOn::CallingThread => relay()?,
            RelayOn::FreshThread => std::thread::scope(|s| s.spawn(relay).join())
                .unwrap_or(Err(RelayError::Engine(EngineError::RelayPanicked)))?,
        }
        for (_, pid) in targets {
            self.verify(*pid, Some(cookie)).map_err(RelayError::Engine)?;
        }
        Ok(())
    }

    /// Gives each target process (thread-group scope) the cookie of the live task `src`, which
    /// must be `cookie` (non-zero; checked on the relay thread before anything is pushed). Used by
    /// `reconcile` for processes that entered a container without a hook (`runc exec`, `nsenter`)
    /// and by the follower.
    ///
    /// One relay per target, so a target that exits meanwhile ([`Adopted::Exited`], not an
    /// error) does not stop the others. `Err` only when `src` is gone or changed
    /// ([`EngineError::TargetGone`]) or `cookie` is 0; per-target failures are in the result.
    pub fn adopt(&self, src: TaskId, cookie: Cookie, targets: &[TaskId]) -> Result<Vec<Adoption>, EngineError> {
        if cookie == 0 {
            return Err(EngineError::Verify {
                what: format!("pid {} (the source to adopt from)", src.pid),
                expected: CookieHex(1),
                found: CookieHex(0),
            });
        }
        let mut out = Vec::with_capacity(targets.len());
        for &target in targets {
            let result = if !self.same(target)? {
                Adopted::Exited
            } else {
                match self.share(src, cookie, &[("process".to_string(), target.pid)]) {
                    Ok(()) if self.same(target)? => Adopted::Done,
                    Ok(()) => {
                        log::warn!("pid {} was reused while it was given cookie {}", target.pid, CookieHex(cookie));
                        Adopted::Exited
                    }
                    Err(RelayError::SourceGone) => return Err(EngineError::TargetGone(src.pid)),
                    Err(RelayError::Engine(_)) if !self.same(target)? => Adopted::Exited,
                    Err(RelayError::Engine(e)) => Adopted::Failed(e),
                }
            };
            out.push(Adoption { pid: target.pid, result });
        }
        Ok(out)
    }
}

/// What [`Relay::adopt`] did to one target.
#[derive(Debug)]
pub enum Adopted {
    /// The process has the cookie now (verified with a GET).
    Done,
    /// The process exited, or its pid was reused, before the share completed.
    Exited,
    /// The share failed.
    Failed(EngineError),
}

/// One target of [`Relay::adopt`] and what happened to it.
#[derive(Debug)]
pub struct Adoption {
    /// The target process.
    pub pid: Pid,
    /// The result.
    pub result: Adopted,
}

/// A relay that failed because its source died (retry with another member) or for good.
pub(super) enum RelayError {
    SourceGone,
    Engine(EngineError),
}
