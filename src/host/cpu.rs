//! The CPU as sysfs describes it: SMT (`/sys/devices/system/cpu/smt/{control,active}`) and the
//! hardware vulnerabilities (`/sys/devices/system/cpu/vulnerabilities/*`), with which of them core
//! scheduling is meant for.
//!
//! `smt/control` reads `on`, `off`, `forceoff`, `notsupported` (one thread per core),
//! `notimplemented` (a kernel without `CONFIG_HOTPLUG_SMT`), or a number of threads per core when
//! only some are on; `smt/active` is 1 while some core has two online siblings, which is exactly
//! when `PR_SCHED_CORE` does not fail with ENODEV. Each vulnerability file holds one line:
//! `Not affected`, `Vulnerable…`, `Mitigation: …` or `Unknown: …` (plus rarer spellings such as
//! `KVM: Mitigation: …` and `Processor vulnerable`); the set of files grows with every kernel, so
//! it is listed, never assumed.

use std::io;
use std::path::Path;

use crate::host::kernel::KernelError;

/// The SMT directory under the sysfs root.
pub const SMT_DIR: &str = "devices/system/cpu/smt";
/// The vulnerabilities directory under the sysfs root.
pub const VULNERABILITIES_DIR: &str = "devices/system/cpu/vulnerabilities";

/// The vulnerabilities core scheduling addresses: data shared between the two hyperthreads of a
/// core (the kernel's core-scheduling document names MDS and L1TF; TAA and MMIO stale data are of
/// MDS's class; the others leak through a branch predictor or buffer a core's threads share).
pub const CROSS_THREAD: [&str; 9] = [
    "l1tf",
    "mds",
    "tsx_async_abort",
    "mmio_stale_data",
    "gather_data_sampling",
    "retbleed",
    "spectre_v2",
    "spec_rstack_overflow",
    "vmscape",
];

/// `smt/control` and `smt/active`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Smt {
    /// `smt/control` as the kernel wrote it (`None`: no such file).
    pub control: Option<String>,
    /// `smt/active` (`None`: no such file, or not 0/1).
    pub active: Option<bool>,
}

impl Smt {
    /// SMT under the sysfs tree `sys_root` (`/sys`).
    pub fn read(sys_root: &Path) -> Self {
        let dir = sys_root.join(SMT_DIR);
        let word = |name: &str| std::fs::read_to_string(dir.join(name)).ok().map(|t| t.trim().to_string());
        let active = word("active").and_then(|s| match s.as_str() {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        });
        Self { control: word("control"), active }
    }
}

/// Whether SMT is on: `smt/active`, else `smt/control`, else the probe's ENODEV (`probe`: the
/// kernel's own answer to the support probe).
pub fn smt_active(smt: &Smt, probe: &Result<(), KernelError>) -> bool {
    if matches!(smt.control.as_deref(), Some("off" | "forceoff" | "notsupported")) {
        return false;
    }
    smt.active.unwrap_or(!matches!(probe, Err(KernelError::NoSmt)))
}

/// Why a node whose SMT is on cannot isolate containers ([`cannot_isolate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CannotIsolate {
    /// The kernel has no core scheduling (its own probe's answer).
    NoCoreScheduling(KernelError),
    /// The sched_ext guard holds every cookie off: why, as
    /// [`crate::host::sched_ext::SchedExt::describe`] says it.
    HeldOff(String),
}

/// The one rule of "this node cannot isolate", for `doctor`'s `list` line and the agents' ready
/// note, each of which words it its own way: SMT is on ([`smt_active`]; off, nothing shares a
/// core) and either the kernel's own probe (`probe`, beneath the guard) says it has no core
/// scheduling, or it answers and the guard holds cookies off (`held_off`: why, `None` when the
/// guard is off or holds nothing). `None` otherwise, including a probe that failed another way.
pub fn cannot_isolate(
    sys_root: &Path,
    probe: &Result<(), KernelError>,
    held_off: Option<String>,
) -> Option<CannotIsolate> {
    if !smt_active(&Smt::read(sys_root), probe) {
        return None;
    }
    match probe {
        Err(KernelError::Unsupported) => Some(CannotIsolate::NoCoreScheduling(KernelError::Unsupported)),
        Ok(()) => held_off.map(CannotIsolate::HeldOff),
        Err(_) => None,
    }
}

/// How a vulnerability file reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exposure {
    /// `Not affected`.
    NotAffected,
    /// `Mitigation: …`.
    Mitigated,
    /// `Unknown: …`, or a text of no known form.
    Unknown,
    /// `Vulnerable…`, `Processor vulnerable`, `KVM: Vulnerable`.
    Vulnerable,
}

impl Exposure {
    /// The class of one file's text.
    pub fn of(text: &str) -> Self {
        let t = text.trim();
        let t = t.strip_prefix("KVM: ").unwrap_or(t);
        if t == "Not affected" {
            Exposure::NotAffected
        } else if t.starts_with("Vulnerable") || t.starts_with("Processor vulnerable") {
            Exposure::Vulnerable
        } else if t.starts_with("Mitigation") {
            Exposure::Mitigated
        } else {
            Exposure::Unknown
        }
    }

    /// The label metrics and JSON use.
    pub fn as_str(self) -> &'static str {
        match self {
            Exposure::NotAffected => "not_affected",
            Exposure::Mitigated => "mitigated",
            Exposure::Unknown => "unknown",
            Exposure::Vulnerable => "vulnerable",
        }
    }
}

/// One `vulnerabilities/*` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vulnerability {
    /// The file's name (`mds`, `l1tf`, …).
    pub name: String,
    /// Its text, trimmed.
    pub text: String,
    /// Its class.
    pub exposure: Exposure,
    /// Whether core scheduling is meant for it ([`CROSS_THREAD`]).
    pub cross_thread: bool,
    /// Whether the text says the sibling thread is still a way in (`SMT vulnerable`, `SMT Host
    /// state unknown`, `STIBP: disabled`).
    pub smt_exposed: bool,
}

/// Every file of the vulnerabilities directory, sorted by name. `Ok(None)`: the kernel has no
/// such directory (no `CONFIG_GENERIC_CPU_VULNERABILITIES`).
pub fn vulnerabilities(sys_root: &Path) -> io::Result<Option<Vec<Vulnerability>>> {
    let dir = sys_root.join(VULNERABILITIES_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let text = std::fs::read_to_string(entry.path())?.trim().to_string();
        let smt_exposed =
            ["SMT vulnerable", "SMT Host state unknown", "STIBP: disabled"].iter().any(|s| text.contains(s));
        out.push(Vulnerability {
            cross_thread: CROSS_THREAD.contains(&name.as_str()),
            exposure: Exposure::of(&text),
            smt_exposed,
            name,
            text,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Some(out))
}

#[cfg(test)]
#[path = "cpu_tests.rs"]
mod tests;
