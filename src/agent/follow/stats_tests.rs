//! The unit tests of `src/agent/follow/stats.rs`.

use super::*;

#[test]
fn the_histogram_is_cumulative_and_counts_every_window() {
    let mut s = Stats::default();
    for w in [0.00005, 0.0003, 0.0003, 0.02, 50.0] {
        s.window(w);
    }
    let text = s.render();
    assert!(text.contains("oci_coresched_hook_follow_window_seconds_bucket{le=\"0.0001\"} 1\n"), "{text}");
    assert!(text.contains("oci_coresched_hook_follow_window_seconds_bucket{le=\"0.0005\"} 3\n"), "{text}");
    assert!(text.contains("oci_coresched_hook_follow_window_seconds_bucket{le=\"10\"} 4\n"), "{text}");
    assert!(text.contains("oci_coresched_hook_follow_window_seconds_bucket{le=\"+Inf\"} 5\n"), "{text}");
    assert!(text.contains("oci_coresched_hook_follow_window_seconds_count 5\n"), "{text}");
    assert!(text.contains("oci_coresched_hook_follow_window_max_seconds 50\n"), "{text}");
    assert!(text.contains("oci_coresched_hook_follow_events_enabled 0\n"));
    // Every family has HELP and TYPE once.
    for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
        let name = line.split(' ').nth(2).unwrap();
        assert_eq!(text.matches(&format!("# TYPE {name} ")).count(), 1, "{name}");
    }
}

/// `metrics` appends the follower's page only when every line is one this build's follower
/// writes; another version's page, another program's file or a torn one is an error naming the
/// line, and no page at all is none.
#[test]
fn the_page_is_read_back_only_when_it_is_this_builds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("follow.prom");
    assert!(read_page(&path).unwrap().is_none());
    let page = Stats::default().render();
    std::fs::write(&path, &page).unwrap();
    assert_eq!(read_page(&path).unwrap().as_deref(), Some(page.as_str()));
    for (text, line) in [
        ("# HELP oci_coresched_hook_members Live members.\n", 1),
        (&*format!("{page}oci_coresched_hook_follow_\n"), page.lines().count() + 1),
        ("not prometheus at all\n", 1),
        (&page[..page.len() - 1], page.lines().count()),
    ] {
        std::fs::write(&path, text).unwrap();
        match read_page(&path) {
            Err(PageError::Foreign { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
            other => panic!("{text:?}: {other:?}"),
        }
    }
    let e = read_page(&path).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!("the follower's page {} is not in this build's format: line ", path.display())),
        "{e}"
    );
}

/// The audit's and the escapes' families have no `follow_` prefix: the page that holds them is
/// still this build's (`metrics` once left the whole page out for them), and they are always
/// there, NaN and `audit_up 0` when no audit ran.
#[test]
fn the_audit_and_escape_families_are_always_on_the_page_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("follow.prom");
    let mut s = Stats::default();
    let page = s.render();
    assert!(page.contains("\noci_coresched_hook_audit_violations NaN\n"), "{page}");
    assert!(page.contains("\noci_coresched_hook_audit_up 0\n"), "{page}");
    assert!(page.contains("\noci_coresched_hook_escaped_containers 0\n"), "{page}");
    s.audit_violations = Some(3);
    s.escaped = 2;
    s.healed = 5;
    let page = s.render();
    assert!(page.contains("\noci_coresched_hook_audit_violations 3\n"), "{page}");
    assert!(page.contains("\noci_coresched_hook_audit_up 1\n"), "{page}");
    assert!(page.contains("\noci_coresched_hook_escaped_containers 2\n"), "{page}");
    assert!(page.contains("\noci_coresched_hook_follow_escapes_healed_total 5\n"), "{page}");
    std::fs::write(&path, &page).unwrap();
    assert_eq!(read_page(&path).unwrap().as_deref(), Some(page.as_str()));
    std::fs::write(&path, format!("{page}oci_coresched_hook_audit_violations_extra 1\n")).unwrap();
    assert!(matches!(read_page(&path), Err(PageError::Foreign { .. })), "a longer name is not ours");
}
