//! The plan carried out: a poststop's stop recorded without the lock; a `sched_idle` repeat's
//! `cpu.idle` written without it; a clear or an ensure under
//! the lock, in one cache transaction ([`Session::write`]: the engine, then the pod's shim and
//! `cpu.idle`), followed, still under the lock, by the receipt a later stage checks instead of
//! opening the cache ([`crate::cookies::receipt::record`]). A failure is counted
//! ([`Session::count_failure`]); a step after the cookie was set and recorded comes back as
//! [`Done::EnsuredThenFailed`], since the record must stay.

use super::plan::Plan;
use super::{Done, HookError};
use crate::config::Config;
use crate::cookies::engine::{Engine, EngineError, RelayOn};
use crate::cookies::shim;
use crate::host::cgroup::{self, CgroupError};
use crate::host::kernel::CoreSched;
use crate::host::procfs::TaskId;
use crate::host::state_dir::StateDir;
use crate::host::system::System;
use crate::session::{Create, Refill, Session};
use crate::store::Txn;
use crate::values::{Cookie, Pid};

/// Carries out `plan`.
pub(super) fn execute<K: CoreSched>(
    plan: Plan,
    config: &Config,
    sys: &System<K>,
    on: RelayOn,
) -> Result<Done, HookError> {
    match plan {
        Plan::Done(done) => Ok(done),
        Plan::Stop { dir, id } => {
            crate::cookies::receipt::remove(dir.path(), &id);
            match crate::cookies::stopped::record(dir.path(), &id) {
                Ok(()) => {
                    crate::timing::mark("stop recorded");
                    crate::fault::point(crate::fault::STOP_RECORDED);
                    return Ok(Done::StopRecorded);
                }
                Err(e) => log::debug!("failed to record container {id} as stopped ({e}); forgetting it now"),
            }
            let (_, removed) = in_session(&dir, config, None, sys, |tx| {
                engine(sys, tx, on).forget(&id).map_err(|source| engine_err(&id, source))
            })?;
            Ok(Done::Forgot(removed))
        }
        Plan::Idle { dir, id, pid, labels, outcome } => match set_idle(sys, &id, pid, &labels) {
            Ok(()) => Ok(Done::Ensured(outcome)),
            Err(error) => {
                // Counted like a failure after the cookie (the run needed no cache until now).
                let refill = Refill::of(sys, config);
                match Session::open(dir, config.lock_timeout(), Create, &refill) {
                    Ok(session) => session.count_failure(None, error.reason()),
                    Err(e) => log::debug!("failed to count the failure: {}", crate::error::Chain(&e)),
                }
                Ok(Done::EnsuredThenFailed { outcome, error })
            }
        },
        Plan::Clear { dir, id, pid, shim } => {
            let (_, removed) = in_session(&dir, config, None, sys, |tx| clear(sys, tx, on, &id, pid, shim.as_ref()))?;
            Ok(Done::Cleared(removed))
        }
        Plan::Ensure { dir, req, sched_idle, shim } => {
            let (session, done) = in_session(&dir, config, Some(&req.group), sys, |tx| {
                let e = engine(sys, tx, on);
                let out = e.ensure(&req).map_err(|s| engine_err(&req.container_id, s))?;
                // The container's cookie is set and recorded: from here on nothing may undo the
                // record (the transaction commits), or the next member would find no one and
                // create a second cookie. A failure is counted and reported on its own.
                let shim_failed = shim.as_ref().and_then(|(shim, sandbox)| {
                    wire_shim(&e, tx, sys, &req.container_id, *shim, sandbox, (&req.group, out.cookie)).err()
                });
                let idle_failed = sched_idle
                    .then(|| set_idle(sys, &req.container_id, req.pid, &req.labels).err().map(|e| counted(tx, e)))
                    .flatten();
                Ok(match shim_failed.or(idle_failed) {
                    None => Done::Ensured(out),
                    Some(error) => Done::EnsuredThenFailed { outcome: out, error },
                })
            })?;
            // Committed, still under the lock: the receipt (not for a stand-in, whose rows are
            // not kept).
            if let Done::Ensured(out) = &done
                && session.stand_in().is_none()
            {
                crate::cookies::receipt::record(&sys.proc, &dir, &req.container_id, &req.group, req.pid, out.cookie);
            }
            crate::timing::mark("receipt");
            Ok(done)
        }
    }
}

/// Opens the cache session in the state dir the plan checked ([`Session::open`] with [`Create`]: the lock,
/// the file or a stand-in, refilled when it may lack running containers) and runs `f` in one
/// transaction ([`Session::write`]: a file that shows damage is moved aside and `f` runs once more
/// on a fresh one). The session comes back with `f`'s value, still holding the lock; a failure is
/// counted (best effort).
fn in_session<K: CoreSched, T>(
    dir: &StateDir,
    config: &Config,
    group: Option<&str>,
    sys: &System<K>,
    f: impl Fn(&Txn<'_>) -> Result<T, HookError>,
) -> Result<(Session, T), HookError> {
    let refill = Refill::of(sys, config);
    let mut session = Session::open(dir.clone(), config.lock_timeout(), Create, &refill)?;
    match session.write(&refill, crate::cookies::stopped::HOOK_BACKLOG, f) {
        Ok(v) => Ok((session, v)),
        Err(e) => {
            session.count_failure(group, e.reason());
            Err(e)
        }
    }
}

fn engine<'a, K: CoreSched>(sys: &'a System<K>, tx: &'a Txn<'a>, on: RelayOn) -> Engine<'a, K> {
    Engine::relaying_on(&sys.kernel, &sys.proc, tx, on)
}

fn engine_err(id: &str, source: EngineError) -> HookError {
    HookError::Engine { id: id.to_string(), source }
}

/// Gives the init cookie 0 (its row, if any, removed). A shim left with a cookie only starts this
/// container's exec'd processes under the pod's group (never wider): it goes to cookie 0 for good;
/// a failure there is logged and counted.
fn clear<K: CoreSched>(
    sys: &System<K>,
    tx: &Txn<'_>,
    on: RelayOn,
    id: &str,
    pid: Pid,
    shim: Option<&(TaskId, String)>,
) -> Result<Option<crate::store::Member>, HookError> {
    let e = engine(sys, tx, on);
    let removed = e.clear(id, pid).map_err(|s| engine_err(id, s))?;
    if let Some((shim, sandbox)) = shim {
        match shim::clear(&e, tx, &sys.proc, *shim, sandbox) {
            Ok(w) if w.changed => log::info!(
                "container {id} runs without a cookie: its pod's shim (pid {}, sandbox {sandbox}) is back at cookie 0, \
                 for the rest of its life",
                shim.pid
            ),
            Ok(_) => {}
            Err(source) => {
                let e = counted(tx, HookError::Shim { id: id.to_string(), source });
                log::warn!("{}", crate::error::Chain(&e));
            }
        }
    }
    Ok(removed)
}

/// Gives the pod's shim the group's cookie, so that the processes it spawns (exec'd ones) start
/// under it; a failure leaves exec'd processes to the follower, and is counted and returned.
fn wire_shim<K: CoreSched>(
    e: &Engine<'_, K>,
    tx: &Txn<'_>,
    sys: &System<K>,
    id: &str,
    shim: TaskId,
    sandbox: &str,
    group: (&str, Cookie),
) -> Result<(), HookError> {
    match shim::wire(e, tx, &sys.proc, shim, sandbox, group) {
        Ok(w) if w.changed => {
            log::info!(
                "container {id}: its pod's shim (pid {}, sandbox {sandbox}) holds group {}'s cookie {}: the processes \
                 it spawns start under it",
                shim.pid,
                w.group,
                crate::host::kernel::CookieHex(w.cookie)
            );
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(source) => Err(counted(tx, HookError::Shim { id: id.to_string(), source })),
    }
}

/// Writes `cpu.idle = 1` to the container's own cgroup (its systemd scope under that driver),
/// recorded in its row so that the follower sets it again when the runtime or systemd reset it.
fn set_idle<K: CoreSched>(
    sys: &System<K>,
    id: &str,
    pid: Pid,
    labels: &crate::values::Labels,
) -> Result<(), HookError> {
    let cg = labels.idle_cgroup.as_deref().ok_or(CgroupError::NoCgroup(pid))?;
    let file = cgroup::set_idle(&sys.cgroup_root, cg)?;
    log::info!("container {id}: wrote cpu.idle=1 to {}", file.display());
    Ok(())
}

/// Counts a failure that comes after the cookie was set and recorded (best effort), and returns it.
fn counted(tx: &Txn<'_>, error: HookError) -> HookError {
    if let Err(e) = tx.count_failure(error.reason()) {
        log::warn!("failed to count a failure ({}): {}", error.reason(), crate::error::Chain(&e));
    }
    error
}
