//! What the follower does when the cache changed, all under the one state lock it takes to read
//! it: the view is rebuilt; the groups whose cookie or live members changed are swept at once
//! ([`crate::ops::reconcile::reconcile_groups`], the sweep's own code and safety rules, walking
//! only those groups' cgroups), so that a process given a group's old cookie on an event while
//! the group converged gets the new one now rather than at the next full sweep; and the members
//! whose init is dead or reused are removed ([`crate::ops::gc::gc_members`] in one
//! [`Store::transaction`] on the session's store: the session's fourth door, [`crate::session`] says
//! which door is which), which is how containers without a poststop (the NRI plugin's
//! catch-up, `rebuild`) leave the cache before `gc` runs.

use std::collections::BTreeSet;
use std::path::Path;

use super::view::{Signature, View};
use super::{Follower, Options, report};
use crate::error::Chain;
use crate::host::kernel::CoreSched;
use crate::ops::OpsError;
use crate::ops::gc::GcReason;
use crate::session::{Existing, Refill, Session};
use crate::store::Store;

/// Rebuilds the view when the cache files changed since `sig` (or `sig` is `None`), then sweeps
/// the changed groups and removes the gone members. The files are looked at before they are
/// read, so a write during the read shows as a change next time. A failure to read is logged once
/// ([`report`]) and tried again when the files change or after a sweep.
pub(super) fn refresh_if_changed<K: CoreSched>(
    f: &mut Follower<'_, K>,
    opts: &Options,
    db: &Path,
    sig: &mut Option<Signature>,
    last_error: &mut String,
) {
    let now = Signature::of(db);
    if sig.as_ref() == Some(&now) {
        return;
    }
    let refill = Refill { kernel: f.kernel, proc: f.proc, roots: &opts.runtime_roots, config: &opts.config };
    let opened = Session::open(opts.state_dir.as_path(), opts.lock_timeout, Existing, &refill)
        .and_then(|s| s.map(|s| s.apply_stops(f.proc).map(|()| s)).transpose().map_err(Into::into));
    match opened {
        Ok(Some(session)) => match f.refresh(session.store()) {
            Ok(changed) => {
                last_error.clear();
                apply(f, session.store(), &changed, &opts.cgroup_root);
            }
            Err(e) => report(last_error, format!("reconcile --follow: failed to read the cache: {}", Chain(&e))),
        },
        Ok(None) => f.view = View::default(),
        Err(e) => report(last_error, format!("reconcile --follow: {}", Chain(&e))),
    }
    *sig = Some(now);
}

/// Adds what each live member's cgroup grew in forced idle to its group's total
/// ([`crate::ops::forced_idle::update`]), under the lock, in one transaction; every 10 s, so that
/// little of a member that exits goes uncounted. A failure is logged once ([`report`]).
pub(super) fn update_forced_idle<K: CoreSched>(f: &Follower<'_, K>, opts: &Options, last_error: &mut String) {
    let refill = Refill { kernel: f.kernel, proc: f.proc, roots: &opts.runtime_roots, config: &opts.config };
    let updated = Session::open(opts.state_dir.as_path(), opts.lock_timeout, Existing, &refill)
        .map_err(OpsError::from)
        .and_then(|s| match s {
            Some(mut s) if s.stand_in().is_none() => {
                s.write(&refill, 1, |store| crate::ops::forced_idle::update(store, f.proc, &opts.cgroup_root)).map(drop)
            }
            _ => Ok(()),
        });
    match updated {
        Ok(()) => last_error.clear(),
        Err(e) => {
            report(last_error, format!("reconcile --follow: failed to update the groups' forced idle: {}", Chain(&e)))
        }
    }
}

/// What a rebuilt view asks for, under the lock the refresh took: its gone members removed, then
/// the `changed` groups swept.
pub(super) fn apply<K: CoreSched>(
    f: &mut Follower<'_, K>,
    store: &Store,
    changed: &BTreeSet<String>,
    cgroup_root: &Path,
) {
    if !f.view.gone().is_empty() {
        forget_gone(f, store);
    }
    if !changed.is_empty() {
        sweep_groups(f, store, changed, cgroup_root);
    }
}

/// Sweeps the cgroups of `groups` (the caller holds the lock).
fn sweep_groups<K: CoreSched>(f: &mut Follower<'_, K>, store: &Store, groups: &BTreeSet<String>, cgroup_root: &Path) {
    f.stats.group_sweeps += 1;
    let names = groups.iter().map(String::as_str).collect::<Vec<_>>().join(", ");
    match crate::ops::reconcile::reconcile_groups(store, f.kernel, f.proc, cgroup_root, false, Some(groups)) {
        Ok(r) => {
            for e in r.members.iter().flat_map(|m| &m.errors) {
                log::warn!("reconcile --follow: sweep of changed groups: {e}");
            }
            f.stats.fixed_sweep += r.fixed() as u64;
            if r.fixed() > 0 {
                log::info!(
                    "reconcile --follow: groups {names} changed in the cache; their sweep gave {} processes their group's cookie",
                    r.fixed()
                );
            }
        }
        Err(e) => {
            f.stats.sweep_failures += 1;
            log::warn!("reconcile --follow: failed to sweep the changed groups {names}: {}", Chain(&e));
        }
    }
}

/// Removes the members of [`View::gone`] whose init `/proc` still shows dead or reused, in one
/// transaction, one log line per container.
fn forget_gone<K: CoreSched>(f: &mut Follower<'_, K>, store: &Store) {
    let ids: BTreeSet<String> = f.view.gone().iter().cloned().collect();
    match store.transaction(|s| crate::ops::gc::gc_members(s, f.proc, &ids)) {
        Ok(r) => {
            for m in &r.removed {
                let why = match m.reason {
                    GcReason::Dead => "exited",
                    GcReason::Reused => "exited and its pid now belongs to another process",
                };
                log::info!(
                    "reconcile --follow: removed container {} from group {}: its init (pid {}) {why}",
                    m.container_id,
                    m.group,
                    m.pid
                );
            }
            f.stats.members_removed += r.removed.len() as u64;
        }
        Err(e) => log::warn!("reconcile --follow: failed to remove the members whose init exited: {}", Chain(&e)),
    }
}
