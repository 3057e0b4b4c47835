//! What happened on the node: `audit` (the read-only audit: violations and escaped containers)
//! and `fail_open` (the fail-open ledger's counts by reason, since the state dir was made).

use crate::host::kernel::CoreSched;
use crate::host::state_dir::DB_FILE;
use crate::host::state_dir::fail_open;
use crate::session::{Existing, Refill, Session};
use crate::store::peek::{self, Kind};

use super::{Fact, Level, Node};

/// The `audit` and `fail_open` facts; `can_make_cookies`: the kernel makes cookies here (the
/// audit is run only then).
pub fn facts<K: CoreSched>(node: &Node<'_, K>, can_make_cookies: bool) -> Vec<Fact> {
    vec![audit_fact(node, can_make_cookies), fail_open_fact(node)]
}

fn audit_fact<K: CoreSched>(node: &Node<'_, K>, can_make_cookies: bool) -> Fact {
    if !can_make_cookies {
        return Fact::new("audit", Level::Info, "not run: the kernel makes no cookies here");
    }
    let sys = node.sys;
    // A cache that the opener would change (upgrade, replace) is left alone: the audit then runs
    // the rules that need no cache.
    let db = sys.state_dir.join(DB_FILE);
    let current = node.state_dir_error.is_none() && peek::peek(&db).is_ok_and(|p| p.kind == Kind::Current);
    let (session, cache_note) = if current {
        match Session::open(
            sys.state_dir.as_path(),
            node.config.lock_timeout(),
            Existing,
            &Refill::of(sys, node.config),
        ) {
            Ok(s) => (s, None),
            Err(e) => (None, Some(crate::error::Chain(&e).to_string())),
        }
    } else {
        (None, None)
    };
    let report = match crate::ops::audit::audit(
        session.as_ref().map(Session::store),
        &sys.kernel,
        &sys.proc,
        &sys.runtime_roots,
        node.config,
    ) {
        Ok(r) => r,
        Err(e) => {
            return Fact::new("audit", Level::Warn, format!("failed to audit the node: {}", crate::error::Chain(&e)));
        }
    };
    let mut detail: Vec<String> = report.render().lines().map(str::to_string).collect();
    if let Some(n) = &cache_note {
        detail.push(format!("without the cache: {n}"));
    }
    let escaped = report.escaped.len();
    let violations = report.violations.iter().filter(|v| v.rule != crate::ops::audit::Rule::Escaped).count();
    if escaped > 0 || violations > 0 {
        let ids: Vec<String> = report.escaped.iter().map(|e| format!("{} ({})", e.id, e.group)).collect();
        let what = match (escaped, violations) {
            (0, v) => format!("{v} thread(s) off their group's cookie (oci-coresched-hook audit lists them)"),
            (e, 0) => {
                format!("{e} container(s) run without core scheduling (their hook failed open): {}", ids.join(", "))
            }
            (e, v) => format!(
                "{e} container(s) run without core scheduling ({}) and {v} thread(s) are off their group's cookie",
                ids.join(", ")
            ),
        };
        Fact::new("audit", Level::Fail, what).with_detail(detail)
    } else if let Some(n) = cache_note {
        Fact::new("audit", Level::Warn, format!("clean without the cache, which could not be opened: {n}"))
            .with_detail(detail)
    } else {
        Fact::new(
            "audit",
            Level::Ok,
            format!(
                "clean: {} threads of {} processes, {} live members in {} groups",
                report.threads, report.processes, report.members, report.groups
            ),
        )
        .with_detail(detail)
    }
}

fn fail_open_fact<K>(node: &Node<'_, K>) -> Fact {
    if node.state_dir_error.is_some() {
        return Fact::new("fail_open", Level::Info, "no state dir: no fail-open ledger to read");
    }
    match fail_open::counts(&node.sys.state_dir) {
        Err(e) => Fact::new("fail_open", Level::Warn, crate::error::Chain(&e).to_string()),
        Ok(counts) => {
            let nonzero: Vec<String> =
                counts.iter().filter(|(_, n)| **n > 0).map(|(r, n)| format!("{} ({n})", r.as_str())).collect();
            let total: u64 = counts.values().sum();
            if total == 0 {
                Fact::new("fail_open", Level::Ok, "no hook run failed open")
            } else {
                // Past, not present: whether a container runs without its cookie now is the
                // audit's `escaped` rule (the follower heals them); these are the causes to fix.
                Fact::new(
                    "fail_open",
                    Level::Info,
                    format!(
                        "{total} hook run(s) failed open since the state dir was made: {} (journalctl -t \
                         oci-coresched-hook names each container; the audit says whether one still runs \
                         without its cookie)",
                        nonzero.join(", ")
                    ),
                )
            }
        }
    }
}

#[cfg(test)]
#[path = "health_tests.rs"]
mod tests;
