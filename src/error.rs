//! Rendering an error with its causes. Every error type of the crate names its cause as its
//! `source()` and never repeats it in its own message, so a message alone (`{e}`) lacks the cause:
//! render with [`Chain`] (or anyhow's `{:#}`) wherever an error is turned into text.

use std::fmt;

/// Displays an error and each of its sources, joined by `: `, as anyhow's `{:#}` does.
#[derive(Debug, Clone, Copy)]
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        while let Some(e) = next {
            write!(f, ": {e}")?;
            next = e.source();
        }
        Ok(())
    }
}

/// Why a hook failed: the `reason` label of `oci_coresched_hook_failures_total` and of the
/// hook's error log. A public metrics contract: a label is never renamed or reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FailureReason {
    /// The OCI state or the container id was unusable.
    BadInput,
    /// An annotation was rejected (counted only with `fail_closed`).
    InvalidAnnotation,
    /// The kernel has no core scheduling.
    Unsupported,
    /// The state lock was held past `lock_timeout_ms`.
    LockTimeout,
    /// The state dir could not be created or opened.
    StateDir,
    /// The cache failed.
    Cache,
    /// A `prctl(PR_SCHED_CORE)` call failed.
    Kernel,
    /// `/proc` could not be read.
    Proc,
    /// The container's init exited meanwhile.
    TargetGone,
    /// A cookie read back differed from the one just set.
    Verify,
    /// `cpu.idle` could not be written.
    Cgroup,
    /// The pod's shim could not be given its cookie.
    Shim,
    /// The config file could not be read or parsed (counted in the fail-open ledger only).
    Config,
    /// The sched_ext guard held the cookie off ([`crate::host::sched_ext`]).
    SchedExt,
}

impl FailureReason {
    /// Every reason, in label order.
    pub const ALL: [FailureReason; 14] = [
        FailureReason::BadInput,
        FailureReason::Cache,
        FailureReason::Cgroup,
        FailureReason::Config,
        FailureReason::InvalidAnnotation,
        FailureReason::Kernel,
        FailureReason::LockTimeout,
        FailureReason::Proc,
        FailureReason::SchedExt,
        FailureReason::Shim,
        FailureReason::StateDir,
        FailureReason::TargetGone,
        FailureReason::Unsupported,
        FailureReason::Verify,
    ];

    /// The label.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::BadInput => "bad_input",
            FailureReason::InvalidAnnotation => "invalid_annotation",
            FailureReason::Unsupported => "unsupported",
            FailureReason::LockTimeout => "lock_timeout",
            FailureReason::StateDir => "state_dir",
            FailureReason::Cache => "cache",
            FailureReason::Kernel => "kernel",
            FailureReason::Proc => "proc",
            FailureReason::TargetGone => "target_gone",
            FailureReason::Verify => "verify",
            FailureReason::Cgroup => "cgroup",
            FailureReason::Shim => "shim",
            FailureReason::Config => "config",
            FailureReason::SchedExt => "sched_ext",
        }
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
