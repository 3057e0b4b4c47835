//! The group rules, in one place: every part that asks what a group's cookie is (the engine's
//! ensure and converge, `reconcile`, rebuild, `audit`, `list`, the follower's view) builds a
//! [`Groups`] from the live members it found and asks it.
//!
//! - **A group's cookie** is the cookie of its oldest live member holding one ([`Groups::source`],
//!   [`Groups::cookie`]): members come in the cache's order (group, then join order), and the
//!   first one whose init carries a cookie other than 0 defines it. The cached cookie value is
//!   never the proof: the caller passes the cookie a GET found on each live init.
//! - **A split group** is one whose live members hold more than one cookie other than 0
//!   ([`Groups::is_split`], [`Groups::held`]); its members off the group's cookie
//!   ([`Groups::off`]) are what a converge moves.
//! - **Which group owns a cookie** ([`Groups::owner_of`]): the group whose oldest holder joined
//!   first; a younger group holding the same cookie holds another group's ([`Groups::borrowed`]).
//! - **Who holds a cookie** ([`Groups::holding`]): the groups whose live members hold it, and how
//!   many in each; rebuild moves a container whose group is a guess to the one group that holds
//!   its cookie ([`crate::session::rebuild`]).
//! - **A pod's cleared shim** is recorded in a group of its own ([`cleared_shim_group`],
//!   recognised by [`is_cleared_shim`]) that never has a cookie: its members are left out.

use std::collections::{BTreeMap, BTreeSet};

use crate::host::procfs::TaskId;
use crate::store::Member;
use crate::values::{Cookie, Pid};

/// The suffix of a pod's cleared shim's group ([`cleared_shim_group`]).
const CLEARED_SHIM: &str = ":cleared";

/// The group a pod's shim is recorded in once it was cleared for its pod (`shim:<sandbox>:cleared`).
pub fn cleared_shim_group(sandbox: &str) -> String {
    format!("shim:{sandbox}{CLEARED_SHIM}")
}

/// Whether `group` is a cleared shim's ([`cleared_shim_group`]): it holds no cookie.
pub fn is_cleared_shim(group: &str) -> bool {
    group.ends_with(CLEARED_SHIM)
}

/// The oldest live member of a group holding a cookie: the source of the group's cookie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Container id.
    pub container_id: String,
    /// Its init, identity as cached.
    pub init: TaskId,
    /// The cookie a GET found on the init: the group's.
    pub cookie: Cookie,
    /// Its join order in the cache.
    seq: i64,
}

/// One group: its source and its live members with the cookie on each.
#[derive(Debug, Clone, Default)]
struct Group {
    source: Option<Holder>,
    members: Vec<(String, Pid, Cookie)>,
}

/// The live members of some groups, with the cookie a GET found on each, and the rules over them
/// (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct Groups {
    groups: BTreeMap<String, Group>,
    /// Each group's cookie and the group owning it ([`Groups::owner_of`]), indexed once.
    owners: BTreeMap<Cookie, String>,
}

impl Groups {
    /// From live members and the cookie on each init, in the cache's order (group, then join
    /// order). Members of a cleared shim's group are left out.
    pub fn new<'m>(live: impl IntoIterator<Item = (&'m Member, Cookie)>) -> Self {
        let mut groups: BTreeMap<String, Group> = BTreeMap::new();
        for (m, cookie) in live.into_iter().filter(|(m, _)| !is_cleared_shim(&m.group)) {
            let g = groups.entry(m.group.clone()).or_default();
            if g.source.is_none() && cookie != 0 {
                g.source = Some(Holder { container_id: m.container_id.clone(), init: m.init(), cookie, seq: m.seq });
            }
            g.members.push((m.container_id.clone(), m.pid, cookie));
        }
        let mut owners: BTreeMap<Cookie, (i64, &str)> = BTreeMap::new();
        for (key, h) in groups.iter().filter_map(|(k, g)| Some((k.as_str(), g.source.as_ref()?))) {
            let owner = owners.entry(h.cookie).or_insert((h.seq, key));
            if (h.seq, key) < *owner {
                *owner = (h.seq, key);
            }
        }
        let owners = owners.into_iter().map(|(c, (_, k))| (c, k.to_string())).collect();
        Self { groups, owners }
    }

    /// The oldest live member of `group` holding a cookie.
    pub fn source(&self, group: &str) -> Option<&Holder> {
        self.groups.get(group)?.source.as_ref()
    }

    /// The cookie of `group`: its oldest live member's that holds one.
    pub fn cookie(&self, group: &str) -> Option<Cookie> {
        self.source(group).map(|h| h.cookie)
    }

    /// Every group with a cookie, and that cookie.
    pub fn cookies(&self) -> impl Iterator<Item = (&str, Cookie)> {
        self.groups.iter().filter_map(|(k, g)| Some((k.as_str(), g.source.as_ref()?.cookie)))
    }

    /// The distinct cookies other than 0 that the live members of `group` hold.
    pub fn held(&self, group: &str) -> BTreeSet<Cookie> {
        self.groups.get(group).map(|g| g.members.iter().map(|m| m.2).filter(|c| *c != 0).collect()).unwrap_or_default()
    }

    /// Whether the live members of `group` hold more than one cookie.
    pub fn is_split(&self, group: &str) -> bool {
        self.held(group).len() > 1
    }

    /// The live members of `group` (container id, init pid) whose cookie is not the group's,
    /// oldest first; none when the group has no cookie.
    pub fn off(&self, group: &str) -> Vec<(String, Pid)> {
        let Some(g) = self.groups.get(group) else { return Vec::new() };
        let Some(src) = &g.source else { return Vec::new() };
        g.members.iter().filter(|m| m.2 != src.cookie).map(|m| (m.0.clone(), m.1)).collect()
    }

    /// The group that owns `cookie`: of the groups whose cookie it is, the one whose oldest holder
    /// joined first. `None` for 0 and for a cookie no group has.
    pub fn owner_of(&self, cookie: Cookie) -> Option<&str> {
        self.owners.get(&cookie).map(String::as_str)
    }

    /// The older group whose cookie `group` holds as its own, when another group owns it.
    pub fn borrowed(&self, group: &str) -> Option<&str> {
        let cookie = self.cookie(group)?;
        self.owner_of(cookie).filter(|owner| *owner != group)
    }

    /// The groups whose live members hold `cookie`, with how many of them do (none for 0).
    pub fn holding(&self, cookie: Cookie) -> BTreeMap<&str, usize> {
        let mut out = BTreeMap::new();
        if cookie == 0 {
            return out;
        }
        for (key, g) in &self.groups {
            let n = g.members.iter().filter(|m| m.2 == cookie).count();
            if n > 0 {
                out.insert(key.as_str(), n);
            }
        }
        out
    }

    /// How many groups have a cookie.
    pub fn with_cookie(&self) -> usize {
        self.groups.values().filter(|g| g.source.is_some()).count()
    }
}

#[cfg(test)]
#[path = "groups_tests.rs"]
mod tests;
