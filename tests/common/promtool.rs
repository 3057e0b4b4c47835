//! `promtool check metrics` (from Debian's `prometheus` package) on Prometheus text, shared by
//! the integration tests (`tests/common`) and the library's unit tests (`src/lib.rs` includes this
//! file): Prometheus's own Go parser, and its lint of names, help and types.

use std::io::Write;

/// Checks `text`; panics with promtool's report when it rejects it. Exit 3 is "lint problems
/// only" (a parse error exits 1); one is expected: Koordinator's `core_sched_cookie_manage_status`
/// is a counter without the `_total` suffix, and the name is kept for its dashboards. Without
/// promtool, `skip(test, why)` is called (the caller's skip helper: a failure under `CI`) and the
/// result is `None`; else the report.
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
    let only_known_lint = out.status.code() == Some(3)
        && report
            .lines()
            .filter(|l| !l.trim().is_empty())
            .all(|l| l == "core_sched_cookie_manage_status counter metrics should have \"_total\" suffix");
    assert!(
        out.status.success() || only_known_lint,
        "promtool check metrics failed ({}):\n{report}\n--- text ---\n{text}",
        out.status
    );
    Some(report)
}
