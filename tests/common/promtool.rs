//! `promtool check metrics` (from Debian's `prometheus` package) on Prometheus text, shared by
//! the integration tests (`tests/common`) and the library's unit tests (`src/lib.rs` includes this
//! file): Prometheus's own Go parser, and its lint of names, help and types.

use std::io::Write;

/// Checks `text`; panics with promtool's report when it rejects it: a parse error (exit 1) or
/// any lint problem (exit 3) fails, none is waived. Without promtool, `skip(test, why)` is called
/// (the caller's skip helper: a failure under `CI`) and the result is `None`; else the report.
pub fn check(test: &str, text: &str, skip: fn(&str, &str)) -> Option<String> {
    let spawned = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            skip(test, "promtool not installed (apt-get install prometheus)");
            return None;
        }
        Err(e) => panic!("failed to run promtool: {e}"),
    };
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool check metrics failed ({}):\n{report}\n--- text ---\n{text}", out.status);
    Some(report)
}
