//! The binary the packages ship has no fake kernel, no fault points and no phase timing in it
//! (issue 15): those exist only with the `fake-kernel`, `fault-injection` and `phase-timing`
//! features, and a release build must not have been made with any of them.
//!
//! The check reads the shipped file itself, byte for byte (it is stripped, so there are no
//! symbols to look at): strings that only the feature code contains must be absent, and strings
//! every build contains must be present, so that a wrong or empty file fails too.
//!
//! It needs the packaged binary, which `scripts/package.sh` writes (`target/packaging/rpm/`, and
//! `target/packaging/image/` for the node image), so it is `#[ignore]`d in a plain `cargo test`
//! and `scripts/test-all.sh` runs it after the packaging tier:
//! `cargo test --all-features --test it release_binary:: -- --ignored`. `OCH_RELEASE_BIN=FILE`
//! checks another file instead. No binary: a skip, which fails under `CI`.

use crate::common::skip;

use std::path::{Path, PathBuf};

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

/// Strings only feature code puts in a binary, each with where it comes from.
const FORBIDDEN: [(&str, &str); 8] = [
    ("OCH_FAKE_KERNEL", "kernel::system, feature fake-kernel"),
    ("OCH_FAKE_CGROUP_ROOT", "cgroup::root, feature fake-kernel"),
    ("OCH_FAKE_RUNTIME_ROOTS", "runtimes::RuntimeRoot::of_this_process, feature fake-kernel"),
    ("och-fake-kernel gen=", "host/kernel/fake_file.rs, feature fake-kernel"),
    ("is not a fake kernel state", "host/kernel/fake_file.rs, feature fake-kernel"),
    ("OCH_FAULT", "fault::point, feature fault-injection"),
    ("killing the process (OCH_FAULT)", "fault::point, feature fault-injection"),
    ("OCH_TIMING", "timing::report, feature phase-timing"),
];

/// Strings every build has (the control: the search works and this is the hook).
const REQUIRED: [&str; 3] =
    ["oci-coresched-hook: error: ", "failed to read config file", "usage error, or unreadable input"];

/// The files to check: `OCH_RELEASE_BIN`, else the shipped copies `scripts/package.sh` wrote.
fn binaries() -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os("OCH_RELEASE_BIN") {
        return vec![PathBuf::from(p)];
    }
    let out = Path::new(MANIFEST_DIR).join("target/packaging");
    [out.join("rpm/oci-coresched-hook"), out.join("image/oci-coresched-hook")]
        .into_iter()
        .filter(|p| p.is_file())
        .collect()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The problems of one binary, empty when it is clean.
fn problems(bytes: &[u8]) -> Vec<String> {
    let mut out: Vec<String> = FORBIDDEN
        .iter()
        .filter(|(s, _)| contains(bytes, s))
        .map(|(s, from)| format!("contains {s:?} ({from})"))
        .collect();
    out.extend(REQUIRED.iter().filter(|s| !contains(bytes, s)).map(|s| format!("lacks {s:?}, which every build has")));
    out
}

#[test]
#[ignore = "needs the packaged binary: scripts/test-all.sh runs it after packaging (or set OCH_RELEASE_BIN)"]
fn shipped_binary_has_no_fake_kernel_or_fault_points() {
    let bins = binaries();
    if bins.is_empty() {
        skip(
            "shipped_binary_has_no_fake_kernel_or_fault_points",
            "no packaged binary under target/packaging (run scripts/package.sh, or set OCH_RELEASE_BIN=FILE)",
        );
        return;
    }
    let mut failures = Vec::new();
    for bin in &bins {
        let bytes = std::fs::read(bin).unwrap_or_else(|e| panic!("failed to read {}: {e}", bin.display()));
        failures.extend(problems(&bytes).into_iter().map(|p| format!("{}: {p}", bin.display())));
    }
    assert!(failures.is_empty(), "not a clean release binary:\n{}", failures.join("\n"));
}

/// The check itself, on made-up bytes: each forbidden string is found, and a file lacking the
/// control strings fails.
#[test]
fn the_check_bites() {
    let clean: Vec<u8> = REQUIRED.join("\0").into_bytes();
    assert!(problems(&clean).is_empty(), "{:?}", problems(&clean));
    for (s, _) in FORBIDDEN {
        let dirty = [clean.as_slice(), b"\0", s.as_bytes()].concat();
        assert!(problems(&dirty).iter().any(|p| p.contains(s)), "{s} not found");
    }
    assert_eq!(problems(b"").len(), REQUIRED.len());
}
