//! oci-coresched-hook: an OCI runtime hook that gives containers Linux core-scheduling cookies by
//! group, so that tenants never share a physical core's SMT siblings while containers of one group
//! still can. ARCHITECTURE.md maps the modules and their rules.

pub mod agent;
pub mod cli;
pub(crate) mod commands;
pub mod config;
pub mod cookies;
pub mod decide;
pub(crate) mod error;
pub mod exit_codes;
pub(crate) mod exposition;
pub mod fault;
pub mod hook;
pub mod host;
pub(crate) mod logging;
pub mod ops;
pub(crate) mod session;
pub mod store;
pub(crate) mod textfile;
pub(crate) mod timing;
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
