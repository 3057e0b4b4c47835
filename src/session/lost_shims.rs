//! The rows of containerd pods' shims that a lost cache took with it, recorded again by
//! [`super::rebuild`] (GET only). A shim holds the cookie the hook gave it
//! ([`crate::cookies::shim`]); without its row, `audit` sees every thread of it holding a group's
//! cookie outside all members, and the next wire would take it for a new shim. Each pod's shim is
//! found from one of its app containers' inits (its parent, the init checked again after), and
//! recorded in the group [`shim::lost_row_group`] names from what it holds, the groups of every
//! running container of the pod (recorded now or by the cache) and whether one of them runs
//! without a cookie. A row the cache has for this very shim stays as it is.

use std::collections::BTreeMap;

use crate::cookies::engine::EngineError;
use crate::cookies::membership::{self, Liveness};
use crate::cookies::shim;
use crate::decide::policy::Action;
use crate::host::kernel::{CookieHex, CoreSched};
use crate::host::procfs::{ProcFs, TaskId};
use crate::store::{Member, Txn};
use crate::values::Cookie;

use super::running::Running;

/// One pod's app containers (not its sandbox) as the runtimes run them.
#[derive(Debug, Default)]
struct Pod {
    /// Each container's id and init.
    containers: Vec<(String, TaskId)>,
    /// Whether one of them is decided to run without a cookie.
    cleared: bool,
}

/// The running containers by pod sandbox.
#[derive(Debug, Default)]
pub(super) struct Pods(BTreeMap<String, Pod>);

impl Pods {
    /// The pods of the app containers `running` has.
    pub(super) fn of(running: &[Running]) -> Self {
        let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
        for r in running.iter().filter(|r| !r.decision.sandbox.is_sandbox) {
            let Some(sandbox) = &r.decision.sandbox.id else { continue };
            let pod = pods.entry(sandbox.clone()).or_default();
            pod.containers.push((r.c.id.clone(), r.task));
            pod.cleared |= matches!(r.decision.action, Action::Clear { .. });
        }
        Self(pods)
    }

    /// Phase 5 of [`super::rebuild`]: records each pod's shim that the cache has no row for.
    /// `placed`: the group each container was just recorded in; the others' groups are their
    /// rows'. A shim or container that cannot be read is left out: the next ensure of a container
    /// of its pod wires the shim again.
    pub(super) fn record<K: CoreSched>(
        &self,
        store: &Txn<'_>,
        kernel: &K,
        proc: &ProcFs,
        placed: &BTreeMap<&str, &str>,
    ) -> Result<(), EngineError> {
        for (sandbox, pod) in &self.0 {
            let mut groups: BTreeMap<String, Cookie> = BTreeMap::new();
            let mut found = None;
            for (id, task) in &pod.containers {
                let group = match placed.get(id.as_str()) {
                    Some(g) => Some(g.to_string()),
                    None => store.member(id)?.filter(|m| m.init() == *task).map(|m| m.group),
                };
                if let (Some(group), Ok(cookie)) = (group, kernel.get(task.pid)) {
                    groups.insert(group, cookie);
                }
                if found.is_none() {
                    found = shim_of(proc, *task);
                }
            }
            let Some(task) = found else { continue };
            let id = shim::member_id(sandbox);
            let previous = store.member(&id)?;
            if previous.as_ref().is_some_and(|r| r.init() == task) {
                continue;
            }
            let Ok(holds) = kernel.get(task.pid) else { continue };
            // The cookie read is this shim's only while it still runs with the same start time.
            if !matches!(membership::liveness(proc, task), Liveness::Alive) {
                continue;
            }
            let Some(group) = shim::lost_row_group(sandbox, holds, &groups, pod.cleared) else { continue };
            store.upsert_member(&Member { cookie: holds, ..Member::new(&id, &group, task.pid, task.start_time) })?;
            if let Some(old) = previous.filter(|p| p.group != group) {
                store.drop_group_if_empty(&old.group)?;
            }
            log::info!(
                "rebuild: the shim of sandbox {sandbox} (pid {}) recorded in group {group}, whose cookie {} it holds",
                task.pid,
                CookieHex(holds)
            );
        }
        Ok(())
    }
}

/// The shim that spawned `init`, while `init` is still that process (its parent was read from
/// it, not from a process that took its pid since).
fn shim_of(proc: &ProcFs, init: TaskId) -> Option<TaskId> {
    let found = shim::find(proc, shim::Proof::ChildOf(init.pid)).ok().flatten()?;
    matches!(membership::liveness(proc, init), Liveness::Alive).then_some(found)
}
