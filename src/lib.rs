//! oci-coresched-hook: an OCI runtime hook that gives containers Linux core-scheduling cookies by
//! group, so that tenants never share a physical core's SMT siblings while containers of one group
//! still can. ARCHITECTURE.md maps the modules and their rules.

pub mod bundle;
pub mod cgroup;
pub mod cgroup_ns;
pub mod cli;
pub mod commands;
pub mod config;
pub mod endpoint;
pub mod engine;
pub mod error;
pub mod exit_codes;
pub mod fault;
pub mod follow;
pub mod hook;
pub mod input;
pub mod kernel;
pub mod logging;
pub mod membership;
pub mod nri;
pub mod oci_state;
pub mod ops;
pub mod policy;
pub mod proc_events;
pub mod procfs;
pub mod rebuild;
pub mod receipt;
pub mod runtimes;
pub mod session;
pub mod shim;
pub mod signals;
pub mod state_dir;
pub mod stopped;
pub mod store;
pub mod system;
pub mod textfile;
pub mod timing;
pub mod values;

#[cfg(test)]
mod scenarios;

/// The unit tests' one world (temp dir, fake `/proc` and kernel, cache).
#[cfg(test)]
mod test_world;

/// The test suite's one skip helper (`tests/common/skip.rs`), for the unit tests.
#[cfg(test)]
#[path = "../tests/common/skip.rs"]
mod test_skip;

/// The test suite's one `promtool check metrics` (`tests/common/promtool.rs`), for the unit tests.
#[cfg(test)]
#[path = "../tests/common/promtool.rs"]
mod test_promtool;

/// The test suite's one wait (`tests/common/wait.rs`), for the unit tests.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../tests/common/wait.rs"]
mod test_wait;
