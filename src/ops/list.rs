//! `list`: every cached group with its members, whether each init is still alive (pid
//! and start time), the cookie cached and the cookie the kernel reports now, and the counters.
//!
//! Each group's `live_cookies` counts the cookies its live members hold (more than one prints a
//! warning: the group is split); the text form starts with a line when the node cannot isolate.

use serde::Serialize;

use crate::cookies::groups::Groups;
use crate::cookies::membership::{self, State};
use crate::host::kernel::{CookieHex, CoreSched};
use crate::host::procfs::ProcFs;
use crate::ops::forced_idle::ForcedIdle;
use crate::store::{Store, StoreError};

/// One member as listed.
#[derive(Debug, Serialize)]
pub struct MemberView {
    /// Container id.
    pub id: String,
    /// Init pid.
    pub pid: i32,
    /// Pod namespace.
    pub namespace: Option<String>,
    /// Whether pid + start time still match.
    pub live: bool,
    /// Cookie recorded at the last check.
    pub cookie_cached: String,
    /// Cookie read now (null when dead or unreadable).
    pub cookie_now: Option<String>,
    /// Cgroup path.
    pub cgroup: Option<String>,
}

/// One group as listed.
#[derive(Debug, Serialize)]
pub struct GroupView {
    /// Group key.
    pub group: String,
    /// Successful ensures.
    pub ok: u64,
    /// Failed ensures.
    pub failed: u64,
    /// Distinct non-zero cookies among live members (more than one: the next ensure converges).
    pub live_cookies: usize,
    /// The forced idle charged to the group's containers, seconds (`None`: not available, cgroup v1).
    #[serde(rename = "force_idle_seconds")]
    pub forced_idle_seconds: Option<f64>,
    /// Members, oldest first.
    pub members: Vec<MemberView>,
}

/// Builds the listing; `forced_idle`: the groups' forced idle ([`crate::ops::forced_idle`]).
pub fn list<K: CoreSched>(
    store: &Store,
    kernel: &K,
    proc: &ProcFs,
    forced_idle: &ForcedIdle,
) -> Result<Vec<GroupView>, StoreError> {
    let members = store.all_members()?;
    let mut out = Vec::new();
    for g in store.groups()? {
        let mut views = Vec::new();
        let mut alive = Vec::new();
        for m in members.iter().filter(|m| m.group == g.key) {
            let (live, now) = match membership::state(proc, kernel, m) {
                State::Alive(cookie) => (true, Some(cookie)),
                State::CookieUnreadable(_) => (true, None),
                State::Gone(_) | State::Unreadable(_) => (false, None),
            };
            alive.extend(now.map(|c| (m, c)));
            views.push(MemberView {
                id: m.container_id.clone(),
                pid: m.pid,
                namespace: m.labels.namespace.clone(),
                live,
                cookie_cached: CookieHex(m.cookie).to_string(),
                cookie_now: now.map(|c| CookieHex(c).to_string()),
                cgroup: m.labels.cgroup.clone(),
            });
        }
        let live_cookies = Groups::new(alive).held(&g.key).len();
        let forced_idle_seconds = forced_idle.of(&g.key);
        out.push(GroupView {
            group: g.key,
            ok: g.ok,
            failed: g.failed,
            live_cookies,
            forced_idle_seconds,
            members: views,
        });
    }
    Ok(out)
}

/// Table form; `note`: a line to add at the end (why forced idle is not counted).
pub fn render(groups: &[GroupView], note: Option<&str>) -> String {
    let note = note.map(|n| format!("note: {n}\n")).unwrap_or_default();
    if groups.is_empty() {
        return format!("no groups in the cache\n{note}");
    }
    let mut s =
        format!("{:<40} {:<20} {:>8} {:<5} {:<18} {:<18}\n", "GROUP", "CONTAINER", "PID", "LIVE", "COOKIE", "CACHED");
    for g in groups {
        for m in &g.members {
            let id: String = m.id.chars().take(20).collect();
            s.push_str(&format!(
                "{:<40} {:<20} {:>8} {:<5} {:<18} {:<18}\n",
                g.group,
                id,
                m.pid,
                if m.live { "yes" } else { "no" },
                m.cookie_now.as_deref().unwrap_or("-"),
                m.cookie_cached
            ));
        }
        let warn = if g.live_cookies > 1 {
            "  WARNING: more than one cookie; the next ensure or the follower's sweep converges it"
        } else {
            ""
        };
        let noun = if g.members.len() == 1 { "member" } else { "members" };
        let idle = g.forced_idle_seconds.map(|s| format!(", forced idle {s:.3} s")).unwrap_or_default();
        s.push_str(&format!("  {} {noun}, {} ok, {} failed{idle}{warn}\n", g.members.len(), g.ok, g.failed));
    }
    s.push_str(&note);
    s
}
