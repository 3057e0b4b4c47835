//! The integration tests, built as one binary (`it`) instead of one per file: the crate and its
//! dev-dependencies are linked once, and libtest runs all of them in one process (as many at a
//! time as `--test-threads`, by default one per CPU). Each file of `tests/it` is a module, so a
//! test's name starts with its file's: `cargo test --test it nri::` runs the NRI plugin's tests,
//! `cargo test --test it runtimes::podman` one test of `runtimes.rs`.
//!
//! Shared support, outside this directory because the library's unit tests include a part of it
//! (`src/lib.rs` includes `tests/common/skip.rs`): [`common`] (the world fixture, the process
//! runner, runtimes and bundles, the skip and wait helpers) and [`fakeworld`] (the world's side
//! over the shared fake kernel, OCI state documents, the cache's consistency checks).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;
#[path = "../fakeworld/mod.rs"]
mod fakeworld;

mod alerts;
mod architecture;
mod bad_input;
mod bundle_config;
mod decision_routes;
mod doctor;
mod error_messages;
mod escapes;
mod explain_fixtures;
mod faults;
mod field_fixtures;
mod follow;
mod helm;
mod leftovers;
mod nri;
mod operator_commands;
mod packaging;
mod release_binary;
mod rootless;
mod runtimes;
mod sched_ext;
mod sched_idle;
mod stress;
