//! Ensure / clear / forget: Koordinator's Add, Assign and Clear made hook-safe, over the kernel
//! seam and the cache. Callers hold the state lock and wrap each call in one cache transaction.
//!
//! Proof of a group's cookie is never the cached value (cookie values can repeat after a cookie
//! dies) but a GET on a live member whose identity — pid plus start time — was checked. Every
//! SHARE runs on a relay thread ([`Relay`]) whose own cookie is verified before it is pushed anywhere.
//!
//! [`Engine::ensure`]: the target's identity and row read; the group's live members, oldest join
//! first, the source being the oldest holding a cookie (the group rules of `cookies::groups`);
//! with a source, the relay pulls its cookie and pushes it to every live member off it and to the
//! target, each verified, another source tried when one dies (at most `MAX_SOURCE_ATTEMPTS` times,
//! then [`EngineError::Unstable`]); without one, CREATE on the target, relayed to the members at 0.
//! The target's identity is checked again, then the rows are written and the group's `ok` counted.
//! [`Engine::converge`] moves a split group to its oldest holder's cookie the same way;
//! [`Engine::clear`] resets a task to 0 from a fresh thread (one whose own GET is not 0 first pulls 0
//! from the hook's process or pid 1, else [`EngineError::NoZeroSource`]); [`Engine::forget`] only
//! removes the row.

use std::io;

use crate::error::FailureReason;

mod relay;

use relay::RelayError;
pub use relay::{Adopted, Adoption, Relay, RelayOn};

use crate::cookies::groups::{Groups, Holder};
use crate::cookies::membership::{self, Liveness, Seen};
use crate::host::kernel::{CookieHex, CoreSched, KernelError, Scope};
use crate::host::procfs::ProcFs;
use crate::store::{Member, StoreError, Txn};
use crate::values::{Cookie, Labels, Pid};

/// How many times a share is retried when its source member dies under it.
const MAX_SOURCE_ATTEMPTS: usize = 4;

/// Why an engine operation failed.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A prctl failed.
    #[error("failed to {op}")]
    Kernel {
        /// What was being done.
        op: String,
        /// The kernel's answer.
        #[source]
        source: KernelError,
    },
    /// The cache failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// `/proc` could not be read.
    #[error("failed to read /proc for pid {pid}")]
    Proc {
        /// The pid.
        pid: Pid,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The container's init is gone (or is not the process the state named).
    #[error("container init pid {0} does not exist")]
    TargetGone(Pid),
    /// A GET after a change did not show the expected cookie.
    #[error("failed to verify the cookie of {what}: expected {expected}, found {found}")]
    Verify {
        /// Which task.
        what: String,
        /// Expected cookie.
        expected: CookieHex,
        /// Cookie found.
        found: CookieHex,
    },
    /// No task with cookie 0 could be found to reset the relay thread from.
    #[error("failed to find a task without a cookie to clear from (the hook itself and pid 1 have cookies)")]
    NoZeroSource,
    /// Every member picked as the source of a share died before the share completed.
    #[error("failed to share the cookie of group {group}: its members kept exiting ({attempts} attempts)")]
    Unstable {
        /// The group.
        group: String,
        /// Attempts made.
        attempts: usize,
    },
    /// The relay thread panicked.
    #[error("failed to run the relay thread: it panicked")]
    RelayPanicked,
}

impl EngineError {
    /// The metrics label of this failure.
    pub fn reason(&self) -> FailureReason {
        match self {
            EngineError::Kernel { source: KernelError::SchedExt(_), .. } => FailureReason::SchedExt,
            EngineError::Kernel { source, .. } if source.is_unsupported() => FailureReason::Unsupported,
            EngineError::Kernel { .. } => FailureReason::Kernel,
            EngineError::Store(_) => FailureReason::Cache,
            EngineError::Proc { .. } => FailureReason::Proc,
            EngineError::TargetGone(_) => FailureReason::TargetGone,
            EngineError::Verify { .. } => FailureReason::Verify,
            EngineError::NoZeroSource | EngineError::Unstable { .. } | EngineError::RelayPanicked => {
                FailureReason::Kernel
            }
        }
    }
}

/// What to ensure.
#[derive(Debug, Clone)]
pub struct EnsureRequest {
    /// Container id.
    pub container_id: String,
    /// Group key.
    pub group: String,
    /// Container init pid.
    pub pid: Pid,
    /// What the cache records besides the identity (cgroup, pod labels).
    pub labels: Labels,
}

/// How the cookie was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// A new cookie (first live member).
    Created,
    /// Shared from this member.
    Shared(String),
    /// The init already had the group's cookie.
    AlreadySet,
}

/// The result of an ensure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsureOutcome {
    /// The group's cookie, now on the init.
    pub cookie: Cookie,
    /// How.
    pub via: Via,
    /// Other members moved to the group's cookie (a group that had two cookies, or lost one).
    pub converged: Vec<String>,
    /// Members dropped because their init died or its pid was reused.
    pub dropped: Vec<String>,
    /// The group the container left, when it changed group.
    pub left: Option<String>,
}

/// The engine over one kernel, one `/proc` and one locked cache.
#[derive(Debug)]
pub struct Engine<'a, K: CoreSched> {
    kernel: &'a K,
    relay: Relay<'a, K>,
    store: &'a Txn<'a>,
}

pub(crate) fn kerr(op: impl Into<String>) -> impl FnOnce(KernelError) -> EngineError {
    let op = op.into();
    move |source| EngineError::Kernel { op, source }
}

/// What [`Engine::share_from_oldest`] did.
enum FromOldest {
    /// No live member holds a cookie: the live members as read.
    NoSource(Vec<Live>),
    /// The group's cookie, from its oldest holder, shared to `targets` (none: all had it).
    Shared {
        /// The oldest live member holding a cookie.
        source: Holder,
        /// The members given its cookie.
        targets: Vec<(String, Pid)>,
    },
}

/// A live member and the cookie a GET found on it.
struct Live {
    member: Member,
    cookie: Cookie,
}

impl<'a, K: CoreSched> Engine<'a, K> {
    /// An engine that relays each share through a fresh thread; the caller holds the lock on
    /// `store`.
    pub fn new(kernel: &'a K, proc: &'a ProcFs, store: &'a Txn<'a>) -> Self {
        Self::relaying_on(kernel, proc, store, RelayOn::FreshThread)
    }

    /// An engine whose shares are relayed on the thread `on` says ([`RelayOn::CallingThread`]
    /// in the hook, which exits after this one operation).
    pub fn relaying_on(kernel: &'a K, proc: &'a ProcFs, store: &'a Txn<'a>, on: RelayOn) -> Self {
        Self { kernel, relay: Relay::on(kernel, proc, on), store }
    }

    /// The kernel this engine acts through.
    pub fn kernel(&self) -> &'a K {
        self.kernel
    }

    /// Checks each cached member of `group`: identity, then a GET. Drops the dead ones.
    fn live_members(&self, group: &str, dropped: &mut Vec<String>) -> Result<Vec<Live>, EngineError> {
        let mut live = Vec::new();
        let members = self.store.members(group)?;
        for seen in membership::live_members(self.relay.proc(), self.kernel, &members) {
            match seen {
                Seen::Live(l) => live.push(Live { member: l.member.clone(), cookie: l.cookie }),
                Seen::Gone(m, how) => {
                    if matches!(how, Liveness::Reused) {
                        log::info!("dropping member {} of group {group}: pid {} was reused", m.container_id, m.pid);
                    } else {
                        log::info!("dropping member {} of group {group}: pid {} died", m.container_id, m.pid);
                    }
                    self.store.remove_member(&m.container_id)?;
                    dropped.push(m.container_id.clone());
                }
                Seen::Unreadable(m, source) => return Err(EngineError::Proc { pid: m.pid, source }),
                Seen::CookieUnreadable(m, e) => {
                    return Err(kerr(format!("read the cookie of member {} (pid {})", m.container_id, m.pid))(e));
                }
            }
        }
        Ok(live)
    }

    /// Counts a successful ensure of `req`'s group (best effort: the cookie is set and recorded).
    fn count_ok(&self, req: &EnsureRequest) {
        if let Err(e) = self.store.count(&req.group, true) {
            log::warn!("failed to count the ensure of container {} in group {}: {e}", req.container_id, req.group);
        }
    }

    /// The one share-from-the-oldest loop of ensure and converge: reads `group`'s live members
    /// (dropping the dead ones), takes its oldest member holding a cookie among those `counts`
    /// keeps ([`Groups::source`]), and shares that cookie to the members `targets` names; a read
    /// again when the source dies under the share, at most [`MAX_SOURCE_ATTEMPTS`] times.
    fn share_from_oldest(
        &self,
        group: &str,
        dropped: &mut Vec<String>,
        counts: impl Fn(&Member) -> bool,
        targets: impl Fn(&Groups, &Holder) -> Result<Vec<(String, Pid)>, EngineError>,
    ) -> Result<FromOldest, EngineError> {
        for _ in 0..MAX_SOURCE_ATTEMPTS {
            let live = self.live_members(group, dropped)?;
            crate::fault::point("after_read");
            crate::timing::mark("members: /proc + GET each");
            let groups = Groups::new(live.iter().filter(|l| counts(&l.member)).map(|l| (&l.member, l.cookie)));
            let Some(source) = groups.source(group).cloned() else { return Ok(FromOldest::NoSource(live)) };
            let targets = targets(&groups, &source)?;
            if !targets.is_empty() {
                match self.relay.share(source.init, source.cookie, &targets) {
                    Ok(()) => {}
                    Err(RelayError::SourceGone) => {
                        log::info!("member {} died while sharing from it; retrying", source.container_id);
                        continue;
                    }
                    Err(RelayError::Engine(e)) => return Err(e),
                }
            }
            return Ok(FromOldest::Shared { source, targets });
        }
        Err(EngineError::Unstable { group: group.to_string(), attempts: MAX_SOURCE_ATTEMPTS })
    }

    /// Gives the container's init its group's cookie (idempotent).
    pub fn ensure(&self, req: &EnsureRequest) -> Result<EnsureOutcome, EngineError> {
        crate::timing::mark("begin");
        let target = self.relay.identity(req.pid)?;
        let previous = self.store.member(&req.container_id)?;
        crate::timing::mark("target /proc + its row");
        let left = previous.as_ref().filter(|p| p.group != req.group).map(|p| p.group.clone());
        let mut dropped = Vec::new();

        // The container itself counts as a source when the cache already has it with this very
        // init (poststart after createRuntime).
        let counts = |m: &Member| m.container_id != req.container_id || m.pid == req.pid;
        let targets = |groups: &Groups, src: &Holder| {
            let mut targets: Vec<(String, Pid)> =
                groups.off(&req.group).into_iter().filter(|(id, _)| *id != req.container_id).collect();
            let current = self.kernel.get(req.pid).map_err(kerr(format!("read the cookie of pid {}", req.pid)))?;
            if current != src.cookie {
                targets.push((req.container_id.clone(), req.pid));
            }
            Ok(targets)
        };
        let (cookie, via, converged) = match self.share_from_oldest(&req.group, &mut dropped, counts, targets)? {
            FromOldest::Shared { source, targets } => {
                let via = if targets.is_empty() || source.container_id == req.container_id {
                    Via::AlreadySet
                } else {
                    Via::Shared(source.container_id.clone())
                };
                let converged: Vec<String> =
                    targets.into_iter().map(|(id, _)| id).filter(|id| *id != req.container_id).collect();
                (source.cookie, via, converged)
            }
            FromOldest::NoSource(live) => {
                self.kernel
                    .create(req.pid, Scope::ThreadGroup)
                    .map_err(kerr(format!("create a cookie for pid {}", req.pid)))?;
                let cookie = self.relay.verify(req.pid, None)?;
                // Live members that lost their cookie (still 0) join the new one.
                let targets: Vec<(String, Pid)> = live
                    .iter()
                    .filter(|l| l.member.container_id != req.container_id)
                    .map(|l| (l.member.container_id.clone(), l.member.pid))
                    .collect();
                if !targets.is_empty() {
                    match self.relay.share(target, cookie, &targets) {
                        Ok(()) => {}
                        Err(RelayError::SourceGone) => return Err(EngineError::TargetGone(req.pid)),
                        Err(RelayError::Engine(e)) => return Err(e),
                    }
                }
                (cookie, Via::Created, targets.into_iter().map(|(id, _)| id).collect())
            }
        };
        crate::fault::point("after_prctl");
        crate::timing::mark("relay thread + verify");
        for id in &converged {
            self.store.set_cookie(id, cookie)?;
        }
        // The init must still be the process we acted on.
        if !self.relay.same(target)? {
            return Err(EngineError::TargetGone(req.pid));
        }
        self.store.upsert_member(&Member {
            cookie,
            labels: req.labels.clone(),
            ..Member::new(&req.container_id, &req.group, req.pid, target.start_time)
        })?;
        crate::fault::point("mid_write");
        // The cookie is set and recorded: what is left is housekeeping, and its failure must
        // not make the caller roll the record back (the next member would create a second
        // cookie). `gc` drops an empty group row left behind.
        if let Some(old) = &left
            && let Err(e) = self.store.drop_group_if_empty(old)
        {
            log::warn!("failed to drop group {old} after container {} left it: {e}", req.container_id);
        }
        self.count_ok(req);
        Ok(EnsureOutcome { cookie, via, converged, dropped, left })
    }

    /// Moves every live member of `group` whose cookie differs from that of its oldest member
    /// holding one to that cookie: a group whose members ended up with two cookies (a cache that
    /// lost members and was refilled, a cookie changed behind the hook's back) converges without
    /// waiting for its next container. Returns the members moved, and the group's cookie (`None`
    /// when no live member holds one).
    pub fn converge(&self, group: &str) -> Result<(Option<Cookie>, Vec<String>), EngineError> {
        let mut dropped = Vec::new();
        match self.share_from_oldest(group, &mut dropped, |_| true, |groups, _| Ok(groups.off(group)))? {
            FromOldest::NoSource(_) => Ok((None, Vec::new())),
            FromOldest::Shared { source, targets } => {
                for (id, _) in &targets {
                    self.store.set_cookie(id, source.cookie)?;
                }
                Ok((Some(source.cookie), targets.into_iter().map(|(id, _)| id).collect()))
            }
        }
    }

    /// Gives the init cookie 0 (policy none, or a disabled QoS class) and removes the container
    /// from any group.
    pub fn clear(&self, container_id: &str, pid: Pid) -> Result<Option<Member>, EngineError> {
        let target = self.relay.identity(pid)?;
        let current = self.kernel.get(pid).map_err(kerr(format!("read the cookie of pid {pid}")))?;
        if current != 0 {
            let kernel = self.kernel;
            std::thread::scope(|s| {
                s.spawn(|| -> Result<(), EngineError> {
                    if kernel.get(0).map_err(kerr("read the relay thread's cookie"))? != 0 {
                        reset_to_zero(kernel)?;
                    }
                    kernel.share_to(pid, Scope::ThreadGroup).map_err(kerr(format!("clear the cookie of pid {pid}")))
                })
                .join()
                .unwrap_or(Err(EngineError::RelayPanicked))
            })?;
            self.relay.verify(pid, Some(0))?;
        }
        if !self.relay.same(target)? {
            return Err(EngineError::TargetGone(pid));
        }
        Ok(self.store.remove_member(container_id)?)
    }

    /// Removes a stopped container; drops its group when empty.
    pub fn forget(&self, container_id: &str) -> Result<Option<Member>, EngineError> {
        Ok(self.store.remove_member(container_id)?)
    }
}

/// Pulls cookie 0 into the calling (relay) thread from a task known to have none: the hook's
/// main thread, else pid 1. Verified with a GET on the relay thread itself.
fn reset_to_zero<K: CoreSched>(kernel: &K) -> Result<(), EngineError> {
    let me = std::process::id() as Pid;
    for candidate in [me, 1] {
        if kernel.get(candidate) == Ok(0) && kernel.share_from(candidate).is_ok() && kernel.get(0) == Ok(0) {
            return Ok(());
        }
    }
    Err(EngineError::NoZeroSource)
}
