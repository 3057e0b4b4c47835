//! The kernel's facts: `kernel` (the kernel's own answer to the support probe, and its release),
//! `smt`, `vulnerabilities`, `schedstats` and `sched_ext`.

pub use crate::host::cpu::smt_active;
use crate::host::cpu::{self, Exposure, Smt};
use crate::host::kernel::{CoreSched, KernelError};
use crate::host::sched_ext::{self, SchedExt};

use super::{Fact, Level, Node};

/// What the kernel facts found, and what the other facts need of it.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The facts.
    pub facts: Vec<Fact>,
    /// SMT is on: there is something to isolate.
    pub smt_active: bool,
    /// The kernel answered the probe.
    pub supported: bool,
}

impl Kernel {
    /// Whether a cookie can be read and made here (the audit needs it).
    pub fn can_make_cookies(&self) -> bool {
        self.supported && self.smt_active
    }
}

/// The kernel facts of `node`.
pub fn read<K: CoreSched>(node: &Node<'_, K>) -> Kernel {
    let sys_root = &node.sys.sys_root;
    let smt = Smt::read(sys_root);
    let active = smt_active(&smt, &node.probe);
    let release = node.sys.proc.kernel_release().unwrap_or_else(|e| format!("unknown: {e}"));
    let facts = vec![
        kernel_fact(&node.probe, &release, active),
        smt_fact(&smt, active),
        vulnerabilities_fact(sys_root),
        schedstats_fact(node),
        sched_ext_fact(&SchedExt::read(sys_root), node.config.sched_ext_guard),
    ];
    Kernel { facts, smt_active: active, supported: node.probe.is_ok() }
}

fn kernel_fact(probe: &Result<(), KernelError>, release: &str, smt_active: bool) -> Fact {
    let detail = vec![format!("uname -r: {release}")];
    let fact = match probe {
        Ok(()) => Fact::new("kernel", Level::Ok, format!("core scheduling is supported (Linux {release})")),
        Err(KernelError::Unsupported) if smt_active => Fact::new(
            "kernel",
            Level::Fail,
            format!(
                "this kernel (Linux {release}) has no core scheduling (CONFIG_SCHED_CORE, Linux 5.14 or later) while \
                 SMT is on: tenants can share a core"
            ),
        ),
        Err(KernelError::Unsupported) => Fact::new(
            "kernel",
            Level::Info,
            format!("this kernel (Linux {release}) has no core scheduling (CONFIG_SCHED_CORE), and SMT is off"),
        ),
        Err(KernelError::NoSmt) => Fact::new(
            "kernel",
            Level::Info,
            format!("core scheduling is built in (Linux {release}), but no core has two threads online"),
        ),
        Err(e) => Fact::new("kernel", Level::Warn, format!("failed to probe core scheduling: {e}")),
    };
    fact.with_detail(detail)
}

fn smt_fact(smt: &Smt, active: bool) -> Fact {
    let control = smt.control.as_deref().unwrap_or("(no smt/control)");
    let active_word = smt.active.map_or("unknown", |a| if a { "1" } else { "0" });
    let detail = vec![format!("smt/control: {control}, smt/active: {active_word}")];
    let fact = if active {
        Fact::always(
            "smt",
            Level::Ok,
            format!("SMT is on ({control}): cores run two threads, which core scheduling keeps to one group"),
        )
    } else {
        Fact::always(
            "smt",
            Level::Info,
            format!(
                "SMT is off ({control}): no two tasks share a core's threads, so there is nothing to isolate and \
                 the hook makes no cookies"
            ),
        )
    };
    fact.with_detail(detail)
}

fn vulnerabilities_fact(sys_root: &std::path::Path) -> Fact {
    let list = match cpu::vulnerabilities(sys_root) {
        Ok(Some(l)) => l,
        Ok(None) => return Fact::new("vulnerabilities", Level::Info, "this kernel lists no CPU vulnerabilities"),
        Err(e) => {
            return Fact::new(
                "vulnerabilities",
                Level::Info,
                format!("failed to read {}: {e}", sys_root.join(cpu::VULNERABILITIES_DIR).display()),
            );
        }
    };
    let needed: Vec<&str> = list
        .iter()
        .filter(|v| v.cross_thread && v.exposure != Exposure::NotAffected)
        .map(|v| v.name.as_str())
        .collect();
    let mut summary = if needed.is_empty() {
        "core scheduling is not needed: no cross-thread vulnerability affects this CPU".to_string()
    } else {
        format!("core scheduling is needed: {}", needed.join(", "))
    };
    if list.iter().any(|v| v.text.contains("SMT Host state unknown")) {
        summary.push_str(
            "; in a VM (\"SMT Host state unknown\"): whether the host's SMT puts another guest on the sibling thread \
             decides",
        );
    }
    let detail = list
        .iter()
        .map(|v| {
            let mark = if v.cross_thread { " [core scheduling addresses it]" } else { "" };
            format!("{}: {}{mark}", v.name, v.text)
        })
        .collect();
    Fact::new("vulnerabilities", Level::Info, summary).with_detail(detail)
}

fn schedstats_fact<K>(node: &Node<'_, K>) -> Fact {
    match crate::ops::forced_idle::schedstats(&node.sys.proc) {
        Some(true) => Fact::new("schedstats", Level::Ok, "forced idle is counted (kernel.sched_schedstats = 1)"),
        Some(false) => Fact::new(
            "schedstats",
            Level::Info,
            "forced idle is not counted: kernel.sched_schedstats is 0 (enable_schedstats = true in the config lets \
             the follower set it)",
        ),
        None => Fact::new(
            "schedstats",
            Level::Info,
            "forced idle is not counted: this kernel has no kernel.sched_schedstats (CONFIG_SCHEDSTATS)",
        ),
    }
}

fn sched_ext_fact(s: &SchedExt, guard: bool) -> Fact {
    let mut detail = vec![format!("state: {}", s.state.as_str())];
    if let Some(ops) = &s.ops {
        detail.push(format!("root/ops: {ops}"));
    }
    if let Some(n) = s.enable_seq {
        detail.push(format!("enable_seq: {n}"));
    }
    detail.push(format!("sched_ext_guard = {guard}"));
    let fact = if !s.blocks_cookies() {
        Fact::new("sched_ext", Level::Ok, s.describe())
    } else if guard {
        Fact::new(
            "sched_ext",
            Level::Fail,
            format!(
                "cookies are held off while {}: the sched_ext guard refuses them, since a cookie on an SMT host \
                 running sched_ext can hang it ({})",
                s.describe(),
                sched_ext::ISSUE
            ),
        )
    } else {
        Fact::new(
            "sched_ext",
            Level::Fail,
            format!(
                "at risk: {} and the guard is off (sched_ext_guard = false): a cookie on this SMT host can hang it \
                 ({})",
                s.describe(),
                sched_ext::ISSUE
            ),
        )
    };
    fact.with_detail(detail)
}

#[cfg(test)]
#[path = "kernel_tests.rs"]
mod tests;
