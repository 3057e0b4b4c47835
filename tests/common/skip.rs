//! The one way a test says it cannot run here, shared by the integration tests
//! (`tests/common`, `tests/fakeworld`) and the library's unit tests (`src/lib.rs` includes this
//! file): a missing tool, feature or privilege is never a silent pass.

use std::io::Write;

/// Reports that `test` cannot run (all or part of it) because of `why`, which says what is
/// missing and how to get it. When the `CI` environment variable is set this panics: a CI host
/// must have everything, so a skip there is a failure. Otherwise it writes
/// `SKIPPED <test>: <why>` straight to file descriptor 2 and returns: libtest captures the
/// output of `print!`/`eprint!` and shows it only for failing tests (or with `--nocapture`), so a
/// skip reported that way would vanish from a passing run.
pub fn skip(test: &str, why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {why}; CI is set, so a skip is a failure");
    }
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}
