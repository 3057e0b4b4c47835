//! The unit tests of `src/error.rs`.

use super::{Chain, FailureReason};

#[test]
fn failure_reasons_are_distinct_sorted_and_documented() {
    let labels: Vec<&str> = FailureReason::ALL.iter().map(|r| r.as_str()).collect();
    let mut sorted = labels.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(labels, sorted, "ALL lists each label once, in label order");
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md")).unwrap();
    for l in labels {
        assert!(doc.contains(&format!("`{l}`")), "docs/metrics.md does not name the failure reason `{l}`");
    }
}

#[derive(Debug, thiserror::Error)]
#[error("failed to open {path}")]
struct Outer {
    path: &'static str,
    #[source]
    source: std::io::Error,
}

#[test]
fn chain_says_each_cause_once_and_in_order() {
    let e = Outer { path: "/x", source: std::io::Error::from_raw_os_error(libc::ENOENT) };
    assert_eq!(e.to_string(), "failed to open /x");
    assert_eq!(Chain(&e).to_string(), "failed to open /x: No such file or directory (os error 2)");
    assert_eq!(Chain(&e).to_string(), format!("{:#}", anyhow::Error::new(e)));
}
