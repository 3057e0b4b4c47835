//! `rebuild`: the operator command that reloads the cache from the containers the runtimes say
//! are running ([`crate::rebuild`], the same work the hook does after moving a damaged cache
//! aside), and the text form of its report.

use std::collections::BTreeSet;

use crate::rebuild::RebuildReport;

/// The text form of a report.
pub fn render(report: &RebuildReport) -> String {
    let present = report.roots.iter().filter(|r| r.present).count();
    let groups: BTreeSet<&str> = report.members.iter().map(|m| m.group.as_str()).collect();
    let mut s = format!(
        "rebuild: scanned {} runtime roots ({present} present); recorded {} containers in {} groups; {} skipped; {} groups with more than one cookie\n",
        report.roots.len(),
        report.members.len(),
        groups.len(),
        report.skipped.len(),
        report.conflicts.len()
    );
    for r in &report.roots {
        let what = if r.present { format!("{} containers", r.containers) } else { "absent".into() };
        s.push_str(&format!("  {} root {}: {what}\n", r.kind.name(), r.path.display()));
    }
    if !report.members.is_empty() {
        s.push_str(&format!("{:<40} {:<20} {:>8} COOKIE\n", "GROUP", "CONTAINER", "PID"));
        for m in &report.members {
            let id: String = m.id.chars().take(20).collect();
            s.push_str(&format!("{:<40} {:<20} {:>8} {}\n", m.group, id, m.pid, m.cookie));
        }
    }
    for k in &report.skipped {
        s.push_str(&format!("skipped {} ({}): {}\n", k.id, k.root.display(), k.reason));
    }
    for c in &report.conflicts {
        let who: Vec<String> = c.members.iter().map(|(id, ck)| format!("{id}={ck}")).collect();
        s.push_str(&format!(
            "WARNING: group {} has {} cookies among live members ({}); the next ensure converges it\n",
            c.group,
            c.cookies.len(),
            who.join(", ")
        ));
    }
    s
}

#[cfg(test)]
#[path = "rebuild_tests.rs"]
mod tests;
